"""Issue 43, part 6: a corpus index's build stays within the memory budget whatever the corpus's size. Peak RSS
growth of a build, each in a process of its own (forked from one that has loaded the libraries), at 1× and 4× the
corpus under a 256 MB budget ($MHA_COMPUTE_MB): both within the budget, and the larger corpus adding little (every
column was gathered whole before: a 298,520-piece build grew by 2.3 GB under the default 1,536 MB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BUDGET_MB = 256
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wide_dir(tmp_path_factory) -> Path:
    """One layer of MiniLM's width (384, six heads): the vectors are as wide as the bundled model's, the pass cheap."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mha_core.engine.loading.model import bundled_model_dir

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("wide") / "wide-bert"
    BertModel(BertConfig(hidden_size=384, num_hidden_layers=1, num_attention_heads=6,
                         intermediate_size=512)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(bundled_model_dir()).save_pretrained(folder)
    return folder


def growths(model_dir: Path, runs: list[tuple[int, Path]]) -> list[tuple[float, int]]:
    """(peak RSS growth in MB, pieces) of each build (its lines, its folder), each in a child of one process."""
    env = {**os.environ, "MHA_COMPUTE_MB": str(BUDGET_MB), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = [str(part) for lines, out in runs for part in (lines, out)]
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "index_memory_child.py"), str(model_dir), *args],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == len(runs), done.stdout
    return [(float(grown), int(pieces)) for grown, pieces, _ in (line.split() for line in lines)]


@pytest.mark.slow
@pytest.mark.long
def test_an_index_build_grows_within_the_budget_at_any_corpus_size(wide_dir, tmp_path):
    (small, small_pieces), (large, large_pieces) = growths(wide_dir, [(600, tmp_path / "small"),
                                                                      (2400, tmp_path / "large")])
    assert large_pieces > 3.5 * small_pieces  # ≈ 37,800 pieces: 58 MB of vectors a column, three columns
    assert small <= BUDGET_MB and large <= BUDGET_MB, (small, large)
    assert large - small <= BUDGET_MB / 4, (small, large)
