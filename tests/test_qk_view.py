"""Issue 13, part 2: the joint query-key view of one head (AttentionViz's normalisation, projections, colours)."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch

from mha_core import load_model, run
from mha_core.analysis.corpus.passes import corpus_pass
from mha_core.analysis.heads.qk_view import (
    COLOUR_BY,
    PROJECTIONS,
    attention_row,
    colour_groups,
    marked_sentence,
    normalise,
    qk_view,
    strongest_keys,
    token_pos,
)
from mha_core.figures.corpus import qk_figure, qk_hover
from mha_core.serving.export import distance_csv, qk_points_csv
from tests.test_head_distances import TEXTS


@pytest.fixture(scope="module")
def llama_corpus(family_dirs):
    model = load_model(family_dirs["llama"])  # causal, RoPE, 2 key/value heads for 4 query heads
    return model, corpus_pass(model, TEXTS)


def softmax_rows(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = q @ k.T * q.shape[-1] ** -0.5  # (T,T)
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -torch.inf)
    return torch.softmax(scores, -1)


def test_the_normalisation_leaves_every_attention_row_unchanged(llama_corpus):
    model, corpus = llama_corpus
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            kv = head // (model.n_heads // model.n_kv_heads)
            norm = normalise(corpus.layer_q[layer][:, head], corpus.layer_k[layer][:, kv])
            assert torch.allclose(norm.queries.mean(0), norm.keys.mean(0), atol=1e-9)
            assert abs(norm.queries.norm(dim=1).mean() - norm.keys.norm(dim=1).mean()) <= 1e-9 * norm.mean_norm
            for t in range(corpus.kept):
                rows = slice(int(corpus.starts[t]), int(corpus.starts[t + 1]))
                moved = softmax_rows(norm.queries[rows], norm.keys[rows], model.causal)
                model_map = run(model, corpus.texts[t], path="explicit").head_map(layer, head)[0].double()
                assert (moved - model_map).abs().max().item() <= 1e-5


def test_the_normalisation_moves_far_apart_clouds_together():
    torch.manual_seed(0)
    q, k = torch.randn(300, 16) * 0.1 + 5.0, torch.randn(300, 16) * 4.0 - 3.0
    norm = normalise(q, k)
    assert norm.scale != pytest.approx(1.0)
    assert torch.allclose(norm.queries.mean(0), norm.keys.mean(0), atol=1e-9)
    assert norm.queries.norm(dim=1).mean().item() == pytest.approx(norm.keys.norm(dim=1).mean().item(), rel=1e-9)
    scores = q.double() @ k.double().T
    moved = norm.queries @ norm.keys.T
    shift = moved - scores  # one constant per query row: softmax is unchanged
    assert (shift - shift[:, :1]).abs().max().item() <= 1e-8 * scores.abs().max().item()


def test_attention_rows_and_top_keys_come_from_the_model(llama_corpus):
    model, corpus = llama_corpus
    t = 3
    result = run(model, corpus.texts[t], path="explicit")
    token = int(corpus.starts[t]) + 5
    row = attention_row(corpus, 1, 2, token)
    assert np.abs(row - result.head_map(1, 2)[0, 5].numpy()).max() <= 1e-5
    assert np.all(row[6:] == 0)  # causal: nothing after the query
    best = strongest_keys(corpus, 1, 2, token, k=3)
    assert [j for j, _, _ in best] == list(np.argsort(-row, kind="stable")[:3])
    assert best[0][1] == result.labels[0][best[0][0]]


@pytest.mark.parametrize("family", ["bert", "gpt2", "qwen2", "mistral"])  # no mask, learned positions, biases, window
def test_every_query_row_equals_the_models_map(family, family_dirs):
    model = load_model(family_dirs[family])
    corpus = corpus_pass(model, TEXTS)
    for t in range(corpus.kept):
        maps = run(model, corpus.texts[t], path="explicit").text_attention(0)  # (L,H,T,T)
        start = int(corpus.starts[t])
        for layer, head in ((0, 0), (model.n_layers - 1, model.n_heads - 1)):
            rows = np.stack([attention_row(corpus, layer, head, start + i) for i in range(maps.shape[-1])])
            assert np.abs(rows - maps[layer, head]).max() <= 1e-5


def test_a_previous_token_head_puts_queries_near_the_previous_key(bundled):
    from tests.conftest import long_text

    texts = [s.strip() + "." for s in long_text(600).split(".") if s.strip()]
    corpus = corpus_pass(bundled, texts)
    prev = corpus.roles.metrics["prev"]
    layer, head = np.unravel_index(int(np.argmax(prev)), prev.shape)
    assert prev[layer, head] >= 0.5  # a previous-token head, by Clark's rule
    view = qk_view(corpus, int(layer), int(head))
    m = view.n_tokens
    queries, keys = view.xy[:m], view.xy[m:]
    has_prev = np.flatnonzero(corpus.position > 0)
    rng = np.random.default_rng(0)
    to_prev = np.linalg.norm(queries[has_prev] - keys[has_prev - 1], axis=1).mean()
    to_random = np.linalg.norm(queries[has_prev] - keys[rng.integers(0, m, len(has_prev))], axis=1).mean()
    assert to_prev < to_random
    assert view.explained is not None and 0 < view.explained[1] <= view.explained[0] < 1


# UMAP's first call compiles with numba (~20 s): in make test, not in the fast tier
@pytest.mark.parametrize("method", [pytest.param(PROJECTIONS[1], marks=pytest.mark.slow), PROJECTIONS[2]])
def test_umap_and_tsne_are_seeded_and_give_every_point(llama_corpus, method):
    _, corpus = llama_corpus
    first, second = qk_view(corpus, 0, 1, method), qk_view(corpus, 0, 1, method)
    assert first.xy.shape == (2 * len(corpus.labels), 2) and np.isfinite(first.xy).all()
    assert np.allclose(first.xy, second.xy)


UMAP_POINTS = np.random.default_rng(0).normal(size=(60, 16)).astype(np.float32)  # as UMAP_CHILD draws them
UMAP_CHILD = """
import json, sys
import numpy as np
import torch
from numba.core.dispatcher import Dispatcher
from mha_core.analysis.heads import projection
torch.set_num_threads(1)
torch.ones(1 << 20).relu().sum()  # torch's OpenMP started, as in any process that has run a model
xy = projection.nonlinear(np.random.default_rng(0).normal(size=(60, 16)).astype(np.float32), projection.UMAP)
functions = {id(f): f for name, module in list(sys.modules.items()) if name.split(".")[0] == "umap" and module
             for f in vars(module).values() if isinstance(f, Dispatcher)}.values()
