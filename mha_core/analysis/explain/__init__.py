"""Is attention an explanation? Attention, rollout, value-weighted attention, gradient × attention, input ×
gradient, Integrated Gradients and occlusion for one target, measured for faithfulness (issue 81)."""
