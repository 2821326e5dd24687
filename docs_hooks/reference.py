"""MkDocs hook (mkdocs.yml `hooks:`): the two reference pages are written from the code at build time, so neither
can drift from it. A page holding the marker `<!-- cli-reference -->` gets every subcommand of mha_core.cli's argparse
parser (its help line and its `--help`, as the terminal prints it); `<!-- api-reference -->` gets one mkdocstrings
block per public name of mha_core (mha_core._PUBLIC: what `import mha_core` offers), grouped by the module that
defines it, which mkdocstrings renders from the docstrings."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this checkout's mha_core, whatever the environment has installed
    sys.path.insert(0, str(ROOT))
CLI_MARKER = "<!-- cli-reference -->"
API_MARKER = "<!-- api-reference -->"


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help line, parser) of every subcommand, in the order the parser lists them."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]


def cli_markdown() -> str:
    from mha_core.cli import build_parser

    os.environ["COLUMNS"] = "110"  # argparse wraps at the terminal's width: the same page on every machine
    parser = build_parser()
    parts = [f"```text\n{parser.format_usage().strip()}\n```", ""]
    for name, line, sub in subcommands(parser):
        parts += [f"## `{name}`", "", line, "", f"```text\n{sub.format_help().strip()}\n```", ""]
    return "\n".join(parts)


def api_markdown() -> str:
    import mha_core

    parts = []
    for module, names in sorted(mha_core._PUBLIC.items()):
        constants = sorted(name for name in names if name.isupper())  # values, not documented objects
        parts += [f"## `{module}`", ""]
        if constants:
            parts += ["Constants: " + ", ".join(f"`mha_core.{name}`" for name in constants) + ".", ""]
        parts += [f"::: {module}.{name}\n" for name in sorted(set(names) - set(constants))]
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_: object) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_markdown())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_markdown())
    return markdown
