"""Induction and duplicate-token scores, and the causal baselines of head metrics."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.analysis.heads.induction import INDUCTION_MIN, InductionScores, induction_scores, repeated_sequences
from mha_core.analysis.heads.roles import RoleAccumulator
from mha_core.engine.forward import forward
from mha_core.engine.tokens import ids_batch


def test_scores_follow_their_definition_on_one_sequence(family_dirs):
    from mha_core import load_model

    model = load_model(family_dirs["llama"])
    scores = induction_scores(model, n=1, seed=3)
    (ids,), (special,), (n,) = repeated_sequences(model, 1, 3)
    assert ids[1: 1 + n] == ids[1 + n: 1 + 2 * n] and special[0] and not any(special[1:])
    maps = forward(model, ids_batch(model.tokenizer, [ids], [special]), path="explicit").text_maps(0)
    induction = np.mean([maps[:, :, 1 + n + i, 2 + i].numpy() for i in range(n)], axis=0)  # (L,H)
    duplicate = np.mean([maps[:, :, 1 + n + i, 1 + i].numpy() for i in range(n)], axis=0)
    assert np.allclose(scores.induction, induction, atol=1e-6) and np.allclose(scores.duplicate, duplicate, atol=1e-6)
    assert np.isclose(scores.baseline, np.mean([1 / (2 + n + i) for i in range(n)]))  # causal: 1/(p + 1)


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_many_sequences_in_length_batches_score_as_each_read_alone(family_dirs, monkeypatch, family):
    """The sequences go in batches of similar length (a third of one padded batch was padding): the scores are the
    mean over every sequence's repeat of its own maps, each sequence read alone."""
    from mha_core import load_model
    from mha_core.analysis.heads import induction

    model = load_model(family_dirs[family])
    monkeypatch.setattr(induction, "INDUCTION_BATCH_PIECES", 150)  # several batches of the tiny model's sequences
    scores = induction_scores(model, n=12, seed=5)
    ids, special, lengths = repeated_sequences(model, 12, 5)
    assert len(set(lengths)) > 3
    lead, rows = int(special[0][0]), {"induction": [], "duplicate": []}
    for one, flags, n in zip(ids, special, lengths, strict=True):
        maps = forward(model, ids_batch(model.tokenizer, [one], [flags]), path="explicit").text_maps(0)  # (L,H,T,T)
        for i in range(n):
            rows["induction"].append(maps[:, :, lead + n + i, lead + i + 1].numpy())
            rows["duplicate"].append(maps[:, :, lead + n + i, lead + i].numpy())
    assert np.allclose(scores.induction, np.mean(rows["induction"], axis=0), atol=1e-6)
    assert np.allclose(scores.duplicate, np.mean(rows["duplicate"], axis=0), atol=1e-6)


@pytest.fixture(scope="module")
def decoder_scores(decoder) -> InductionScores:
    """The bundled decoder's scores as the pages keep them (this process's server, serving.computed.text): computed
    once for these tests and the Roles page that the last one opens (7-20 s each time, by machine)."""
    from mha_core.serving.computed.text import induction_of
    from views._state import server

    return induction_of(server(), decoder)


def test_the_bundled_decoder_has_induction_heads_and_the_encoder_none(decoder_scores, bundled):
    scores = decoder_scores
    assert scores.sequences == 32 and scores.induction.shape == (30, 9)
    assert scores.induction.max() > 20 * scores.baseline and scores.induction.max() > 0.7  # measured: 0.861 (L18 H6)
    assert len(scores.induction_heads()) >= 3 and all(layer > 0 for layer, _ in scores.induction_heads())
    encoder = induction_scores(bundled)
    assert encoder.induction.max() < INDUCTION_MIN and not encoder.induction_heads()  # bidirectional, no repeat trick


def test_causal_baselines_are_uniform_over_the_visible_keys():
    t = 5
    causal_uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]  # (T,T)
    acc = RoleAccumulator()
    acc.add(causal_uniform[None, None], ["<s>", "a", "b", "c", "d"], [True, False, False, False, False], causal=True)
    roles = acc.result()
    for name in ("cls", "prev", "self", "entropy"):
        assert np.isclose(roles.metrics[name][0, 0], roles.baselines[name]), name
    assert np.isclose(roles.baselines["cls"], np.mean(1 / np.arange(1, t + 1)))
    assert roles.labels(first="first token")[0, 0] != "[CLS]"


def test_roles_page_on_the_decoder_labels_sinks_and_induction_heads(decoder_scores):
    from tests.conftest import chart_json, decode, open_app

    at = open_app("views/roles.py", model="SmolLM2-135M-Instruct")
    assert not at.exception
    cells = {label for row in chart_json(at, "role_grid")["data"][0]["text"] for label in row}
    assert {"first token", "induction"} <= cells and "[CLS]" not in cells
    assert any("only looks back" in c.value for c in at.caption)
    induction = decode(chart_json(at, "induction_grid")["data"][0]["z"])
    assert np.allclose(induction, decoder_scores.induction, atol=1e-6)  # the probe the page keeps, as drawn
