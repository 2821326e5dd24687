"""Issue 24, first part: blocks, summaries and downsampled maps of long texts, rebuilt a band of rows at a time,
equal to the same quantities computed naively from the full maps (text_maps) on every kind of attention: an
encoder, grouped-query RoPE, sliding windows and soft-capping (Gemma), ALiBi (BLOOM), both paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model, run
from mha_core.analysis.long.text import distance_edges, downsampled_map, head_summaries, map_block
from tests.conftest import long_text
from tests.tolerance import assert_close_to_scale

FAMILIES = ["bert", "llama", "gemma2", "gemma3_text", "bloom"]


def naive_summaries(maps: np.ndarray, window: int) -> dict[str, np.ndarray]:
    """The summaries from full (L,H,T,T) maps, written out row by row."""
    n = maps.shape[-1]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    dist = np.abs(i - j)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(maps > 0, maps * np.log(maps), 0.0)
    edges = distance_edges(n)
    profile = np.stack([(maps * ((dist >= lo) & (dist < hi))).sum(-1).mean(-1)
                        for lo, hi in zip(edges[:-1], edges[1:], strict=True)], axis=-1)
    return {"entropy": -plogp.sum(-1).mean(-1), "first": maps[..., 0].mean(-1),
            "previous": maps[..., np.arange(1, n), np.arange(n - 1)].mean(-1),
            "local": (maps * (dist <= window)).sum(-1).mean(-1), "distance": (maps * dist).sum(-1).mean(-1),
            "profile": profile}


@pytest.mark.parametrize("path", ["explicit", "fused"])
@pytest.mark.parametrize("family", FAMILIES)
def test_summaries_and_blocks_equal_the_full_maps(family_dirs, family, path):
    model = load_model(family_dirs[family])
    result = run(model, long_text(25), path=path)
    maps = result.text_attention(0)  # (L,H,T,T) the reference
    n = maps.shape[-1]
    summaries = head_summaries(result, window=2, block=7)  # blocks of 7 rows: uneven, several per text
    for name, expected in naive_summaries(maps, 2).items():
        assert_close_to_scale(getattr(summaries, name), expected, 2e-5, what=f"{family} {path} {name}")
    assert_close_to_scale(summaries.profile.sum(-1), np.ones(summaries.profile.shape[:-1]), 1e-5)  # some bin each
    block = map_block(result, 0, 1, slice(1, 3), range(5, 17), range(3, n))  # (2,12,n-3)
    assert_close_to_scale(block, maps[1, 1:3, 5:17, 3:], 1e-6)


@pytest.mark.parametrize("how", ["max", "mean"])
@pytest.mark.parametrize("family", ["llama", "gemma3_text", "bert"])  # causal, windowed, neither
def test_a_downsampled_map_pools_the_full_map(family_dirs, how, family):
    result = run(load_model(family_dirs[family]), long_text(40), path="fused")
    full = result.text_attention(0)[0, 1]  # (T,T) layer 0: Gemma 3's tiny model has a window of 4 there
    n = full.shape[0]
    cells, side = downsampled_map(result, 0, 0, 1, how, max_cells=9, block=7)  # several bands
    assert side == -(-n // 9) and cells.shape == (-(-n // side),) * 2
    expected = np.zeros(cells.shape)
    for r in range(cells.shape[0]):
        for c in range(cells.shape[1]):
            part = full[r * side:(r + 1) * side, c * side:(c + 1) * side]
            expected[r, c] = part.max() if how == "max" else part.mean()
    assert_close_to_scale(cells, expected, 1e-5, what=(family, how))


def test_the_blocks_never_build_a_full_map(family_dirs, monkeypatch):
    """The largest product map_block is asked for is one band of rows by the text: R × T, never T × T."""
    import mha_core.analysis.long.text as long_module

    result = run(load_model(family_dirs["llama"]), long_text(60), path="fused")
    n = result.lengths[0]
    shapes = {}
    for name in ("rebuild_probs", "rebuild_log_probs"):  # the maps' blocks; the summaries' bands (GQA: a key/value
        real = getattr(long_module, name)  # head's query heads' rows stacked: 2 × 16)

        def record(q, k, *args, name=name, real=real, **kwargs):
            shapes.setdefault(name, []).append(q.shape[-2])
            return real(q, k, *args, **kwargs)

        monkeypatch.setattr(long_module, name, record)
    head_summaries(result, block=16)
    downsampled_map(result, 0, 0, 0, max_cells=8, block=16)
    recorded = [rows for calls in shapes.values() for rows in calls]
    assert len(recorded) > 2 * 4 and max(recorded) <= 2 * 16 < n
    assert torch.is_tensor(result.layer_lse[0])
