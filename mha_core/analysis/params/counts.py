"""Parameter accounting, always counted from real modules (`numel()`), never from a formula alone.

Shapes: L layers, H heads, D d_model, Dh head dim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from mha_core.analysis.params.shapes import AttentionShape, count_shape, make_shape
from mha_core.engine.loading.model import LoadedModel
from mha_core.i18n import tr
from mha_core.messages import N_

# What each family calls its modules (transformers' names) -> the part they hold. GPT-2's c_attn, GPT-NeoX's and
# BLOOM's query_key_value and Phi-3's qkv_proj hold W_Q, W_K and W_V at once; the other families store them apart.
PROJECTIONS = {
    "attention.self.query": "Q", "attention.q_lin": "Q", "self_attn.q_proj": "Q",
    "attention.self.key": "K", "attention.k_lin": "K", "self_attn.k_proj": "K",
    "attention.self.value": "V", "attention.v_lin": "V", "self_attn.v_proj": "V",
    "attention.output.dense": "O", "attention.out_lin": "O", "self_attn.o_proj": "O", "attn.c_proj": "O",
    "attention.dense": "O", "self_attention.dense": "O", "self_attn.out_proj": "O",
    "attn.c_attn": "QKV", "attention.query_key_value": "QKV", "self_attention.query_key_value": "QKV",
    "self_attn.qkv_proj": "QKV",
    "SelfAttention.q": "Q", "SelfAttention.k": "K", "SelfAttention.v": "V", "SelfAttention.o": "O",  # T5
    "attention.q_proj": "Q", "attention.k_proj": "K", "attention.v_proj": "V", "attention.o_proj": "O",  # ViT, DINOv2
}
# An encoder–decoder's decoder layer holds a second attention block over the encoder's output (BART's, Whisper's and
# Marian's encoder_attn, T5's EncDecAttention): counted apart, as cross-attention.
CROSS_PROJECTIONS = {"encoder_attn.q_proj": "Q", "encoder_attn.k_proj": "K", "encoder_attn.v_proj": "V",
                     "encoder_attn.out_proj": "O", "EncDecAttention.q": "Q", "EncDecAttention.k": "K",
                     "EncDecAttention.v": "V", "EncDecAttention.o": "O"}
ATTENTION, CROSS_ATTENTION = N_("attention"), N_("cross-attention")
RELATIVE_BIAS = "relative_attention_bias"  # T5's learned bias per relative-position bucket and head
STACKS = ("encoder", "decoder")
T5_SUBLAYER = re.compile(r"^layer\.\d+\.")  # T5 numbers a block's parts: layer.0 attention, layer.1 (cross-)…
NORMS = ("LayerNorm", "layer_norm", "layernorm", "ln_1", "ln_2", "ln_f", "norm")
FFN_IN, FFN_OUT, WORD, POSITION = N_("FFN in"), N_("FFN out"), N_("word embeddings"), N_("position embeddings")
MLP_NAMES = {  # the parts are marked for the catalogue: the Parameters page shows them translated
    "intermediate.dense": FFN_IN, "output.dense": FFN_OUT, "ffn.lin1": FFN_IN, "ffn.lin2": FFN_OUT,
    "mlp.c_fc": FFN_IN, "mlp.c_proj": FFN_OUT, "mlp.up_proj": N_("MLP up"), "mlp.gate_proj": N_("MLP gate"),
    "mlp.down_proj": N_("MLP down"), "mlp.gate_up_proj": N_("MLP gate and up"), "mlp.dense_h_to_4h": FFN_IN,
    "mlp.dense_4h_to_h": FFN_OUT, "fc1": FFN_IN, "fc2": FFN_OUT, "DenseReluDense.wi": FFN_IN,
    "DenseReluDense.wo": FFN_OUT, "DenseReluDense.wi_0": N_("MLP gate"), "DenseReluDense.wi_1": N_("MLP up"),
    "mlp.fc1": FFN_IN, "mlp.fc2": FFN_OUT,
}
PATCHES = N_("patch embedding (convolution)")
EMBEDDING_NAMES = {"word_embeddings": WORD, "embed_tokens": WORD, "shared": WORD, "conv1": N_("convolution"),
                   "conv2": N_("convolution"), "projection": PATCHES, "patch_embedding": PATCHES,
                   "position_embedding": POSITION, "wte": WORD, "embed_in": WORD,
                   "position_embeddings": POSITION, "wpe": POSITION, "embed_positions": POSITION,
                   "token_type_embeddings": N_("token type embeddings")}
OWNERS = {  # (W_O: columns rather than rows, shared by a key/value group) -> which head owns the slice
    (False, False): N_("rows {span} (head h)"), (False, True): N_("rows {span} (key/value head g)"),
    (True, False): N_("columns {span} (head h)"), (True, True): N_("columns {span} (key/value head g)"),
}
LAYER_NAME = re.compile(r"^(?:[\w.]*?\.)?(?:layer|layers|h|block)\.(\d+)\.(.+)\.(weight|bias|lambda1)$")
TOKEN_PARAMETERS = {  # a Vision Transformer's embeddings hold tokens of their own, and its positions, as parameters
    "cls_token": N_("[CLS] token"), "class_embedding": N_("[CLS] token"), "distillation_token": N_("[DIST] token"),
    "register_tokens": N_("register tokens"), "mask_token": N_("mask token"), "position_embeddings": POSITION}
LAYER_SCALE = N_("layer scale")  # DINOv2: each sub-layer's output times λ


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
        """Every attention block's parameters (an encoder–decoder's cross-attention included)."""
        return sum(r.count for r in self.rows if r.kind in (ATTENTION, CROSS_ATTENTION))

    @property
    def attention_has_biases(self) -> bool:
        """Whether any attention block holds biases (BERT's do; Gemma's, SmolLM2's and Llama's have none)."""
        return any(r.name.endswith(".bias") for r in self.rows if r.kind in (ATTENTION, CROSS_ATTENTION))

    @property
    def cross_attention_total(self) -> int:
        return sum(r.count for r in self.rows if r.kind == CROSS_ATTENTION)

    def group_total(self, group: str) -> int:
        return sum(r.count for r in self.rows if r.group == group)

    def part_total(self, part: str) -> int:
        return sum(r.count for r in self.rows if r.part == part)

    def block_totals(self, group: str) -> dict[str, int]:
        """One layer's attention blocks counted from its modules: {"attention": …, "cross-attention": …}."""
        totals = {kind: sum(r.count for r in self.rows if r.group == group and r.kind == kind)
                  for kind in (ATTENTION, CROSS_ATTENTION)}
        return {kind: total for kind, total in totals.items() if total}


