"""Issue 33, part 1: one bad folder in the Hugging Face cache never breaks a page or the listing. Each bad repository
is listed with one sentence (sidebar, `models --json`'s "usable" and "reason"), nothing blocks on a FIFO, nothing
leaves the repository, and a config asking for sizes its weights do not hold is refused before anything is built."""

from __future__ import annotations

import json
import os
import shutil
import struct
import time

import pytest

from mha_core.serving.menu import HF_CACHE, available_models, scanned_cache
from tests.conftest import cli, open_app
from tests.tiny_models import make_tiny

BAD = {  # repository: what its one sentence says
    "deep-config": "nested too deeply",
    "number-dtype": "no valid dtype and shape",
    "negative-shape": "no valid dtype and shape",
    "endless-shape": "no valid dtype and shape",
    "fifo-ref": "not a regular file",
    "escaping-ref": "does not name a revision",
    "billion-layers": "1,000,000,000 layers",
    "huge-config": "over the",
}


def header_file(path, tensors: dict) -> None:
    header = json.dumps(tensors).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


@pytest.fixture
def hostile_hub(tmp_path, monkeypatch):
    """A hub cache with a usable tiny Llama and one repository broken in each way a careless cache can be."""
    root = tmp_path / "hub"
    good = make_tiny("llama", tmp_path / "good")

    def repo(name: str, revision: str = "main-rev") -> object:
        snapshot = root / f"models--org--{name}" / "snapshots" / revision
        shutil.copytree(good, snapshot)
        (snapshot.parents[1] / "refs").mkdir()
        (snapshot.parents[1] / "refs" / "main").write_text(revision)
        return snapshot

    repo("tiny")
    (repo("deep-config") / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    header_file(repo("number-dtype") / "model.safetensors", {"w": {"dtype": 7, "shape": [2], "data_offsets": [0, 8]}})
    header_file(repo("negative-shape") / "model.safetensors",
                {"w": {"dtype": "F32", "shape": [-3, 4], "data_offsets": [0, 8]}})
    header_file(repo("endless-shape") / "model.safetensors",
                {"w": {"dtype": "F32", "shape": [1e400, 4], "data_offsets": [0, 8]}})
    fifo = repo("fifo-ref").parents[1] / "refs" / "main"
    fifo.unlink()
    os.mkfifo(fifo)
    repo("escaping-ref")
    (root / "models--org--escaping-ref" / "refs" / "main").write_text("../../models--org--tiny/snapshots/main-rev")
    config = json.loads((good / "config.json").read_text())
    (repo("billion-layers") / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1_000_000_000}))
    (repo("huge-config") / "config.json").write_text(json.dumps({**config, "padding": "x" * (2 << 20)}))
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("MHA_HF_CACHE", "1")
    scanned_cache.cache_clear()
    return root


def test_every_bad_repository_is_listed_with_one_sentence_and_none_blocks(hostile_hub):
    start = time.monotonic()
    listed = {c.name.removeprefix("org/"): c for c in available_models() if c.source == HF_CACHE}
    assert time.monotonic() - start < 10  # the FIFO is never opened
    assert listed["tiny"].refused is None and listed["tiny"].family == "llama"
    for name, said in BAD.items():
        assert listed[name].refused and said in str(listed[name].refused), (name, listed[name].refused)
        assert "cannot be used" in listed[name].label and "\n" not in str(listed[name].refused)


def test_models_json_is_plain_json_with_usable_and_reason(hostile_hub):
    run = cli("models", "--json", "-")

    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    entries = {m["name"].removeprefix("org/"): m for m in json.loads(run.stdout, parse_constant=no_constant)}
    assert run.returncode == 0 and entries["tiny"]["usable"] is True and entries["tiny"]["reason"] is None
    for name, said in BAD.items():
        assert entries[name]["usable"] is False and said in entries[name]["reason"], entries[name]
        assert entries[name]["parameters"] is None or entries[name]["parameters"] >= 0


def test_a_config_asking_for_a_billion_layers_is_refused_before_anything_is_built(hostile_hub):
    start = time.monotonic()
    run = cli("attention", "the animal", "--model", "org/billion-layers", "--json", "-")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "layers" in run.stderr
    assert time.monotonic() - start < 10


def test_the_pages_name_the_bad_repositories_and_keep_working(hostile_hub):
    at = open_app("views/heads.py")
    assert not at.exception and not at.error
    options = at.selectbox(key="model").options
    assert "org/deep-config (cannot be used)" in options and "org/tiny" in options
    at = open_app("views/heads.py", model="org/fifo-ref")
    assert not at.exception and any("not a regular file" in e.value for e in at.error)
    assert any("6 layers × 12 heads" in c.value for c in at.caption)  # the default model is shown instead
