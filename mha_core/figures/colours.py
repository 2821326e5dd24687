"""Every colour the app draws, declared once: the colour scales (sequential and diverging), the categorical
palettes, and the marks drawn over them. Figures and pages name them from here (issue 82).

Each is checked for colour-blind eyes (tests/test_colours.py, colorspacious's deuteranopia, protanopia and
tritanopia at severity 100, and normal vision): a sequential scale's CAM02-UCS lightness J′ is monotone from end to
end with the ends at least 40 apart; a diverging scale's is monotone on each half; a palette's colours are pairwise at
least 10 apart (ΔE in CAM02-UCS), or the figures that draw more categories than the palette holds tell them apart by
a second channel they really draw (a marker's symbol, a line's dash: `series_style`); a mark is at least 10 apart
from every colour of the scales it is drawn over.

The palettes are Paul Tol's "muted" (10) with a lavender, a brown, black and a strong blue found by search to stay
at least 10 apart from them under every simulation.
"""

from __future__ import annotations

from mha_core.messages import N_

# Sequential and diverging scales: plotly's names, or [[position, colour], …].
WEIGHTS = "Blues"  # attention weights, shares, probabilities: 0 pale, the largest dark
SIGNED = "RdBu"  # scores, margins, contributions, explanations: red below 0, blue above
SPECTRUM = "Viridis"  # a spectrogram's energy, a point's position in its sentence
LOWER_IS_NEARER = "Viridis_r"  # an error rate or a divergence: dark where it is small
PROJECTOR_WEIGHTS = [  # WEIGHTS without its pale end (a projector washes it out): every colour 3.4:1 or more on white
    [0.0, "#4292c6"], [0.35, "#2171b5"], [0.65, "#08519c"], [0.85, "#08306b"], [1.0, "#041533"]]
PHOTO_DIM = 0.2  # how much of the photo shows where a head does not look
PHOTO_GLOW = 0.35  # how far toward white the photo goes where a head looks most: a dark photo's lit patch still stands
# out (a dim 60-grey photo: lit patch to the rest 4.9:1 in WCAG contrast; without the glow 1.8:1)
SHADE = [[0.0, f"rgba(0,0,0,{1 - PHOTO_DIM})"], [1.0, f"rgba(255,255,255,{PHOTO_GLOW})"]]  # a head's light on a photo

SEQUENTIAL = {"WEIGHTS": WEIGHTS, "SPECTRUM": SPECTRUM, "LOWER_IS_NEARER": LOWER_IS_NEARER,
              "PROJECTOR_WEIGHTS": PROJECTOR_WEIGHTS, "SHADE": SHADE}
DIVERGING = {"SIGNED": SIGNED}
PROJECTOR_SCALES = {WEIGHTS: PROJECTOR_WEIGHTS}  # what projector mode draws instead (the others have no pale end)

# Categorical palettes.
SERIES = ("#332288", "#cc6677", "#117733", "#882255", "#44aa99", "#999933", "#aa4499", "#5f2f00", "#9f80ff",
          "#000000", "#88ccee", "#ddcc77")  # heads, lengths, methods, kernels, token groups: the strong ones first
SERIES_DASHES = ("solid", "dash", "dot", "dashdot")  # a line's dash in each round of SERIES (head 12 on: dashed)
SERIES_SYMBOLS = (("circle", "x"), ("diamond", "cross"), ("square", "star"), ("triangle-up", "asterisk-open"))
# a marker's symbol in each round of SERIES: (the first kind's, the second kind's: a query's, a key's)
ONE_SERIES = SERIES[0]  # the bars and lines of a chart with one series

ROLE_COLOURS = {  # head roles (marked: the role grid writes them translated); one colour per meaning
    N_("previous"): "#332288", N_("self"): "#88ccee", N_("next"): "#44aa99", "[CLS]": "#cc6677",
    "[SEP]": "#882255", N_("first token"): "#cc6677", N_("punctuation"): "#aa4499", N_("broad"): "#ddcc77",
    N_("syntactic"): "#117733", N_("coreference"): "#9f80ff", N_("induction"): "#999933",
    N_("cross-sentence"): "#5f2f00", N_("other"): "#dddddd",
}  # [CLS] and the first token: one meaning (where a decoder's heads rest)

