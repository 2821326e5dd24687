"""What a model predicts and which heads write it: the language-model head, predictions and the logit lens, generation,
ablation and patching (all on the hooks).
"""
