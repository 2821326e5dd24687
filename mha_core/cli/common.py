"""What every subcommand shares: its one-line error, the model arguments and the loaded model, the JSON writer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mha_core.engine.model import LoadedModel


class CliError(Exception):
    """A user-facing error raised by a subcommand."""


def positive_int(value: str) -> int:
    """argparse type: a whole number >= 1 (argparse turns the ValueError into exit 2 with one line)."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def add_model_arguments(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--model or --model-dir; `default`: the listed model taken when neither is given (else the bundled encoder)."""
    from mha_core.engine.bundled import ENCODER_NAME

    group = p.add_mutually_exclusive_group()
    group.add_argument("--model", default=default, help=f"a listed model: bundled, in $MHA_MODELS_DIR or in the "
                       f"Hugging Face cache (python -m mha_core models; default: {default or ENCODER_NAME})")
    group.add_argument("--model-dir", default=None, help="a local model directory (see README: supported families)")


def load_chosen_model(args: argparse.Namespace) -> LoadedModel:
    from mha_core.engine.model import load_model
    from mha_core.serving.menu import available_models

    if args.model is not None and args.model_dir is None:  # --model, or the subcommand's default model
        choices = {choice.name: choice for choice in available_models()}
        if args.model not in choices:
            raise CliError(f"{args.model!r} is not a listed model: {', '.join(choices)} (python -m mha_core models)")
        if choices[args.model].refused:
            raise CliError(choices[args.model].refused)
        return load_model(choices[args.model].path)
    return load_model(args.model_dir)


def write_json(data: object, out: str) -> None:
    """Write `data` to `out` ("-" for stdout) as it is made (serving.export.stream_json: a generator in it is written
    an item at a time, so an output of a gigabyte never exists in memory)."""
    from mha_core.serving.export import stream_json

    if out == "-":
        stream_json(data, sys.stdout.write)
        sys.stdout.write("\n")
        return
    try:
        with Path(out).open("w", encoding="utf-8") as file:
            stream_json(data, file.write)
    except OSError as err:
        raise CliError(f"cannot write {out}: {err.strerror}") from None


def layer_head(value: str) -> tuple[int, int]:
    """'L:H' -> (L, H), both 0-based."""
    layer, sep, head = value.partition(":")
    if not (sep and layer.strip().isdigit() and head.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"{value!r} is not LAYER:HEAD, e.g. 2:3 (0-based)")
    return int(layer), int(head)
