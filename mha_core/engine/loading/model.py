"""Load a model of a supported family from a local directory (dirs.py finds and checks the folder, without
torch); expose its weights per layer.

Shapes: H query heads, G key/value heads, D d_model, Dh head dim. Weights are read by weights.py into
plain tensors (nn.Linear layout); per-head views come from `split_heads_in` / `split_heads_out`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from mha_core.engine.arch import (
    ENCODER_DECODERS,
    SPEECH,
    VISION,
    Architecture,
    describe,
    describe_stacks,
    describe_vision,
)
from mha_core.engine.loading import bundled
from mha_core.engine.loading.checks import check_loaded_weights, check_tokenizer, load_failure
from mha_core.engine.loading.dirs import (  # noqa: F401 -- read from here by the engine's callers too
    MODEL_DIR_ENV,
    TOKENIZER_FILES,
    bundled_dirs,
    bundled_model_dir,
    check_config,
    check_model_dir,
    default_model_dir,
    resolve_model_dir,
)
from mha_core.engine.loading.folder import (
    ModelLoadError,
    shown,
)
from mha_core.engine.loading.unembedding import HeadTensors, read_head
from mha_core.engine.seq2seq.weights import read_stacks
from mha_core.engine.vision.weights import read_vision
from mha_core.engine.weights import EmbeddingWeights, HeadWeights, LayerWeights, read_weights
from mha_core.messages import N_

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase



@dataclass(frozen=True)
class LoadedModel:
    holds_model_weights: ClassVar[bool] = True  # a result that keeps its model weighs none of its weights (serving)
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
    head_tensors: HeadTensors = ()  # the LM head's tensors the base model leaves out (loading/unembedding.py)

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
        with bundled.TRANSFORMERS_LOADING:
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
        bos_id=prepare_decoder_tokenizer(tokenizer) if arch.causal else None,
        head_tensors=read_head(path, arch, config, embeddings.word),
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

    if config.model_type in SPEECH:
        return AutoModelForSpeechSeq2Seq
    return AutoModelForSeq2SeqLM if config.model_type in ENCODER_DECODERS else AutoModel


def encoder_decoder(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, config: PretrainedConfig,
                    path: Path) -> LoadedModel:
    """An encoder–decoder as its encoder stack, whose `decoder` is the decoder stack (each described and read
    apart: seq2seq/weights.py)."""
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
