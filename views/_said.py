"""A lesson step's claims about its figure, worded in the page's language as one paragraph (mha_core.teaching.claims
says them; views/lesson.py draws them): once per server for a step every follower of a class shows (issue 84)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from mha_core import i18n
from mha_core.i18n import tr
from mha_core.teaching.claims import Claim
from views._state import server
from views._text import literal


def shown(value: object, marked: bool) -> object:
    """A claim's value as the page writes it: text escaped (a marked word translated), a list of (word, count)
    pairs as "word count, …" ("word count、…" in Chinese)."""
    if isinstance(value, tuple):
        separator = "、" if i18n.current() == "zh" else ", "  # Chinese lists its items with the enumeration comma
        return separator.join(f"{shown(word, marked)} {count}" for word, count in value)
    if isinstance(value, str):
        return literal(tr(value) if marked else value)
    return value


def paragraph(claims: tuple[Claim, ...]) -> str:
    """A step's claims about its figure, in the page's language (one paragraph; a list's items on their own)."""
    worded_claims = [tr(said.template, **{name: shown(value, name in said.words) for name, value in
                                          said.kwargs().items()}) for said in claims]
    return ("" if i18n.current() == "zh" else " ").join(worded_claims)  # 。 ends a sentence


def say(claims: tuple[Claim, ...]) -> None:
    """A step's claims as one paragraph."""
    if claims:
        st.markdown(paragraph(claims))


def worded_once(key: tuple, claims: Callable[[], tuple[Claim, ...]]) -> str:
    """The paragraph of claims() worded once per server for `key` and the page's language (say_once)."""
    return server().kept("small", ("lesson said", *key, i18n.current()), lambda: paragraph(claims()))


def say_once(key: tuple, claims: Callable[[], tuple[Claim, ...]], lead: str = "") -> None:
    """say(claims()), the paragraph worded once per server for `key` (which names all the claims read: the step,
    the model, the sentence) and the page's language: every follower of a class's step is sent it as it is (issue
    84); `lead`: a paragraph drawn before it in the same element (one element fewer sent to each follower)."""
    said = worded_once(key, claims)
    if said or lead:
        st.markdown("\n\n".join(part for part in (lead, said) if part))
