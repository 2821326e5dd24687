"""Issue 13, part 1: head distances (mean Jensen-Shannon divergence per query token) and the MDS head map."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import rel_entr

from mha_core import load_model, run
from mha_core.analysis.corpus.distances import closest_pairs, embed_heads, js_sums
from mha_core.analysis.corpus.passes import corpus_pass
from mha_core.engine.batching import map_batches
from tests.conftest import ANIMAL_TIRED

TEXTS = [ANIMAL_TIRED, "A short one.", "Dogs bark.", "She said that the results, surprisingly, held up in every test.",
         "It rained."]


def reference_distance(maps_per_text: list[np.ndarray]) -> np.ndarray:
    """JS(p, q) = (KL(p | m) + KL(q | m)) / 2 with scipy's rel_entr, in float64, row by row, averaged over all
    rows of all texts (each text's maps (N,T,T))."""
    n = maps_per_text[0].shape[0]
    total, rows = np.zeros((n, n)), 0
    for maps in maps_per_text:
        p = maps.astype(np.float64)[:, None]  # (N,1,T,T)
        q = maps.astype(np.float64)[None]  # (1,N,T,T)
        m = (p + q) / 2
        total += ((rel_entr(p, m) + rel_entr(q, m)) / 2).sum((-2, -1))  # (N,N) summed over rows
        rows += maps.shape[1]
    return total / rows


def random_rows(n: int, r: int, s: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    rows = torch.rand(n, r, s, generator=g) ** 4
    rows[:, :, -2:] = 0  # padding keys
    return rows / rows.sum(-1, keepdim=True)


def test_js_sums_equal_scipy_and_identical_heads_are_zero():
    rows = random_rows(5, 9, 7, seed=0)
    rows[3] = rows[1]  # two heads with identical maps
    ours = js_sums(rows).numpy()
    expected = reference_distance([rows.numpy()]) * rows.shape[1]
    assert np.abs(ours - expected).max() <= 1e-5
    assert np.array_equal(ours, ours.T) and np.all(np.diag(ours) == 0)
    assert ours[1, 3] == 0.0 and ours[3, 1] == 0.0
    assert ours[0, 1] > 0.01  # different heads are apart


def synthetic_maps(lengths: list[int], seed: int = 1) -> list[np.ndarray]:
    """Per sentence (4,T,T): heads 0 and 1 attend to the previous token, heads 2 and 3 to the last ([SEP])."""
    rng = np.random.default_rng(seed)
    out = []
    for t in lengths:
        maps = rng.random((4, t, t)) * 0.2
        idx = np.arange(t)
        maps[:2, idx, np.maximum(idx - 1, 0)] += 3.0
        maps[2:, :, -1] += 3.0
        out.append(maps / maps.sum(-1, keepdims=True))
    return out


def test_two_previous_token_heads_and_two_sep_heads_pair_up():
    maps = synthetic_maps([5, 9, 12, 7])
    width = max(m.shape[-1] for m in maps)
    rows = torch.cat([torch.nn.functional.pad(torch.tensor(m, dtype=torch.float32), (0, width - m.shape[-1]))
                      for m in maps], dim=1)  # (4,R,S): padded keys are 0
    distance = (js_sums(rows) / rows.shape[1]).numpy()
    assert np.abs(distance - reference_distance(maps)).max() <= 1e-6
    head_map = embed_heads(distance, tuple((0, h) for h in range(4)))
    assert list(head_map.nearest[:, 0]) == [1, 0, 3, 2]
    plane = np.linalg.norm(head_map.xy[:, None] - head_map.xy[None], axis=-1)
    assert max(plane[0, 1], plane[2, 3]) < min(plane[0, 2], plane[0, 3], plane[1, 2], plane[1, 3])


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_the_batched_pass_equals_a_per_sentence_reference(family, family_dirs):
    model = load_model(family_dirs[family])
    corpus = corpus_pass(model, TEXTS)
    n = model.n_layers * model.n_heads
    per_text = [m.reshape(n, *m.shape[-2:]) for m in (run(model, t, path="explicit").text_attention(0) for t in TEXTS)]
    expected = reference_distance(per_text)
    assert np.abs(corpus.distance - expected).max() <= 1e-6
    assert corpus.rows == sum(m.shape[1] for m in per_text)
    assert corpus.heads[:model.n_heads + 1] == tuple((0, h) for h in range(model.n_heads)) + ((1, 0),)
    assert np.array_equal(corpus.distance, corpus.distance.T) and np.all(np.diag(corpus.distance) == 0)


def test_the_kept_vectors_are_the_models_queries_and_keys(family_dirs):
    model = load_model(family_dirs["llama"])  # RoPE and grouped-query attention
    corpus = corpus_pass(model, TEXTS)
    assert corpus.kept == len(TEXTS)
    for t, text in enumerate(TEXTS):
        result = run(model, text, path="explicit")
        rows = slice(int(corpus.starts[t]), int(corpus.starts[t + 1]))
        assert corpus.labels[rows] == result.labels[0]
        for layer in range(model.n_layers):
            assert torch.allclose(corpus.layer_q[layer][rows], result.layer_q[layer][0].transpose(0, 1), atol=1e-6)
            assert torch.allclose(corpus.layer_k[layer][rows], result.layer_k[layer][0].transpose(0, 1), atol=1e-6)
    assert list(corpus.position[: len(corpus.labels) // 2][:3]) == [0, 1, 2]


def test_long_texts_go_in_batches_whose_maps_fit_the_budget():
    lengths = [1024] * 5 + [20] * 300 + [300] * 40
    batches = map_batches(lengths, n_heads=270, maps_mb=128)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * 270 * longest**2 * 4 <= 128 * 2**20


def test_closest_pairs_skip_heads_of_one_layer():
    heads = ((0, 0), (0, 1), (1, 0), (1, 1))
    distance = np.array([[0, 0.01, 0.3, 0.2], [0.01, 0, 0.05, 0.4], [0.3, 0.05, 0, 0.02], [0.2, 0.4, 0.02, 0]])
    assert closest_pairs(distance, heads, 2) == [(0.05, (0, 1), (1, 0)), (0.2, (0, 0), (1, 1))]
