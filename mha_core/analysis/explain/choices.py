"""The explanation methods' names and limits, importable without torch (the command line's help)."""

METHODS = ("attention", "attention_layer", "attention_head", "rollout", "value_weighted", "gradxattn", "inputxgrad",
           "ig", "occlusion")
DEFAULT_METHODS = ("attention", "rollout", "gradxattn", "ig", "occlusion")
ZERO, PAD = "zero", "pad"
BASELINES = (ZERO, PAD)
DEFAULT_STEPS, MAX_STEPS = 50, 300
FULL, SHORT = "full", "short"  # faithfulness curves at every k, or at the k of the measures (faithfulness.py)
CURVES = (FULL, SHORT)

from mha_core.messages import N_  # noqa: E402 -- after the names the command line reads

METHOD_NAMES = {
    "attention": N_("Attention (last layer, mean of heads)"),
    "attention_layer": N_("Attention (the chosen head's layer, mean)"),
    "attention_head": N_("Attention (the chosen head)"),
    "rollout": N_("Attention rollout"),
    "value_weighted": N_("Value-weighted attention"),
    "gradxattn": N_("Gradient × attention"),
    "inputxgrad": N_("Input × gradient"),
    "ig": N_("Integrated Gradients"),
    "occlusion": N_("Occlusion"),
}
METHOD_NOTES = {  # two sentences each: what the method measures
    "attention": N_("How much the read position looks at each word in the last layer, averaged over heads. It says "
                    "where information could flow, not whether the answer used it."),
    "attention_layer": N_("The same average in the layer of the head that matters most. One layer is one step of "
                          "many."),
    "attention_head": N_("The weights of the one head whose output moves the answer most. A head can look somewhere "
                         "and still write nothing that matters."),
    "rollout": N_("Attention multiplied through every layer, the residual counted as half of each step (Abnar & "
                  "Zuidema 2020). It follows paths of attention but ignores what the values carry."),
    "value_weighted": N_("Each weight times the size of what the head moves from that word (Kobayashi et al. 2020). "
                         "A large weight on a word with a tiny value vector moves little."),
    "gradxattn": N_("Attention weighted by how much the answer changes with it, positive parts only, multiplied "
                    "through the layers (Chefer et al. 2021). It mixes where heads look with what the answer needs."),
    "inputxgrad": N_("Each word's embedding times the answer's gradient with respect to it. A first-order "
                     "estimate: fast, but local."),
    "ig": N_("The gradient summed along a straight path from a baseline to the sentence (Sundararajan et al. 2017). "
             "Its scores add up to the change in the answer, up to the convergence delta shown."),
    "occlusion": N_("The answer recomputed with each word removed. Exact for one word at a time, blind to words that "
                    "only matter together."),
}
BASELINE_NAMES = {ZERO: N_("all-zero"), PAD: N_("padding-piece")}  # Integrated Gradients' baselines, as a page says