print(json.dumps({"xy": xy.tolist(), "torch_threads": torch.get_num_threads(),
                  "read": sum(sum(f.stats.cache_hits.values()) > 0 for f in functions),
                  "compiled": sum(bool(f.overloads) and not sum(f.stats.cache_hits.values()) for f in functions)}))
"""


@pytest.mark.slow
def test_umap_s_compiled_code_is_kept_for_the_next_process():
    """keep_compiled: a new process (a server's projection child, a restarted server) reads umap-learn's numba code
    from the cache a first one wrote instead of compiling it again (measured: 12.9 s -> 0.4 s for 300 points); and
    its UMAP leaves the process's torch on the one thread it was given (numba_keeps_to_its_own_threads). The first
    process is this one (its UMAP keeps the code), the next a child that imports only what a projection needs."""
    import json
    import subprocess
    import sys

    from mha_core.analysis.heads import projection
    from tests.conftest import ROOT

    def child() -> dict:
        done = subprocess.run([sys.executable, "-c", UMAP_CHILD], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, check=True)
        return json.loads(done.stdout.splitlines()[-1])

    here = projection.nonlinear(UMAP_POINTS, projection.UMAP)  # this process compiles, or reads what one kept
    second = child()
    assert np.allclose(here, second["xy"])
    assert second["torch_threads"] == 1  # numba's threads left torch's OpenMP alone
    # measured: 6 functions read, 2 tiny helpers compiled; without keep_compiled, 1 read (umap-learn's own cache=True
    # function) and 8 compiled
    assert second["read"] >= 3 * max(1, second["compiled"]), second


def test_one_scattergl_trace_per_colour_group(llama_corpus):
    _, corpus = llama_corpus
    view, hover = qk_view(corpus, 1, 0), qk_hover(corpus)
    pos = token_pos(corpus)
    for colour in COLOUR_BY:
        groups = colour_groups(corpus, colour, pos)
        figure = qk_figure(view, corpus, colour, hover, pos)
        assert len(figure["data"]) == len(groups) < 20
        assert {trace["type"] for trace in figure["data"]} == {"scattergl"}
        points = sorted(i for trace in figure["data"] for i in trace["customdata"])
        assert points == list(range(2 * len(corpus.labels)))  # every query and key exactly once


def test_parts_of_speech_and_marked_sentences(llama_corpus):
    _, corpus = llama_corpus
    pos = token_pos(corpus)
    t = 0  # "The animal didn't cross the street because it was too tired."
    rows = range(int(corpus.starts[t]), int(corpus.starts[t + 1]))
    tags = {corpus.labels[i].strip("␣▁ ").lower(): pos[i] for i in rows if not corpus.special[i]}
    assert tags["the"] == "DET" and tags["street"] == "NOUN" and tags["."] == "PUNCT"
    assert [pos[i] for i in rows if corpus.special[i]] == ["special"] * int(corpus.special[list(rows)].sum())
    word = next(i for i in rows if not corpus.special[i])
    assert marked_sentence(corpus, word).startswith("⟦")
    assert marked_sentence(corpus, word).replace("⟦", "").replace("⟧", "") == corpus.texts[0]


def test_the_exports_hold_every_point_and_the_matrix(llama_corpus):
    _, corpus = llama_corpus
    view = qk_view(corpus, 0, 0)
    rows = list(csv.reader(io.StringIO(qk_points_csv(view.xy, corpus.labels, corpus.sentence_of, corpus.position))))
    assert rows[0] == ["kind", "x", "y", "sentence", "position", "token"]
    assert len(rows) == 1 + 2 * len(corpus.labels)
    assert rows[1][0] == "query" and rows[-1][0] == "key" and float(rows[1][1]) == pytest.approx(view.xy[0, 0], 1e-5)
    matrix = list(csv.reader(io.StringIO(distance_csv(corpus.distance, corpus.heads))))
    assert matrix[0][1:3] == ["L0 H0", "L0 H1"] and len(matrix) == 1 + len(corpus.heads)
    assert np.allclose(np.array([r[1:] for r in matrix[1:]], dtype=float), corpus.distance, atol=1e-6)


def test_a_missing_head_is_refused_by_one_check_on_every_floor(llama_corpus, tiny):
    """Issue 45: the query-key view, patching, the corpus search and the CLI's --heads once had two checks with two
    messages; now one (engine/heads.checked_head), its code naming what went wrong."""
    from mha_core.analysis.heads.qk_view import check_head as check_view_head
    from mha_core.analysis.lm.patching import check_head
    from mha_core.engine.tokens import InputError

    _, corpus = llama_corpus
    with pytest.raises(InputError) as in_view:
        check_view_head(corpus, corpus.n_layers, 0)
    with pytest.raises(InputError) as in_patching:
        check_head(tiny, (0, tiny.n_heads))
    assert in_view.value.code == in_patching.value.code == "no_such_head"
    assert "there is no layer 0, head 4" in str(in_patching.value) and str(in_view.value).startswith("The model has")
    assert check_head(tiny, (1, 3)) == (1, 3)
