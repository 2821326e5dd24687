"""Issue 81's faithfulness table over data (analysis/explain/dataset.py) on a tiny decoder: its means, spreads and
ranking equal a plain loop over transformers' forwards on the sampled texts (each the model's own next piece, the
words ranked by the last layer's mean attention from transformers' attentions); GAP's snippet is cut to the
sentences that hold the pronoun and the two names."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.corpus.readers import GapExample
from mha_core.analysis.explain.dataset import CORPUS, dataset_items, dataset_table, gap_window, sampled
from mha_core.analysis.explain.explain import explain
from tests.lm_models import reference

KS = (1, 2, 3, 5)


def own_log_probability(ref, ids: list[int], answer: int | None = None) -> tuple[float, int]:
    """log p(answer | ids) after the last piece, answer: the model's own most likely next piece unless given."""
    logits = ref(input_ids=torch.tensor([ids])).logits[0, -1].float()
    answer = int(logits.argmax()) if answer is None else answer
    return float(torch.log_softmax(logits, -1)[answer]), answer


def plain_aopc(ref, ids: list[int], word_of_piece: list[int], removable: list[int]) -> tuple[float, float]:
    """AOPC comprehensiveness and sufficiency of the last layer's mean attention from the last piece, by hand."""
    with torch.no_grad():
        full, answer = own_log_probability(ref, ids)
        row = ref(input_ids=torch.tensor([ids]), output_attentions=True).attentions[-1][0, :, -1].mean(0)  # (T,)
        words = np.bincount(word_of_piece, weights=row.double().numpy())
        order = sorted(removable, key=lambda w: (-words[w], w))

        def without(gone: set[int]) -> float:
            kept = [i for i, w in zip(ids, word_of_piece, strict=True) if w not in gone]
            return own_log_probability(ref, kept, answer)[0]

        ks = [k for k in KS if k <= len(order)]
        comprehensiveness = [full - without(set(order[:k])) for k in ks]
        sufficiency = [full - without(set(removable) - set(order[:k])) for k in ks]
    return float(np.mean(comprehensiveness)), float(np.mean(sufficiency))


def test_the_corpus_table_is_a_plain_loop_over_the_sampled_sentences(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    ref = reference(lm_dirs["llama-tied"])
    table = dataset_table(model, CORPUS, limit=3, methods=["attention", "inputxgrad"], seed=5)
    texts = [text for text, _, _ in sampled(dataset_items(model, CORPUS, None), 5)[:3]]
    assert texts != [text for text, _, _ in dataset_items(model, CORPUS, None)[:3]]  # a sample, not the first three
    by_hand = []
    for text in texts:
        shape = explain(model, text, methods=["attention"], measure=False)  # its pieces and words only
        by_hand.append(plain_aopc(ref, list(shape.ids), list(shape.word_of_piece), list(shape.removable)))
    comprehensiveness, sufficiency = np.array(by_hand).T
    assert table.explained == 3 and table.skipped == 0
    assert table.comprehensiveness["attention"] == pytest.approx(comprehensiveness.mean(), rel=1e-4, abs=1e-6)
    assert table.sufficiency["attention"] == pytest.approx(sufficiency.mean(), rel=1e-4, abs=1e-6)
    np.testing.assert_allclose(table.margins["attention"], comprehensiveness - sufficiency, rtol=1e-4, atol=1e-6)
    margins = np.array(table.margins["attention"])
    assert table.standard_error("attention") == pytest.approx(margins.std(ddof=1) / np.sqrt(3), rel=1e-9)
    shown = table.as_json()
    first, second = (name for name, _ in shown["ranking"])
    assert shown["by"] == pytest.approx(table.faithful(first) - table.faithful(second))
    assert shown["ahead_on"] == int((np.array(table.margins[first]) > np.array(table.margins[second])).sum())
    assert sum(shown["methods"][name]["wins"] for name in shown["methods"]) >= 3


def test_a_gap_snippet_keeps_the_sentences_from_the_first_mention_to_the_last():
    text = ("Anna grew up in Oslo. Later Mary met Jane in Rome. Mary said that she would stay. "
            "Rome was warm. The end.")
    example = GapExample("t", text, "she", text.index("she"), "Mary", text.index("Mary"), "Jane", text.index("Jane"),
                         True)
    assert gap_window(example) == "Later Mary met Jane in Rome. Mary said that she would stay."
    whole = GapExample("t", "Mary met Jane; she left", "she", 15, "Mary", 0, "Jane", 9, False)
    assert gap_window(whole) == "Mary met Jane; she left"
