"""Issue 45: mha_core's import graph — top-level and function-level imports, and importlib.import_module of a literal
name — has no circle and no arrow from a lower floor to a higher one (import-linter checks the layers of the
imports Python's grammar shows; a string handed to importlib it cannot see). Results draw themselves through a
registry the figures fill (engine/drawable.py), messages word themselves through the translator i18n registers, and
the CLI's shared helpers live in cli/common.py."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

FLOORS = {"engine": 0, "analysis": 1, "figures": 2, "teaching": 2, "serving": 3, "cli": 4}


def module_files() -> dict[str, object]:
    files = {}
    for path in (ROOT / "mha_core").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_names(tree: ast.AST, package: str) -> set[str]:
    """Every module name a file imports, wherever the import stands; relative imports resolved."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            names |= {arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}
    return names


def import_graph() -> dict[str, set[str]]:
    files = module_files()

    def owner(name: str) -> str:  # the project module a name is (or is in)
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = {owner(name) for name in imported_names(ast.parse(path.read_text(encoding="utf-8")), package)
                   if name.startswith("mha_core")}
        graph[module] = targets - {module, "mha_core", ""}  # the package root is the public facade, above all
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def floor(module: str) -> int | None:
    parts = module.split(".")
    return FLOORS.get(parts[1]) if len(parts) > 1 else None


def test_no_module_imports_itself_back_through_others():
    assert circles(import_graph()) == []


def test_no_import_goes_up_a_floor():
    upward = [(module, target) for module, targets in import_graph().items() for target in targets
              if floor(module) is not None and floor(target) is not None and floor(target) > floor(module)]
    assert upward == []


def test_the_graph_sees_function_level_and_importlib_imports():
    """The reader of the graph itself: a circle made only of a function-level import and an importlib call is found,
    and an import from a lower floor to a higher one inside a function is found."""
    graph = {"mha_core.engine.a": {"mha_core.figures.b"}, "mha_core.figures.b": {"mha_core.engine.a"}}
    assert circles(graph) == [["mha_core.engine.a", "mha_core.figures.b"]]
    source = "def f():\n    from mha_core.figures import notebook\n    importlib.import_module('mha_core.cli')\n"
    tree = ast.parse(source)
    assert imported_names(tree, "mha_core.engine") == {"mha_core.figures", "mha_core.figures.notebook", "mha_core.cli"}
