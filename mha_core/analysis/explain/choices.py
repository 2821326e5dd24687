"""The explanation methods' names and limits, importable without torch (the command line's help)."""

METHODS = ("attention", "attention_layer", "attention_head", "rollout", "value_weighted", "gradxattn", "inputxgrad",
           "ig", "occlusion")
DEFAULT_METHODS = ("attention", "rollout", "gradxattn", "ig", "occlusion")
ZERO, PAD = "zero", "pad"
BASELINES = (ZERO, PAD)
DEFAULT_STEPS, MAX_STEPS = 50, 300
