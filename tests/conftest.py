"""Shared fixtures: the real bundled model (parity) and a tiny random BERT (fast unit tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mha_core import LoadedModel, load_model
from mha_core.engine.model import bundled_model_dir

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
ANIMAL_TIRED = "The animal didn't cross the street because it was too tired."
ANIMAL_WIDE = "The animal didn't cross the street because it was too wide."


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on the 30-layer bundled decoder belong to make test, not to the fast tier (make check)."""
    for item in items:
        if "decoder" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def bundled() -> LoadedModel:
    return load_model()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 4-head, d_model 32 BERT with random weights and the bundled tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    )
    path = tmp_path_factory.mktemp("tiny-bert")
    BertModel(config).save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny(tiny_dir: Path) -> LoadedModel:
    return load_model(tiny_dir)


def long_text(n_words: int) -> str:
    """Varied English prose of about n_words words."""
    base = (
        "Researchers study how attention heads in a transformer distribute weight across tokens, "
        "and whether some heads track syntax, coreference, or simple positions in the sentence."
    )
    words = base.split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def open_app(page: str | None = None, **query: str) -> object:
    """AppTest of the app, optionally switched to `page` (e.g. "views/roles.py"), with URL query params."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for key, value in query.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    return at.run()


def chart_json(at: object, key: str) -> dict:
    import json

    for c in at.get("plotly_chart"):
        if key in c.proto.id:
            return json.loads(c.proto.spec)
    raise AssertionError(f"no chart {key}")


def decode(z: object) -> np.ndarray:
    """Plotly sends numpy arrays as base64 typed arrays ({"dtype", "bdata", "shape"})."""
    if isinstance(z, dict):
        import base64

        flat = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        shape = [int(s) for s in str(z.get("shape", len(flat))).split(",")]
        return flat.reshape(shape).astype(float)
    return np.array(z, dtype=float)


@pytest.fixture(scope="session")
def bad_model_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> dict[str, Path]:
    """Model folders a careless server owner might list: each must give one sentence, never a traceback."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("bad-models")
    folders = {}

    def folder(name: str, config: str | None = None, weights: bytes | None = None, tokenizer: bool = True) -> None:
        path = root / name
        path.mkdir()
        (path / "config.json").write_text(config if config is not None else (tiny_dir / "config.json").read_text())
        if weights is None:
            shutil.copy(tiny_dir / "model.safetensors", path)
        else:
            (path / "model.safetensors").write_bytes(weights)
        if tokenizer:
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(tiny_dir / f, path)
        folders[name] = path

    for name, config in (("config-list", "[1, 2]"), ("config-null", "null"), ("config-string", '"bert"'),
                         ("config-broken", "{not json"), ("unknown-type", '{"model_type": "t5"}'),
                         ("custom-code", '{"model_type": "llama", "auto_map": {"AutoModel": "modeling_x.M"}}')):
        folder(name, config)
    folder("garbage-weights", weights=b"\xff" * 64)
    mismatched = json.loads((tiny_dir / "config.json").read_text())
    mismatched.update(hidden_size=64, intermediate_size=128)
    folder("sizes-mismatch", json.dumps(mismatched))
    folder("no-tokenizer", tokenizer=False)
    return folders


@pytest.fixture(scope="session")
def decoder() -> LoadedModel:
    """The bundled SmolLM2-135M-Instruct (converted from GGUF on first use)."""
    from mha_core.engine.bundled import DECODER_NAME
    from mha_core.engine.model import bundled_dirs

    return load_model(bundled_dirs()[DECODER_NAME])


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random model of every supported family (tests/tiny_models.py), by family name."""
    from tests.tiny_models import CONFIGS, make_tiny

    root = tmp_path_factory.mktemp("families")
    return {family: make_tiny(family, root / family) for family in CONFIGS}
