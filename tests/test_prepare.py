"""`python -m mha_core prepare` (issue 44; `make prepare`, run by `make run`, `make serve` and `make test`): what a new
machine's first visitors would wait for, done once where the app looks for it, each step skipped when done. On the
bundled encoder in a cache of the test's own: the search tab builds the bundled corpus's index at its first use;
prepare then finds it and does nothing; with the index gone, prepare builds it again where the tab reads it."""

from __future__ import annotations

import json

import pytest

from mha_core.engine.loading.bundled import ENCODER_NAME
from tests.conftest import cli, open_app
from tests.test_app_search import PAGE, TAB, matches_table

pytestmark = pytest.mark.slow  # the bundled encoder's corpus indexed twice (about 3 s each)


def prepared(tmp_path: object, *options: str) -> list[dict]:
    out = tmp_path / "prepare.json"
    done = cli("prepare", "--no-umap", *options, "--json", str(out))
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text(encoding="utf-8"))["steps"]


def test_prepare_builds_what_the_app_builds_at_first_use_where_the_app_looks(bundled, tmp_path, monkeypatch):
    import shutil

    from mha_core.engine.loading import model as loading
    from mha_core.serving.computed.index import MANIFEST, bundled_index_dir

    monkeypatch.setenv("MHA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "bundled_dirs", lambda: {ENCODER_NAME: loading.bundled_model_dir()})
    index = bundled_index_dir(bundled) / MANIFEST
    assert not index.exists()
    at = open_app(PAGE, model=ENCODER_NAME, view=TAB)  # the first use builds it
    assert not at.exception and not at.error and index.is_file()
    assert prepared(tmp_path, "--no-analyses") == []  # found where the app put it: nothing to do
    shutil.rmtree(index.parent)
    steps = prepared(tmp_path, "--no-analyses")
    assert [(s["step"], s["name"]) for s in steps] == [("index", f"{ENCODER_NAME} (bundled corpus)")]
    at = open_app(PAGE, model=ENCODER_NAME, view=TAB)  # this process's server kept the
    assert not at.exception and not at.error  # folder's name from the first build: it reads prepare's build there
    assert len(matches_table(at)) == 50


def test_prepare_keeps_the_analyses_a_new_server_s_roles_page_reads_without_computing(tmp_path, monkeypatch):
    """The induction probe, the bundled corpus's analysis and its head distances, kept by prepare where the app reads
    them: a new server (this process's, dropped) draws the Roles page on the bundled corpus, and Across a corpus's
    head map, without computing any."""
    from mha_core.engine.loading import model as loading
    from mha_core.serving.computed import corpus as computed_corpus
    from mha_core.serving.computed import text as computed_text
    from views._state import server

    monkeypatch.setenv("MHA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "bundled_dirs", lambda: {ENCODER_NAME: loading.bundled_model_dir()})
    steps = prepared(tmp_path, "--no-index")
    assert [(s["step"], s["name"]) for s in steps] == [
        ("analyse", f"{ENCODER_NAME} (induction)"), ("analyse", f"{ENCODER_NAME} (bundled corpus)"),
        ("analyse", f"{ENCODER_NAME} (bundled corpus, head distances)")]
    assert prepared(tmp_path, "--no-index") == []  # kept: nothing to do

    def computed(*args: object, **kwargs: object) -> None:
        raise AssertionError("computed, not read")

    monkeypatch.setattr(computed_corpus, "analyse_corpus", computed)
    monkeypatch.setattr(computed_text, "induction_scores", computed)
    monkeypatch.setattr(computed_corpus, "corpus_pass", computed)
    server.clear()  # a new server: nothing in memory
    try:
        at = open_app("views/roles.py", model=ENCODER_NAME, source="Bundled corpus")
        assert not at.exception and not at.error and "det" in set(at.dataframe[0].value["relation"])
        assert "Induction and duplicate-token heads" in [h.value for h in at.subheader]  # drawn from the kept probe
        at = open_app("views/corpus.py", model=ENCODER_NAME)
        assert not at.exception and not at.error and "312 sentences" in " ".join(c.value for c in at.caption)
    finally:
        server.clear()
