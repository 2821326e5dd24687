"""The menu of models a server offers its visitors. Only whoever starts the server decides what is on it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mha_core.engine import bundled
from mha_core.engine.model import MODEL_DIR_ENV, bundled_dirs, resolve_model_dir

MODELS_DIR_ENV = "MHA_MODELS_DIR"  # each subfolder is a model the app offers in its list


@dataclass(frozen=True)
class ModelChoice:
    """A model the app offers: the name shown (and kept in the URL) and its folder."""

    name: str
    path: Path


def available_models() -> tuple[ModelChoice, ...]:
    """The models a visitor may choose: $MHA_MODEL_DIR if set (the default), the bundled model, then each
    subfolder of $MHA_MODELS_DIR by name. Only whoever starts the server decides what is on this list."""
    choices = []
    if os.environ.get(MODEL_DIR_ENV):
        path = resolve_model_dir(None)
        choices.append(ModelChoice(path.name or str(path), path))
    choices += [ModelChoice(name, path) for name, path in bundled_dirs().items()]
    root = os.environ.get(MODELS_DIR_ENV)
    if root:
        try:
            folders = sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            folders = []
        choices += [ModelChoice(p.name, p) for p in folders]
    unique = {}
    for choice in choices:
        unique.setdefault(choice.name, choice)
    return tuple(unique.values())


def model_notice(path: Path) -> str | None:
    """The terms a model's licence asks to be shown where it is offered (Gemma's), or None."""
    bundle = bundled.bundle_at(Path(path))
    return None if bundle is None else bundle.notice
