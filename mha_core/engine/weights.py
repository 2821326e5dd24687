"""A model's weights as plain tensors, read once from its transformers modules, family by family.

Shapes: D d_model, H query heads, G key/value heads, Dh head dim, F feed-forward width, V vocabulary,
P positions. Linear weights keep `nn.Linear`'s layout (out_features, in_features); GPT-2's Conv1D
weights (in, out) are transposed views. Nothing is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers.activations import ACT2FN

from mha_core.engine.arch import Architecture, Layout
from mha_core.engine.attention import ProjectionWeights, split_heads_in, split_heads_out
from mha_core.engine.held import register_lru


@dataclass(frozen=True)
class Norm:
    weight: Tensor  # (D,)
    bias: Tensor | None  # (D,) LayerNorm only
    eps: float
    rms: bool  # RMSNorm (no centring, no bias) instead of LayerNorm
    offset: float = 0.0  # Gemma's RMSNorm scales by (1 + weight), in float32

    @property
    def gain(self) -> Tensor:
        """(D,) what the normalised vector is multiplied by."""
        return self.weight + self.offset if self.offset else self.weight

    def __call__(self, x: Tensor) -> Tensor:
        if not self.rms:
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
        x32 = x.float()  # as transformers' RMSNorm: statistics in float32, scale in the input's dtype
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.offset:  # Gemma: (x * (1 + w)) in float32, then the input's dtype
            return (normed * (self.offset + self.weight.float())).to(x.dtype)
        return self.weight * normed.to(x.dtype)


@partial(register_lru, "activation modules", each=1024)  # stateless modules: an object each
@cache
def activation_fn(name: str) -> Callable[[Tensor], Tensor]:
    """The activation ACT2FN names, made once (ACT2FN builds a new module at each lookup: 6% of a short forward's
    Python time went to building GELU modules); stateless, so one serves every layer and thread."""
    return ACT2FN[name]


@dataclass(frozen=True)
class MlpWeights:
    w_in: Tensor  # (F, D)  up projection (gated: "up")
    b_in: Tensor | None  # (F,)
    w_gate: Tensor | None  # (F, D)  gated MLPs only
    w_out: Tensor  # (D, F)
    b_out: Tensor | None  # (D,)
    activation: str  # a key of ACT2FN
    b_gate: Tensor | None = None  # (F,) DINOv2's SwiGLU has a gate bias

    def __call__(self, h: Tensor) -> Tensor:
        """(B,T,D) -> (B,T,F) -> (B,T,D): out(act(in h)), or down(act(gate h) * up h) when gated."""
        act = activation_fn(self.activation)
        inner = F.linear(h, self.w_in, self.b_in)  # (B,T,F)
        gated = self.w_gate is not None  # in place: one (B,T,F) buffer fewer per layer
        inner = act(F.linear(h, self.w_gate, self.b_gate)).mul_(inner) if gated else act(inner)  # (B,T,F)
        return F.linear(inner, self.w_out, self.b_out)


@dataclass(frozen=True)
class HeadWeights:
    """Per-head slices: head h computes q_h = x @ w_q[h] + b_q[h]; output = sum_h ctx_h @ w_o[h] + b_o.
    With grouped-query attention, w_k/w_v hold the G key/value heads; query head h uses kv head h // (H/G)."""

    w_q: Tensor  # (H, D, Dh)
    b_q: Tensor  # (H, Dh)
    w_k: Tensor  # (G, D, Dh)
    b_k: Tensor  # (G, Dh)
    w_v: Tensor  # (G, D, Dh)
    b_v: Tensor  # (G, Dh)
    w_o: Tensor  # (H, Dh, D)
    b_o: Tensor  # (D,)


PositionBias = Callable[..., Tensor]  # (T, S, device, past) -> (1,H,T,S) a bias per head on relative positions


