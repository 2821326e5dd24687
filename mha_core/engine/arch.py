"""What differs between attention families, read from config.json. The one layer loop (encoder.py) reads
only this description; nothing else in the recompute branches on the family's name.

| family       | norm  | placement | positions          | attention           | MLP          | causal |
|--------------|-------|-----------|--------------------|---------------------|--------------|--------|
| bert         | layer | post      | learned (+ types)  | MHA, biases         | plain        | no     |
| roberta, xlm-roberta | layer | post | learned from padding_idx + 1 | MHA, biases | plain | no |
| distilbert   | layer | post      | learned            | MHA, biases         | plain        | no     |
| gpt2         | layer | pre       | learned            | MHA, fused c_attn   | plain        | yes    |
| llama, mistral | rms | pre       | rotary (RoPE)      | GQA, no biases      | gated (SiLU) | yes    |
| qwen2        | rms   | pre       | rotary (RoPE)      | GQA, q/k/v biases   | gated (SiLU) | yes    |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PretrainedConfig

ENCODERS = ("bert", "roberta", "xlm-roberta", "distilbert")
DECODERS = ("gpt2", "llama", "qwen2", "mistral")
SUPPORTED_MODEL_TYPES = ENCODERS + DECODERS
ROTARY = ("llama", "qwen2", "mistral")
MAX_PIECES = 1024  # longest text recomputed (a decoder's 8,192-token window would need GBs of maps)


@dataclass(frozen=True)
class Architecture:
    family: str  # config.model_type
    causal: bool  # decoders: a query sees only itself and earlier tokens
    norm: str  # "layer" (LayerNorm) or "rms" (RMSNorm)
    pre_norm: bool  # norm before each sub-layer (x + f(norm(x))), else after the residual (norm(x + f(x)))
    rotary: bool  # RoPE rotates q and k; else learned absolute position embeddings are added
    position_offset: int  # the first position id (RoBERTa: padding_idx + 1)
    token_types: bool  # a token-type (segment) embedding is added (segment 0)
    gated_mlp: bool  # down(act(gate(x)) * up(x)), else out(act(in(x)))
    activation: str  # a key of transformers.activations.ACT2FN
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (< n_heads: grouped-query attention)
    d_model: int
    head_dim: int
    max_length: int  # word pieces recomputed at most (specials included)
    norm_eps: float
    sliding_window: int | None  # Mistral: keys further back than this are not seen

    @property
    def grouped(self) -> bool:
        return self.n_kv_heads < self.n_heads


def first(config: PretrainedConfig, *names: str, default: Any = None) -> Any:
    """The first of `names` that the config has and is not None (families name the same size differently)."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def describe(config: PretrainedConfig) -> Architecture:
    """The description of a transformers config of a supported family (model_type checked before)."""
    family = config.model_type
    decoder = family in DECODERS
    d_model = int(first(config, "hidden_size", "n_embd", "dim"))
    n_heads = int(first(config, "num_attention_heads", "n_head", "n_heads"))
    positions = int(first(config, "max_position_embeddings", "n_positions", default=512))
    offset = int(config.pad_token_id) + 1 if family in ("roberta", "xlm-roberta") else 0
    window = getattr(config, "sliding_window", None) if family == "mistral" else None
    return Architecture(
        family=family, causal=decoder, norm="rms" if family in ROTARY else "layer", pre_norm=decoder,
        rotary=family in ROTARY, position_offset=offset, token_types=family in ("bert", "roberta", "xlm-roberta"),
        gated_mlp=family in ROTARY,
        activation=str(first(config, "hidden_act", "activation_function", "activation", default="gelu")),
        n_layers=int(first(config, "num_hidden_layers", "n_layer", "n_layers")), n_heads=n_heads,
        n_kv_heads=int(first(config, "num_key_value_heads", default=n_heads)), d_model=d_model,
        head_dim=int(first(config, "head_dim", default=d_model // n_heads)),
        max_length=min(positions - offset, MAX_PIECES),
        norm_eps=float(first(config, "layer_norm_eps", "layer_norm_epsilon", "rms_norm_eps", default=1e-12)),
        sliding_window=int(window) if window else None,
    )
