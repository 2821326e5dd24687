"""The cost of attention and cheaper stand-ins: sparse and linear patterns, what they change in a model, and each kernel
timed."""
