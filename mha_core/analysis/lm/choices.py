"""What the language-model analyses offer to choose from (ablation modes, measures, what to patch, how many
predictions), named without importing torch: the command line builds its arguments from them before any model loads,
so that `python -m mha_core --help` and a mistyped argument answer at once."""

from __future__ import annotations

from mha_core.messages import N_

ZERO, MEAN = N_("zero"), N_("mean")  # ablation modes; marked: the page shows them translated
MODES = (ZERO, MEAN)

MEASURES = (N_("embedding"), N_("loss"), N_("target"), N_("coref"))
MEASURE_HELP = {"embedding": N_("1 − cos between the ablated and the original sentence embedding (mean-pooled, "
                             "L2-normalised)"), "loss": N_("change in mean next-token loss (nats)"),
                "target": N_("change in the summed log-probability of the target's pieces after the chosen position "
                          "(nats)"),
                "coref": N_("change of the coreference margin (pronoun → first candidate minus second) in the last "
                         "layer's head where it is largest")}

HEADS, RESIDUAL, HEAD = N_("heads"), N_("residual"), N_("head")  # what activation patching patches
WHAT = (HEADS, RESIDUAL, HEAD)

TOP_K = 10  # next pieces a prediction lists
