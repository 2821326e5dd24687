"""Finding and loading a model: a folder read without trusting it, the checks a loaded model passes, the bundled
models.
"""
