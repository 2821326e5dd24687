"""Vision Transformers: their layers read, images read and prepared, run through the one layer loop."""
