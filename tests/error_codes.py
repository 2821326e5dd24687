"""mha_core's public error codes, read from the code itself: every Explained error raised with a literal code (its
constructors, and engine/loading/folder.refused) and the English sentence it says."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

CODE_CALLS = ("InputError", "ModelLoadError", "BudgetError", "CorpusFormatError", "ShapeError", "InspectorError",
              "Explained", "refused")


def constants(tree: ast.Module) -> dict[str, str]:
    """A module's NAME = N_("...") templates."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args:
            first = node.value.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = first.value
    return found


def template_of(node: ast.expr | None, names: dict[str, str]) -> str:
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        return node.args[0].value
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    return ast.unparse(node) if node is not None else ""


def error_codes() -> list[tuple[str, str, str]]:
    """(code, English template, module path) for every place mha_core raises a coded error."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted((ROOT / "mha_core").rglob("*.py"))}
    shared = {name: text for tree in trees.values() for name, text in constants(tree).items()}  # imported ones too
    found = []
    for path, tree in trees.items():
        names = {**shared, **constants(tree)}
        for node in ast.walk(tree):
            name = getattr(node, "func", None) and getattr(node.func, "id", getattr(node.func, "attr", ""))
            if isinstance(node, ast.Call) and name in CODE_CALLS and node.args:
                code = node.args[0]
                if isinstance(code, ast.Constant) and isinstance(code.value, str):
                    found.append((code.value, template_of(node.args[1] if len(node.args) > 1 else None, names),
                                  Path(path).relative_to(ROOT).as_posix()))
    return found
