"""The numbers the Walkthrough writes at each step (shapes, widths and the scores' scale), read from one layer's own
weights, and the sentences that state them in the page's language.

Shapes: T tokens, D d_model, H query heads, G key/value heads, Dh head dim (= d_k). H·Dh need not be D.
"""

from __future__ import annotations

from dataclasses import dataclass

from mha_core.engine.loading.model import LoadedModel
from mha_core.i18n import tr


@dataclass(frozen=True)
class StepShapes:
    """The numbers the Walkthrough writes at each step, read from the layer's own weights: the heads are H·d_k wide,
    which need not be d_model (Gemma 3 270M: 4 × 256 = 1024 heads on a 640-wide stream), and the scale is the
    model's own (Gemma: 1/√query_pre_attn_scalar; T5: 1)."""

    tokens: int  # T
    d_model: int  # D: the stream's width, W_Q's input and W_O's output
    heads: int  # H query heads
    kv_heads: int  # G key/value heads
    d_k: int  # Dh: one head's width
    heads_width: int  # H·Dh: W_Q's output, the concatenated heads, W_O's input
    kv_width: int  # G·Dh: W_K's and W_V's output
    out_bias: bool  # W_O adds a bias b_O
    scale: float  # the scores' factor
    scale_rule: str  # SQRT_DK, PRE_ATTN_SCALAR, UNSCALED or CONSTANT
    scale_root: float | None  # the number under the root (d_k, query_pre_attn_scalar); None otherwise

    @property
    def scale_is_sqrt_dk(self) -> bool:
        """The scale equals 1/√d_k, whatever rule the model names it by (Gemma 3 270M: 1/√256 both ways)."""
        return abs(self.scale - self.d_k ** -0.5) < 1e-9


SQRT_DK, PRE_ATTN_SCALAR, UNSCALED, CONSTANT = "1/sqrt(d_k)", "1/sqrt(query_pre_attn_scalar)", "1", "constant"


def step_shapes(model: LoadedModel, layer: int, tokens: int) -> StepShapes:
    """The shapes of `layer`'s attention on `tokens` pieces, from its weight matrices (nn.Linear's (out, in))."""
    w = model.layers[layer].attention
    heads_width, d_model = w.w_q.shape  # (H·Dh, D)
    if tuple(w.w_o.shape) != (d_model, heads_width):
        raise ValueError(f"W_O is {tuple(w.w_o.shape)}, not ({d_model}, {heads_width})")
    d_k = heads_width // w.n_heads
    scale = w.scale if w.scale is not None else d_k ** -0.5
    pre_attn = getattr(model.config.get_text_config(), "query_pre_attn_scalar", None)
    if w.scale is None:
        rule, root = SQRT_DK, float(d_k)
    elif pre_attn is not None and abs(scale - float(pre_attn) ** -0.5) < 1e-9:
        rule, root = PRE_ATTN_SCALAR, float(pre_attn)
    else:
        rule, root = (UNSCALED if scale == 1.0 else CONSTANT), None
    return StepShapes(tokens=tokens, d_model=d_model, heads=w.n_heads, kv_heads=int(w.n_kv_heads), d_k=d_k,
                      heads_width=heads_width, kv_width=int(w.w_k.shape[0]), out_bias=bool(w.b_o.abs().max() > 0),
                      scale=float(scale), scale_rule=rule, scale_root=root)


def scale_name(s: StepShapes) -> str:
    """The scale as the model defines it: 1/√d_k, 1/√query_pre_attn_scalar, 1 (T5) or its number."""
    return {SQRT_DK: "1/√d_k", PRE_ATTN_SCALAR: "1/√query_pre_attn_scalar", UNSCALED: "1"}.get(s.scale_rule,
                                                                                             f"{s.scale:.4f}")


def softmax_formula(s: StepShapes) -> str:
    """The weights' formula with the model's own scale."""
    return {SQRT_DK: "softmax(QKᵀ/√d_k)", PRE_ATTN_SCALAR: "softmax(QKᵀ/√query_pre_attn_scalar)",
            UNSCALED: "softmax(QKᵀ+B)"}.get(s.scale_rule, f"softmax(QKᵀ·{s.scale:.4f})")


