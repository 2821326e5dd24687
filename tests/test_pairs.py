"""Issue 35 (first part): sentence pairs on encoders, as BERT, BertViz and Clark et al. read them — segments A and B
with the tokenizer's token types; every map and the hidden states equal transformers' eager forward given the same
pair, padded batches included, on both paths."""

from __future__ import annotations

import pytest
import torch

from mha_core import InputError, load_model, run

PAIRS = [("The animal didn't cross the street.", "It was too tired."),
         ("The keys are on the table.", "They were left there by the cleaner this morning after work.")]
ENCODERS = ["bert", "roberta", "xlm-roberta", "distilbert"]


def reference(model_dir, pairs):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    ref = AutoModel.from_pretrained(model_dir, local_files_only=True, attn_implementation="eager").eval()
    with torch.no_grad():
        return enc, ref(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")},
                        output_attentions=True)


@pytest.mark.parametrize("path", ["explicit", "fused"])
@pytest.mark.parametrize("family", ENCODERS)
def test_a_sentence_pair_equals_transformers_with_its_token_types(family_dirs, family, path):
    model = load_model(family_dirs[family])
    result = run(model, [a for a, _ in PAIRS], path=path, pairs=[b for _, b in PAIRS])
    enc, out = reference(family_dirs[family], PAIRS)
    assert torch.equal(result.batch.input_ids, enc["input_ids"])
    if "token_type_ids" in enc:
        assert torch.equal(result.batch.token_type_ids, enc["token_type_ids"])
    mask = result.batch.attention_mask.bool()
    rows = mask[:, None, :, None] & mask[:, None, None, :]
    for layer in range(model.n_layers):
        assert ((result.layer_maps(layer) - out.attentions[layer]).abs() * rows).max().item() <= 1e-5, (family, layer)
    assert (result.last_hidden_state - out.last_hidden_state).abs()[mask].max().item() <= 1e-4


def test_the_second_text_is_segment_b_and_its_words_are_found(family_dirs):
    model = load_model(family_dirs["bert"])
    first, second = PAIRS[0]
    result = run(model, first, pairs=[second])
    batch = result.batch
    segments = batch.segments[0]
    assert segments[0] is None and segments[-1] is None and 0 in segments and 1 in segments
    types = batch.token_type_ids[0].tolist()
    assert all(types[i] == (1 if s == 1 else 0) for i, s in enumerate(segments) if s is not None)  # B's [SEP]: 1
    tired = result.word_pieces(0, "tired")
    animal = result.word_pieces(0, "animal")
    assert tired and all(segments[i] == 1 for i in tired) and all(segments[i] == 0 for i in animal)
    words = [w for w in batch.word_ids[0] if w is not None]
    assert words == sorted(words)  # the second text's words follow the first's


def test_a_pair_on_a_decoder_or_an_unmatched_pair_is_one_sentence(family_dirs):
    with pytest.raises(InputError, match="Sentence pairs are read by encoders"):
        run(load_model(family_dirs["gpt2"]), "The cat sat.", pairs=["It was warm."])
    with pytest.raises(InputError, match="one second text for each text"):
        run(load_model(family_dirs["bert"]), ["The cat sat.", "A dog ran."], pairs=["It was warm."])


def test_the_cli_writes_a_pairs_maps_with_its_token_types(tiny_dir, family_dirs):
    import json

    import numpy as np

    from tests.conftest import cli

    first, second = PAIRS[0]
    data = json.loads(cli("attention", "--pair", first, second, "--model-dir", str(tiny_dir), "--json", "-").stdout)
    result = run(load_model(tiny_dir), first, pairs=[second])
    n = result.lengths[0]
    assert data["tokens"] == list(result.tokens[0])
    assert data["token_type_ids"] == result.batch.token_type_ids[0].tolist()
    assert data["segments"][0] is None and set(data["segments"][1:-1]) >= {0, 1}
    assert np.array(data["attention"]).shape == (2, 4, n, n)
    enc, theirs = reference(tiny_dir, [PAIRS[0]])  # transformers' eager forward given the same pair
    assert data["token_type_ids"] == enc.token_type_ids[0].tolist()
    assert np.abs(np.array(data["attention"]) - torch.cat(theirs.attentions).numpy()).max() <= 1e-5
    refused = cli("attention", "--pair", first, second, "--model-dir", str(family_dirs["gpt2"]), "--json", "-")
    assert refused.returncode == 2 and "Sentence pairs are read by encoders" in refused.stderr
    both = cli("attention", "The cat.", "--pair", first, second, "--model-dir", str(tiny_dir), "--json", "-")
    assert both.returncode == 2 and "--pair A B takes the two texts itself" in both.stderr


