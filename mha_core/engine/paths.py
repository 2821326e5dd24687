"""The ways a forward computes attention (engine/attention.py), named without importing torch: the command line
builds its arguments from them before any model is loaded (`python -m mha_core --help` answers at once)."""

EXPLICIT, FUSED, AUTO = "explicit", "fused", "auto"  # the map materialised; SDPA's kernel and the LSE; chosen per model
PATHS = (EXPLICIT, FUSED, AUTO)
