"""Every encoder–decoder family, as a tiny random model built from its transformers config: the three kinds of maps
(encoder self-attention, the decoder's causal self-attention, cross-attention), on the explicit and the fused path,
equal transformers' eager encoder_attentions, decoder_attentions and cross_attentions with padding in both
batches; decoding with the caches equals transformers' generate, greedy and sampled."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.seq2seq.decode import decode
from mha_core.engine.seq2seq.forward import forward_seq2seq, target_batch, target_ids
from mha_core.engine.seq2seq.frames import frames_batch
from mha_core.engine.tokens import InputError, tokenize
from tests.tiny_models import SEQ2SEQ_CONFIGS, make_tiny_seq2seq
from tests.tolerance import assert_close_to_scale

SOURCES = ["The animal didn't cross the street because it was too tired.", "A short one."]
TARGETS = ["Das Tier ging nicht über die Straße.", "Kurz."]
PLAIN = dict(num_beams=1, no_repeat_ngram_size=0, forced_bos_token_id=None, forced_eos_token_id=None, min_length=0,
             repetition_penalty=1.0, begin_suppress_tokens=None, suppress_tokens=None, use_cache=False)


@pytest.fixture(scope="module", params=list(SEQ2SEQ_CONFIGS))
def seq2seq(request, tmp_path_factory):
    return request.param, load_model(make_tiny_seq2seq(request.param, tmp_path_factory.mktemp(request.param)))


def source_of(name, model):
    if name == "whisper":
        torch.manual_seed(1)
        return frames_batch(torch.randn(2, model.config.num_mel_bins, 2 * model.config.max_source_positions))
    return tokenize(model.tokenizer, SOURCES, model.max_length)


def reference(model, source, target):
    inputs = {"input_features": source.features} if source.features is not None else {
        "input_ids": source.input_ids, "attention_mask": source.attention_mask}
    with torch.inference_mode():
        return model.model(**inputs, decoder_input_ids=target.input_ids, decoder_attention_mask=target.attention_mask,
                           output_attentions=True, output_hidden_states=True)


def transformers_maps(model: object, source: str, target_ids: list[int]) -> dict[str, np.ndarray]:
    """Each kind's (L,H,rows,columns) maps from transformers' own forward of the encoder–decoder (eager), given the
    source as its tokenizer writes it and the decoder's input ids."""
    with torch.inference_mode():
        out = model.model(input_ids=model.tokenizer(source, return_tensors="pt").input_ids,
                          decoder_input_ids=torch.tensor([target_ids]), output_attentions=True)
    return {kind: torch.cat(maps).numpy() for kind, maps in (
        ("encoder", out.encoder_attentions), ("decoder", out.decoder_attentions), ("cross", out.cross_attentions))}


def assert_maps_close(ours, theirs, rows, cols, what):
    """Each layer's maps over real query rows and key columns (tests/tolerance.py)."""
    real = rows[:, None, :, None] & cols[:, None, None, :]
    assert len(ours) == len(theirs)
    for layer, (o, t) in enumerate(zip(ours, theirs, strict=True)):
        assert_close_to_scale(o, t.float(), 1e-5, real, (what, layer))


@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_three_kinds_of_maps_and_hidden_states_equal_transformers(seq2seq, path):
    name, model = seq2seq
    source = source_of(name, model)
    target = target_batch(model, [target_ids(model, t) for t in TARGETS])
    result = forward_seq2seq(model, source, target, path)
    ref = reference(model, source, target)
    s, t = source.attention_mask.bool(), target.attention_mask.bool()
    assert not bool(t.all()) and (name == "whisper" or not bool(s.all()))  # padding in both batches
    enc = [result.encoder.layer_maps(layer) for layer in range(result.encoder.n_layers)]
    dec = [result.decoder.layer_maps(layer) for layer in range(result.decoder.n_layers)]
    cross = [result.cross.layer_maps(layer) for layer in range(result.cross.n_layers)]
    assert_maps_close(enc, ref.encoder_attentions, s, s, (name, "encoder"))
    assert_maps_close(dec, ref.decoder_attentions, t, t, (name, "decoder"))
    assert_maps_close(cross, ref.cross_attentions, t, s, (name, "cross"))
    assert_close_to_scale(result.encoder.last_hidden_state, ref.encoder_last_hidden_state, 1e-5, s[..., None], name)
    assert_close_to_scale(result.decoder.last_hidden_state, ref.decoder_hidden_states[-1], 1e-5, t[..., None], name)
    assert result.encoder.path == result.decoder.path == result.cross.path == path


