"""The alignment methods' names, importable without torch (the command line's help, the page's labels); what each
does: methods.py."""

METHODS = ("heads", "both", "hidden", "weighted", "ensemble")
ATTENTION_ONLY = ("heads", "both", "weighted")  # the methods that read attention alone

from mha_core.messages import N_  # noqa: E402 -- after the names the command line reads

METHOD_NAMES = {
    "heads": N_("What the heads say: one direction"),
    "both": N_("What the heads say: both directions"),
    "hidden": N_("What the representations say"),
    "weighted": N_("Every head, weighted"),
    "ensemble": N_("Heads and representations"),
    "diagonal": N_("Guessing the diagonal"),
}
