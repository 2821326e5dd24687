"""AppTest for the roles page: typed sentence, bundled corpus, uploaded CoNLL-U and GAP files."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import SHARED_DATA, corpus_uploader, open_app, transformers_encoder


def open_roles(source: str | None = None) -> AppTest:
    return open_app("views/roles.py", **({"source": source} if source else {}))


def relations(at: AppTest):
    return at.dataframe[0].value  # the relations table comes first


def test_typed_sentence():
    at = open_roles()
    assert not at.exception and not at.error
    table = relations(at)
    assert {"det", "nsubj", "all"} <= set(table["relation"])
    assert "1 sentence(s) analysed" in at.caption[0].value
    ids = [c.proto.id for c in at.get("plotly_chart")]
    keys = ("role_grid", "induction_grid", "duplicate_grid")
    assert len(ids) == 3 and all(any(key in i for i in ids) for key in keys)


def word_level(maps: np.ndarray, pieces: list[list[int]]) -> np.ndarray:
    """(L,H,T,T) -> (L,H,W,W): word i's attention to word j, summed over j's pieces and averaged over i's."""
    w = len(pieces)
    words = np.zeros((*maps.shape[:2], w, w))
    for i in range(w):
        for j in range(w):
            words[:, :, i, j] = np.mean([maps[:, :, p, pieces[j]].sum(-1) for p in pieces[i]], axis=0)
    return words


def clark_by_loops(text: str) -> dict[str, tuple]:
    """Clark et al. (2019) on one sentence, written out: transformers' eager BertModel reads the sentence's words
    (spaCy's parse, the page's input); a word's attention to another is the sum over the other's pieces, averaged
    over its own; each word predicts the other word it attends to most (dep2head) or that attends to it most
    (head2dep); per relation (not root or punct), the best (direction, layer, head), the first on ties, and the best
    fixed offset. Rows: relation -> (count, "L H", direction, accuracy %, offset, baseline %)."""
    import torch

    from mha_core.analysis.corpus.readers import spacy_parse

    (sentence,) = spacy_parse([text])
    model, tokenizer = transformers_encoder()
    enc = tokenizer(list(sentence.words), is_split_into_words=True, return_tensors="pt")
    with torch.inference_mode():
        maps = torch.cat(model(**enc, output_attentions=True).attentions).double().numpy()  # (L,H,T,T)
    n_layers, n_heads, w = maps.shape[0], maps.shape[1], len(sentence.words)
    words = word_level(maps, [[p for p, word in enumerate(enc.word_ids()) if word == i] for i in range(w)])
    correct, counts, offsets = {}, {}, {}
    for i, (relation, head) in enumerate(zip(sentence.deprels, sentence.heads, strict=True)):
        if relation in ("root", "punct") or head == 0:
            continue
        for key in (relation, "all"):
            hits = correct.setdefault(key, np.zeros((2, n_layers, n_heads)))
            for layer in range(n_layers):
                for h in range(n_heads):
                    others = [j for j in range(w) if j != i]
                    hits[0, layer, h] += max(others, key=lambda j: (words[layer, h, i, j], -j)) == head - 1
                    hits[1, layer, h] += max(others, key=lambda j: (words[layer, h, j, i], -j)) == head - 1
            counts[key] = counts.get(key, 0) + 1
            offsets.setdefault(key, []).append(head - 1 - i)
    rows = {}
    for key, hits in correct.items():
        d, layer, h = np.unravel_index(int(np.argmax(hits)), hits.shape)
        offset = max((-3, -2, -1, 1, 2, 3), key=lambda k: (offsets[key].count(k), -(-3, -2, -1, 1, 2, 3).index(k)))
        rows[key] = (counts[key], f"L{layer} H{h}", ("dep2head", "head2dep")[d],
                     round(100 * hits[d, layer, h] / counts[key], 1), f"{offset:+d}",
                     round(100 * offsets[key].count(offset) / counts[key], 1))
    return rows


