"""The attention shape calculator: parameters counted from real modules built on the meta device
(no memory allocated, so any size is cheap), plus FLOPs, memory and KV-cache costs over length n.

Symbols: D d_model, h query heads, g key/value heads (h = MHA, 1 < g < h = GQA, 1 = MQA),
d_k query/key head dim, d_v value head dim, n sequence length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from mha_core.i18n import Explained, Worded, tr
from mha_core.messages import N_

MAX_DIM = 1 << 17  # 131,072: larger than any released model, small enough to stay meaningful


class ShapeError(Explained):
    """An impossible attention shape; the message says why in one sentence."""


@dataclass(frozen=True)
class AttentionShape:
    d_model: int
    n_heads: int
    d_k: int
    d_v: int
    n_kv_heads: int
    bias: bool
    kdim: int  # features of the key source (= d_model for self-attention)
    vdim: int  # features of the value source

    @property
    def kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return N_("multi-head (MHA)")
        return N_("multi-query (MQA)") if self.n_kv_heads == 1 else N_("grouped-query (GQA)")


def make_shape(d_model: int, n_heads: int, d_k: int | None = None, d_v: int | None = None,
               n_kv_heads: int | None = None, bias: bool = True, kdim: int | None = None,
               vdim: int | None = None) -> AttentionShape:
    """Validate and fill defaults (d_k = d_v = d_model / h, g = h, kdim = vdim = d_model)."""
    for name, value in (("d_model", d_model), (Worded(N_("number of heads")), n_heads)):
        if not isinstance(value, int) or value < 1:
            raise ShapeError(
                "size_not_positive",
                N_("The {name} must be a positive whole number, not {value}."),
                name=name,
                value=value,
            )
        if value > MAX_DIM:
            raise ShapeError(
                "size_above_limit",
                N_("The {name} {value:,} is above the calculator's limit of {max_dim:,}."),
                name=name,
                value=value,
                max_dim=MAX_DIM,
            )
    if (d_k is None or d_v is None) and d_model % n_heads:
        raise ShapeError(
            "d_model_not_divisible",
            N_("d_model {d_model} is not divisible by {n_heads} heads; set d_k and d_v explicitly."),
            d_model=d_model,
            n_heads=n_heads,
        )
    d_k = d_model // n_heads if d_k is None else d_k
    d_v = d_model // n_heads if d_v is None else d_v
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    kdim, vdim = kdim or d_model, vdim or d_model
    checks = (("d_k", d_k), ("d_v", d_v), (Worded(N_("number of key/value heads")), n_kv_heads), ("kdim", kdim),
              ("vdim", vdim))
    for name, value in checks:
        if not isinstance(value, int) or value < 1 or value > MAX_DIM:
            raise ShapeError(
                "size_out_of_range",
                N_("The {name} must be a whole number from 1 to {max_dim:,}, not {value}."),
                name=name,
                max_dim=MAX_DIM,
                value=value,
            )
    if n_heads % n_kv_heads:
        raise ShapeError(
            "kv_heads_do_not_divide",
            N_("{n_heads} query heads cannot be shared evenly by {n_kv_heads} key/value heads."),
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
        )
    return AttentionShape(d_model, n_heads, d_k, d_v, n_kv_heads, bias, kdim, vdim)


class ShapedAttention(nn.Module):
    """The four projections of any attention shape, as real `nn.Linear` modules."""

    def __init__(self, s: AttentionShape, device: str | torch.device = "meta") -> None:
        super().__init__()
        self.q_proj = nn.Linear(s.d_model, s.n_heads * s.d_k, bias=s.bias, device=device)
        self.k_proj = nn.Linear(s.kdim, s.n_kv_heads * s.d_k, bias=s.bias, device=device)
        self.v_proj = nn.Linear(s.vdim, s.n_kv_heads * s.d_v, bias=s.bias, device=device)
        self.o_proj = nn.Linear(s.n_heads * s.d_v, s.d_model, bias=s.bias, device=device)


@dataclass(frozen=True)
class ShapeCount:
    per_matrix: dict[str, int]  # "W_Q", "b_Q", … counted from ShapedAttention
    total: int
    torch_mha_total: int | None  # nn.MultiheadAttention's own count, where it can express the shape


def count_shape(s: AttentionShape) -> ShapeCount:
    module = ShapedAttention(s)
    per_matrix = {}
    for proj, letter in (("q_proj", "Q"), ("k_proj", "K"), ("v_proj", "V"), ("o_proj", "O")):
        linear = getattr(module, proj)
        per_matrix[f"W_{letter}"] = linear.weight.numel()
        per_matrix[f"b_{letter}"] = linear.bias.numel() if linear.bias is not None else 0
    total = sum(p.numel() for p in module.parameters())
    return ShapeCount(per_matrix, total, torch_mha_count(s))


def torch_mha_count(s: AttentionShape) -> int | None:
    """nn.MultiheadAttention's parameter count, when it can express the shape (MHA, d_k = d_v = D/h)."""
    if s.n_kv_heads != s.n_heads or s.d_k * s.n_heads != s.d_model or s.d_v != s.d_k:
        return None
    mha = nn.MultiheadAttention(s.d_model, s.n_heads, bias=s.bias, kdim=s.kdim, vdim=s.vdim, device="meta")
    return sum(p.numel() for p in mha.parameters())


