"""`translate TEXT --source-lang zh --target-lang en --json OUT`: a decoder's translation and its word alignment;
`align --source-file S --target-file T --out A.txt [--method heads|both|hidden|weighted|ensemble]`: forced alignment of
given translations, one Pharaoh line per pair ("i-j": source word i, target word j, 0-based, as fast_align and
awesome-align write them); the methods: analysis/translation/methods.py."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from mha_core.cli.common import CliError, add_model_arguments, load_chosen_model, progress_bar, write_json

LANGUAGE_CHOICES = ("zh", "en")


def cmd_translate(args: argparse.Namespace) -> None:
    from mha_core.analysis.translation.translate import translate

    model = load_chosen_model(args)
    result = translate(model, args.text, args.source_lang, args.target_lang, method=args.method)
    write_json(result.as_json(model.name), args.json)


def sentence_lines(path: str, what: str) -> list[str]:
    """The file's lines, split at line feeds only ("\\r\\n" too): a U+2028 or a form feed inside a sentence stays in
    it, so line i is the source's line i as an editor numbers them. Read up to MAX_FILE_MB (/dev/zero never ends)."""
    from mha_core.analysis.corpus.readers import MAX_FILE_MB

    cap = MAX_FILE_MB * 2**20
    try:
        with Path(path).open("rb") as file:
            data = file.read(cap + 1)
        if len(data) > cap:
            raise CliError(f"{path}: the {what} file is larger than {MAX_FILE_MB} MB: split it")
        text = data.decode("utf-8-sig")  # a byte-order mark (Windows Notepad's) is no part of the first word
    except (OSError, UnicodeDecodeError) as err:
        raise CliError(f"{path}: cannot read the {what} file as UTF-8 text ({err.__class__.__name__})") from None
    lines = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []
    empty = [i + 1 for i, line in enumerate(lines) if not line.strip()]
    if empty or not lines:
        raise CliError(f"{path}: line {empty[0] if empty else 1} is empty: one sentence per line, words separated by "
                       "spaces")
    return lines


def check_writable(path: str | None) -> None:
    """Refuse an output path that cannot be written, before any work: a folder, a path under a file, a missing
    folder, a folder without write permission."""
    if path is None or path == "-":
        return
    out = Path(path)
    if out.is_dir():
        raise CliError(f"cannot write {path}: it is a folder")
    parent = out.parent
    if not parent.is_dir():
        raise CliError(f"cannot write {path}: {parent} is not a folder" if parent.exists()
                       else f"cannot write {path}: the folder {parent} does not exist")
    if not os.access(out if out.exists() else parent, os.W_OK):
        raise CliError(f"cannot write {path}: permission denied")


def check_distinct(args: argparse.Namespace) -> None:
    """--out and --json are two files, neither an input: the same path for both interleaved the Pharaoh lines and the
    JSON in one file; --out at the source file truncated it (the user's sentences lost)."""
    if args.out == "-" and args.json == "-":
        raise CliError("--out and --json cannot both be '-' (standard output): give one of them a file")
    outputs = [(flag, path) for flag, path in (("--out", args.out), ("--json", args.json)) if path not in (None, "-")]
    named = [("--source-file", args.source_file), ("--target-file", args.target_file), *outputs]
    for i, (flag, path) in enumerate(outputs, start=2):
        for other_flag, other in named[:i]:
            if same_file(path, other):
                raise CliError(f"{flag} {path} is the file {other_flag} names: give another path")


def same_file(one: str, other: str) -> bool:
    try:
        return Path(one).resolve() == Path(other).resolve() or os.path.samefile(one, other)
    except OSError:  # a file not there yet is no other file
        return False


def checked_pairs(model: object, sources: list[str], targets: list[str], args: argparse.Namespace
                  ) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every pair's words, each line checked as `align` would refuse it, before the first is aligned."""
    from mha_core.analysis.translation.translate import alignable

    pairs = []
    for i, (source, target) in enumerate(zip(sources, targets, strict=True)):
        try:
            read = alignable(model, source.split(), target.split(), args.source_lang, args.target_lang)
            pairs.append((read.source_words, read.target_words))  # the words only: 10,000 pairs kept small
        except ValueError as err:
            raise CliError(f"line {i + 1}: {err}") from None
    return pairs


