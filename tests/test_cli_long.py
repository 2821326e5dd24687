"""Issue 24's CLI: `attention` writes only chosen heads and query rows of a long text, reads --text-file, and
refuses every map of a text over 1,024 pieces with one line saying how large that would be."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import cli, long_text


@pytest.fixture(scope="module")
def long_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny llama (4 query heads sharing 2 key/value heads, RoPE) with room for 4,096 positions."""
    from tests.tiny_models import make_tiny

    return make_tiny("llama", tmp_path_factory.mktemp("long") / "llama", max_position_embeddings=4096)


def test_chosen_heads_and_rows_of_a_long_text_equal_the_full_maps(long_llama, tmp_path):
    from mha_core import load_model, run
    from mha_core.engine.loading.model import for_long_texts

    text = tmp_path / "long.txt"
    text.write_text(long_text(1000), encoding="utf-8")
    out = tmp_path / "out.json"
    done = cli("attention", "--text-file", str(text), "--model-dir", str(long_llama), "--heads", "1:2,0:0",
               "--rows", "1000:1010", "--json", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    n = len(data["tokens"])
    assert n > 1024 and data["heads"] == [[1, 2], [0, 0]] and data["rows"] == [1000, 1010]
    assert data["path"] == "fused" and not data["truncated"]
    got = np.array(data["attention"])  # (heads, rows, T)
    assert got.shape == (2, 10, n)
    full = run(for_long_texts(load_model(long_llama)), text.read_text(), path="explicit").text_attention(0)
    np.testing.assert_allclose(got[0], full[1, 2, 1000:1010], atol=1e-6)
    np.testing.assert_allclose(got[1], full[0, 0, 1000:1010], atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1, atol=1e-5)


def test_every_map_of_a_long_text_is_refused_with_its_size(long_llama):
    done = cli("attention", long_text(1000), "--model-dir", str(long_llama))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "pieces" in done.stderr and "--heads" in done.stderr and "GB of JSON" in done.stderr


@pytest.mark.parametrize(("args", "said"), [
    ((), "either as an argument or with --text-file"),
    (("hi", "--text-file", "x.txt"), "not both"),
    (("--text-file", "/no/such/file.txt"), "cannot read"),
    (("hi", "--heads", "1"), "'1' is not LAYER:HEAD"),
    (("hi", "--heads", "0:0,2:0"), "there is no layer 2, head 0"),
    (("hi", "--heads", "0:0", "--rows", "5:2"), "--rows takes A:B"),
])
def test_bad_long_text_arguments_get_one_line(long_llama, args, said):
    done = cli("attention", *args, "--model-dir", str(long_llama))
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