def layer_group(loaded: LoadedModel, layer: int, stack: str = "encoder") -> str:
    """A layer's group in model_breakdown: "layer 3", or an encoder–decoder's "encoder layer 3" (`stack`)."""
    return f"{stack} layer {layer}" if loaded.encoder_decoder else f"layer {layer}"


def stack_of(name: str) -> str:
    """An encoder–decoder's parameter's stack ("encoder", "decoder"), from its dotted name; "" for shared ones."""
    return next((part for part in name.split(".") if part in STACKS), "")


def classify(name: str, stacks: bool = False) -> tuple[str, str, str]:
    """(group, part, kind) of a parameter of any supported family's base model, from its dotted name; with `stacks`
    (an encoder–decoder) the groups name their stack: "encoder layer 0", "decoder layer 0", "decoder final norm"."""
    stack = stack_of(name) if stacks else ""
    group, part, kind = in_layer(name) or outside_layers(name)
    return (f"{stack} {group}" if stack and group != "embeddings" else group), part, kind


def in_layer(name: str) -> tuple[str, str, str] | None:
    match = LAYER_NAME.match(name)
    if match is None:
        return None
    index, module, param = match.groups()
    module, group = T5_SUBLAYER.sub("", module), f"layer {index}"
    for table, kind in ((PROJECTIONS, ATTENTION), (CROSS_PROJECTIONS, CROSS_ATTENTION)):
        if module in table:
            return group, f"{'W' if param == 'weight' else 'b'}_{table[module]}", kind
    if module.endswith(RELATIVE_BIAS):
        return group, N_("relative position bias"), ATTENTION
    if param == "lambda1":
        return group, f"{module} λ", LAYER_SCALE
    if any(n in module.split(".")[-1] for n in NORMS):
        return group, f"{module} {'γ' if param == 'weight' else 'β'}", "layernorm"
    part = MLP_NAMES.get(module, module)
    return group, f"{part} {'W' if param == 'weight' else 'b'}", "feed-forward"