def aligned_pairs(model: object, pairs: list, args: argparse.Namespace, out: TextIO) -> Iterator[dict]:
    """Align pair after pair, each Pharaoh line written (and flushed) as it is made: an interruption keeps the
    pairs finished; yields each pair's JSON."""
    from mha_core.analysis.translation.gold import pharaoh
    from mha_core.analysis.translation.translate import align

    bar, update = progress_bar("pairs aligned")
    try:
        for i, (source, target) in enumerate(pairs):
            result = align(model, source, target, args.source_lang, args.target_lang, method=args.method)
            out.write(pharaoh(result.links) + "\n")
            out.flush()
            update(i + 1, len(pairs))
            yield result.as_json(model.name)
    finally:
        bar.close()


def output_file(path: str) -> contextlib.AbstractContextManager[TextIO]:
    """The Pharaoh lines' file; "-" is standard output (as --json's; a file named '-' was written before)."""
    return contextlib.nullcontext(sys.stdout) if path == "-" else Path(path).open("w", encoding="utf-8")


def method_heads(model: object, args: argparse.Namespace) -> list[list]:
    """The heads a method reads, for the JSON: [layer, head] (heads), [direction, rows, layer, head] (both), none for
    the others. A model without shipped choices has them made here, with progress."""
    from mha_core.analysis.translation.chosen import method_choices
    from mha_core.analysis.translation.heads import head_choice

    if args.method == "heads":
        return [list(h) for h in head_choice(model, args.source_lang, args.target_lang).heads]
    bar, update = progress_bar("development pairs read both ways")
    try:
        choice = method_choices(model, update).of(args.method)
    finally:
        bar.close()
    return [list(h) for h in getattr(choice, "heads", ())]


def cmd_align(args: argparse.Namespace) -> None:
    from mha_core.analysis.translation.prompt import check_pair

    check_pair(args.source_lang, args.target_lang)
    sources, targets = sentence_lines(args.source_file, "source"), sentence_lines(args.target_file, "target")
    if len(sources) != len(targets):
        raise CliError(f"{args.source_file} has {len(sources)} lines and {args.target_file} {len(targets)}: "
                       "give one target line per source line")
    check_writable(args.out)
    check_writable(args.json)
    check_distinct(args)
    model = load_chosen_model(args)
    pairs = checked_pairs(model, sources, targets, args)
    heads = method_heads(model, args) if pairs else []
    try:
        with output_file(args.out) as out:
            written = aligned_pairs(model, pairs, args, out)
            if args.json:
                write_json({"model": model.name, "method": args.method, "heads": heads, "pairs": written}, args.json)
            else:
                deque(written, maxlen=0)
    except OSError as err:
        raise CliError(f"cannot write {args.out}: {err.strerror}") from None


def add_translation_parsers(sub: argparse._SubParsersAction) -> None:
    translate = sub.add_parser("translate", help="a decoder's translation (few-shot prompt, greedy) and which "
                               "source word each of its words aligns to")
    translate.add_argument("text")
    align = sub.add_parser("align", help="forced alignment of given translations, one Pharaoh line per pair")
    align.add_argument("--source-file", required=True, help="one sentence per line, words separated by spaces")
    align.add_argument("--target-file", required=True, help="its translations, line for line")
    align.add_argument("--out", required=True, help="the alignments, one line per pair: i-j … ('-' for stdout)")
    from mha_core.engine.loading.bundled import GEMMA_NAME

    for p in (translate, align):
        add_model_arguments(p, default=GEMMA_NAME)  # the bundled model that reads Chinese
        p.add_argument("--source-lang", choices=LANGUAGE_CHOICES, required=True)
        p.add_argument("--target-lang", choices=LANGUAGE_CHOICES, required=True)
    translate.add_argument("--json", default="-", help="output file, '-' for stdout")
    from mha_core.analysis.translation.choices import METHODS

    for p in (translate, align):
        p.add_argument("--method", choices=METHODS, default=METHODS[0], help=(
            "heads: one direction's chosen heads; both: both directions' chosen heads, symmetrized; hidden: the "
            "layers' word similarity (SimAlign); weighted: every head of both directions, weighted by a regression "
            "fitted on the development pairs; ensemble: the weighted heads and the similarity together"))
    align.add_argument("--json", default=None, help="also every pair's words, links and the heads, as JSON")
    translate.set_defaults(func=cmd_translate)
    align.set_defaults(func=cmd_align)
