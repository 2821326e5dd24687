"""Issue 45: the README's Layout names every module of mha_core in its own folder's part of the tree (it missed
about twenty: a reader could not find where long texts, images or encoder–decoders live)."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def layout_sections() -> dict[str, str]:
    """The Layout tree's text under each folder of mha_core ("" for mha_core itself)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("```", readme.index("## Layout")) + 3
    tree = readme[start:readme.index("```", start)]
    sections: dict[str, list[str]] = {}
    current = None
    for line in tree.splitlines():
        folder = re.match(r"^  ([a-z_]+)/", line)
        if line.startswith("mha_core/") or re.match(r"^  [a-z_]+\.py", line):
            current = ""
        elif folder:
            current = folder.group(1)
        elif re.match(r"^\S", line):  # another top-level entry (assets/, tests/, …)
            current = None
        if current is not None:
            sections.setdefault(current, []).append(line)
    return {folder: "\n".join(lines) for folder, lines in sections.items()}


def test_the_readme_layout_names_every_module_in_its_folder():
    sections = layout_sections()
    missing = []
    for path in sorted((ROOT / "mha_core").rglob("*.py")):
        parts = path.relative_to(ROOT / "mha_core").parts
        folder = parts[0] if len(parts) > 1 else ""
        if path.name == "__init__.py" and folder != "cli":  # a package's __init__ only re-exports (cli's holds code)
            continue
        if not re.search(r"(?<![\w/.])" + re.escape(path.name), sections.get(folder, "")):
            missing.append("/".join(parts))
    assert not missing, missing
