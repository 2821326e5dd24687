"""A lesson step's charts sized to what the step draws around them, so that a 1920×1080 projector shows the whole step
with room to spare: the screen's height less the page's rows above and below the figure (a class's panel when a class
runs), each sentence's wrapped lines estimated from its own characters (a Chinese character takes a whole em, a Latin
letter a little over half), all in the page's root size (projector mode's type is larger)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import streamlit as st

from mha_core.figures.title_lines import display_width
from views._presenter import PROJECTOR_ROOT_PX, projector_on
from views._state import cap_chart_heights
from views._visit import RUN_MEMO

SCREEN_PX = (1920, 1080)  # a classroom projector's screen
SIDEBAR_PX = 300  # the open sidebar beside the step
SIDE_PADDING_REM = 5  # the main area's padding on each side (text wraps inside it)
SPARE_PX = 40  # left free under the step: a step never fits by a hair
PAGE_ROWS_REM = 4 + 1 + 3.6 + 3.4 + 2.6 + 1  # the header, the bottom padding, the sentence, the controls, the link
CLASS_PANEL_REM = 2.4  # a running class's count of followers, under its link (folded, beside the sentence)
ROOT_PX = 16  # the page's root size (projector mode's: views/_presenter.PROJECTOR_ROOT_PX)
LATIN_EM = 0.6  # a Latin letter's width in ems with what wrapping at words wastes (a wide character: 1)

# the page's rows in PAGE_ROWS_REM: the header's padding above a step, a phone's smaller type
PAGE_CSS = ("<style>[data-testid='stMainBlockContainer']{padding-top:4rem;padding-bottom:1rem}"
                 "</style>")  # just below the header (3.75rem): no blank margins above and below a step
CONTROLS = "lesson_controls"  # the container of Back, the step list and Next (one row on a phone too)
PHONE_CSS = ("<style>@media (max-width: 640px){"  # a 390-px phone: the step's figure in the first screen
             "[data-testid='stMainBlockContainer']{padding-left:.6rem;padding-right:.6rem}"
             "[data-testid='stMainBlockContainer'] h1{font-size:1.3rem;padding:.1rem 0 .2rem}"
             "[data-testid='stMainBlockContainer'] :is(h2,h3){font-size:1.05rem;padding:.3rem 0 .1rem}"
             "[data-testid='stMarkdownContainer'] h4{font-size:.92rem;font-weight:400;line-height:1.35;padding:0}"
             f".st-key-{CONTROLS} [data-testid='stHorizontalBlock']{{flex-wrap:wrap;gap:.4rem}}"
             f".st-key-{CONTROLS} [data-testid='stColumn']{{min-width:0!important;flex:0 0 4.6rem!important}}"
             f".st-key-{CONTROLS} [data-testid='stColumn']:nth-child(2){{flex:1 1 0!important}}"
             f".st-key-{CONTROLS} [data-testid='stColumn']:nth-child(4){{flex:1 0 100%!important}}"
             "}</style>")


@dataclass(frozen=True)
class Style:
    """How a kind of text is set, in rems: its size, its line's height (in its size) and the room around it; and the
    share of the main area's width it wraps in (a column's)."""

    size_rem: float
    line: float
    around_rem: float
    share: float = 1.0


TITLE = Style(2.75, 1.2, 2.1)  # the step's number and title (h1)
LEAD = Style(1.5, 1.2, 1.75)  # the step's sentence under it (h4, bold)
HEADING = Style(1.75, 1.2, 1.9)  # a part's heading (h3)
BODY = Style(1.0, 1.6, 1.0)  # a paragraph
CAPTION = Style(0.875, 1.6, 1.0)  # a caption
HALF_BODY = Style(1.0, 1.6, 1.0, 0.5)  # a paragraph in one of two columns
LABELLED_ROW_REM = 5.25  # a row of inputs under their labels (a text box, lists)
FOLDED_NOTE_REM = 0.65  # a folded note beside a row of inputs, under a caption: the row's extra height
CAPTION_ROW_REM = 2.4  # a caption's line under a chart
FOLDED_ROW_REM = 3.6  # a folded panel's row (an expander's title and the gap under it)


def em_width(text: str) -> float:
    """The width of `text` in ems: a wide (Chinese) character one, any other LATIN_EM."""
    return sum(1.0 if display_width(ch) == 2 else LATIN_EM for ch in text)  # wide as a chart's title reads it


@functools.lru_cache(maxsize=1024)  # a class's every follower lays out the same texts at each move
def text_px(text: str, style: Style, root_px: float) -> float:
    """The height `text` takes in `style` at root size `root_px`, its lines wrapped in its share of the main area."""
    width = (SCREEN_PX[0] - SIDEBAR_PX - 2 * SIDE_PADDING_REM * root_px) * style.share
    size = style.size_rem * root_px
    lines = sum(max(1, math.ceil(em_width(part) * size / width)) for part in text.split("\n") if part.strip())
    return lines * size * style.line + style.around_rem * root_px


def room_px(texts: list[tuple[str, Style]], root_px: float, rows_rem: float = 0.0) -> int:
    """The screen's height left for a step's figure once its `texts` and `rows_rem` of other rows (inputs, tables,
    gaps) are laid out, with the page's own rows and the spare room."""
    taken = sum(text_px(text, style, root_px) for text, style in texts)
    return math.floor(SCREEN_PX[1] - SPARE_PX - (PAGE_ROWS_REM + rows_rem) * root_px - taken)


FIT = "lesson_fit"  # the run memo's: the page's texts and rows around a step's figure (fit_page)
LEAST_CHART_PX = 200  # a chart stays readable however much text a step has
CHART_ROW_REM = 1  # the gap above the row of charts


def root_px() -> float:
    """The page's root size: projector mode's larger type (views/_presenter.PROJECTOR_CSS) or the browser's."""
    return PROJECTOR_ROOT_PX if projector_on() else ROOT_PX


def fit_page(texts: list[tuple[str, Style]], rows_rem: float, most_px: int) -> None:
    """This run's page around the step (its title, its sentence, a class's panel): the step's charts fit under it,
    no taller than `most_px` (until the step says what else it draws: fit_charts)."""
    st.session_state.setdefault(RUN_MEMO, {})[FIT] = (texts, rows_rem, most_px)
    fit_charts([])


def room_left(texts: list[tuple[str, Style]], rows_rem: float = 0.0) -> int | None:
    """The height left for a step's figure under the page's and the step's `texts` and `rows_rem` of its other rows
    (None: not the lesson, whose page scrolls)."""
    if FIT not in st.session_state.get(RUN_MEMO, {}):
        return None
    page_texts, page_rows, _ = st.session_state[RUN_MEMO][FIT]
    return max(LEAST_CHART_PX, room_px([*page_texts, *texts], root_px(), page_rows + rows_rem + CHART_ROW_REM))


def fit_charts(texts: list[tuple[str, Style]], rows_rem: float = 0.0, most_px: int | None = None) -> None:
    """The step's charts (one row of them) as tall as the screen allows once the page's and the step's `texts` and
    `rows_rem` of its other rows are laid out."""
    room = room_left(texts, rows_rem)
    if room is not None:  # else not the lesson: the page scrolls
        cap_chart_heights(min(most_px or st.session_state[RUN_MEMO][FIT][2], room))
