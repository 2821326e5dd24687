"""Issue 49: analysis/seq2seq/word_alignment.py against plain loops over transformers' own cross-attentions (a tiny
BART): each target piece's most-attended source word (its pieces' weights summed, the words read from the
tokenizer's own word ids) and the pairs that are each other's argmax both ways."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.seq2seq.word_alignment import word_alignment
from mha_core.engine.seq2seq.forward import run_seq2seq
from tests.tiny_models import make_tiny_seq2seq

SOURCE, TARGET = ("The animal didn't cross the unbelievably wide street because it was tired",
                  "Das Tier ging nicht über die Straße")


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    return load_model(make_tiny_seq2seq("bart", tmp_path_factory.mktemp("bart")))


def expected_alignment(cross: torch.Tensor, groups: list[list[int]], rows: list[int]) -> tuple:
    """(T,S) map -> the words' weights, argmax and mutual argmax, one number at a time."""
    weights = [[float(sum(cross[t, i] for i in group)) for group in groups] for t in rows]
    argmax = [max(range(len(groups)), key=lambda w, k=k: weights[k][w]) for k in range(len(rows))]
    back = [max(range(len(rows)), key=lambda k, w=w: weights[k][w]) for w in range(len(groups))]
    return np.array(weights), tuple(argmax), tuple((k, w) for k, w in enumerate(argmax) if back[w] == k)


def test_the_alignment_equals_argmax_and_mutual_argmax_over_transformers_cross_attention(bart):
    result = run_seq2seq(bart, [SOURCE], [TARGET], "explicit")
    source, target = result.encoder.batch, result.decoder.batch
    with torch.inference_mode():
        ref = bart.model(input_ids=source.input_ids, attention_mask=source.attention_mask,
                         decoder_input_ids=target.input_ids, decoder_attention_mask=target.attention_mask,
                         output_attentions=True)
    words: dict[int, list[int]] = {}
    for i, word in enumerate(bart.tokenizer(SOURCE).word_ids()):
        if word is not None:
            words.setdefault(word, []).append(i)
    groups = [words[w] for w in sorted(words)]
    special_ids = set(bart.tokenizer.all_special_ids)
    ids = target.input_ids[0].tolist()
    rows = [t for t in range(len(ids) - 1) if ids[t + 1] not in special_ids]  # row t writes piece t + 1
    assert len(groups) >= 8 and len(rows) >= 6 and max(len(group) for group in groups) > 1  # a word of pieces
    for layer, maps in enumerate(ref.cross_attentions):
        for head in (None, 0, maps.shape[1] - 1):
            cross = maps[0].mean(0) if head is None else maps[0, head]  # (T,S)
            weights, argmax, symmetric = expected_alignment(cross, groups, rows)
            got = word_alignment(result, layer, head)
            assert np.allclose(got.weights, weights, atol=1e-5), (layer, head)
            assert got.argmax == argmax and got.symmetric == symmetric, (layer, head)