@dataclass(frozen=True)
class LayerWeights:
    """One layer: attention with its norm, MLP with its norm (placement per the Architecture)."""

    attention: ProjectionWeights
    attn_norm: Norm  # pre-norm: before attention; post-norm: after attention's residual
    mlp: MlpWeights
    mlp_norm: Norm
    post_attn_norm: Norm | None = None  # Gemma's sandwich: attention's output normed before the residual
    post_mlp_norm: Norm | None = None  # ... and the MLP's
    cross_attention: ProjectionWeights | None = None  # an encoder–decoder's decoder: Q from here, K, V from the
    cross_norm: Norm | None = None  # encoder's output; its norm (before it, or after its residual when post-norm)
    position_bias: PositionBias | None = None  # T5: this layer's own relative-position table (transformers'
    #                                            compute_bias(T, S, device, past)), else None
    attn_scale: Tensor | None = None  # (D,) DINOv2's layer scale: attention's output times λ1 before the residual
    mlp_scale: Tensor | None = None  # (D,) ... and the MLP's times λ2

    def head_weights(self) -> HeadWeights:
        """This layer's projections cut into heads (views, no copies)."""
        a = self.attention
        h, g = a.n_heads, a.n_kv_heads
        return HeadWeights(
            w_q=split_heads_in(a.w_q, h), b_q=a.b_q.view(h, -1),
            w_k=split_heads_in(a.w_k, g), b_k=a.b_k.view(g, -1),
            w_v=split_heads_in(a.w_v, g), b_v=a.b_v.view(g, -1),
            w_o=split_heads_out(a.w_o, h), b_o=a.b_o,
        )


@dataclass(frozen=True)
class EmbeddingWeights:
    word: Tensor  # (V, D)
    position: Tensor | None  # (P, D) learned absolute positions; None with RoPE
    token_type: Tensor | None  # (types, D); segment 0 is added
    norm: Norm | None  # BERT-style norm right after the embeddings (BLOOM too)
    final_norm: Norm | None  # pre-norm decoders: the norm after the last layer
    scale: float = 1.0  # the word embeddings times this (Gemma: √d_model, in the weights' dtype)
    convs: tuple[tuple[Tensor, Tensor], ...] = ()  # Whisper's encoder: two Conv1d (weight (D,C,3), bias (D,)), GELU
    #                                               after each, the second with stride 2: (B,mels,F) -> (B,F/2,D)
    patches: Callable[[Tensor], Tensor] | None = None  # a Vision Transformer: pixels (B,C,Hpx,Wpx) -> (B,N,D), its
    #                                                    transformers embedding module (patches, [CLS], positions)


def norm_of(module: torch.nn.Module, rms: bool, offset: float = 0.0) -> Norm:
    bias = getattr(module, "bias", None)
    eps = getattr(module, "eps", None) or getattr(module, "variance_epsilon", 1e-6)
    return Norm(module.weight.detach(), None if bias is None else bias.detach(), float(eps), rms, offset)


def linear(module: torch.nn.Module, conv1d: bool = False) -> tuple[Tensor, Tensor | None]:
    """(weight (out, in), bias): nn.Linear as stored, GPT-2's Conv1D transposed."""
    weight = module.weight.detach()
    bias = None if module.bias is None else module.bias.detach()
    return (weight.T if conv1d else weight), bias


def zeros_if_none(bias: Tensor | None, like: Tensor) -> Tensor:
    return torch.zeros(like.shape[0], dtype=like.dtype, device=like.device) if bias is None else bias


def projections(q: tuple, k: tuple, v: tuple, o: tuple, arch: Architecture, attention: torch.nn.Module | None = None
                ) -> ProjectionWeights:
    """The four projections as (weight, bias) pairs; `attention`'s q_norm and k_norm where the family has QK-norm."""
    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = q, k, v, o
    offset = arch.norm_offset
    q_norm, k_norm = (norm_of(attention.q_norm, True, offset), norm_of(attention.k_norm, True, offset)) if (
        arch.qk_norm) else (None, None)
    return ProjectionWeights(wq, zeros_if_none(bq, wq), wk, zeros_if_none(bk, wk), wv, zeros_if_none(bv, wv),
                             wo, zeros_if_none(bo, wo), arch.n_heads, arch.n_kv_heads, q_norm, k_norm, arch.scale,
                             arch.attn_softcap)


def bert_like_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """BERT, RoBERTa and XLM-RoBERTa share transformers' BertLayer layout."""
    sa, so = layer.attention.self, layer.attention.output
    attention = projections(linear(sa.query), linear(sa.key), linear(sa.value), linear(so.dense), arch)
    mlp = MlpWeights(*linear(layer.intermediate.dense), None, *linear(layer.output.dense), arch.activation)
    return LayerWeights(attention, norm_of(so.LayerNorm, False), mlp, norm_of(layer.output.LayerNorm, False))


