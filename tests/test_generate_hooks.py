"""Hooks through generation (issue 80, part 4): generate with a forward hook that zeroes a head (blocks.{l}.attn.hook_z)
writes, piece for piece, what transformers' own generate writes with that head's slice zeroed where it enters the
output projection (a forward pre-hook on W_O), on a tiny decoder of every decoder family and on SmolLM2 (slow); an
encoder–decoder's decode the same against transformers' (T5, BART)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from mha_core import decode, generate, load_model
from mha_core.engine.arch import DECODERS
from mha_core.engine.seq2seq.forward import decoder_prefix
from mha_core.engine.tokens import tokenize, tokenize_ending
from tests.test_hooks import output_projection, zeroing
from tests.test_seq2seq import PLAIN
from tests.tiny_models import CONFIGS, make_tiny, make_tiny_seq2seq

PROMPT = "The animal didn't cross the street because it"
NEW = 8
HEAD = 1


def zero_head_z(z, _):
    """blocks.{l}.attn.hook_z (B,T,H,Dh): head HEAD's output zeroed, in every layer."""
    z[:, :, HEAD] = 0


def ours(model, hooked: bool):
    hooks = [(lambda name: name.endswith("attn.hook_z") and "cross" not in name, zero_head_z)] if hooked else []
    generation = generate(model, PROMPT, new=NEW, fwd_hooks=hooks)
    return [s.id for s in generation.steps], [s.prob for s in generation.steps]


def transformers_generation(model, hf, hooked: bool):
    """transformers' greedy generate on the pieces ours reads, each layer's W_O input slice of head HEAD zeroed."""
    batch = tokenize_ending(model.tokenizer, PROMPT, model.max_length - NEW, model.bos_id)
    hooks = [(output_projection(hf, layer.attention.w_o), zeroing(HEAD, model.head_dim)) for layer in model.layers]
    handles = [module.register_forward_pre_hook(fn) for module, fn in hooks] if hooked else []
    try:
        with torch.inference_mode():
            out = hf.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, max_new_tokens=NEW,
                              do_sample=False, eos_token_id=model.tokenizer.eos_token_id, output_scores=True,
                              return_dict_in_generate=True, pad_token_id=model.tokenizer.pad_token_id)
    finally:
        for handle in handles:
            handle.remove()
    ids = out.sequences[0, batch.input_ids.shape[1]:].tolist()
    return ids, [float(scores[0].float().softmax(-1)[i]) for scores, i in zip(out.scores, ids, strict=True)]


def check_generation_equals_transformers(model, hf) -> None:
    zeroed, zeroed_probs = ours(model, hooked=True)
    plain, plain_probs = ours(model, hooked=False)
    reference, reference_probs = transformers_generation(model, hf, hooked=True)
    assert zeroed == reference
    assert max(abs(a - b) for a, b in zip(zeroed_probs, reference_probs, strict=True)) <= 1e-4
    assert plain == transformers_generation(model, hf, hooked=False)[0]
    changed = zeroed != plain or max(abs(a - b) for a, b in zip(zeroed_probs, plain_probs, strict=True)) > 1e-2
    assert changed  # the hook reached the generation: without it, another text or other probabilities


@pytest.mark.parametrize("family", [family for family in CONFIGS if family in DECODERS])
def test_generation_with_a_head_zeroed_equals_transformers_generate(family, tmp_path):
    path = make_tiny(family, tmp_path / family, lm=True, initializer_range=0.2)  # weights whose effects show
    model = load_model(path)
    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    check_generation_equals_transformers(model, hf)


@pytest.mark.slow
def test_smollm2_generation_with_a_head_zeroed_equals_transformers_generate(decoder):
    hf = AutoModelForCausalLM.from_pretrained(decoder.model_dir, attn_implementation="eager")
    check_generation_equals_transformers(decoder, hf)


@pytest.mark.parametrize(("family", "sizes"), [("t5", {}), ("bart", {"init_std": 0.2})])  # weights whose effects show
def test_decode_with_a_cross_attention_head_zeroed_equals_transformers_generate(family, sizes, tmp_path):
    model = load_model(make_tiny_seq2seq(family, tmp_path / family, **sizes))
    source = tokenize(model.tokenizer, PROMPT, model.max_length)
    cross_points = [(lambda name: name.endswith("cross_attn.hook_z"), zero_head_z)]
    zeroed, plain = decode(model, source, new=NEW, fwd_hooks=cross_points), decode(model, source, new=NEW)
    w_o = [layer.cross_attention.w_o for layer in model.decoder.layers]
    hf = model.model
    handles = [output_projection(hf, w).register_forward_pre_hook(zeroing(HEAD, model.decoder.head_dim)) for w in w_o]
    try:
        with torch.inference_mode():
            out = hf.generate(input_ids=source.input_ids, attention_mask=source.attention_mask, max_new_tokens=NEW,
                              decoder_start_token_id=decoder_prefix(model)[0], do_sample=False, **PLAIN)
    finally:
        for handle in handles:
            handle.remove()
    assert list(zeroed.ids[1:]) == out[0, 1:].tolist()
    assert zeroed.ids != plain.ids or max(abs(a.prob - b.prob) for a, b in zip(zeroed.steps, plain.steps,
                                                                               strict=True)) > 1e-2
