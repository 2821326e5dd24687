"""Multi-head attention, step by step: project, split into heads, attend, concatenate, W_O.

Shapes: B batch, H query heads, G key/value heads (G = H for MHA, G < H for grouped-query attention),
T query tokens, S key tokens, D d_model, Dh head dim.
Weights use `nn.Linear`'s layout, (out_features, in_features), so `F.linear(x, w, b) = x @ w.T + b`.

Two kernels share everything but the attention call:
- explicit: scores = q @ k.T * scale + bias, probs = softmax(scores), context = probs @ v
- fused: PyTorch's SDPA kernels (CPU flash, CUDA efficient/flash), which never materialise the
  (T, S) map but return each query row's log-sum-exp (LSE); any head's exact map is rebuilt
  afterwards as probs = exp(q @ k.T * scale + bias - LSE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.engine.hooks import NO_HOOKS, Hooks
from mha_core.engine.paths import AUTO, EXPLICIT, FUSED, PATHS  # noqa: F401 -- the engine's modules read them here


@dataclass(frozen=True)
class ProjectionWeights:
    """All heads' projections, concatenated the way `nn.Linear` stores them."""

    w_q: Tensor  # (H*Dh, D)  rows h*Dh:(h+1)*Dh belong to head h
    b_q: Tensor  # (H*Dh,)
    w_k: Tensor  # (G*Dh, D)
    b_k: Tensor  # (G*Dh,)
    w_v: Tensor  # (G*Dh, D)
    b_v: Tensor  # (G*Dh,)
    w_o: Tensor  # (D, H*Dh)  columns h*Dh:(h+1)*Dh read head h's context
    b_o: Tensor  # (D,)
    n_heads: int
    n_kv_heads: int | None = None  # None: as many as query heads (MHA)
    q_norm: Callable[[Tensor], Tensor] | None = None  # QK-norm (Qwen3, Gemma 3): each head's q and k normed, before
    k_norm: Callable[[Tensor], Tensor] | None = None  # RoPE, over its Dh features
    scale: float | None = None  # the scores' factor; None: 1/√Dh (Gemma: 1/√query_pre_attn_scalar)
    softcap: float | None = None  # Gemma 2: scores -> tanh(scores / c) · c before the mask (explicit kernel only)

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)


@dataclass(frozen=True)
class AttentionOutput:
    """One multi-head attention call. `probs` is None on the fused path, `lse` on the explicit."""

    output: Tensor  # (B,T,D)  after W_O
    q: Tensor  # (B,H,T,Dh)  after RoPE where the model rotates
    k: Tensor  # (B,G,S,Dh)  after RoPE; one per key/value head (query head h uses k[:, h // (H/G)])
    v: Tensor  # (B,G,S,Dh)  one per key/value head
    context: Tensor  # (B,H,T,Dh)  each head's softmax(...) @ v, before concatenation
    probs: Tensor | None  # (B,H,T,S)
    lse: Tensor | None  # (B,H,T)
    backend: str
    cross: AttentionOutput | None = None  # an encoder–decoder's decoder layer: its cross-attention (S: source)


def from_torch_mha(mha: torch.nn.MultiheadAttention) -> ProjectionWeights:
    """Read an `nn.MultiheadAttention` (packed in_proj of shape (3D, D), equal q/k/v dims)."""
    if mha.in_proj_weight is None:
        raise ValueError("kdim/vdim differ from embed_dim: q/k/v projections are stored separately")
    w_q, w_k, w_v = mha.in_proj_weight.detach().chunk(3)
    d = mha.embed_dim
    zeros = torch.zeros(d, dtype=w_q.dtype)
    b_q, b_k, b_v = mha.in_proj_bias.detach().chunk(3) if mha.in_proj_bias is not None else (zeros,) * 3
    b_o = mha.out_proj.bias.detach() if mha.out_proj.bias is not None else zeros
    return ProjectionWeights(w_q, b_q, w_k, b_k, w_v, b_v, mha.out_proj.weight.detach(), b_o, mha.num_heads)


