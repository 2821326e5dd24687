"""AppTest for the roles page: typed sentence, bundled corpus, uploaded CoNLL-U and GAP files."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import SHARED_DATA, corpus_uploader, open_app


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


@pytest.mark.slow  # the whole bundled corpus
def test_bundled_corpus_finds_syntactic_heads():
    at = open_roles("Bundled corpus")
    assert not at.exception
    table = relations(at).set_index("relation")
    assert "312 sentence(s) analysed" in at.caption[0].value
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
