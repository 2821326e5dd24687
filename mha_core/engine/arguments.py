"""The public API's arguments checked against each function's own type hints (issue 43): `mha_core.run(m, None)`,
`load_model(123)` or `search_text(index, model, text, token="a", …)` is one sentence naming the function, the
argument and what it takes (InputError), never a TypeError from deep inside; a str is taken wherever a Path is.

mha_core's __init__ wraps each public function with `checked` as it is first imported; the package's own modules call
each other unwrapped. A hint that cannot be resolved at run time (a name imported only for type checkers) is not
checked.
"""

from __future__ import annotations

import functools
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mha_core.engine.tokens import InputError
from mha_core.messages import N_

OMITTED_FOR_DEFAULT = {"load_model": ("model_dir",)}  # None here is refused: leave the argument out for the default
UNRESOLVED = object()


def resolved_hints(function: Callable) -> dict[str, object]:
    """Each parameter's hint evaluated in its module (UNRESOLVED where a name is known only to type checkers)."""
    namespace = {**vars(typing), **getattr(inspect.getmodule(function), "__dict__", {})}
    hints = {}
    for name, parameter in inspect.signature(function).parameters.items():
        hint = parameter.annotation
        if isinstance(hint, str):
            try:
                hint = eval(hint, namespace)  # noqa: S307 - the package's own annotations, not input
            except Exception:  # noqa: BLE001 - a name imported only under TYPE_CHECKING: not checked
                hint = UNRESOLVED
        hints[name] = hint
    return hints


def accepts(hint: object, value: object) -> bool:
    """Whether `value` is of the type `hint` (containers: each item, one level of generics at a time)."""
    if hint in (UNRESOLVED, inspect.Parameter.empty, Any, object):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(accepts(arg, value) for arg in args)
    if hint is None or hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin is None:
        return is_instance(value, hint)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return isinstance(value, tuple) and len(value) == len(args) and all(map(accepts, args, value))
    if not is_instance(value, origin):
        return False
    if isinstance(value, Mapping) or not args or origin is type:
        return True
    return not isinstance(value, Sequence) or all(accepts(args[0], item) for item in value)


def is_instance(value: object, kind: object) -> bool:
    if not isinstance(kind, type):
        return callable(value) if kind is Callable else True
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is Path:
        return isinstance(value, str | os.PathLike)
    if kind in (Sequence, list, tuple) and isinstance(value, str | bytes):
        return False  # a text is not a sequence of texts
    return isinstance(value, kind)


def described(hint: object) -> str:
    """A hint as a reader would say it: "str or Path", "a sequence of str", "LoadedModel"."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(described(arg) for arg in args)
    if hint is None or hint is type(None):
        return "None"
    if isinstance(hint, list):  # a Callable's parameters: Callable[[str], bool]
        return f"[{', '.join(described(arg) for arg in hint)}]"
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(described(a) for a in args)}]"
    return getattr(hint, "__name__", str(hint))


def as_path(hint: object, value: object) -> object:
    """A str given where the hint names Path (and not str) becomes a Path."""
    members = typing.get_args(hint) or (hint,)
    if isinstance(value, str | os.PathLike) and Path in members and str not in members:
        return Path(value)
    return value


def refuse_type(function: str, name: str, hint: object, value: object) -> None:
    """One sentence naming the function, the argument and what it takes, where `value` is not of the type `hint`
    (also for an argument hinted `object` whose type depends on another: hooked.py's inputs by model)."""
    if not accepts(hint, value):
        raise InputError("api_argument_type", N_("{function}() takes {name} as {expected}, not {given}."),
                         function=function, name=name, expected=described(hint),
                         given="None" if value is None else type(value).__name__)


def checked(function: Callable) -> Callable:
    """`function` with its arguments checked against its type hints before it runs."""
    signature, hints = inspect.signature(function), resolved_hints(function)
    refused_none = OMITTED_FOR_DEFAULT.get(function.__name__, ())

    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> object:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise InputError("api_arguments", N_("{function}(): {problem}."), function=function.__name__,
                             problem=str(err)) from None
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            if value is None and name in refused_none:
                raise InputError("api_argument_none", N_("{function}() takes {name} as a folder or a listed model's "
                                                         "name; leave it out for the default."),
                                 function=function.__name__, name=name)
            refuse_type(function.__name__, name, hints[name], value)
            bound.arguments[name] = as_path(hints[name], value)
        return function(*bound.args, **bound.kwargs)

    return call