FUSED_QKV = N_("W_Q, W_K, W_V fused (GPT-2)")
RELATIVE_BIAS = N_("relative position bias")  # T5's, a part of its own
PARAMETER_COLOURS = {  # the parameters page: a colour per kind of parameter, the same in the stacked bars and the
    "W_Q + b_Q": "#332288", "W_K + b_K": "#cc6677", "W_V + b_V": "#117733", FUSED_QKV: "#44aa99",  # sunburst
    "W_O + b_O": "#882255", RELATIVE_BIAS: "#ddcc77", "cross-attention": "#aa4499", "LayerNorms": "#9f80ff",
    "feed-forward": "#5f2f00", "attention": "#88ccee", "embeddings": "#999933", "pooler": "#4040ff",
    "layer scale": "#000000", "groups": "#dddddd",  # groups: the model and its layers, rings of one grey
}
KIND_COLOURS = {  # a ModelBreakdown's kinds, in the colour of the segment they mean
    "attention": PARAMETER_COLOURS["attention"], "layernorm": PARAMETER_COLOURS["LayerNorms"],
    "final norm": PARAMETER_COLOURS["LayerNorms"], "feed-forward": PARAMETER_COLOURS["feed-forward"],
    "embedding": PARAMETER_COLOURS["embeddings"], "embeddings": PARAMETER_COLOURS["embeddings"],
    "pooler": PARAMETER_COLOURS["pooler"], "cross-attention": PARAMETER_COLOURS["cross-attention"],
    "layer scale": PARAMETER_COLOURS["layer scale"],
}

PALETTES = {"SERIES": SERIES, "ROLE_COLOURS": tuple(ROLE_COLOURS.values()),
            "PARAMETER_COLOURS": tuple(PARAMETER_COLOURS.values())}

# Marks drawn over a scale (or a photo), and what each is drawn over.
SELECTED = "#d62728"  # the chosen head's outline, a link's ring, the chosen patch
SPAN = "#e69f00"  # a word's span on a transcript
INK = "#000000"  # outlines, separators, the marks on a badge
GRID = "#ffffff"  # lines between a photo's patches and over a spectrogram
MARKS_OVER = {"SELECTED": (SELECTED, (WEIGHTS, LOWER_IS_NEARER, PROJECTOR_WEIGHTS)), "SPAN": (SPAN, (WEIGHTS,)),
              "INK": (INK, (WEIGHTS, SIGNED, PROJECTOR_WEIGHTS)), "GRID": (GRID, (SPECTRUM,))}
PAPER = "#ffffff"  # a chart's background
BADGE = "rgba(255,255,255,0.9)"  # under a mark written on a cell: legible on its darkest and its palest colour
NEUTRAL = "#767676"  # a marker that stands for no category (a legend's symbol key): 4.5:1 on white
OUTLINE = "#333333"  # a marker's rim
CLEAR = "rgba(0,0,0,0)"  # click targets and gaps: the page's background shows


def series_colour(index: int) -> str:
    return SERIES[index % len(SERIES)]


def series_style(index: int) -> dict:
    """The colour, dash and marker symbols of series `index`: past len(SERIES) the colours come round again, each
    round with a dash and symbols of its own, so that two series of one colour never look alike."""
    lap = index // len(SERIES)
    return {"color": series_colour(index), "dash": SERIES_DASHES[lap % len(SERIES_DASHES)],
            "symbols": SERIES_SYMBOLS[lap % len(SERIES_SYMBOLS)]}


def series_line(index: int, **line: object) -> dict:
    """A line trace's `line` for series `index` (colour and dash), with `line`'s other settings."""
    style = series_style(index)
    return {"color": style["color"], "dash": style["dash"], **line}
