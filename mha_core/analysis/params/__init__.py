"""Where the parameters and the compute go: counted from real modules, and the shape calculator."""
