"""The Efficiency page's words: each pattern's name, its numbers and two sentences on what it trades (the seeds'
closing topic: O(n²), sparse by window or random sampling, linear attention, Flash attention; choose by the task)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mha_core.i18n import Worded
from mha_core.messages import N_

if TYPE_CHECKING:
    from mha_core.analysis.efficiency.cost import AttentionCost

MB = 2**20

KINDS = {"dense": N_("dense (as trained)"), "window": N_("window (local)"), "dilated": N_("dilated window"),
         "longformer": N_("Longformer (window + global)"), "bigbird": N_("BigBird (window + global + random)"),
         "linear": N_("linear attention (elu + 1)"), "performer": N_("Performer (random features)")}
NUMBERS = {  # kind -> {name in the spec: (label, default)}, in the spec's order
    "window": {"W": (N_("W: pieces on each side"), 4)},
    "dilated": {"W": (N_("W: steps on each side"), 3), "D": (N_("D: step"), 2)},
    "longformer": {"W": (N_("W: pieces on each side"), 4), "G": (N_("G: global first pieces"), 1)},
    "bigbird": {"W": (N_("W: pieces on each side"), 3), "G": (N_("G: global first pieces"), 1),
                "R": (N_("R: random keys per query"), 2), "seed": (N_("seed"), 0)},
    "performer": {"M": (N_("M: random features"), 256), "seed": (N_("seed"), 0)},
}
TRADES = {
    "dense": N_("Every query sees every key: the model as it was trained, and the reference the others are compared "
                "with. Time and memory grow with the square of the length."),
    "window": N_("Each piece sees only its neighbours: cost grows linearly with the length. A word whose antecedent "
                 "lies further back than the window cannot attend to it directly; only layer after layer can carry "
                 "it."),
    "dilated": N_("A window with gaps: the same number of keys reaches further back. Neighbours between the steps "
                  "are skipped, and words often need exactly those."),
    "longformer": N_("A window, plus a few global pieces that see and are seen by everyone (the first piece here, "
                     "where many heads park their attention). Linear cost; long-range links go through the globals."),
    "bigbird": N_("Longformer's window and globals plus a few random keys per query: a sparse graph whose paths "
                  "connect any two pieces in few steps. Linear cost; which distant word is kept is chance."),
    "linear": N_("The softmax is replaced by a product of features, so keys and values can be summed once: O(n·d²). "
                 "Nothing is masked, but the weights are smoother: sharp heads lose their focus."),
    "performer": N_("Random positive features whose product estimates the softmax's exp(q·k): linear cost, and "
                    "closer to the softmax as M grows, at the price of noise."),
}


def spec_of(kind: str, numbers: dict[str, int]) -> str:
    """The pattern's spec from the page's choices: 'window:4', 'bigbird:3:1:2:0', 'linear:elu'."""
    if kind == "linear":
        return "linear:elu"
    return ":".join([kind, *(str(int(numbers[name])) for name in NUMBERS.get(kind, {}))])


def slope_note(cost: AttentionCost) -> Worded:
    """What a fitted slope says, and (where explicit's is clearly above 2) why: memory traffic, with its weights'
    size at the longest length measured."""
    said = Worded(N_("A slope s means time grows as nˢ: doubling the length multiplies the time by 2ˢ (2: four "
                     "times, 1: twice)."))
    slope = cost.slopes.get("explicit")
    if slope is None or slope <= 2.1:
        return said
    n, weights = cost.lengths[-1], cost.bytes["explicit"][-1]
    return Worded(N_("{said} The explicit kernel's {slope:.2f} is above the 2 of its n² arithmetic because of memory "
                     "traffic: at {n:,} pieces one head's scores and weights take {mb:,.0f} MB, far more than the "
                     "processor's caches hold, so each weight is written to main memory and read back, and that "
                     "traffic grows faster than the arithmetic as n grows."), said=said, slope=slope, n=n,
                  mb=weights / MB)


def share(p: float) -> str:
    """A probability as a percentage that keeps a small one visible: 62%, 0.3%, 0.02%, <0.01% (the Efficiency page said
    "玛丽 0%, 书 0%: it now prefers 书 over 玛丽" of two answers under 1 %)."""
    if p >= 0.01 or p <= 0:
        return f"{p:.0%}"
    if p < 1e-4:  # no "5e-07%" on a page
        return "<0.01%"
    return f"{float(f'{p * 100:.1g}'):g}%"