def projection_sentence(s: StepShapes, pre_norm: bool) -> str:
    """Step 1: X times W_Q, W_K, W_V, each with its own width."""
    reads = tr("after the layer's norm (a pre-norm model)") if pre_norm else tr("the layer's input")
    text = tr("X (batch, seq_len, d_model) = (1, {t}, {d}), {reads}, is multiplied by W_Q ({d} × {width_q}) and by "
              "W_K, W_V ({d} × {width_kv} each): Q is reshaped to (batch, h, seq_len, d_k) = (1, {h}, {t}, {dk})",
              t=s.tokens, d=s.d_model, reads=reads, width_q=s.heads_width, width_kv=s.kv_width, h=s.heads, dk=s.d_k)
    g, h = s.kv_heads, s.heads
    shared = (tr("one key/value head serving all the query heads (multi-query attention)") if g == 1 else
              tr("{g} key/value heads, each serving {group} query heads (grouped-query attention)", g=g, group=h // g))
    return text + (tr(", K and V to (1, {g}, {t}, {dk}): {shared}.", g=g, t=s.tokens, dk=s.d_k, shared=shared)
                   if g < h else tr(", K and V likewise."))


def scale_sentence(s: StepShapes) -> str:
    """Step 2: the scores, scaled as this model scales them, named by the model's rule."""
    t, dk = s.tokens, s.d_k
    if s.scale_rule == SQRT_DK:
        return tr("Scores QKᵀ ({t} × {t}), scaled by 1/√d_k = 1/√{dk} = {scale:.4f}, softmax over each row, then the "
                  "weighted sum of the values.", t=t, dk=dk, scale=s.scale)
    if s.scale_rule == PRE_ATTN_SCALAR:
        relation = (tr("here equal to 1/√d_k = 1/√{dk}", dk=dk) if s.scale_is_sqrt_dk
                    else tr("not 1/√d_k = 1/√{dk} = {value:.4f}", dk=dk, value=dk ** -0.5))
        return tr("Scores QKᵀ ({t} × {t}), scaled by the model's 1/√query_pre_attn_scalar = 1/√{root:g} = {scale:.4f} "
                  "({relation}), softmax over each row, then the weighted sum of the values.", t=t,
                  root=s.scale_root, scale=s.scale, relation=relation)
    if s.scale_rule == UNSCALED:
        return tr("Scores QKᵀ ({t} × {t}), not scaled (the scale is 1: T5 folds 1/√d_k into its weights' "
                  "initialisation), plus each head's relative-position bias, softmax over each row, then the weighted "
                  "sum of the values.", t=t)
    return tr("Scores QKᵀ ({t} × {t}), scaled by the model's {scale:.4f} (not 1/√d_k = 1/√{dk}), softmax over each "
              "row, then the weighted sum of the values.", t=t, dk=dk, scale=s.scale)


def concat_sentence(s: StepShapes) -> str:
    """Step 3: the heads side by side, H·d_k wide."""
    return tr("(1, {h}, {t}, {dk}) → transpose → (1, {t}, {h}, {dk}) → reshape → (1, {t}, {width}): head i fills "
              "columns {dk}·i … {dk}·i + {dk2}.", h=s.heads, t=s.tokens, dk=s.d_k, width=s.heads_width, dk2=s.d_k - 1)


def output_sentence(s: StepShapes) -> str:
    """Step 4: W_O takes the H·d_k-wide heads back to d_model."""
    if s.out_bias:
        return tr("(1, {t}, {width}) × W_Oᵀ ({width} × {d}) + b_O → (1, {t}, {d}): back to d_model, mixing the heads.",
                  t=s.tokens, width=s.heads_width, d=s.d_model)
    return tr("(1, {t}, {width}) × W_Oᵀ ({width} × {d}) → (1, {t}, {d}): back to d_model, mixing the heads (this "
              "model's W_O has no bias).", t=s.tokens, width=s.heads_width, d=s.d_model)


def scale_note(s: StepShapes) -> str:
    """A model whose scale is a constant of its own (Gemma), named as such, and compared with 1/√d_k."""
    if s.scale_rule == PRE_ATTN_SCALAR and s.scale_is_sqrt_dk:
        return tr("The scores are scaled by 1/√query_pre_attn_scalar = 1/√{root:g} = {scale:.4f}, a constant of the "
                  "model's configuration; here it equals 1/√d_k, since d_k = {dk}.", root=s.scale_root,
                  scale=s.scale, dk=s.d_k)
    return tr("The scores are scaled by {scale:.4f}, the model's {rule}, not 1/√d_k = {value:.4f}.", scale=s.scale,
              rule=scale_name(s), value=s.d_k ** -0.5)


def width_note(s: StepShapes) -> str | None:
    """Heads wider (or narrower) than the stream: H·d_k ≠ d_model."""
    if s.heads_width == s.d_model:
        return None
    return tr("The heads are {h} × {dk} = {width} wide, not d_model = {d}: W_Q takes the {d}-wide stream to {width} "
              "features, and W_O takes the {width}-wide concatenated heads back to {d}.", h=s.heads, dk=s.d_k,
              width=s.heads_width, d=s.d_model)
