"""Issue 80: each page is declared once (mha_core/serving/pages.py), and the navigation, the menu's refusals and the
lesson's links come from that declaration; a page is a script that no module imports (the views it shares with the
lesson live in views/parts/)."""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace

import pytest

from mha_core.engine.loading.folder import ModelLoadError
from mha_core.serving.menu import page_model
from mha_core.serving.pages import AUDIO, BY_NAME, PAGES, TEXT, page_at
from mha_core.teaching.lesson import STEPS
from tests.conftest import ROOT


def page_files() -> set[str]:
    """The pages under views/: every file not starting with "_" (those are the pages' shared helpers)."""
    return {path.stem for path in (ROOT / "views").glob("*.py") if not path.name.startswith("_")}


def test_every_page_file_is_declared_and_every_declaration_has_its_file():
    declared = [page.name for page in PAGES]
    assert len(declared) == len(set(declared)), declared  # declared once
    assert page_files() - set(declared) == set(), "a page under views/ that serving/pages.py does not declare"
    assert set(declared) - page_files() == set(), "a declared page without its file under views/"
    assert all((ROOT / page.path).is_file() for page in PAGES)
    assert page_at("") is PAGES[0] and page_at("roles") is BY_NAME["roles"] and page_at("views") is None


def test_the_lesson_links_to_declared_pages():
    assert {step.page for step in STEPS} <= set(BY_NAME), {step.page for step in STEPS} - set(BY_NAME)


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_no_module_imports_a_page():
    """A page runs its main() when its file runs (st.Page runs it): importing one would draw it. What the lesson and a
    page both draw lives in views/parts/."""
    pages = {f"views.{name}" for name in page_files()}
    sources = [ROOT / "app.py", *(ROOT / "views").rglob("*.py"), *(ROOT / "mha_core").rglob("*.py"),
               *(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    importers = {path.relative_to(ROOT).as_posix(): sorted(imported_modules(path) & pages) for path in sources}
    assert not {path: names for path, names in importers.items() if names}


def refusal(image: bool) -> str:
    """The sentence page_model refuses an image model (or an encoder that hears audio) with, on a text page."""
    arch = SimpleNamespace(image=image, audio=not image)
    model = SimpleNamespace(arch=arch, name="m", encoder_decoder=not image, decoder=object())
    with pytest.raises(ModelLoadError) as refused:
        page_model(model, "contributions")
    return str(refused.value)


def named_pages(sentence: str) -> set[str]:
    return {page.name for page in PAGES if re.search(rf"\b{re.escape(page.title)}\b", sentence)}


def test_the_menu_s_refusals_name_the_pages_the_declarations_say_read_the_model():
    assert named_pages(refusal(image=True)) == {page.name for page in PAGES if page.reads_images}
    hear_a_sentence = {page.name for page in PAGES if page.reads_audio_models and {TEXT, AUDIO} & set(page.reads)}
    assert named_pages(refusal(image=False)) == hear_a_sentence
