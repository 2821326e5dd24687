"""The walkthrough and the lessons, computed from the live model. Imports analysis and the engine."""