def test_each_heads_share_crossing_between_the_texts_follows_its_definition(family_dirs):
    """The mean over A's pieces of the weight each puts on B's pieces (and back), against a plain loop over the maps;
    the three shares and A's weight on A make each row's sum."""
    from mha_core import pair_shares

    model = load_model(family_dirs["bert"])
    result = run(model, PAIRS[1][0], path="explicit", pairs=[PAIRS[1][1]])
    shares = pair_shares(result)
    segments = result.batch.segments[0]
    maps = torch.stack(result.layer_probs)[:, 0]  # (L,H,T,T)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            a_rows = [sum(maps[layer, head, i, j].item() for j, s in enumerate(segments) if s == 1)
                      for i, t in enumerate(segments) if t == 0]
            assert shares.a_to_b[layer, head] == pytest.approx(sum(a_rows) / len(a_rows), abs=1e-6)
    assert shares.pieces == (segments.count(0), segments.count(1))
    assert ((shares.a_to_b > 0) & (shares.a_to_b < 1)).all() and ((shares.b_to_a > 0) & (shares.b_to_a < 1)).all()
    assert shares.figure().data and not run(model, "One text.").batch.segments  # a single text has no segments
    with pytest.raises(InputError, match="not a sentence pair"):
        pair_shares(run(model, "One text."))


def test_the_heads_page_reads_a_sentence_pair_and_marks_where_b_begins(bundled):
    """The bundled encoder (MiniLM) on the Heads page: a second sentence makes a pair; the head's map is the pair's,
    as run(model, first, pairs=[second]) computes it, with dashed lines at B's first piece."""
    import numpy as np

    from tests.conftest import chart_json, decode, open_app

    first, second = PAIRS[0]
    at = open_app(text=first, layer="2", head="5")
    at.text_input(key="segment_b").input(second).run()
    assert not at.exception and not at.error
    spec = chart_json(at, "head_map")
    expected = run(bundled, first, pairs=[second]).text_layer_maps(0, 2)[5].numpy()
    assert np.allclose(decode(spec["data"][0]["z"]), expected, atol=1e-6)
    start = run(bundled, first, pairs=[second]).batch.segments[0].index(1)
    lines = [s for s in spec["layout"]["shapes"] if s.get("line", {}).get("dash") == "dash"]
    assert len(lines) == 2 and lines[0]["x0"] == start - 0.5
    assert any("segment B" in c.value for c in at.caption)
    assert at.query_params.get("segment_b") == second  # a shared link keeps the pair


def test_a_pair_over_the_models_limit_is_cut_and_says_how_long_it_was(tiny_dir):
    """The tiny BERT reads 64 positions: a longer pair is cut (the longer text first) and keeps its whole count."""
    model = load_model(tiny_dir)
    first, second = "The cat sat.", " ".join(["the dog ran across the yard"] * 20)
    result = run(model, first, pairs=[second])
    whole = len(model.tokenizer(first, second, split_special_tokens=True)["input_ids"])
    assert result.lengths[0] == 64 and result.truncated[0] and result.n_tokens[0] == whole > 64
    assert run(model, first, pairs=["A dog ran."]).truncated == (False,)


def test_cross_sentence_heads_are_those_crossing_both_ways_on_average():
    import numpy as np

    from mha_core.analysis.heads.pairs import CROSS_MIN, PairShares

    a_to_b = np.array([[0.9, 0.1], [CROSS_MIN, 0.2]])
    b_to_a = np.array([[0.0, 0.1], [CROSS_MIN, 0.9]])
    shares = PairShares(a_to_b, b_to_a, np.zeros((2, 2)), (3, 4))
    assert shares.head_labels() == {(0, 0): "cross-sentence", (1, 0): "cross-sentence", (1, 1): "cross-sentence"}


def test_the_roles_page_reads_a_pair_and_names_its_sep_and_cross_sentence_heads():
    import json

    from tests.conftest import open_app

    at = open_app("views/roles.py", segment_b="It was too tired.")
    assert not at.exception and at.text_input(key="segment_b").value == "It was too tired."
    said = [c.value for c in at.caption if "cross-sentence heads" in c.value]
    assert said and "Most crossing: L" in said[0]
    grid = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "role_grid" in c.proto.id)
    shown = {(layer, head) for layer, row in enumerate(grid["data"][0]["text"]) for head, label in enumerate(row)
             if label == "cross-sentence"}
    from mha_core import load_model, run
    from mha_core.analysis.heads.pairs import pair_shares

    crossing = pair_shares(run(load_model(), at.text_area(key="text").value, pairs=["It was too tired."]))
    assert shown and shown <= set(crossing.head_labels())  # measured on the pair; a positional rule may win
    single = open_app("views/roles.py")
    assert not [c.value for c in single.caption if "cross-sentence heads" in c.value]