def distilbert_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    a = layer.attention
    attention = projections(linear(a.q_lin), linear(a.k_lin), linear(a.v_lin), linear(a.out_lin), arch)
    mlp = MlpWeights(*linear(layer.ffn.lin1), None, *linear(layer.ffn.lin2), arch.activation)
    return LayerWeights(attention, norm_of(layer.sa_layer_norm, False), mlp, norm_of(layer.output_layer_norm, False))


def gpt2_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """GPT-2 fuses q, k, v into one Conv1D (c_attn, weight (D, 3D)): split its transposed rows in three."""
    w, b = linear(layer.attn.c_attn, conv1d=True)  # (3D, D), (3D,)
    (wq, wk, wv), (bq, bk, bv) = w.chunk(3), b.chunk(3)
    attention = projections((wq, bq), (wk, bk), (wv, bv), linear(layer.attn.c_proj, conv1d=True), arch)
    mlp = MlpWeights(*linear(layer.mlp.c_fc, conv1d=True), None, *linear(layer.mlp.c_proj, conv1d=True),
                     arch.activation)
    return LayerWeights(attention, norm_of(layer.ln_1, False), mlp, norm_of(layer.ln_2, False))


def llama_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """Llama, Mistral, Qwen2 (q/k/v biases), Qwen3 (QK-norm) and Gemma (QK-norm in 3, norms after each sub-layer,
    RMSNorm of 1 + w): separate projections, gated MLP, RMSNorm."""
    a, m = layer.self_attn, layer.mlp
    attention = projections(linear(a.q_proj), linear(a.k_proj), linear(a.v_proj), linear(a.o_proj), arch, a)
    (w_up, b_up), (w_gate, _), (w_down, b_down) = linear(m.up_proj), linear(m.gate_proj), linear(m.down_proj)
    mlp = MlpWeights(w_up, b_up, w_gate, w_down, b_down, arch.activation)
    offset = arch.norm_offset
    if arch.sandwich:
        return LayerWeights(attention, norm_of(layer.input_layernorm, True, offset), mlp,
                            norm_of(layer.pre_feedforward_layernorm, True, offset),
                            norm_of(layer.post_attention_layernorm, True, offset),
                            norm_of(layer.post_feedforward_layernorm, True, offset))
    return LayerWeights(attention, norm_of(layer.input_layernorm, True, offset), mlp,
                        norm_of(layer.post_attention_layernorm, True, offset))


def phi3_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """Phi-3 fuses q, k and v (qkv_proj: H, then G, then G heads' rows) and gate and up (gate_up_proj: gate first)."""
    a, m = layer.self_attn, layer.mlp
    w, b = linear(a.qkv_proj)  # (H*Dh + 2*G*Dh, D)
    q_rows, kv_rows = arch.n_heads * arch.head_dim, arch.n_kv_heads * arch.head_dim
    wq, wk, wv = w.split([q_rows, kv_rows, kv_rows])
    bq, bk, bv = b.split([q_rows, kv_rows, kv_rows]) if b is not None else (None,) * 3
    attention = projections((wq, bq), (wk, bk), (wv, bv), linear(a.o_proj), arch)
    w_gate_up, _ = linear(m.gate_up_proj)  # (2F, D)
    w_gate, w_up = w_gate_up.chunk(2)
    mlp = MlpWeights(w_up, None, w_gate, *linear(m.down_proj), arch.activation)
    return LayerWeights(attention, norm_of(layer.input_layernorm, True), mlp,
                        norm_of(layer.post_attention_layernorm, True))


def per_head_fused(module: torch.nn.Module, arch: Architecture) -> tuple[tuple, tuple, tuple]:
    """GPT-NeoX's and BLOOM's query_key_value: for each head its q, k and v rows in turn, (H * 3 * Dh, D)."""
    w, b = linear(module)
    h, dh = arch.n_heads, arch.head_dim
    w3, b3 = w.view(h, 3, dh, -1), b.view(h, 3, dh)  # (H,3,Dh,D), (H,3,Dh)
    return tuple((w3[:, i].reshape(h * dh, -1), b3[:, i].reshape(h * dh)) for i in range(3))


