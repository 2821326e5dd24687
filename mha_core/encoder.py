"""The whole BERT encoder recomputed from the model's weights, layer by layer.

Shapes: B batch, L layers, H heads, T tokens, D d_model, Dh head dim, F feed-forward width.
Each layer: x -> LayerNorm(x + MHA(x)) -> LayerNorm(h + FFN(h))  (post-norm, as BERT).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.attention import AUTO, EXPLICIT, FUSED, PATHS, AttentionOutput, multi_head_attention, padding_bias
from mha_core.model import EmbeddingWeights, LayerWeights, LoadedModel
from mha_core.result import AttentionResult
from mha_core.tokens import InputError, TextsLike, tokenize

# Below this many tokens the explicit path is as fast and gives the maps for free.
AUTO_FUSED_MIN_TOKENS = 256

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,  # exact (erf) GELU, as BERT
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


def embed(w: EmbeddingWeights, input_ids: Tensor) -> Tensor:
    """Word + token-type (all segment 0) + position embeddings, then LayerNorm: (B,T) -> (B,T,D)."""
    t = input_ids.shape[1]
    x = w.word[input_ids] + w.token_type[0]  # (B,T,D)
    x = x + w.position[:t]  # (B,T,D)
    return F.layer_norm(x, x.shape[-1:], w.norm_weight, w.norm_bias, w.norm_eps)


def feed_forward(h: Tensor, w: LayerWeights) -> Tensor:
    """(B,T,D) -> (B,T,F) -> (B,T,D)."""
    act = ACTIVATIONS[w.activation]
    return F.linear(act(F.linear(h, w.ffn_in_weight, w.ffn_in_bias)), w.ffn_out_weight, w.ffn_out_bias)


def encoder_layer(x: Tensor, w: LayerWeights, bias: Tensor | None, path: str) -> tuple[Tensor, AttentionOutput]:
    """One post-norm BERT layer: (B,T,D) -> (B,T,D), plus the attention internals."""
    attn = multi_head_attention(x, w.attention, bias, path)
    d = x.shape[-1:]
    h = F.layer_norm(attn.output + x, d, w.attn_norm_weight, w.attn_norm_bias, w.norm_eps)  # (B,T,D)
    out = F.layer_norm(feed_forward(h, w) + h, d, w.out_norm_weight, w.out_norm_bias, w.norm_eps)  # (B,T,D)
    return out, attn


def choose_path(path: str, n_tokens: int, device: torch.device) -> tuple[str, str]:
    """Resolve `auto`; returns (path, reason)."""
    if path not in PATHS:
        raise InputError(f"Unknown path {path!r}: choose one of {', '.join(PATHS)}.")
    if path != AUTO:
        return path, f"{path} (as asked)"
    if device.type == "cuda":
        return FUSED, "auto: fused on the GPU"
    if n_tokens > AUTO_FUSED_MIN_TOKENS:
        return FUSED, f"auto: fused for {n_tokens} tokens > {AUTO_FUSED_MIN_TOKENS}"
    return EXPLICIT, f"auto: explicit for {n_tokens} tokens <= {AUTO_FUSED_MIN_TOKENS}"


@torch.inference_mode()
def run(model: LoadedModel, texts: TextsLike, path: str = AUTO) -> AttentionResult:
    """Recompute every layer and head for `texts` (a str, a list of str, or pre-split word lists).

    Several texts are padded into one batch; padded keys get weight 0, so each text's maps and
    hidden states equal those of the text alone. Texts over the model's maximum are cut.
    Runs in the precision the model was loaded in (`load_model(dtype=...)`).
    """
    batch = tokenize(model.tokenizer, texts, model.max_length)
    device = model.device
    chosen, reason = choose_path(path, batch.input_ids.shape[1], device)
    mask = batch.attention_mask.to(device)
    x = embed(model.embeddings, batch.input_ids.to(device))  # (B,T,D)
    bias = padding_bias(mask, x.dtype) if bool((mask == 0).any()) else None  # (B,1,1,T)
    hidden, attns = [x], []
    for w in model.layers:
        x, attn = encoder_layer(x, w, bias, chosen)
        hidden.append(x)
        attns.append(attn)
    return AttentionResult(
        batch=batch,
        layer_q=tuple(a.q for a in attns), layer_k=tuple(a.k for a in attns),
        layer_context=tuple(a.context for a in attns),
        layer_probs=None if chosen == FUSED else tuple(a.probs for a in attns),
        layer_lse=tuple(a.lse for a in attns) if chosen == FUSED else None,
        hidden_states=tuple(hidden), path=chosen, backend=attns[0].backend, path_reason=reason,
        max_length=model.max_length,
    )
