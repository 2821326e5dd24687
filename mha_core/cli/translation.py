"""`translate TEXT --source-lang zh --target-lang en --json OUT`: a decoder's translation and its word alignment;
`align --source-file S --target-file T --out A.txt`: forced alignment of given translations, one Pharaoh line per
pair ("i-j": source word i, target word j, 0-based, as fast_align and awesome-align write them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mha_core.cli.common import CliError, add_model_arguments, load_chosen_model, progress_bar, write_json

LANGUAGE_CHOICES = ("zh", "en")


def cmd_translate(args: argparse.Namespace) -> None:
    from mha_core.analysis.translation.translate import translate

    model = load_chosen_model(args)
    result = translate(model, args.text, args.source_lang, args.target_lang)
    write_json(result.as_json(model.name), args.json)


def sentence_lines(path: str, what: str) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise CliError(f"{path}: cannot read the {what} file as UTF-8 text ({err.__class__.__name__})") from None
    empty = [i + 1 for i, line in enumerate(lines) if not line.strip()]
    if empty:
        raise CliError(f"{path}: line {empty[0]} is empty: one sentence per line, words separated by spaces")
    return lines


def cmd_align(args: argparse.Namespace) -> None:
    from mha_core.analysis.translation.gold import pharaoh
    from mha_core.analysis.translation.prompt import check_pair
    from mha_core.analysis.translation.translate import align

    check_pair(args.source_lang, args.target_lang)
    sources, targets = sentence_lines(args.source_file, "source"), sentence_lines(args.target_file, "target")
    if len(sources) != len(targets):
        raise CliError(f"{args.source_file} has {len(sources)} lines and {args.target_file} {len(targets)}: "
                       "give one target line per source line")
    model = load_chosen_model(args)
    bar, update = progress_bar("pairs aligned")
    results = []
    try:
        for i, (source, target) in enumerate(zip(sources, targets, strict=True)):
            try:
                results.append(align(model, source.split(), target.split(), args.source_lang, args.target_lang))
            except ValueError as err:
                raise CliError(f"line {i + 1}: {err}") from None
            update(i + 1, len(sources))
    finally:
        bar.close()
    Path(args.out).write_text("".join(pharaoh(r.links) + "\n" for r in results), encoding="utf-8")
    if args.json:
        write_json({"model": model.name, "heads": [list(h) for h in results[0].heads] if results else [],
                    "pairs": [r.as_json(model.name) for r in results]}, args.json)


def add_translation_parsers(sub: argparse._SubParsersAction) -> None:
    translate = sub.add_parser("translate", help="a decoder's translation (few-shot prompt, greedy) and which "
                               "source word each of its words aligns to")
    translate.add_argument("text")
    align = sub.add_parser("align", help="forced alignment of given translations, one Pharaoh line per pair")
    align.add_argument("--source-file", required=True, help="one sentence per line, words separated by spaces")
    align.add_argument("--target-file", required=True, help="its translations, line for line")
    align.add_argument("--out", required=True, help="the alignments, one line per pair: i-j …")
    from mha_core.engine.loading.bundled import GEMMA_NAME

    for p in (translate, align):
        add_model_arguments(p, default=GEMMA_NAME)  # the bundled model that reads Chinese
        p.add_argument("--source-lang", choices=LANGUAGE_CHOICES, required=True)
        p.add_argument("--target-lang", choices=LANGUAGE_CHOICES, required=True)
    translate.add_argument("--json", default="-", help="output file, '-' for stdout")
    align.add_argument("--json", default=None, help="also every pair's words, links and the heads, as JSON")
    translate.set_defaults(func=cmd_translate)
    align.set_defaults(func=cmd_align)
