"""Messages as data: what mha_core says to a person, kept as an English template marked for the catalogue and the values
that fill it, so that the layer that shows it (a page, in its language; the CLI, in English) words it. The engine
uses these and nothing of mha_core.i18n, which translates. Text as a page, a chart or a message shows it: visible().
"""

from __future__ import annotations

from collections.abc import Callable

TRANSLATORS: list[Callable[..., str]] = []  # mha_core.i18n's tr(), registered when it loads (this module imports
# nothing of the project: a leaf)


def use_translator(translate: Callable[..., str]) -> None:
    """What mha_core.i18n calls as it loads: worded() then says a message in the running context's language."""
    TRANSLATORS[:] = [translate]


def shortened(text: str, at_most: int) -> str:
    """A value quoted in a message (a path, a code typed in an address), at most `at_most` characters: cut with "…"
    as its last where it is longer."""
    return text if len(text) <= at_most else text[: at_most - 1] + "…"


# Characters a reader cannot see that change what the rest of a line says: the bidirectional overrides and isolates
# (U+202E turns the rest of a line round) and the invisible spaces (a typed answer "c<U+200B>at" shows as "cat" but
# is not the word). Shown as their code wherever text is shown (the joiners U+200C/U+200D stay: scripts and emoji
# sequences need them).
INVISIBLE = {chr(code): f"⟨U+{code:04X}⟩" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200B,
                                                       0x200E, 0x200F, 0x2060, 0xFEFF, 0x061C, 0x00AD, 0x2028,
                                                       0x2029)}
# a quoted value's tabs, line ends and NULs too (Quoted)
QUOTED_CODES = {**INVISIBLE, **{chr(code): f"⟨U+{code:04X}⟩" for code in (*range(0x20), 0x7F)}}


def visible(text: str) -> str:
    """The text with each INVISIBLE character shown as its code."""
    return "".join(INVISIBLE.get(c, c) for c in text)


QUOTED_AT_MOST = 60  # characters of a typed value a message quotes (a 5,000-letter answer filled the screen)


class Quoted(str):
    """A text value of a message: its repr (a template's {value!r}, which quotes what a person typed) shows each
    INVISIBLE or control character as its code, not as Python's escape ('它⟨U+202E⟩猫', not '它\\u202e猫'), and at
    most QUOTED_AT_MOST characters of it (cut with "…")."""

    def __repr__(self) -> str:
        shown = "".join(QUOTED_CODES.get(c, c) for c in shortened(str(self), QUOTED_AT_MOST))
        return f"'{shown}'"


def N_(message: str) -> str:  # noqa: N802 - gettext's conventional name for "mark, translate later"
    """Marks `message` for the catalogue without translating it (module constants, error templates)."""
    return message


class Worded(str):
    """A sentence kept in results (a path's reason): the English text itself (JSON, the CLI, comparisons), plus its
    template and values, so a page can word it in its own language (worded())."""

    template: str
    values: dict

    def __new__(cls, template: str, /, **values: object) -> Worded:
        values = {name: Quoted(value) if type(value) is str else value for name, value in values.items()}
        text = super().__new__(cls, template.format(**values) if values else template)
        text.template, text.values = template, values
        return text

    def worded(self) -> str:
        """In this context's language (English until mha_core.i18n, which translates, has loaded); a value that is
        itself Worded (a budget error's "what") is worded too."""
        values = {name: value.worded() if isinstance(value, Worded) else value
                  for name, value in getattr(self, "values", {}).items()}
        template = getattr(self, "template", str(self))
        if TRANSLATORS:
            return TRANSLATORS[-1](template, **values)
        return template.format(**values) if values else template


class Explained(ValueError):
    """An error a person reads: a code, and its sentence as a Worded (an English template, marked for the catalogue,
    and the values that fill it). str() is the English sentence (the CLI, logs); worded() is the sentence in the
    running context's language (a page), so the page words an error without parsing it."""

    def __init__(self, code: str, template: str, /, **values: object) -> None:
        self.code, self.said = code, Worded(template, **values)
        super().__init__(str(self.said))

    @property
    def template(self) -> str:
        return self.said.template

    @property
    def values(self) -> dict:
        return self.said.values

    def worded(self) -> str:
        return self.said.worded()


class InputError(Explained):
    """Bad user input; the message is one sentence for the user. Defined here, with nothing of torch imported (the
    engine raises it from mha_core.engine.tokens, which re-exports it): a process that only checks input, or reads a
    class's step (serving.classroom), needs no torch."""