def outside_layers(name: str) -> tuple[str, str, str]:
    """Embeddings (Whisper's convolutions among them), the embedding norm, the final norm of pre-norm stacks, BERT's
    pooler."""
    module, _, param = name.rpartition(".")
    leaf = module.split(".")[-1]
    if param in TOKEN_PARAMETERS:
        return "embeddings", TOKEN_PARAMETERS[param], "embedding"
    if module.startswith("pooler"):
        return "pooler", name.removeprefix("pooler.dense."), "pooler"
    if leaf in EMBEDDING_NAMES:
        return "embeddings", EMBEDDING_NAMES[leaf], "embedding"
    part = f"{leaf} {'γ' if param == 'weight' else 'β'}"
    before = "embedding" in module or leaf.startswith("pre_lay")  # CLIP's pre_layrnorm: right after the embeddings
    return ("embeddings", f"embedding {part}", "layernorm") if before else ("final norm", part, "layernorm")


def model_breakdown(loaded: LoadedModel) -> ModelBreakdown:
    """Every parameter of the model by group (embeddings, each layer's attention and MLP, norms) and part (W_Q, …)."""
    rows = []
    for name, p in loaded.model.named_parameters():
        group, part, kind = classify(name, stacks=loaded.encoder_decoder)
        rows.append(ModelRow(group, part, kind, tuple(p.shape), p.numel(), name))
    return ModelBreakdown(rows=tuple(rows), total=sum(r.count for r in rows))


@dataclass(frozen=True)
class HeadSlice:
    """One head's slice of one projection of a layer, counted from the module: a bias only where the module has
    one. Slices are of the weight as stored (out, in): W_Q, W_K, W_V by rows, W_O by columns."""

    matrix: str  # "W_Q", "W_K", "W_V" or "W_O"
    full_shape: tuple[int, int]  # (out, in)
    first: int  # slice s owns rows (W_O: columns) first·s … first·s + first - 1
    slice_shape: tuple[int, int]
    weights: int
    bias: int  # the slice's bias entries; 0 without a bias, and for W_O (its bias belongs to no head)
    slices: int  # slices that tile the matrix: H, or G for W_K and W_V with grouped-query attention
    serves: int  # query heads each slice serves (H / G for W_K and W_V with grouped-query attention, else 1)

    @property
    def count(self) -> int:
        return self.weights + self.bias

    @property
    def owner(self) -> str:
        letter = "g" if self.serves > 1 else "h"
        span = f"{letter}·{self.first} … {letter}·{self.first}+{self.first - 1}"
        template = OWNERS[(self.matrix == "W_O", self.serves > 1)]
        return tr(template, span=span)


def biased_projections(loaded: LoadedModel, layer: int) -> set[str]:
    """Which of Q, K, V, O have a bias in this layer's modules (GPT-2's fused c_attn bias counts for Q, K, V)."""
    parts = {row.part for row in model_breakdown(loaded).rows if row.group == layer_group(loaded, layer)}
    fused = "b_QKV" in parts
    return {letter for letter in "QKVO" if f"b_{letter}" in parts or (fused and letter != "O")}


