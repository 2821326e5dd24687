"""A figure's title on a phone: its width as a screen shows it (a Chinese character two Latin letters wide) and its
lines, broken where a reader pauses (mha_core.figures.charts.for_narrow_screen)."""

from __future__ import annotations

import re

from mha_core.engine.pieces import is_wide

NARROW_TITLE_CHARS = 34  # a title line on a phone's width, in Latin letters (a Chinese character counts two)


def display_width(text: str) -> int:
    return sum(2 if is_wide(c) else 1 for c in text)


def break_units(text: str) -> list[str]:
    """The text cut where a line may break: after a space between two Latin words, after Chinese punctuation
    (，。：；、！？）); never at a space beside a Chinese character ("第 9 层" stays whole, as a reader says it)."""
    units, unit = [], ""
    for i, char in enumerate(text):
        unit += char
        after = text[i + 1] if i + 1 < len(text) else ""
        latin_space = char.isspace() and not (i and is_wide(text[i - 1])) and not (after and is_wide(after))
        if latin_space or char in "，。：；、！？）" and not after.isspace():
            units.append(unit)
            unit = ""
    return [*units, unit] if unit else units


def between_characters(unit: str, width: int) -> list[str]:
    """A unit too wide for a line, cut between two Chinese characters side by side (a number stays with the
    characters around it); a piece still too wide (a long Latin word) cut anywhere."""
    pieces = []
    for char in unit:
        if pieces and not (is_wide(char) and is_wide(pieces[-1][-1])):
            pieces[-1] += char
        else:
            pieces.append(char)
    return [cut for piece in pieces
            for cut in ([piece] if display_width(piece) <= width else formula_parts(piece, width))]


def formula_parts(word: str, width: int) -> list[str]:
    """A Latin word too wide for a line (a formula: "softmax(QKᵀ/√query_pre_attn_scalar)") cut after a slash and
    before a bracket, one character a piece only where a part is still too wide for any line: its closing bracket
    stays with what it closes."""
    parts = [part for part in re.split(r"(?<=/)|(?=\()", word) if part]
    return [cut for part in parts for cut in ([part] if display_width(part) <= width else list(part))]


def wrapped(text: str, width: int) -> list[str]:
    """Lines of at most `width` (display_width), broken where break_units allows, a unit wider than a line anywhere."""
    lines, line = [], ""
    for unit in break_units(text):
        for piece in [unit] if display_width(unit.rstrip()) <= width else between_characters(unit, width):
            if line and display_width(line + piece.rstrip()) > width:
                lines.append(line.rstrip())
                line = ""
            line += piece
    return [*lines, line.rstrip()] if line.strip() else lines
