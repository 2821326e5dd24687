"""Text as a page or a chart shows it: a character a reader cannot see, or one that turns the rest of a line round,
shown as its code (views/_text.literal for markdown, figures.charts.safe_label for a chart's labels)."""

from __future__ import annotations

# Characters a reader cannot see that change what the rest of a line says: the bidirectional overrides and isolates
# (U+202E turns the rest of a line round) and the invisible spaces (a typed answer "c<U+200B>at" shows as "cat" but
# is not the word). Shown as their code wherever text is shown (the joiners U+200C/U+200D stay: scripts and emoji
# sequences need them).
INVISIBLE = {chr(code): f"⟨U+{code:04X}⟩" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200B,
                                                       0x200E, 0x200F, 0x2060, 0xFEFF)}


def visible(text: str) -> str:
    """The text with each INVISIBLE character shown as its code."""
    return "".join(INVISIBLE.get(c, c) for c in text)
