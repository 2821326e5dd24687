"""One visit's state: the language, model and text, and each page's choices, as one record whose one serialised form
is the address (issue 32).

A choice is what the visitor set by hand (a widget, a link, the address), kept with the context it was made in: the
choices it depends on (a query token depends on the model and the text). Reading a choice names its context now and
its default there: a choice made in another context, or one that no longer fits (a token index past the new text's
end), gives way to the default, which is computed from the current choices, so a derived choice is never stale. A
choice read from the address takes the context of its first reading: the link's own text and model.

The address holds the language, the visitor's model and text, and the choices of the page shown, as text
(`encode`); opening it elsewhere gives the same record for that page. Values are parsed back with the type of the
choice's default or options (`decode`), so nothing typed into an address reaches a widget unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

UNBOUND = ("<from the address>",)  # the context of a choice read from an address, until it is first read
GLOBAL = ("lang", "model", "text")  # in every address: what every page starts from
MAX_NUMBER_CHARS = 15  # a longer number in an address is no index or size any choice takes


@dataclass
class Chosen:
    value: object  # as the choice takes it (an int, a bool, a tuple …), or the address's text until first read
    context: tuple = ()  # what it was chosen for; UNBOUND: not yet read since the address gave it


@dataclass
class Visit:
    """What one visitor chose, by choice name (the widgets' keys and the address's parameters)."""

    chosen: dict[str, Chosen] = field(default_factory=dict)
    shown: set[str] = field(default_factory=set)  # the choices the page read in this run (its address)

    @classmethod
    def from_address(cls, params: Mapping[str, str]) -> Visit:
        return cls({name: Chosen(str(value), UNBOUND) for name, value in params.items()})

    def get(self, name: str, default: object, context: tuple = (), options: Sequence | None = None,
            fits: Callable[[object], bool] | None = None, like: object = None) -> object:
        """The choice `name` in `context`: the visitor's, if made in this context (or read from the address) and it
        still fits (one of `options` — each of them for a list-valued choice — and `fits(value)`), else `default`,
        which is then its value. An address's text is read as a value like `default` (or `like`, when the default
        is None: an empty number box)."""
        self.shown.add(name)
        chosen = self.chosen.get(name)
        if chosen is None:
            return default
        if chosen.context == UNBOUND:
            kind = default if default is not None else like
            chosen.value, chosen.context = decode(chosen.value, kind, options), context
        value = chosen.value
        unfit = value is not None and fits is not None and not fits(value)
        if chosen.context != context or not fitting(value, default, options) or unfit:
            del self.chosen[name]  # made for another text, model or page state: the default follows it
            return default
        return value

    def choose(self, name: str, value: object, context: tuple = ()) -> None:
        """The visitor set `name` to `value` by hand, in `context`."""
        self.chosen[name] = Chosen(value, context)

    def forget(self, name: str) -> None:
        self.chosen.pop(name, None)

    def adopt(self, params: Mapping[str, str]) -> None:
        """An address given within the visit (a link to a page with its choices): its values replace the visitor's,
        the rest stays."""
        for name, value in params.items():
            current = self.chosen.get(name)
            if current is None or current.context == UNBOUND or encode(current.value) != value:
                self.chosen[name] = Chosen(str(value), UNBOUND)

    def address(self, language: str) -> dict[str, str]:
        """The address of what is shown: the language, the visitor's model and text, this run's page choices."""
        names = [name for name in self.chosen if name in GLOBAL or name in self.shown]
        params = {"lang": language}
        for name in names:
            chosen = self.chosen[name]
            if name != "lang" and chosen.value is not None:
                params[name] = chosen.value if chosen.context == UNBOUND else encode(chosen.value)
        return params


def fitting(value: object, default: object, options: Sequence | None) -> bool:
    """`value` can stand where `default` stands: not missing (unless the default is), one of `options`."""
    if value is None:
        return default is None
    if options is None:
        return True
    return all(v in options for v in value) if isinstance(default, list) else value in options


def encode(value: object) -> str:
    """A choice as address text: true/false, numbers, text, a pair (a tuple) as 3:7, a list comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ":".join(map(encode, value))
    if isinstance(value, list):
        return ",".join(map(encode, value))
    return str(value)


def decode(text: str, like: object, options: Sequence | None = None) -> object:
    """Address text as a value of the choice's kind: the option it encodes, else parsed like `like` (the default);
    None where it is not one (a word for a number, inf, nan, a 100-digit number, an unknown option)."""
    if options is not None:
        if isinstance(like, list):  # a multiselect: each item one of the options
            items = [decode(item, None, options) for item in text.split(",") if item]
            return None if None in items else items
        found = next((option for option in options if encode(option) == text), None)
        if found is None and ":" in text:  # an option as a list shows it ("11: was"), as older addresses wrote it
            return decode(text.split(":")[0].strip(), like, options)
        return found
    if isinstance(like, bool):
        return {"true": True, "false": False}.get(text.lower())
    if isinstance(like, int):
        return whole_number(text)
    if isinstance(like, float):
        number = finite_number(text)
        return None if number is None else float(number)
    if isinstance(like, list):
        parsed = [decode(item, like[0] if like else 0) for item in text.split(",") if item]
        return None if None in parsed else parsed
    return text


def whole_number(text: str) -> int | None:
    digits = text.strip().removeprefix("-")
    ok = digits.isascii() and digits.isdigit() and len(digits) <= MAX_NUMBER_CHARS
    return int(text.strip()) if ok else None


def finite_number(text: str) -> float | None:
    if len(text.strip()) > MAX_NUMBER_CHARS:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None

