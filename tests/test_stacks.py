"""An encoder–decoder on the pages that read one stack: each page reads it whole, or its encoder alone (parity with
the transformers encoder module, T5's relative bias in the Walkthrough's steps), or refuses Whisper's hearing encoder
in one sentence; the parameter counts name each stack and count a decoder layer's two attention blocks from the
modules; every head of one kind at a glance keeps its rows distributions."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from mha_core import ModelLoadError, load_model, run
from tests.tiny_models import make_tiny_seq2seq

SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    root = tmp_path_factory.mktemp("stacks")
    return {family: load_model(make_tiny_seq2seq(family, root / family)) for family in ("t5", "bart", "whisper")}


def cross_modules(model: object) -> list[torch.nn.Module]:
    """Each decoder layer's cross-attention module, found by transformers' own names (independent of params.py)."""
    return [m for name, m in model.named_modules() if name.endswith(("encoder_attn", "EncDecAttention"))]


def self_modules(model: object, stack: str) -> list[torch.nn.Module]:
    return [m for name, m in model.named_modules()
            if f"{stack}." in name and name.endswith(("self_attn", "SelfAttention"))]


@pytest.mark.parametrize("family", ["t5", "bart", "whisper"])
def test_each_decoder_layer_counts_its_two_attention_blocks_from_the_modules(stacks, family):
    from mha_core.analysis.params.counts import layer_group, model_breakdown

    model = stacks[family]
    b = model_breakdown(model)
    assert b.total == sum(p.numel() for p in model.model.parameters())  # every parameter once, tied ones once
    crosses = cross_modules(model.model)
    assert len(crosses) == model.decoder.n_layers
    for layer, module in enumerate(crosses):
        blocks = b.block_totals(layer_group(model, layer, "decoder"))
        own = self_modules(model.model, "decoder")[layer]
        assert blocks == {"attention": sum(p.numel() for p in own.parameters()),
                          "cross-attention": sum(p.numel() for p in module.parameters())}
    for layer in range(model.n_layers):  # an encoder layer holds one block
        assert set(b.block_totals(layer_group(model, layer))) == {"attention"}
    assert b.cross_attention_total == sum(p.numel() for m in crosses for p in m.parameters())
    assert not any(r.group.startswith("layer ") for r in b.rows)  # every layer group names its stack


def test_an_encoder_only_model_keeps_its_plain_layer_groups(bundled):
    encoder = bundled
    from mha_core.analysis.params.counts import calculator_check, model_breakdown

    b = model_breakdown(encoder)
    assert {r.group for r in b.rows if "layer" in r.group} == {f"layer {i}" for i in range(encoder.n_layers)}
    assert b.cross_attention_total == 0 and calculator_check(encoder, b).agrees


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_the_calculator_check_agrees_on_the_encoder_of_an_encoder_decoder(stacks, family):
    from mha_core.analysis.params.counts import calculator_check, model_breakdown

    model = stacks[family]
    assert calculator_check(model, model_breakdown(model)).agrees


def test_pages_read_an_encoder_decoder_whole_alone_or_refuse_whisper(stacks):
    from mha_core.serving.menu import page_model

    t5, whisper = stacks["t5"], stacks["whisper"]
    assert page_model(t5, "parameters", "encoder").decoder is not None  # whole: both stacks' parameters
    assert page_model(t5, "predictions", "encoder").decoder is not None  # whole: what the decoder writes
    assert page_model(t5, "heads", "cross").decoder is not None  # the picker's cross-attention
    assert page_model(t5, "heads", "encoder").decoder is None  # its encoder, as an encoder
    assert page_model(t5, "contributions", "cross").decoder is None  # a one-stack page: the encoder
    assert page_model(whisper, "heads", "encoder").decoder is not None  # frames: drawn from the whole run
    with pytest.raises(ModelLoadError, match="hears audio"):
        page_model(whisper, "contributions", "cross")


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_the_encoder_alone_equals_the_transformers_encoder_and_its_walkthrough_the_run(stacks, family):
    from mha_core.teaching.walkthrough import softmax_at_scale, walkthrough

    encoder = replace(stacks[family], decoder=None)
    result = run(encoder, SENTENCE, path="explicit")
    with torch.inference_mode():  # the reference: transformers' own encoder stack, not the app's parity()
        ref = stacks[family].model.get_encoder()(input_ids=result.batch.input_ids,
                                                 attention_mask=result.batch.attention_mask, output_attentions=True)
    for path in ("explicit", "fused"):
        ours = run(encoder, SENTENCE, path=path)
        theirs = torch.stack(ref.attentions, dim=1)[0].float()  # (L,H,T,T)
        assert (ours.attention()[0] - theirs).abs().max() <= 1e-5, path
        assert (ours.last_hidden_state - ref.last_hidden_state).abs().max() <= 1e-4, path
    for layer in range(encoder.n_layers):
        w = walkthrough(encoder, result, layer, 1)
        assert np.abs(w.probs - result.layer_probs[layer][0, 1].numpy()).max() <= 1e-5
        assert (w.position_bias is not None) == (family == "t5")  # T5's buckets are a step of their own
        for query in range(len(w.tokens)):
            bias = None if w.position_bias is None else w.position_bias[query]
            row = softmax_at_scale(w.raw_scores[query], w.scale, w.visible[query], bias, w.softcap)
            assert np.allclose(row, w.probs[query], atol=1e-5)


def test_every_head_of_one_kind_at_a_glance_keeps_distributions(stacks):
    from mha_core import run_seq2seq
    from mha_core.figures.charts import level_weights, tile_origin, tile_overview
    from mha_core.figures.seq2seq import kind_overview_figure, squared
    from mha_core.figures.spec import array_of

    result = run_seq2seq(stacks["t5"], [SENTENCE * 3], ["Das Tier ging nicht über die Straße."])
    maps = result.text_maps("cross").numpy()  # (L,H,T,S): S over the overview's 24 columns
    figure = kind_overview_figure(maps, "cross", (0, 0))
    canvas = tile_overview(squared(maps, 24), 24)
    shown = level_weights(array_of(figure["data"][0]["z"]))  # the colour levels the figure sends, as weights
    assert np.array_equal(np.isnan(shown), np.isnan(canvas)) and np.nanmax(np.abs(shown - canvas)) <= 1 / 508
    t, s = min(maps.shape[2], 24), min(maps.shape[3], 24)
    side = max(t, s)
    assert maps.shape[3] > 24
    for layer in range(maps.shape[0]):
        for head in range(maps.shape[1]):
            r, c = tile_origin(layer, head, side)
            tile = canvas[r:r + side, c:c + side]
            assert np.allclose(tile[:t, :s].sum(-1), 1.0, atol=1e-5)  # pooled rows still sum to one
            assert np.isnan(tile[t:, :]).all() and np.isnan(tile[:, s:]).all()  # the square's empty cells


def test_an_encoder_decoder_on_the_walkthrough_is_read_by_its_picker(stacks):
    from mha_core.serving.menu import page_model

    t5 = stacks["t5"]  # the Walkthrough also reads image models whole: a text encoder–decoder still follows its kind
    assert page_model(t5, "walkthrough", "encoder").decoder is None
    assert page_model(t5, "walkthrough", "cross").decoder is not None
    assert page_model(t5, "parameters", "encoder").decoder is not None