def head_slices(loaded: LoadedModel, layer: int = 0) -> tuple[HeadSlice, ...]:
    """W_Q, W_K, W_V, W_O of `layer` cut per head, from the real weights' shapes."""
    a, hw, biased = loaded.layers[layer].attention, loaded.head_weights(layer), biased_projections(loaded, layer)
    h, g, dh = loaded.n_heads, loaded.n_kv_heads, loaded.head_dim
    out = []
    for letter, full, per, slices in (("Q", a.w_q, hw.w_q, h), ("K", a.w_k, hw.w_k, g), ("V", a.w_v, hw.w_v, g)):
        bias = dh if letter in biased else 0
        out.append(HeadSlice(f"W_{letter}", tuple(full.shape), dh, tuple(per[0].T.shape), per[0].numel(), bias,
                             slices, h // slices))
    out.append(HeadSlice("W_O", tuple(a.w_o.shape), dh, tuple(hw.w_o[0].T.shape), hw.w_o[0].numel(), 0, h, 1))
    return tuple(out)


@dataclass(frozen=True)
class HeadCount:
    """One head's slices: W_Q's rows (+ bias), the W_K and W_V rows (+ biases) of the key/value head serving it
    (shared by `kv_shared_by` query heads), W_O's columns."""

    q: int
    k: int
    v: int
    o: int  # W_O's bias is shared by all heads and belongs to none
    kv_shared_by: int

    @property
    def total(self) -> int:
        return self.q + self.k + self.v + self.o


def head_count(loaded: LoadedModel, layer: int = 0) -> HeadCount:
    """Counted from the per-head slices of the real modules (biases only where they exist)."""
    q, k, v, o = head_slices(loaded, layer)
    return HeadCount(q.count, k.count, v.count, o.count, k.serves)


@torch.inference_mode()
def head_weight_norms(loaded: LoadedModel) -> tuple[torch.Tensor, torch.Tensor]:
    """Frobenius norms of W_Q^h W_K^h^T (what a head matches) and W_V^h W_O^h (what it writes), (L,H) each."""
    qk, ov = [], []
    group = loaded.n_heads // loaded.n_kv_heads  # query heads per key/value head (GQA, MQA; 1 for MHA)
    for layer in range(loaded.n_layers):
        hw = loaded.head_weights(layer)
        w_k, w_v = (w.repeat_interleave(group, dim=0) for w in (hw.w_k, hw.w_v))  # (G,D,Dh) -> (H,D,Dh)
        qk.append(torch.linalg.matrix_norm(hw.w_q @ w_k.transpose(1, 2)))  # (H,D,D) -> (H,)
        ov.append(torch.linalg.matrix_norm(w_v @ hw.w_o))  # (H,D,D) -> (H,)
    return torch.stack(qk), torch.stack(ov)  # (L,H), (L,H)


@dataclass(frozen=True)
class CalculatorCheck:
    """The shape calculator's count for a model's attention against what the model's layer 0 modules hold."""

    shape: AttentionShape
    calculated: int  # weights of W_Q, W_K, W_V, W_O by the calculator
    counted: int  # the same, summed from layer 0's modules

    @property
    def agrees(self) -> bool:
        return self.calculated == self.counted


def attention_shape(loaded: LoadedModel) -> AttentionShape:
    """The model's own attention shape from its layer 0 modules: d_k from W_Q's rows per query head, d_v from W_V's
    rows per key/value head (Gemma 3 270M: 4 query heads × 256 on d_model 640, 1 key/value head — never d_model / h)."""
    a = loaded.layers[0].attention
    return make_shape(loaded.d_model, loaded.n_heads, a.w_q.shape[0] // loaded.n_heads,
                      a.w_v.shape[0] // loaded.n_kv_heads, loaded.n_kv_heads, bias=False)


def calculator_check(loaded: LoadedModel, breakdown: ModelBreakdown) -> CalculatorCheck:
    shape = attention_shape(loaded)
    counted = sum(r.count for r in breakdown.rows
                  if r.group == layer_group(loaded, 0) and r.kind == "attention" and r.part.startswith("W"))
    return CalculatorCheck(shape, count_shape(shape).total, counted)
