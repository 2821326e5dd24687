"""Head roles, Clark's syntactic scoring and GAP coreference scoring: synthetic maps with known
answers, file formats, and the CLI end to end on the shared UD EWT and GAP data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mha_core import run
from mha_core.analysis.coref.gap import candidate_scores, span_pieces
from mha_core.analysis.corpus.readers import CorpusFormatError, ParsedSentence, parse_conllu, read_gap, spacy_parse
from mha_core.analysis.corpus.syntax import SyntaxAccumulator, predict_heads
from mha_core.analysis.heads.roles import RoleAccumulator, first_token_label, head_label, is_punctuation
from mha_core.engine.words import merge_pieces, word_groups
from mha_core.figures.colours import ROLE_COLOURS
from tests.conftest import SHARED_DATA, cli

UD_DEV = SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu"
GAP_VALIDATION = SHARED_DATA / "gap" / "gap-validation.tsv"
TOKENS = ["[CLS]", "the", "dog", "chased", "a", "cat", ".", "[SEP]"]
SPECIAL = [True, False, False, False, False, False, False, True]


def one_hot_map(targets: list[int]) -> np.ndarray:
    t = len(targets)
    m = np.zeros((1, 1, t, t))
    m[0, 0, np.arange(t), targets] = 1.0
    return m


def roles_of(maps: np.ndarray):
    acc = RoleAccumulator()
    acc.add(maps, TOKENS, SPECIAL)
    return acc.result()


def test_previous_token_head_is_labelled_previous():
    roles = roles_of(one_hot_map([0] + list(range(7))))  # row i -> i-1 (row 0 -> itself)
    assert roles.metrics["prev"][0, 0] == pytest.approx(7 / 8)
    assert roles.labels()[0, 0] == "previous" and roles.patterns()[0, 0] == "diagonal"
    assert roles.baselines["prev"] == pytest.approx(7 / 64)  # uniform: 1/n on 7 of 8 rows


def test_sep_sink_is_labelled_sep_and_vertical():
    roles = roles_of(one_hot_map([7] * 8))
    assert roles.metrics["sep"][0, 0] == 1.0 and roles.labels()[0, 0] == "[SEP]"
    assert roles.patterns()[0, 0] == "vertical"
    assert roles.metrics["confidence"][0, 0] == 1.0 and roles.metrics["entropy"][0, 0] == 0.0


def test_a_first_token_sink_is_named_for_the_model_kind_and_has_its_colour():
    roles = roles_of(one_hot_map([0] * 8))
    for causal, name in ((False, "[CLS]"), (True, "first token")):
        assert first_token_label(causal) == name
        assert roles.labels(first=first_token_label(causal))[0, 0] == name and name in ROLE_COLOURS
    assert head_label(0, 11) == "L0 H11"


def test_uniform_head_is_broad_and_equals_its_baselines():
    roles = roles_of(np.full((1, 1, 8, 8), 1 / 8))
    assert roles.labels()[0, 0] == "broad"
    for name, value in roles.metrics.items():
        assert value[0, 0] == pytest.approx(roles.baselines[name]), name


def test_punctuation_detection():
    assert is_punctuation(".") and is_punctuation("##,") and is_punctuation("...")
    assert not is_punctuation("dog") and not is_punctuation("3.5")


SENTENCE = ParsedSentence(("the", "dog", "chased", "a", "cat"), (2, 3, 0, 5, 3), ("det", "nsubj", "root", "det", "obj"))


def gold_head_maps(word_ids: list[int | None]) -> torch.Tensor:
    """A head whose every piece of word i attends to the pieces of its gold head (root: itself)."""
    t = len(word_ids)
    maps = torch.zeros(1, 1, t, t)
    for p, w in enumerate(word_ids):
        if w is None:
            maps[0, 0, p, p] = 1.0
            continue
        head = SENTENCE.heads[w] - 1 if SENTENCE.heads[w] else w
        targets = [q for q, v in enumerate(word_ids) if v == head]
        maps[0, 0, p, targets] = 1.0 / len(targets)
    return maps


def test_gold_head_attention_scores_100_percent_dep2head():
    word_ids = [None, 0, 1, 1, 2, 3, 4, None]  # "dog" split into two pieces
    words = merge_pieces(gold_head_maps(word_ids), word_groups(word_ids, 5))
    acc = SyntaxAccumulator(1, 1)
    acc.add(SENTENCE, predict_heads(words))
    result = acc.result(skipped=0)
    assert result.relations["det"].accuracy[0, 0, 0] == 1.0 and result.relations["det"].count == 2
    assert result.relations["all"].accuracy[0, 0, 0] == 1.0 and result.relations["all"].count == 4
    assert "root" not in result.relations
    # baseline: det heads are at +1 (the dog, a cat); nsubj dog -> chased is +1; obj cat -> chased is -2
    assert result.relations["det"].baseline_offset == 1 and result.relations["det"].baseline_accuracy == 1.0
    assert result.relations["obj"].baseline_offset == -2 and result.relations["obj"].baseline_accuracy == 1.0
    assert result.relations["nsubj"].baseline_offset == 1


def test_head2dep_is_the_transpose():
    word_ids = [None, 0, 1, 2, 3, 4, None]
    maps = gold_head_maps(word_ids).transpose(-1, -2).contiguous()  # heads attend to their dependents
    predicted = predict_heads(merge_pieces(maps, word_groups(word_ids, 5)))
    # "chased" (2) is the head of dog (1) and cat (4): head2dep predicts 2 for exactly one of them
    assert predicted[1, 0, 0, 0].item() == 1  # "the" -> "dog" attends back to "the"
    torch.manual_seed(4)
    words = torch.rand(2, 3, 6, 6)  # (L,H,W,W) any word-level maps
    forward, transposed = predict_heads(words), predict_heads(words.transpose(-1, -2).contiguous())
    assert torch.equal(forward[1], transposed[0]) and torch.equal(forward[0], transposed[1])  # every element
    assert not torch.equal(forward[0], forward[1])  # the two directions differ on these maps


def test_word_level_rows_sum_like_piece_rows():
    torch.manual_seed(0)
    raw = torch.rand(2, 3, 8, 8)
    maps = raw / raw.sum(-1, keepdim=True)
    word_ids = [None, 0, 1, 1, 2, 3, 3, None]
    words = merge_pieces(maps, word_groups(word_ids, 4))  # (L,H,W,W)
    special_mass = maps[..., [0, 7]].sum(-1)  # (L,H,T) dropped as keys
    expected = torch.stack([(1 - special_mass[..., [p for p, w in enumerate(word_ids) if w == i]]).mean(-1)
                            for i in range(4)], dim=-1)
    assert torch.allclose(words.sum(-1), expected, atol=1e-6)
    no_specials = maps.clone()
    no_specials[..., [0, 7]] = 0
    no_specials = no_specials / no_specials.sum(-1, keepdim=True)
    assert torch.allclose(merge_pieces(no_specials, word_groups(word_ids, 4)).sum(-1), torch.ones(2, 3, 4), atol=1e-6)


def test_ties_go_to_the_lowest_index():
    words = torch.zeros(1, 1, 4, 4)  # every candidate ties
    assert predict_heads(words)[0, 0, 0].tolist() == [1, 0, 0, 0]


def test_coref_span_pieces_and_scores():
    offsets = [(0, 0), (0, 4), (5, 8), (8, 10), (11, 13), (0, 0)]  # [CLS] Mary wen ##dy it [SEP]
    assert span_pieces(offsets, 5, 5) == [2, 3]
    assert span_pieces(offsets, 0, 4) == [1]
    maps = torch.zeros(1, 1, 6, 6)
    maps[0, 0, 4, 2], maps[0, 0, 4, 3], maps[0, 0, 4, 1] = 0.3, 0.3, 0.1
    assert candidate_scores(maps, [4], [2, 3]).item() == pytest.approx(0.6)
    assert candidate_scores(maps, [4], [1]).item() == pytest.approx(0.1)


@pytest.mark.parametrize(("text", "message"), [
    ("1\tThe\tthe\n", "line 1: expected 10"),
    ("# c\n1\tThe\tthe\tDET\tDT\t_\tX\tdet\t_\t_\n", "line 2: ID and HEAD"),
    ("", "no sentences"),
])
def test_malformed_conllu(text, message):
    with pytest.raises(CorpusFormatError, match=message):
        parse_conllu(text.splitlines())


def test_conllu_skips_multiword_and_empty_nodes():
    text = ("1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\t_\t_\t3\taux\t_\t_\n"
            "2\tn't\tnot\tPART\t_\t_\t3\tadvmod\t_\t_\n3\tgo\tgo\tVERB\t_\t_\t0\troot\t_\t_\n"
            "3.1\tgo\tgo\tVERB\t_\t_\t_\t_\t_\t_\n")
    (sentence,) = parse_conllu(text.splitlines())
    assert sentence.words == ("do", "n't", "go") and sentence.heads == (3, 3, 0)


def test_malformed_gap(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("ID\tText\nx\ty\n")
    with pytest.raises(CorpusFormatError, match="line 1: expected the GAP header"):
        read_gap(bad)
    header = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n"
    bad.write_text(header + "d-1\tShe met Ann.\tShe\tzero\tAnn\t8\tTRUE\tX\t0\tFALSE\tu\n")
    with pytest.raises(CorpusFormatError, match="line 2: Pronoun-offset"):
        read_gap(bad)


def test_spacy_parses_typed_text():
    (parsed,) = spacy_parse(["The animal didn't cross the street because it was too tired."])
    assert parsed.words[:2] == ("The", "animal") and parsed.deprels[0] == "det" and parsed.heads[0] == 2
    assert parsed.deprels.count("root") == 1


@pytest.mark.slow
def test_cli_roles_on_ud_ewt_dev(tmp_path):
    out = tmp_path / "roles.json"
    proc = cli("roles", "--conllu", str(UD_DEV), "--limit", "600", "--json", str(out))  # of 2,001: a third
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "syntactic heads" in proc.stderr and "600/600" in proc.stderr  # the progress bar
    data = json.loads(out.read_text())
    assert data["sentences"] + data["skipped"] == 600
    rel = data["relations"]
    assert "root" not in rel and "punct" not in rel and "nmod:poss" in rel
    assert len(rel["det"]["accuracy"]) == 2 and len(rel["det"]["accuracy"][0]) == 6
    assert len(rel["det"]["accuracy"][0][0]) == 12
    for name in ("det", "obj", "nmod:poss", "all"):
        assert rel[name]["best_accuracy"] > rel[name]["baseline_accuracy"], name
    assert rel["det"]["clark_bert_base"] == [94.3, 51.7] and rel["obj"]["clark_bert_base"] == [86.8, 40.0]
    assert rel["nsubj"]["clark_bert_base"] is None  # the page's column and the CLI read one table
    best = rel["det"]
    d = ("dep2head", "head2dep").index(best["best_direction"])
    assert best["accuracy"][d][best["best_layer"]][best["best_head"]] == pytest.approx(best["best_accuracy"], abs=1e-6)


@pytest.mark.slow
def test_cli_coref_on_gap_validation(tmp_path):
    out = tmp_path / "coref.json"
    proc = cli("coref", "--gap", str(GAP_VALIDATION), "--limit", "250", "--json", str(out))  # of 454 rows
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["examples"] > 190 and len(data["accuracy"]) == 6
    assert data["baseline_always_a"] + data["baseline_always_b"] == pytest.approx(1.0)
    assert data["best_accuracy"] > max(data["baseline_always_a"], data["baseline_always_b"], data["baseline_nearest"])


@pytest.mark.slow
def test_cli_malformed_files_exit_2_with_the_line(tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("# ok\n1\tThe\n")
    proc = cli("roles", "--conllu", str(bad))
    assert proc.returncode == 2 and "line 2" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("coref", "--gap", str(bad))
    assert proc.returncode == 2 and "line 1" in proc.stderr


def test_coref_batches_are_capped_by_map_memory_and_change_no_score(tiny, monkeypatch):
    import mha_core.analysis.coref.gap as coref
    import mha_core.engine.batching as batching

    examples = read_gap(GAP_VALIDATION, limit=12).examples
    whole = coref.analyse_coref(tiny, examples)
    calls = []

    def recording_run(model, texts, path):
        result = run(model, texts, path=path)
        calls.append((len(texts), result.batch.input_ids.shape[1]))
        return result

    monkeypatch.setattr(batching, "MAPS_MB", 1)
    monkeypatch.setattr(coref, "run", recording_run)
    capped = coref.analyse_coref(tiny, examples)
    n = tiny.n_layers * tiny.n_heads
    assert len(calls) > 1 and all(b == 1 or b * n * t * t * 4 <= 2**20 for b, t in calls)
    assert np.array_equal(capped.correct, whole.correct) and capped.examples == whole.examples


def test_role_labels_are_assembled_one_way_for_every_page(tiny):  # issue 20, section 2
    from dataclasses import replace
    from types import SimpleNamespace

    from mha_core.analysis.heads.induction import InductionScores
    from mha_core.analysis.heads.roles import head_roles, role_labels

    measured = head_roles(run(tiny, "The cat sat on the mat because it was warm."))
    roles = replace(measured, metrics={name: np.zeros_like(v) for name, v in measured.metrics.items()})  # no rule fires
    plain = roles.labels(first="[CLS]")
    free = [tuple(int(i) for i in lh) for lh in np.argwhere(plain == "other")]
    assert len(free) >= 2, plain
    first, second = free[:2]
    syntax = SimpleNamespace(head_labels=lambda: {first: "nsubj"})
    coref = SimpleNamespace(head_labels=lambda: {first: "coreference", second: "coreference"})
    induction = InductionScores(np.zeros(plain.shape), np.zeros(plain.shape), 0.1, 4)
    induction.induction[second] = 0.9
    labels = role_labels(roles, False, (syntax, None, coref), probed=induction)
    assert labels[first] == "coreference" and labels[second] == "induction"  # later sources win; probes on top
    assert induction.head_labels() == {second: "induction"}
    same = np.array(labels != plain)
    assert same.sum() == 2  # nothing else changed


def test_one_ranking_largest_first_ties_to_the_earliest():
    from mha_core.analysis.heads.roles import ranked_heads, top_indices

    assert top_indices(np.array([0.2, 0.5, 0.1, 0.5]), 2).tolist() == [1, 3]
    assert ranked_heads(np.array([[0.1, 0.7], [0.7, 0.3]])) == [(0, 1), (1, 0), (1, 1), (0, 0)]
