"""What every subcommand shares: its one-line error, the model arguments and the loaded model, the JSON writer, the
text argument, every map of a result, the --heads and --rows readers and the progress bar (the subcommands' modules
import this one and never each other's helpers)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel
    from mha_core.engine.result import AttentionResult


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
    from mha_core.engine.loading.bundled import ENCODER_NAME

    group = p.add_mutually_exclusive_group()
    group.add_argument("--model", default=default, help=f"a listed model: bundled, in $MHA_MODELS_DIR or in the "
                       f"Hugging Face cache (python -m mha_core models; default: {default or ENCODER_NAME})")
    group.add_argument("--model-dir", default=None,
                       help="a local model directory (a supported family: docs/researchers/models.md)")


def load_chosen_model(args: argparse.Namespace) -> LoadedModel:
    from mha_core.serving.menu import available_models

    path = args.model_dir
    if args.model is not None and args.model_dir is None:  # --model, or the subcommand's default model
        choices = {choice.name: choice for choice in available_models()}
        if args.model not in choices:
            raise CliError(f"{args.model!r} is not a listed model: {', '.join(choices)} (python -m mha_core models)")
        if choices[args.model].refused:
            raise CliError(choices[args.model].refused)
        path = choices[args.model].path
    from mha_core.engine.loading.model import load_model  # torch and transformers: only for a model to load

    return load_model(path)


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


def every_map(model: LoadedModel, result: AttentionResult, **extra: object) -> dict:
    """The output for every head of text 0: its pieces, `extra`, every layer's maps (written as made), how they were
    computed. A text (or pair) cut to the model's window says so on stderr as well as in "truncated"."""
    if result.truncated[0]:
        print(f"note: the input has {result.n_tokens[0]:,} pieces; {model.name} reads the first {result.lengths[0]:,} "
              f"(its window), and the maps cover those", file=sys.stderr)
    return {"tokens": list(result.tokens[0]), **extra,
            "attention": (result.text_layer_maps(0, layer) for layer in range(model.n_layers)),
            "path": result.path, "backend": result.backend, "truncated": result.truncated[0],
            "n_tokens": result.n_tokens[0], "model": model.name}


def attention_text(args: argparse.Namespace) -> str:
    """The text given as an argument or in --text-file (exactly one of them)."""
    if (args.text is None) == (args.text_file is None):
        raise CliError("give the text either as an argument or with --text-file FILE, not both or neither")
    if args.text is not None:
        return args.text
    from mha_core.analysis.corpus.readers import CorpusFormatError, read_text

    try:
        return read_text(Path(args.text_file))  # as the page's .txt upload: a BOM dropped, at most 200,000 characters
    except CorpusFormatError as err:
        raise CliError(f"{args.text_file}: {err}") from None


def check_every_map(model: LoadedModel, n: int, what: str, advice: str) -> None:
    """Every map of `what`'s n pieces (tokens) is written only up to arch.MAX_PIECES: over it, exit 2 with its
    size and what to choose instead."""
    from mha_core.analysis.long.text import is_long

    if is_long(n):
        numbers = model.n_layers * model.n_heads * n * n
        raise CliError(f"{what} has {n:,} pieces: every map would be {numbers:,} numbers (about "
                       f"{numbers * 10 / 2**30:,.0f} GB of JSON); choose heads with --heads L:H[,L:H...] {advice}")


def layer_heads(value: str) -> list[tuple[int, int]]:
    """argparse type: "3:1,0:5" -> [(3, 1), (0, 5)], each part read by layer_head."""
    return [layer_head(part.strip()) for part in value.split(",")]


def unique_heads(model: LoadedModel, heads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """--heads as given, each head once and checked against the model's (engine.heads: one sentence if it has none)."""
    from mha_core.engine.heads import model_head

    return list(dict.fromkeys(model_head(model, *head) for head in heads))


def parse_rows(spec: str | None, n: int) -> tuple[int, int]:
    """"A:B" -> (A, B), 0-based, B exclusive, within the text's n pieces; None: every row."""
    if spec is None:
        return 0, n
    start, _, stop = spec.partition(":")
    if not (start.isdigit() and stop.isdigit()) or not int(start) < int(stop) <= n:
        raise CliError(f"--rows takes A:B with 0 <= A < B <= {n:,} (the text's pieces), not {spec!r}")
    return int(start), int(stop)


class LazyBar:
    """A tqdm bar on stderr drawn from its first update: a command refused before any work prints its one line, no
    empty bar before it."""

    def __init__(self, desc: str) -> None:
        self.desc, self.bar = desc, None

    def update(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(desc=self.desc, unit="text", file=sys.stderr, dynamic_ncols=True)
        self.bar.total = total
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def progress_bar(desc: str) -> tuple[LazyBar, Callable[[int, int], None]]:
    """A bar on stderr (drawn from the first update) and the (done, total) callback that drives it."""
    bar = LazyBar(desc)
    return bar, bar.update