def test_each_kind_has_its_shape_rows_summing_to_one_and_the_decoder_is_causal(seq2seq):
    name, model = seq2seq
    source = source_of(name, model)
    result = forward_seq2seq(model, source, target_batch(model, [target_ids(model, t) for t in TARGETS]))
    cross = result.text_maps("cross", 1)  # (L,H,T_b,S_b)
    t_b, s_b = result.decoder.lengths[1], int(source.attention_mask[1].sum())
    assert cross.shape == (model.decoder.n_layers, model.decoder.n_heads, t_b, s_b)
    assert torch.allclose(cross.sum(-1), torch.ones(()), atol=1e-5)
    decoder = result.text_maps("decoder", 1)
    assert decoder.shape[-2:] == (t_b, t_b)
    assert decoder.triu(diagonal=1).abs().max() == 0.0  # nothing looks ahead
    assert result.text_maps("encoder", 0).shape[-1] == source.input_ids.shape[1]
    assert result.target_ids(0)[0] == model.config.decoder_start_token_id  # its start piece first


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_decoding_with_the_caches_equals_transformers_generate(seq2seq, temperature):
    name, model = seq2seq
    source = source_of(name, model)
    ours = decode(model, source, new=10, temperature=temperature, top_k=50, seed=3)
    one = {"input_features": source.features[:1]} if name == "whisper" else {
        "input_ids": source.input_ids[:1], "attention_mask": source.attention_mask[:1]}
    sampled = dict(do_sample=True, temperature=temperature, top_k=50, top_p=1.0) if temperature else dict(
        do_sample=False)
    torch.manual_seed(3)
    with torch.inference_mode():
        theirs = model.model.generate(**one, max_new_tokens=10, decoder_start_token_id=101, **PLAIN, **sampled)
    theirs = theirs[0].tolist()
    theirs = theirs[1:] if theirs[:1] == [101] else theirs  # Whisper's generate leaves out its prefix and end piece
    written = list(ours.ids[1:])
    assert written[: len(theirs)] == theirs and len(theirs) >= len(written) - 1 and len(written) == 10, name
    assert len(ours.steps) == len(ours.ids) - 1


def test_a_target_needs_an_encoder_decoder_and_one_per_source(seq2seq, tiny):
    _, model = seq2seq
    with pytest.raises(InputError, match="encoder–decoder"):
        forward_seq2seq(tiny, tokenize(tiny.tokenizer, "a", 16), target_batch(model, [[101]]))
    from mha_core.engine.seq2seq.forward import run_seq2seq

    if model.arch.family != "whisper":
        with pytest.raises(InputError, match="one target per source"):
            run_seq2seq(model, SOURCES, ["only one"])


def test_cli_attention_writes_the_three_kinds_of_maps(tmp_path_factory, tmp_path):
    import json

    from mha_core.cli import main

    folder = make_tiny_seq2seq("bart", tmp_path_factory.mktemp("bart_cli"))
    out = tmp_path / "a.json"
    assert main(["attention", SOURCES[1], "--target", TARGETS[1], "--model-dir", str(folder), "--json",
                 str(out)]) == 0
    data = json.loads(out.read_text())
    s, t = len(data["source_tokens"]), len(data["target_tokens"])
    assert data["target_ids"][0] == 101 and len(data["target_ids"]) == t  # the start piece first
    assert np.array(data["encoder"]).shape == (2, 4, s, s) and np.array(data["decoder"]).shape == (2, 4, t, t)
    assert np.allclose(np.array(data["cross"]).sum(-1), 1, atol=1e-5) and np.array(data["cross"]).shape[-2:] == (t, s)
    model = load_model(folder)  # transformers' own eager forward on the same ids: every map of the three kinds
    assert data["source_tokens"] == model.tokenizer.convert_ids_to_tokens(model.tokenizer(SOURCES[1]).input_ids)
    for kind, theirs in transformers_maps(model, SOURCES[1], data["target_ids"]).items():
        assert np.abs(np.array(data[kind]) - theirs).max() <= 1e-5, kind
    assert main(["attention", SOURCES[1], "--new", "5", "--model-dir", str(folder), "--json", str(out)]) == 0
    assert len(json.loads(out.read_text())["target_ids"]) <= 6  # its own greedy output: start + up to 5 pieces
    assert main(["attention", "--pair", "a", "b", "--model-dir", str(folder), "--json", str(out)]) == 2


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path):
    from mha_core.engine.loading.folder import ModelLoadError

    folder = make_tiny_seq2seq("bart", tmp_path / "small-vocabulary", vocab_size=30000)
    with pytest.raises(ModelLoadError, match="30,522 tokens but the model embeds only 30,000"):
        load_model(folder)
