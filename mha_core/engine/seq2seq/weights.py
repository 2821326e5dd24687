"""An encoder–decoder's weights as plain tensors, both stacks, read once from its transformers modules.

Shapes: D d_model, F feed-forward width, V vocabulary, P positions, C mel bins. Two layer layouts cover every
family: T5's blocks (T5, mT5, UMT5: layer[0] self-attention, layer[1] cross-attention, then the feed-forward
layer) and BART's (BART, mBART, Marian, M2M100/NLLB, Whisper: self_attn, encoder_attn, fc1 and fc2, each with its
norm). Nothing is copied.
"""

from __future__ import annotations

import torch

from mha_core.engine.arch import Architecture, Layout
from mha_core.engine.weights import EmbeddingWeights, LayerWeights, MlpWeights, linear, norm_of, projections

Stack = tuple[EmbeddingWeights, tuple[LayerWeights, ...]]


def t5_attention(attention: torch.nn.Module, arch: Architecture):
    return projections(linear(attention.q), linear(attention.k), linear(attention.v), linear(attention.o), arch)


def t5_layer(block: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """A T5 block: self-attention (with its relative-position table where the layer has one), cross-attention in
    the decoder, and the feed-forward layer (gated: wi_0 the gate, wi_1 the up projection)."""
    sa, ff = block.layer[0], block.layer[-1]
    dense = ff.DenseReluDense
    if hasattr(dense, "wi_0"):
        mlp = MlpWeights(*linear(dense.wi_1), linear(dense.wi_0)[0], *linear(dense.wo), arch.activation)
    else:
        mlp = MlpWeights(*linear(dense.wi), None, *linear(dense.wo), arch.activation)
    own_table = getattr(sa.SelfAttention, "has_relative_attention_bias", False)
    cross = block.layer[1] if arch.cross else None
    return LayerWeights(
        t5_attention(sa.SelfAttention, arch), norm_of(sa.layer_norm, True), mlp, norm_of(ff.layer_norm, True),
        cross_attention=None if cross is None else t5_attention(cross.EncDecAttention, arch),
        cross_norm=None if cross is None else norm_of(cross.layer_norm, True),
        position_bias=sa.SelfAttention.compute_bias if own_table else None,
    )


def bart_attention(attention: torch.nn.Module, arch: Architecture):
    """q_proj, k_proj (Whisper's has no bias), v_proj, out_proj."""
    a = attention
    return projections(linear(a.q_proj), linear(a.k_proj), linear(a.v_proj), linear(a.out_proj), arch)


def bart_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    cross = getattr(layer, "encoder_attn", None) if arch.cross else None
    mlp = MlpWeights(*linear(layer.fc1), None, *linear(layer.fc2), arch.activation)
    return LayerWeights(
        bart_attention(layer.self_attn, arch), norm_of(layer.self_attn_layer_norm, False), mlp,
        norm_of(layer.final_layer_norm, False),
        cross_attention=None if cross is None else bart_attention(cross, arch),
        cross_norm=None if cross is None else norm_of(layer.encoder_attn_layer_norm, False),
    )


def embedding_scale(stack: torch.nn.Module) -> float:
    """What the stack multiplies its word embeddings by (Marian, M2M100, BART with scale_embedding: √d_model)."""
    scale = getattr(stack, "embed_scale", None)
    if scale is None:
        scale = getattr(getattr(stack, "embed_tokens", None), "embed_scale", None)
    return float(scale) if scale is not None else 1.0


def positions_table(stack: torch.nn.Module) -> torch.Tensor | None:
    """(P,D) the stack's absolute position embeddings (learned or sinusoidal), None for T5."""
    module = getattr(stack, "embed_positions", None)
    if module is None:
        return None
    table = getattr(module, "weight", None)
    return (table if table is not None else module.weights).detach()


def read_stack(stack: torch.nn.Module, arch: Architecture, word: torch.Tensor) -> Stack:
    """One stack's embeddings and layers; `word` (V,D): the shared word embeddings."""
    if arch.layout == Layout.T5:
        final = norm_of(stack.final_layer_norm, True)
        return EmbeddingWeights(word, None, None, None, final), tuple(t5_layer(b, arch) for b in stack.block)
    norm_in = getattr(stack, "layernorm_embedding", None)
    final = getattr(stack, "layer_norm", None)
    convs = tuple((c.weight.detach(), c.bias.detach()) for c in (stack.conv1, stack.conv2)) if arch.audio else ()
    embeddings = EmbeddingWeights(
        word, positions_table(stack), None, None if norm_in is None else norm_of(norm_in, False),
        None if final is None else norm_of(final, False), embedding_scale(stack), convs,
    )
    return embeddings, tuple(bart_layer(m, arch) for m in stack.layers)


def read_stacks(model: torch.nn.Module, encoder: Architecture, decoder: Architecture) -> tuple[Stack, Stack]:
    """Both stacks of a ...ForConditionalGeneration (or its base model): (encoder, decoder)."""
    enc, dec = model.get_encoder(), model.get_decoder()
    word = dec.embed_tokens.weight.detach()
    enc_word = enc.embed_tokens.weight.detach() if hasattr(enc, "embed_tokens") else word
    return read_stack(enc, encoder, enc_word), read_stack(dec, decoder, word)
