"""Command line: `python -m mha_core attention "TEXT" --json OUT` (and more subcommands).

Bad input exits with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from mha_core.attention import AUTO, PATHS
from mha_core.model import ModelLoadError
from mha_core.tokens import InputError


class CliError(Exception):
    """A user-facing error raised by a subcommand."""


def write_json(data: object, out: str) -> None:
    """Write `data` to `out` ("-" for stdout)."""
    text = json.dumps(data, ensure_ascii=False)
    if out == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as err:
        raise CliError(f"cannot write {out}: {err.strerror}") from None


def cmd_attention(args: argparse.Namespace) -> None:
    from mha_core import load_model, run

    model = load_model(args.model_dir)
    result = run(model, args.text, path=args.path)
    write_json({
        "tokens": list(result.tokens[0]),
        "attention": result.text_attention(0).astype("float64").round(7).tolist(),
        "path": result.path,
        "backend": result.backend,
        "truncated": result.truncated[0],
        "n_tokens": result.n_tokens[0],
        "model": model.name,
    }, args.json)


def add_attention_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="every layer's and head's attention map for one text")
    p.add_argument("text")
    p.add_argument("--model-dir", default=None, help="a local BERT-family model directory (default: bundled)")
    p.add_argument("--path", choices=PATHS, default=AUTO)
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_attention)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mha_core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_attention_parser(sub)
    for add in extra_parsers():
        add(sub)
    return parser


def extra_parsers() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands defined beside the modules they drive."""
    from mha_core.cli_more import PARSERS

    return PARSERS


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (CliError, InputError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
