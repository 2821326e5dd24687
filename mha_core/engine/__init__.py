"""The engine: what differs between families, weights, tokens, the one layer loop, explicit and fused
attention, results, batching. Imports nothing else from mha_core."""
