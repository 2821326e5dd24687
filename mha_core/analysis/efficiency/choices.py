"""The efficiency analyses' defaults and spelling the command line shows, named without importing torch (the
command line builds its arguments from them before any work)."""

from __future__ import annotations

from mha_core.messages import N_

WINDOW = 128  # the window kernel's W (each query sees the W pieces on either side)
SPEC_HELP = N_("dense, window:W, dilated:W:D, longformer:W:G, bigbird:W:G:R:SEED, linear:elu or performer:M:SEED")
