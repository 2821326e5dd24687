"""Issue 82: every colour scale and palette the app draws (mha_core/figures/colours.py), looked at through
colorspacious's simulations of deuteranopia, protanopia and tritanopia (severity 100) and normal vision, in CAM02-UCS:
sequential scales keep their lightness order end to end (the ends 40 J′ apart), a diverging scale on each half;
palettes stay 10 ΔE apart, or the figures drawing more categories than the palette tell them apart by a channel they
draw; marks stand apart from the scales they are drawn over; and no figure or page names a colour of its own."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from colorspacious import cspace_convert
from plotly.colors import get_colorscale, sample_colorscale

from mha_core.analysis.heads.qk_view import BY_POS, QKView
from mha_core.figures import charts, colours, corpus, long, vision

ROOT = Path(__file__).resolve().parents[1]
VISIONS = {"normal": None, **{name: {"name": "sRGB1+CVD", "cvd_type": kind, "severity": 100}
                              for name, kind in (("deuteranopia", "deuteranomaly"), ("protanopia", "protanomaly"),
                                                 ("tritanopia", "tritanomaly"))}}
MIN_ENDS_J, MIN_DELTA_E = 40, 10
SAMPLES = 65


def srgb(colour: str, under: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> np.ndarray:
    """A colour ("#rrggbb", "rgb(…)", "rgba(…)") as sRGB in 0..1, a translucent one laid over `under` (white)."""
    if colour.startswith("#"):
        return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    numbers = [float(x) for x in re.findall(r"[\d.]+", colour)]
    alpha = numbers[3] if len(numbers) == 4 else 1.0
    return alpha * np.array(numbers[:3]) / 255 + (1 - alpha) * np.asarray(under)


def seen(rgb: np.ndarray, vision: str) -> np.ndarray:
    """(N,3) sRGB as `vision` sees it, in CAM02-UCS (J′, a′, b′)."""
    rgb = np.atleast_2d(rgb)
    if VISIONS[vision] is not None:
        rgb = np.clip(cspace_convert(rgb, VISIONS[vision], "sRGB1"), 0, 1)
    return cspace_convert(rgb, "sRGB1", "CAM02-UCS")


def along(scale: str | list) -> np.ndarray:
    """(SAMPLES,3) sRGB evenly along a scale, as plotly interpolates it."""
    stops = get_colorscale(scale) if isinstance(scale, str) else [[p, c] for p, c in scale]
    sampled = sample_colorscale([[p, f"rgb{tuple(np.rint(srgb(c) * 255).astype(int).tolist())}"] for p, c in stops],
                                list(np.linspace(0, 1, SAMPLES)), colortype="rgb")
    return np.array([srgb(c) for c in sampled])


def monotone(values: np.ndarray) -> bool:
    steps = np.diff(values)
    return bool((steps < 0).all() or (steps > 0).all())


@pytest.mark.parametrize("vision", VISIONS)
@pytest.mark.parametrize("name", colours.SEQUENTIAL)
def test_a_sequential_scale_keeps_its_order_for_every_eye(name, vision):
    lightness = seen(along(colours.SEQUENTIAL[name]), vision)[:, 0]
    assert monotone(lightness), (name, vision, np.round(lightness, 1))
    assert abs(lightness[-1] - lightness[0]) >= MIN_ENDS_J, (name, vision, lightness[0], lightness[-1])


@pytest.mark.parametrize("vision", VISIONS)
@pytest.mark.parametrize("name", colours.DIVERGING)
def test_a_diverging_scale_keeps_its_order_on_each_half(name, vision):
    lightness = seen(along(colours.DIVERGING[name]), vision)[:, 0]
    middle = SAMPLES // 2
    assert monotone(lightness[: middle + 1]) and monotone(lightness[middle:]), (name, vision, lightness)


def test_the_projector_scales_are_declared_and_have_no_pale_end():
    """Projector mode draws a scale without its pale end: its palest colour 3:1 or more on the chart's paper."""
    for projected in colours.PROJECTOR_SCALES.values():
        assert any(projected is scale for scale in colours.SEQUENTIAL.values())
        assert min(contrast(rgb, srgb(colours.PAPER)) for rgb in along(projected)) >= 3