def test_the_typed_sentence_table_is_clark_s_method_written_out():
    """Each relation's count, best head, direction, accuracy and baseline, as the relations table shows them."""
    at = open_roles()
    table = relations(at).set_index("relation")
    expected = clark_by_loops(at.text_area(key="text").value)
    assert set(table.index) == set(expected)
    columns = ["count", "best head", "direction", "accuracy %", "baseline offset", "baseline %"]
    for relation, row in expected.items():
        shown = tuple(table.loc[relation, columns])
        assert shown[:3] == row[:3] and shown[4] == row[4], relation
        assert abs(shown[3] - row[3]) < 0.06 and abs(shown[5] - row[5]) < 0.06, relation


@pytest.mark.slow  # the whole bundled corpus
def test_bundled_corpus_finds_syntactic_heads():
    at = open_roles("Bundled corpus")
    assert not at.exception
    table = relations(at).set_index("relation")
    from mha_core.analysis.corpus.readers import bundled_corpus

    assert f"{len(bundled_corpus())} sentence(s) analysed" in at.caption[0].value  # every line of assets/corpus.txt
    assert table.loc["det", "syntactic head"] == "yes"
    assert table.loc["det", "accuracy %"] > table.loc["det", "baseline %"]
    assert table.loc["det", "Clark BERT-base % (baseline)"] == "94.3 (51.7)"


def test_uploaded_conllu_and_gap():
    conllu = (SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8")
    excerpt = "\n\n".join(conllu.split("\n\n")[:60]) + "\n"
    gap_lines = (SHARED_DATA / "gap" / "gap-validation.tsv").read_text(encoding="utf-8").splitlines()[:41]
    at = open_roles("Uploaded CoNLL-U")
    assert any("Upload a CoNLL-U" in i.value for i in at.info)
    corpus_uploader(at, 0).set_value(("dev.conllu", excerpt.encode(), "text/plain")).run()
    assert not at.exception and "60 sentence(s) analysed" in at.caption[0].value
    assert "obj" in set(relations(at)["relation"])
    corpus_uploader(at, 1).set_value(("gap.tsv", "\n".join(gap_lines).encode(), "text/plain")).run()
    assert not at.exception
    assert any("examples" in c.value and "nearest candidate" in c.value for c in at.caption)
    assert len(at.session_state["gap_results"]) == 1


def test_malformed_upload_names_the_line():
    at = open_roles("Uploaded CoNLL-U")
    corpus_uploader(at, 0).set_value(("bad.conllu", b"# x\n1\tonly two\n", "text/plain")).run()
    assert not at.exception
    assert any("line 2" in e.value for e in at.error)


@pytest.mark.slow  # Gemma 3 over 300 sentences
@pytest.mark.long
def test_a_chinese_class_sees_gemma_s_syntactic_heads_on_the_bundled_treebank(gemma):
    """Issue 42, item 12: a Chinese class's syntactic heads without an upload (UD Chinese GSDSimp, gold trees): a
    Chinese sentence points to the bundled treebank; the relation counts are the file's own, counted here."""
    from collections import Counter

    from mha_core import i18n
    from mha_core.analysis.corpus.readers import CHINESE_TREEBANK

    lines = CHINESE_TREEBANK.read_text(encoding="utf-8").splitlines()
    sentences = sum(line.startswith("# text") for line in lines)
    deprels = Counter(line.split("\t")[7] for line in lines if line and not line.startswith("#"))
    at = open_app("views/roles.py", lang="zh", model=gemma.name)  # a Chinese sentence: spaCy cannot parse it
    assert not at.exception
    i18n.use("zh")  # AppTest formats the widgets' options in this thread, as the page's script did
    try:
        at.button(key="to_treebank").click().run()
        assert not at.exception and not at.error and at.radio(key="source").value == "Chinese treebank"
    finally:
        i18n.use("en")
    table = at.dataframe[0].value.set_index(at.dataframe[0].value.columns[0])
    assert sentences == 300 and any(f"分析了 {sentences} 个句子" in c.value for c in at.caption)
    for relation in ("nsubj", "obj", "nmod"):
        assert table.loc[relation].iloc[0] == deprels[relation]  # the count column: every dependent of the relation
    syntactic = table[table.iloc[:, 6] != ""]  # "syntactic head" column: yes in Chinese
    assert len(syntactic) >= 3 and (syntactic.iloc[:, 3] > syntactic.iloc[:, 5]).all()  # accuracy above baseline
