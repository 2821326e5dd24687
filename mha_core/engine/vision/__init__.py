"""Vision Transformers: each family described, images read and prepared, run through the one layer loop."""