def contrast(a: np.ndarray, b: np.ndarray) -> float:
    """WCAG's contrast ratio of two sRGB colours."""
    def luminance(rgb: np.ndarray) -> float:
        linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        return float(linear @ [0.2126, 0.7152, 0.0722])
    lighter, darker = sorted((luminance(a), luminance(b)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def too_close(colour_a: str, colour_b: str) -> list[str]:
    """The visions under which two colours are less than MIN_DELTA_E apart."""
    return [vision for vision in VISIONS
            if np.linalg.norm(seen(srgb(colour_a), vision) - seen(srgb(colour_b), vision)) < MIN_DELTA_E]


@pytest.mark.parametrize("name", colours.PALETTES)
def test_a_palette_s_colours_stay_apart_for_every_eye(name):
    """Colours of one meaning (the first token's and [CLS]'s) are one colour: pairs of distinct colours only."""
    distinct = list(dict.fromkeys(c.lower() for c in colours.PALETTES[name]))
    close = [(a, b, too_close(a, b)) for a, b in itertools.combinations(distinct, 2) if too_close(a, b)]
    assert not close, (name, close)


@pytest.mark.parametrize("name", colours.MARKS_OVER)
def test_a_mark_stands_apart_from_every_colour_it_is_drawn_over(name):
    mark, scales = colours.MARKS_OVER[name]
    for scale in scales:
        for eye in VISIONS:
            distance = np.linalg.norm(seen(along(scale), eye) - seen(srgb(mark), eye), axis=1)
            assert distance.min() >= MIN_DELTA_E, (name, scale, eye, distance.min())


def channels(trace: dict) -> dict[str, object]:
    """What tells a trace from another besides its colour, among what it draws: its lines' dash, its markers'
    symbols, text written on its marks."""
    mode, drawn = trace.get("mode", "markers"), {}
    if "lines" in mode:
        drawn["dash"] = (trace.get("line") or {}).get("dash", "solid")
    if "markers" in mode:
        symbol = (trace.get("marker") or {}).get("symbol", "circle")
        drawn["symbols"] = frozenset([symbol] if isinstance(symbol, str) else symbol)
    if "text" in mode and trace.get("text"):
        drawn["text"] = tuple(trace["text"])
    return drawn


def colour_of(trace: dict) -> str:
    return (trace.get("marker") or {}).get("color") or (trace.get("line") or {}).get("color")


def assert_told_apart(figure: dict) -> int:
    """Every two series of a figure (its traces, those of one name taken as one) whose colours are under
    MIN_DELTA_E apart for some eye differ in a channel both draw; returns how many such pairs there were."""
    series = {trace["name"]: trace for trace in figure["data"] if trace.get("name") and colour_of(trace)}
    close = 0
    for (name_a, a), (name_b, b) in itertools.combinations(series.items(), 2):
        if too_close(colour_of(a), colour_of(b)):
            close += 1
            shared = channels(a).keys() & channels(b).keys()
            assert any(channels(a)[c] != channels(b)[c] for c in shared), (name_a, name_b, channels(a), channels(b))
    return close


def test_more_heads_than_colours_are_told_apart_by_dash_and_symbol():
    """Sixteen heads: the line view's heads 12-15 dashed, the distance chart's in other symbols, a long text's
    fourteenth length dashed; the same colours came round, and are told apart."""
    n = len(colours.SERIES) + 4
    maps = np.full((n, 3, 3), 1 / 3, dtype=np.float32)
    figures = [charts.line_view_figure(maps, ["a", "b", "c"], list(range(n))),
               vision.distance_figure(np.random.default_rng(0).uniform(0, 200, (4, n)), 224),
               long.sink_growth_figure(list(range(100, 100 * (n + 1), 100)), np.full((n, 4, 2), 0.5))]
    for figure in figures:
        assert assert_told_apart(figure) >= 4


def test_twenty_parts_of_speech_are_told_apart_by_symbol():
    tags = [f"TAG{i}" for i in range(20)]
    labels = [f"w{i}" for i in range(40)]
    fake = SimpleNamespace(labels=labels, position=np.arange(40) % 7)
    view = QKView(0, 0, 0, "PCA", np.random.default_rng(0).normal(size=(80, 2)), 1.0, 0.0, 1.0, (0.5, 0.2))
    figure = corpus.qk_figure(view, fake, BY_POS, ["h"] * 80, tuple(tags * 2))
    assert len(figure["data"]) == 20 and assert_told_apart(figure) >= 8
    assert "● ◆" in figure["layout"]["title"]["text"]  # the title names both rounds' symbols


CSS_NAMES = ("red", "orange", "white", "black", "grey", "gray", "blue", "green", "yellow", "purple", "pink")
COLOUR_LITERAL = re.compile(r"""["'](#[0-9a-fA-F]{3,8}|rgba?\([^"']*\)|(?:""" + "|".join(CSS_NAMES) + r"""))["']""")
SCALE_LITERAL = re.compile(r"""(?:colorscale["']?\s*[:=]\s*|named_colorscale\()["']([^"']+)["']""")


def test_no_figure_or_page_names_a_colour_of_its_own():
    """Every colour, scale and mark is named from mha_core/figures/colours.py (a colour written as text, a scale
    given by its plotly name)."""
    found = []
    for path in [*sorted((ROOT / "mha_core" / "figures").glob("*.py")), *sorted((ROOT / "views").glob("*.py"))]:
        if path.name == "colours.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            found += [f"{path.relative_to(ROOT)}:{number}: {literal}"
                      for literal in COLOUR_LITERAL.findall(line) + SCALE_LITERAL.findall(line)]
    assert not found, found
