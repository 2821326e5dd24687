"""Issue 22: the models already in the Hugging Face hub cache are listed ("org/name", the revision refs/main names,
a supported family with safetensors and a fast tokenizer), sized from their headers, refused over the size limit."""

from __future__ import annotations

import json
import shutil

import pytest

from mha_core.serving.menu import HF_CACHE, available_models, hub_cache_root
from tests.conftest import cli, open_app
from tests.tiny_models import make_tiny


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A hub cache with a tiny Llama at refs/main (an older revision beside it), a Pegasus (unsupported), a repo without
    refs/main and a dataset."""
    root = tmp_path / "hub"
    repo = root / "models--org--tiny-llama"
    make_tiny("llama", repo / "snapshots" / "new")
    shutil.copytree(repo / "snapshots" / "new", repo / "snapshots" / "old")
    (repo / "snapshots" / "old" / "config.json").write_text('{"model_type": "pegasus"}')
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("new\n")
    t5 = root / "models--org--t5" / "snapshots" / "a"
    t5.mkdir(parents=True)
    (t5 / "config.json").write_text('{"model_type": "pegasus"}')
    (root / "models--org--t5" / "refs").mkdir()
    (root / "models--org--t5" / "refs" / "main").write_text("a")
    (root / "models--org--no-ref" / "snapshots" / "x").mkdir(parents=True)
    (root / "datasets--org--data").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("MHA_HF_CACHE", "1")
    return repo / "snapshots" / "new"


def test_the_cache_lists_its_usable_models_at_refs_main(hub, monkeypatch):
    from mha_core import load_model

    cached = [c for c in available_models() if c.source == HF_CACHE]
    listed = [c for c in cached if c.refused is None]
    assert [(c.name, c.family, c.path) for c in listed] == [("org/tiny-llama", "llama", hub)]
    refused = {c.name: str(c.refused) for c in cached if c.refused is not None}  # named, each with why
    assert "Unsupported architecture 'pegasus'" in refused["org/t5"] and "refs/main" in refused["org/no-ref"]
    model = load_model(hub)
    assert listed[0].parameters == sum(p.numel() for p in model.model.parameters())
    monkeypatch.setenv("MHA_HF_CACHE", "0")
    assert not [c for c in available_models() if c.source == HF_CACHE]


def test_the_cache_root_follows_hf_hub_cache_then_hf_home(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache_root() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert hub_cache_root() == tmp_path / "elsewhere"


def test_the_cli_lists_and_loads_cache_models_by_name(hub):
    listed = json.loads(cli("models", "--json", "-").stdout)
    assert {"name": "org/tiny-llama", "family": "llama", "source": "hf_cache"}.items() <= listed[-1].items()
    assert [m["source"] for m in listed[:3]] == ["bundled"] * 3
    proc = cli("attention", "the animal", "--model", "org/tiny-llama", "--json", "-")
    assert proc.returncode == 0 and json.loads(proc.stdout)["model"] == "org/tiny-llama"
    unknown = cli("attention", "the animal", "--model", "org/nothing", "--json", "-")
    assert unknown.returncode == 2 and "not a listed model" in unknown.stderr


def test_a_model_over_the_size_limit_is_listed_and_refused_in_one_sentence(hub, monkeypatch):
    monkeypatch.setenv("MHA_MAX_PARAMS", "1000")
    (choice,) = [c for c in available_models() if c.source == HF_CACHE and c.name == "org/tiny-llama"]
    assert choice.refused and "over this server's limit" in choice.refused and "too large" in choice.label
    proc = cli("attention", "the animal", "--model", "org/tiny-llama", "--json", "-")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "limit" in proc.stderr
    at = open_app("views/heads.py", model="org/tiny-llama")
    assert not at.exception and any("over this server's limit" in e.value for e in at.error)
    assert any("6 layers × 12 heads" in c.value for c in at.caption)  # the default model is shown instead


def test_a_listed_cache_model_runs_on_a_page(hub):
    at = open_app("views/heads.py", model="org/tiny-llama")
    assert not at.exception and not at.error
    assert at.selectbox(key="model").value == "org/tiny-llama"
    assert any("2 layers × 4 heads" in c.value for c in at.caption)
