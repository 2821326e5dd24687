"""Vision Transformers: what their heads do with an image."""
