"""Issue 79: the docs site's two reference pages are written from the code as it builds (docs_hooks/reference.py):
every subcommand of the CLI's parser with its --help, and every public name of mha_core, so that neither can drift."""

from __future__ import annotations

import importlib.util

from tests.conftest import ROOT


def reference_hook() -> object:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs_hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_holds_every_subcommand_with_its_help():
    from mha_core.cli import build_parser

    hook = reference_hook()
    page = hook.on_page_markdown(f"# CLI reference\n\n{hook.CLI_MARKER}\n")
    for name, _, parser in hook.subcommands(build_parser()):
        assert f"## `{name}`" in page, name
        assert parser.format_help().strip() in page, name  # its --help, as the terminal prints it (COLUMNS: the hook's)
    assert {"attention", "prepare", "app", "models"} <= {name for name, _, _ in hook.subcommands(build_parser())}


def test_the_api_reference_names_every_public_name_where_it_is_defined():
    import mha_core

    page = reference_hook().on_page_markdown(f"# API\n\n{reference_hook().API_MARKER}\n")
    for module, names in mha_core._PUBLIC.items():
        for name in names:
            assert f"::: {module}.{name}\n" in page or f"`mha_core.{name}`" in page, name
    assert page.count(":::") == sum(not name.isupper() for names in mha_core._PUBLIC.values() for name in names)
