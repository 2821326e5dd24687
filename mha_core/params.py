"""Parameter accounting, always counted from real modules (`numel()`), never from a formula alone.

Shapes: L layers, H heads, D d_model, Dh head dim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from mha_core.model import LoadedModel

# What each family calls its modules (transformers' names) -> the part they hold. GPT-2's c_attn holds
# W_Q, W_K and W_V at once (one Conv1D); every other family stores them apart.
PROJECTIONS = {
    "attention.self.query": "Q", "attention.q_lin": "Q", "self_attn.q_proj": "Q",
    "attention.self.key": "K", "attention.k_lin": "K", "self_attn.k_proj": "K",
    "attention.self.value": "V", "attention.v_lin": "V", "self_attn.v_proj": "V",
    "attention.output.dense": "O", "attention.out_lin": "O", "self_attn.o_proj": "O", "attn.c_proj": "O",
    "attn.c_attn": "QKV",
}
NORMS = ("LayerNorm", "layer_norm", "layernorm", "ln_1", "ln_2", "ln_f", "norm")
MLP_NAMES = {
    "intermediate.dense": "FFN in", "output.dense": "FFN out", "ffn.lin1": "FFN in", "ffn.lin2": "FFN out",
    "mlp.c_fc": "FFN in", "mlp.c_proj": "FFN out", "mlp.up_proj": "MLP up", "mlp.gate_proj": "MLP gate",
    "mlp.down_proj": "MLP down",
}
EMBEDDING_NAMES = {"word_embeddings": "word embeddings", "embed_tokens": "word embeddings", "wte": "word embeddings",
                   "position_embeddings": "position embeddings", "wpe": "position embeddings",
                   "token_type_embeddings": "token type embeddings"}
LAYER_NAME = re.compile(r"^(?:[\w.]*?\.)?(?:layer|layers|h)\.(\d+)\.(.+)\.(weight|bias)$")
ATTENTION_PARTS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O", "W_QKV", "b_QKV")


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

    group: str  # "embeddings", "layer 0" … "layer L-1", "final norm", "pooler"
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
    """(group, part, kind) of a parameter of any supported family's base model, from its dotted name."""
    match = LAYER_NAME.match(name)
    if match is None:
        return outside_layers(name)
    index, module, param = match.groups()
    letter = PROJECTIONS.get(module)
    if letter is not None:
        return f"layer {index}", f"{'W' if param == 'weight' else 'b'}_{letter}", "attention"
    if any(n in module.split(".")[-1] for n in NORMS):
        return f"layer {index}", f"{module} {'γ' if param == 'weight' else 'β'}", "layernorm"
    part = MLP_NAMES.get(module, module)
    return f"layer {index}", f"{part} {'W' if param == 'weight' else 'b'}", "feed-forward"


def outside_layers(name: str) -> tuple[str, str, str]:
    """Embeddings, the embedding norm, the final norm of pre-norm decoders, BERT's pooler."""
    module, _, param = name.rpartition(".")
    leaf = module.split(".")[-1]
    if module.startswith("pooler"):
        return "pooler", name.removeprefix("pooler.dense."), "pooler"
    if leaf in EMBEDDING_NAMES:
        return "embeddings", EMBEDDING_NAMES[leaf], "embedding"
    part = f"{leaf} {'γ' if param == 'weight' else 'β'}"
    return ("embeddings", f"embedding {part}", "layernorm") if "embeddings" in module else ("final norm", part,
                                                                                           "layernorm")


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
