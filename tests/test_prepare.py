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


def prepared(tmp_path: object) -> list[dict]:
    out = tmp_path / "prepare.json"
    done = cli("prepare", "--no-umap", "--json", str(out))
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
    assert prepared(tmp_path) == []  # found where the app put it: nothing to do
    shutil.rmtree(index.parent)
    steps = prepared(tmp_path)
    assert [(s["step"], s["name"]) for s in steps] == [("index", f"{ENCODER_NAME} (bundled corpus)")]
    at = open_app(PAGE, model=ENCODER_NAME, view=TAB)  # this process's server kept the
    assert not at.exception and not at.error  # folder's name from the first build: it reads prepare's build there
    assert len(matches_table(at)) == 50
