"""Issue 45: the Layout (docs/developers/layout.md, the README's until issue 79) names every module of mha_core where
it lives, subject folders included (it missed about twenty: a reader could not find where long texts, images or
encoder–decoders live)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

ENTRY = re.compile(r"^( *)((?:[a-z_0-9]+(?:\.py|/)(?:, )?)+)")


def layout_paths() -> set[str]:
    """Every path the Layout tree names under mha_core/ ("engine/loading/model.py"), read from its indentation: two
    spaces a level; a line naming several files ("roles.py, corpus.py") names each."""
    page = (ROOT / "docs" / "developers" / "layout.md").read_text(encoding="utf-8")
    start = page.index("```") + 3
    tree = page[start:page.index("```", start)]
    named, folders = set(), []  # folders: the open folder at each level
    for line in tree.splitlines():
        entry = ENTRY.match(line)
        if not entry or len(entry.group(1)) >= 20:  # a description's continuation
            continue
        level = len(entry.group(1)) // 2
        folders = folders[:level]
        for name in entry.group(2).split(", "):
            path = "/".join([*folders, name.rstrip("/")])
            named.add(path)
        if entry.group(2).endswith("/"):
            folders.append(entry.group(2).rstrip("/"))
    return {path.removeprefix("mha_core/") for path in named if path.startswith("mha_core/")}


def test_the_layout_names_every_module_where_it_lives():
    named = layout_paths()
    missing = []
    for path in sorted((ROOT / "mha_core").rglob("*.py")):
        relative = path.relative_to(ROOT / "mha_core").as_posix()
        if path.name == "__init__.py" and not relative.startswith("cli/"):  # a package's docstring (cli's: code)
            continue
        if relative not in named:
            missing.append(relative)
    assert not missing, missing
    folders = {p.relative_to(ROOT / "mha_core").as_posix() for p in (ROOT / "mha_core").rglob("*") if p.is_dir()
               and p.name != "__pycache__" and any(p.glob("*.py"))}
    assert folders <= named, folders - named
    stale = {p for p in named if p.endswith(".py") and not (ROOT / "mha_core" / p).exists()}
    assert not stale, stale  # nothing named that is gone