def neox_bloom_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """GPT-NeoX (attention, parallel blocks) and BLOOM (self_attention): fused per-head q/k/v, plain MLP."""
    a = layer.attention if arch.layout == Layout.GPT_NEOX else layer.self_attention
    q, k, v = per_head_fused(a.query_key_value, arch)
    attention = projections(q, k, v, linear(a.dense), arch)
    mlp = MlpWeights(*linear(layer.mlp.dense_h_to_4h), None, *linear(layer.mlp.dense_4h_to_h), arch.activation)
    return LayerWeights(attention, norm_of(layer.input_layernorm, False), mlp,
                        norm_of(layer.post_attention_layernorm, False))


def opt_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    a = layer.self_attn
    attention = projections(linear(a.q_proj), linear(a.k_proj), linear(a.v_proj), linear(a.out_proj), arch)
    mlp = MlpWeights(*linear(layer.fc1), None, *linear(layer.fc2), arch.activation)
    return LayerWeights(attention, norm_of(layer.self_attn_layer_norm, False), mlp,
                        norm_of(layer.final_layer_norm, False))


def bert_like_embeddings(model: torch.nn.Module) -> EmbeddingWeights:
    """BERT's, RoBERTa's and DistilBERT's embeddings: words, positions, token types where it has them, a norm."""
    emb = model.embeddings
    token_type = getattr(emb, "token_type_embeddings", None)
    return EmbeddingWeights(emb.word_embeddings.weight.detach(), emb.position_embeddings.weight.detach(),
                            None if token_type is None else token_type.weight.detach(), norm_of(emb.LayerNorm, False),
                            None)


def read_bert(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    return bert_like_embeddings(model), tuple(bert_like_layer(m, arch) for m in model.encoder.layer)


def read_distilbert(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    return bert_like_embeddings(model), tuple(distilbert_layer(m, arch) for m in model.transformer.layer)


def read_gpt2(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    embeddings = EmbeddingWeights(model.wte.weight.detach(), model.wpe.weight.detach(), None, None,
                                  norm_of(model.ln_f, False))
    return embeddings, tuple(gpt2_layer(m, arch) for m in model.h)


def read_opt(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    d = model.decoder
    final = getattr(d, "final_layer_norm", None)
    embeddings = EmbeddingWeights(d.embed_tokens.weight.detach(), d.embed_positions.weight.detach(), None, None,
                                  None if final is None else norm_of(final, False))
    return embeddings, tuple(opt_layer(m, arch) for m in d.layers)


def read_bloom(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    embeddings = EmbeddingWeights(model.word_embeddings.weight.detach(), None, None,
                                  norm_of(model.word_embeddings_layernorm, False), norm_of(model.ln_f, False))
    return embeddings, tuple(neox_bloom_layer(m, arch) for m in model.h)


def read_gpt_neox(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    embeddings = EmbeddingWeights(model.embed_in.weight.detach(), None, None, None,
                                  norm_of(model.final_layer_norm, False))
    return embeddings, tuple(neox_bloom_layer(m, arch) for m in model.layers)


def read_llama(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    """Llama's layout (Mistral, Qwen, Gemma; Phi-3 with its fused projections)."""
    embeddings = EmbeddingWeights(model.embed_tokens.weight.detach(), None, None, None,
                                  norm_of(model.norm, True, arch.norm_offset), arch.embed_scale)
    read = phi3_layer if arch.layout == Layout.PHI3 else llama_layer
    return embeddings, tuple(read(m, arch) for m in model.layers)


READERS = {Layout.BERT: read_bert, Layout.DISTILBERT: read_distilbert, Layout.GPT2: read_gpt2, Layout.OPT: read_opt,
           Layout.BLOOM: read_bloom, Layout.GPT_NEOX: read_gpt_neox, Layout.LLAMA: read_llama,
           Layout.PHI3: read_llama}


def read_weights(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    """The base model's (AutoModel's) embeddings and layers, read by its family's module layout (arch.layout)."""
    return READERS[arch.layout](model, arch)
