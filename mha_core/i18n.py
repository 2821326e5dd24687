"""The interface's two languages: English, as the messages are written, and 简体中文 (locales/zh/.../messages.po).

A string a person reads is marked where it is written: `tr("Layer {layer}", layer=3)` translates it now into the
running context's language; `N_("...")` (imported from mha_core.messages, the one place on every floor: the engine
may not import this module) only marks a constant (a label, an error's template) for the catalogue, and whoever shows
it calls tr() on it then. The language lives in a ContextVar: a page's run sets it (each
Streamlit run has its own thread and context); the CLI never does, so it stays English.

The catalogue is compiled from the .po file by Babel when first asked for (no compiled file to go stale); `make
messages` extracts the marked strings (pybabel extract) and merges them into the .po for translating.
tests/test_i18n.py checks that every marked string has a translation with the same {placeholders}.
"""

from __future__ import annotations

import contextvars
import gettext
import io
from pathlib import Path

from mha_core.engine.held import Held, register, value_bytes
from mha_core.messages import Explained, Worded, use_translator

__all__ = ["Explained", "Worded", "catalogue", "current", "has_translation", "language_of", "quoted", "tr",
           "use", "worded"]

LOCALES = Path(__file__).parent / "locales"
DOMAIN = "messages"
LANGUAGES = {"en": "English", "zh": "简体中文"}  # code -> the language's own name (the picker shows it)
DEFAULT = "en"
_current: contextvars.ContextVar[str] = contextvars.ContextVar("language", default=DEFAULT)


def language_of(locale: str | None) -> str:
    """The interface language for a browser's locale ("zh-CN", "zh-Hant-TW", "en-GB"): Chinese for any zh."""
    return "zh" if (locale or "").lower().replace("_", "-").split("-")[0] == "zh" else DEFAULT


def use(language: str) -> None:
    """Sets this context's language (unknown codes mean English)."""
    _current.set(language if language in LANGUAGES else DEFAULT)


def current() -> str:
    return _current.get()


_CATALOGUES: dict[str, gettext.NullTranslations] = {}  # a plain dict: tr() reads it hundreds of times a page


def catalogue(language: str) -> gettext.NullTranslations:
    """`language`'s translations, compiled once a process (listed by serving.caches.held() as "catalogues")."""
    found = _CATALOGUES.get(language)
    return found if found is not None else _CATALOGUES.setdefault(language, compiled_catalogue(language))


def catalogues_held() -> Held:
    catalogues = list(_CATALOGUES.values())
    return Held("catalogues", len(catalogues), value_bytes([getattr(c, "_catalog", {}) for c in catalogues]), True)


register("catalogues", catalogues_held)


def compiled_catalogue(language: str) -> gettext.NullTranslations:
    """`language`'s translations, compiled by Babel from its .po file (fuzzy entries left out: English shows)."""
    po_file = LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.po"
    if language == DEFAULT or not po_file.is_file():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with po_file.open("rb") as handle:
        messages = read_po(handle, locale=language)
    compiled = io.BytesIO()
    write_mo(compiled, messages, use_fuzzy=False)
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def tr(message: object, /, **values: object) -> str:
    """`message` in this context's language, its {placeholders} filled from `values` (none: no formatting, so a
    message may hold braces)."""
    if not isinstance(message, str):  # a widget's format_func over numbers
        return str(message)
    text = catalogue(current()).gettext(message) if message else message
    return text.format(**values) if values else text


def quoted(text: str) -> str:
    """A word or piece quoted as the page's language quotes it: 'it' in English, “它” in Chinese."""
    return f"“{text}”" if current() == "zh" else f"'{text}'"


def has_translation(message: str, language: str) -> bool:
    """`message` has an entry in `language`'s catalogue (some, like "QK-norm", are the same in both languages)."""
    return message in getattr(catalogue(language), "_catalog", {})


def worded(said: BaseException | str) -> str:
    """An error, a kept sentence (Worded) or a marked constant, in this context's language (anything else as it is)."""
    if isinstance(said, Explained | Worded):
        return said.worded()
    return tr(said) if isinstance(said, str) else str(said)


use_translator(tr)  # messages word themselves through tr() from now on