def single_head_equivalent(s: AttentionShape) -> AttentionShape:
    """One head of width h*d_k: the same projections, so the same parameters (for MHA; for GQA/MQA
    the single head keeps one key/value head, so it is the MQA-like equivalent)."""
    return AttentionShape(s.d_model, 1, s.n_heads * s.d_k, s.n_heads * s.d_v, 1, s.bias, s.kdim, s.vdim)


# -- costs over sequence length -------------------------------------------------------------------
def projection_flops(s: AttentionShape, n: int) -> int:
    """Multiply-adds x 2 for the four projections of n tokens (grows with n)."""
    qkv = s.d_model * s.n_heads * s.d_k + s.kdim * s.n_kv_heads * s.d_k + s.vdim * s.n_kv_heads * s.d_v
    return 2 * n * (qkv + s.n_heads * s.d_v * s.d_model)


def score_flops(s: AttentionShape, n: int) -> int:
    """QK^T and probs @ V for n tokens: 2 n^2 h (d_k + d_v) (grows with n^2)."""
    return 2 * n * n * s.n_heads * (s.d_k + s.d_v)


def crossover_length(s: AttentionShape) -> float:
    """The n at which attention-score FLOPs equal projection FLOPs (2·D for standard MHA)."""
    return projection_flops(s, 1) / (2 * s.n_heads * (s.d_k + s.d_v))


def attention_matrix_bytes(s: AttentionShape, n: int, bytes_per_value: int = 4) -> tuple[int, int]:
    """Per layer and sequence: (explicit: the h n x n probabilities, fused: h n log-sum-exps)."""
    return s.n_heads * n * n * bytes_per_value, s.n_heads * n * 4


def kv_cache_bytes_per_token(s: AttentionShape, n_layers: int, bytes_per_value: int = 2) -> int:
    """Keys and values kept per generated token (fp16 by default), over all layers."""
    return n_layers * s.n_kv_heads * (s.d_k + s.d_v) * bytes_per_value


def two_bias_miscount(shape: AttentionShape) -> int | None:
    """The count some tutorials print for a standard multi-head layer with biases, 4·D² + 2·D: all four weight
    matrices but only two of the four bias vectors (1,049,600 for d_model 512); None for other shapes."""
    d = shape.d_model
    standard = shape.n_kv_heads == shape.n_heads and shape.d_k * shape.n_heads == d == shape.kdim == shape.vdim
    return 4 * d * d + 2 * d if standard and shape.bias and shape.d_v == shape.d_k else None


def count_walk(s: AttentionShape) -> list[str]:
    """The parameter count as steps a lesson walks through (the seeds' example: d_model 512, h = 8, d_k 64 gives
    1,050,624), every number read from the counted modules; in the running context's language."""
    count = count_shape(s)
    m = count.per_matrix
    steps = []
    for letter, width, out in (("Q", s.n_heads * s.d_k, s.d_model), ("K", s.n_kv_heads * s.d_k, s.kdim),
                               ("V", s.n_kv_heads * s.d_v, s.vdim)):
        heads = s.n_heads if letter == "Q" else s.n_kv_heads
        steps.append(tr("W_{letter}: {rows} × {cols} = {weights:,} weights (the {heads} heads' {rows} × {per_head} "
                        "slices side by side), plus {bias:,} biases.", letter=letter, rows=out, cols=width,
                        weights=m[f"W_{letter}"], heads=heads, per_head=width // heads, bias=m[f"b_{letter}"]))
    steps.append(tr("W_O: {rows} × {cols} = {weights:,} weights (the concatenated heads back to d_model), plus "
                    "{bias:,} biases.", rows=s.n_heads * s.d_v, cols=s.d_model, weights=m["W_O"], bias=m["b_O"]))
    steps.append(tr("Total: {parts} = {total:,} parameters.", parts=" + ".join(f"{v:,}" for v in m.values() if v),
                    total=count.total))
    return steps