def split_heads_in(w: Tensor, n_heads: int) -> Tensor:
    """An input projection's `nn.Linear` weight (H*Dh, D) as per-head matrices (H, D, Dh)."""
    out_features, d_in = w.shape
    return w.view(n_heads, out_features // n_heads, d_in).transpose(1, 2)


def split_heads_out(w: Tensor, n_heads: int) -> Tensor:
    """The output projection's `nn.Linear` weight (D, H*Dh) as per-head matrices (H, Dh, D)."""
    d_out, in_features = w.shape
    return w.view(d_out, n_heads, in_features // n_heads).permute(1, 2, 0)


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B,T,D) -> (B,H,T,Dh): head h owns features h*Dh:(h+1)*Dh."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B,H,T,Dh) -> (B,T,D): concatenate the heads' features."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def kv_head(head: int, n_heads: int, n_kv_heads: int) -> int:
    """The key/value head that query head `head` reads (grouped-query attention; itself when n_kv_heads == n_heads):
    the one rule repeat_kv applies to tensors and every page and analysis names."""
    return head // (n_heads // n_kv_heads)


def heads_sharing(kv: int, n_heads: int, n_kv_heads: int) -> range:
    """The query heads that key/value head `kv` serves."""
    group = n_heads // n_kv_heads
    return range(kv * group, (kv + 1) * group)


def repeat_kv(x: Tensor, n_heads: int) -> Tensor:
    """(B,G,S,Dh) -> (B,H,S,Dh): key/value head g serves query heads g*H/G ... (g+1)*H/G - 1."""
    groups = x.shape[1]
    return x if groups == n_heads else x.repeat_interleave(n_heads // groups, dim=1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary position embedding: x (B,H,T,Dh) rotated by position; cos, sin (B,T,R), R <= Dh.

    Equals transformers' x * cos + rotate_half(x) * sin, written with two in-place halves
    instead of a concatenated copy of x: feature i < R/2 pairs with i + R/2. Partial rotary
    (GPT-NeoX's rotary_pct, R < Dh) rotates the first R features and passes the rest unchanged."""
    rotated = cos.shape[-1]
    if rotated < x.shape[-1]:
        return torch.cat([apply_rope(x[..., :rotated], cos, sin), x[..., rotated:]], dim=-1)
    half = x.shape[-1] // 2
    cos, sin = cos[:, None], sin[:, None]  # (B,1,T,Dh)
    out = x * cos  # (B,H,T,Dh)
    out[..., :half].addcmul_(x[..., half:], sin[..., :half], value=-1)  # first half: - second * sin
    out[..., half:].addcmul_(x[..., :half], sin[..., half:])  # second half: + first * sin
    return out


def blocked_keys(queries: Tensor, keys: Tensor, window: int | None = None) -> Tensor:
    """(Q,K) True where a decoder's query at position queries[q] cannot see the key at position keys[k]: a later
    key, or one `window` or more positions back."""
    blocked = keys[None, :] > queries[:, None]
    if window is not None:
        blocked |= queries[:, None] - keys[None, :] >= window
    return blocked


def causal_bias(n: int, dtype: torch.dtype, device: torch.device | str = "cpu", window: int | None = None) -> Tensor:
    """(1,1,T,T) additive bias: 0 where key j <= query i (and within `window`), the dtype's minimum elsewhere."""
    i = torch.arange(n, device=device)
    return (blocked_keys(i, i, window).to(dtype) * torch.finfo(dtype).min)[None, None]


def attention_bias(key_mask: Tensor, dtype: torch.dtype, causal: bool, window: int | None = None) -> Tensor | None:
    """The bias every head adds to its scores: padding (B,1,1,S), plus the causal mask (B,1,T,S) for decoders.
    None when there is nothing to mask."""
    padded = bool((key_mask == 0).any())
    bias = padding_bias(key_mask, dtype) if padded else None
    if not causal:
        return bias
    mask = causal_bias(key_mask.shape[1], dtype, key_mask.device, window)
    return mask if bias is None else torch.maximum(bias + mask, torch.tensor(torch.finfo(dtype).min, dtype=dtype))


def padding_bias(key_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """(B,S) 1 = real key, 0 = padding -> additive bias (B,1,1,S): 0 or the dtype's minimum.

    The dtype minimum (as transformers' eager BERT uses) rather than -inf keeps a fully masked row
    finite; exp(min - max) is exactly 0, so padded keys get weight 0 either way.
    """
    return ((1.0 - key_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min).to(dtype)


def scores_bias(key_mask: Tensor, dtype: torch.dtype, causal: bool, window: int | None = None,
                alibi_heads: int | None = None) -> Tensor | None:
    """(B,1|H,T|1,S) all a layer adds to its scores: padding, the causal mask and `window` (attention_bias), and with
    `alibi_heads` ALiBi's bias per head on the keys' positions (BLOOM, as transformers' build_alibi_tensor has it)."""
    bias = attention_bias(key_mask, dtype, causal, window)  # (B,1,T|1,S) or None
    if alibi_heads is None:
        return bias
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(key_mask, alibi_heads, dtype).view(key_mask.shape[0], alibi_heads, 1, -1)  # (B,H,1,S)
    return alibi if bias is None else bias + alibi  # (B,H,T,S)


def explicit_kernel(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, scale: float,
                    softcap: float | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q k^T * scale + bias) v, written out; returns (context (B,H,T,Dh), probs (B,H,T,S)). `softcap`
    c: the scores pass through tanh(s / c) · c before the bias (Gemma 2's attention-logit soft-capping)."""
    scores = scaled_scores(q, k, scale)  # (B,H,T,S) q k^T * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores.add_(bias) if bias.dtype == scores.dtype else scores + bias
    probs = softmax_over_keys(scores)  # (B,H,T,S)
    return torch.matmul(probs, v), probs  # (B,H,T,Dh)


def scaled_scores(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """q (B,H,T,Dh), k (B,H,S,Dh) -> q k^T * scale (B,H,T,S), the scale applied inside the product (baddbmm's
    alpha) rather than in a pass of its own over the (T,S) scores."""
    b, h, t, dh = q.shape
    q3, k3 = q.reshape(b * h, t, dh), k.reshape(b * h, k.shape[2], dh)
    return torch.baddbmm(q3.new_zeros(()), q3, k3.transpose(1, 2), beta=0, alpha=scale).view(b, h, t, -1)


def softmax_over_keys(scores: Tensor) -> Tensor:
    """softmax(scores) over the keys (the last dimension), written into the scores' own buffer where no gradient
    flows through them: a layer then holds one (B,H,T,S) tensor, the map, instead of the scores and the map."""
    if scores.requires_grad:
        return torch.softmax(scores, dim=-1)
    return torch._softmax(scores, -1, False, out=scores)  # aten's softmax with an output: the same kernel, in place


def fused_kernel(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, scale: float, causal: bool = False
                 ) -> tuple[Tensor, Tensor, str]:
    """SDPA through the kernel that also returns the LSE: (context (B,H,T,Dh), lse (B,H,T), backend).
    `causal`: the kernel's own causal mode (it skips the blocks above the diagonal) instead of a mask."""
    if q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, attn_mask=bias, scale=scale
        )
        return out, lse, "flash (CPU)" + (", causal" if causal else "")
    if q.device.type == "cuda":
        return cuda_fused_kernel(q, k, v, bias, scale, causal)
    raise NotImplementedError(f"fused path not available on {q.device.type}")


def cuda_fused_kernel(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, scale: float, causal: bool = False
                      ) -> tuple[Tensor, Tensor, str]:
    """CUDA: flash when there is no padding and the dtype allows it, else memory-efficient.

    Both kernels return the LSE. The efficient kernel wants a bias whose strides are aligned: its rows are
    copied into aligned memory and expanded to (B,H,T,S) as a view (aligned_bias).
    """
    if bias is None and q.dtype in (torch.float16, torch.bfloat16):
        try:
            out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
            return out[0], out[1], f"flash (CUDA, {dtype_name(q.dtype)})"
        except RuntimeError:
            pass  # e.g. an older GPU: fall through to the efficient kernel
    full_bias = None if bias is None else aligned_bias(bias, (q.shape[0], q.shape[1], q.shape[2], k.shape[2]))
    out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, full_bias, True, 0.0, causal, scale=scale)
    return out[0], out[1][..., : q.shape[2]], f"efficient (CUDA, {dtype_name(q.dtype)})"


def aligned_bias(bias: Tensor, shape: tuple[int, int, int, int], align: int = 16) -> Tensor:
    """`bias` broadcast to `shape` (B,H,T,S) for CUDA's efficient kernel, which refuses a bias whose strides are not
    multiples of 16 bytes (seen on an H200 with a padded batch of decoder texts: "attn_bias is not correctly
    aligned"). Its rows are copied into (.., S') with S' the next multiple of `align`, and its broadcast dimensions
    (the heads, often the batch) stay views: as PyTorch's own SDPA pads and expands a mask."""
    s = shape[-1]
    rows = bias.new_empty(*bias.shape[:-1], s + (-s) % align)  # bias's own dims, keys padded to S'
    rows[..., :s] = bias
    return rows[..., :s].expand(shape)  # (B,H,T,S)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def rebuild_probs(q: Tensor, k: Tensor, lse: Tensor, bias: Tensor | None, scale: float) -> Tensor:
    """Exact attention map from a fused kernel's LSE: exp(q k^T * scale + bias - lse). Works on any
    leading dims: q (...,T,Dh), k (...,S,Dh), lse (...,T), bias broadcastable to (...,T,S)."""
    return torch.exp(rebuild_log_probs(q, k, lse, bias, scale))  # (...,T,S)


def rebuild_log_probs(q: Tensor, k: Tensor, lse: Tensor, bias: Tensor | None, scale: float,
                      out: Tensor | None = None) -> Tensor:
    """The map's logarithm, q k^T * scale + bias - lse (no logarithm taken; masked keys at about the bias); `out`:
    a (...,T,S) float32 buffer to write it in (reused across blocks: a fresh large tensor costs its page faults)."""
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1), out=out).mul_(scale)  # (...,T,S) fresh: in place
    if bias is not None:
        scores.add_(bias.float())
    return scores.sub_(lse.float().unsqueeze(-1))  # (...,T,S)


def keys_values(w: ProjectionWeights, kv: Tensor) -> tuple[Tensor, Tensor]:
    """Steps 1 and 2 for keys and values: (B,S,D) -> k, v, each (B,G,S,Dh) (before QK-norm and RoPE)."""
    k = split_heads(F.linear(kv, w.w_k, w.b_k), w.n_kv_heads)  # (B,G,S,Dh)
    v = split_heads(F.linear(kv, w.w_v, w.b_v), w.n_kv_heads)  # (B,G,S,Dh)
    return k, v


def multi_head_attention(
    x: Tensor, w: ProjectionWeights, bias: Tensor | None, path: str = EXPLICIT, kv: Tensor | None = None,
    rope: tuple[Tensor, Tensor] | None = None, kernel_causal: bool = False, hooks: Hooks = NO_HOOKS,
    past: tuple[Tensor, Tensor] | None = None, given_kv: tuple[Tensor, Tensor] | None = None,
) -> AttentionOutput:
    """The four steps of multi-head attention on x (B,T,D); keys/values from `kv` (B,S,D) if given; `rope`
    (cos, sin), each (B,T,Dh), rotates queries and keys by position before the scores. `kernel_causal`: the
    fused kernel applies the causal mask itself (`bias` then holds nothing else). `hooks` (hooks.py, prefixed
    "….attn."): hook_q, hook_k, hook_v, hook_rot_q, hook_rot_k, hook_pattern and hook_z may read or replace what
    passes them (head ablation: hook_z). `past` (k, v), each (B,G,P,Dh): the earlier positions' keys (after RoPE)
    and values, kept from the previous steps of a generation (the key/value cache). `given_kv` (k, v), each
    (B,G,S,Dh): keys and values already projected (cross-attention's, computed once from the encoder's output)."""
    kv = x if kv is None else kv
    # 1. project, 2. split into heads
    q = hooks("hook_q", split_heads(F.linear(x, w.w_q, w.b_q), w.n_heads), heads_first=True)  # (B,H,T,Dh)
    if given_kv is not None:
        k, v = given_kv  # (B,G,S,Dh) each
    else:
        k, v = (hooks(name, t, heads_first=True) for name, t in zip(("hook_k", "hook_v"), keys_values(w, kv),
                                                                      strict=True))
    # 2a. QK-norm (Qwen3, Gemma 3): each head's query and key vectors normed over their Dh features
    if w.q_norm is not None:
        q, k = w.q_norm(q), k if given_kv is not None else w.k_norm(k)  # (B,H,T,Dh), (B,G,S,Dh)
    # 2b. rotary position embedding (RoPE models): rotate q and k by each token's position
    if rope is not None:
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)  # (B,H,T,Dh), (B,G,S,Dh)
    if rope is not None or w.q_norm is not None:
        q, k = hooks("hook_rot_q", q, heads_first=True), hooks("hook_rot_k", k, heads_first=True)
    if past is not None:  # 2d. the key/value cache: earlier positions' keys and values come first
        k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)  # (B,G,P+S,Dh)
    # 2c. grouped-query attention: each key/value head serves its group of query heads
    k_heads, v_heads = repeat_kv(k, w.n_heads), repeat_kv(v, w.n_heads)  # (B,H,S,Dh)
    scale = w.scale if w.scale is not None else q.shape[-1] ** -0.5
    # 3. scaled dot-product attention per head
    if path == FUSED and w.softcap is None:  # no fused kernel caps its scores
        context, lse, backend = fused_kernel(q, k_heads, v_heads, bias, scale, kernel_causal)
        probs = None
        if hooks.wants("hook_pattern"):  # the exact map, rebuilt from the log-sum-exp for the hooks
            full_bias = causal_bias(q.shape[2], q.dtype, q.device) if kernel_causal else bias
            _, context = hooked_pattern(hooks, rebuild_probs(q, k_heads, lse, full_bias, scale), v_heads, context)
    else:
        context, probs = explicit_kernel(q, k_heads, v_heads, bias, scale, w.softcap)
        lse, backend = None, "explicit (matmul + softmax)"
        probs, context = hooked_pattern(hooks, probs, v_heads, context)
    context = hooks("hook_z", context, heads_first=True)  # (B,H,T,Dh)
    # 4. concatenate heads, project with W_O
    output = F.linear(merge_heads(context), w.w_o, w.b_o)  # (B,T,D)
    return AttentionOutput(output, q, k, v, context, probs, lse, backend)


def hooked_pattern(hooks: Hooks, probs: Tensor, v_heads: Tensor, context: Tensor) -> tuple[Tensor, Tensor]:
    """The map (B,H,T,S) through hook_pattern; where a hook may have changed it, the heads' outputs (B,H,T,Dh)
    recomputed from what it gave."""
    if not hooks.wants("hook_pattern"):
        return probs, context
    seen = hooks("hook_pattern", probs)
    if hooks.edits("hook_pattern"):
        context = torch.matmul(seen.to(v_heads.dtype), v_heads)  # (B,H,T,Dh)
    return seen, context
