"""Parameter accounting, always counted from real modules (`numel()`), never from a formula alone.

Shapes: L layers, H heads, D d_model, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_core.model import LoadedModel

# Display names for the parts of a transformers BertLayer / BertModel.
BERT_PART_NAMES = {
    "attention.self.query.weight": "W_Q", "attention.self.query.bias": "b_Q",
    "attention.self.key.weight": "W_K", "attention.self.key.bias": "b_K",
    "attention.self.value.weight": "W_V", "attention.self.value.bias": "b_V",
    "attention.output.dense.weight": "W_O", "attention.output.dense.bias": "b_O",
    "attention.output.LayerNorm.weight": "attention LayerNorm γ",
    "attention.output.LayerNorm.bias": "attention LayerNorm β",
    "intermediate.dense.weight": "FFN W_in", "intermediate.dense.bias": "FFN b_in",
    "output.dense.weight": "FFN W_out", "output.dense.bias": "FFN b_out",
    "output.LayerNorm.weight": "output LayerNorm γ", "output.LayerNorm.bias": "output LayerNorm β",
}
EMBEDDING_PART_NAMES = {
    "word_embeddings.weight": "word embeddings", "position_embeddings.weight": "position embeddings",
    "token_type_embeddings.weight": "token type embeddings",
    "LayerNorm.weight": "embedding LayerNorm γ", "LayerNorm.bias": "embedding LayerNorm β",
}
ATTENTION_PARTS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")


@dataclass(frozen=True)
class ParamRow:
    name: str  # dotted parameter name, e.g. "encoder.layer.0.attention.self.query.weight"
    shape: tuple[int, ...]
    count: int


@dataclass(frozen=True)
class ParameterCount:
    rows: tuple[ParamRow, ...]  # one per named parameter, in module order
    total: int


def count_parameters(module: torch.nn.Module) -> ParameterCount:
    """Every named matrix and bias of `module` with its count; shared parameters counted once."""
    rows = tuple(ParamRow(n, tuple(p.shape), p.numel()) for n, p in module.named_parameters())
    return ParameterCount(rows=rows, total=sum(r.count for r in rows))


@dataclass(frozen=True)
class ModelRow:
    """One named parameter of the loaded model, grouped for tables and plots."""

    group: str  # "embeddings", "layer 0" … "layer L-1", "pooler"
    part: str  # display name, e.g. "W_Q", "FFN W_in", "word embeddings"
    kind: str  # "attention", "layernorm", "feed-forward", "embedding", "pooler"
    shape: tuple[int, ...]
    count: int
    name: str  # the module's own dotted name


@dataclass(frozen=True)
class ModelBreakdown:
    rows: tuple[ModelRow, ...]
    total: int  # == sum(p.numel() for p in model.parameters())

    @property
    def attention_total(self) -> int:
        return sum(r.count for r in self.rows if r.kind == "attention")

    def group_total(self, group: str) -> int:
        return sum(r.count for r in self.rows if r.group == group)


def classify(name: str) -> tuple[str, str, str]:
    """(group, part, kind) for a BertModel parameter name."""
    if name.startswith("embeddings."):
        part = EMBEDDING_PART_NAMES.get(name.removeprefix("embeddings."), name)
        return "embeddings", part, "layernorm" if "LayerNorm" in name else "embedding"
    if name.startswith("pooler."):
        return "pooler", name.removeprefix("pooler.dense."), "pooler"
    _, _, index, rest = name.split(".", 3)  # encoder.layer.{i}.{rest}
    part = BERT_PART_NAMES.get(rest, rest)
    kind = "attention" if part in ATTENTION_PARTS else "layernorm" if "LayerNorm" in part else "feed-forward"
    return f"layer {index}", part, kind


def model_breakdown(loaded: LoadedModel) -> ModelBreakdown:
    rows = []
    for name, p in loaded.model.named_parameters():
        group, part, kind = classify(name)
        rows.append(ModelRow(group, part, kind, tuple(p.shape), p.numel(), name))
    return ModelBreakdown(rows=tuple(rows), total=sum(r.count for r in rows))


@dataclass(frozen=True)
class HeadCount:
    """One head's slice of the projections: rows of W_Q/W_K/W_V (+ bias), columns of W_O."""

    q: int
    k: int
    v: int
    o: int  # W_O's bias is shared by all heads and belongs to none

    @property
    def total(self) -> int:
        return self.q + self.k + self.v + self.o


def head_count(loaded: LoadedModel, layer: int = 0, head: int = 0) -> HeadCount:
    """Counted from the per-head slices of the real weights."""
    hw = loaded.head_weights(layer)
    return HeadCount(
        q=hw.w_q[head].numel() + hw.b_q[head].numel(),
        k=hw.w_k[head].numel() + hw.b_k[head].numel(),
        v=hw.w_v[head].numel() + hw.b_v[head].numel(),
        o=hw.w_o[head].numel(),
    )


@torch.inference_mode()
def head_weight_norms(loaded: LoadedModel) -> tuple[torch.Tensor, torch.Tensor]:
    """Frobenius norms of W_Q^h W_K^h^T (what a head matches) and W_V^h W_O^h (what it writes), (L,H) each."""
    qk, ov = [], []
    for layer in range(loaded.n_layers):
        hw = loaded.head_weights(layer)
        qk.append(torch.linalg.matrix_norm(hw.w_q @ hw.w_k.transpose(1, 2)))  # (H,D,D) -> (H,)
        ov.append(torch.linalg.matrix_norm(hw.w_v @ hw.w_o))  # (H,D,D) -> (H,)
    return torch.stack(qk), torch.stack(ov)  # (L,H), (L,H)
