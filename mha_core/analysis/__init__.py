"""Analyses of the engine's results: head roles, syntax, coreference, induction, contributions,
ablation, corpus passes, parameters. Imports only the engine."""
