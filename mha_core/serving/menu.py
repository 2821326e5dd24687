"""The menu of models a server offers its visitors. Only whoever starts the server decides what is on it:
$MHA_MODEL_DIR (the default, if set), the bundled models, each subfolder of $MHA_MODELS_DIR, and the models already in
the Hugging Face hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; off with MHA_HF_CACHE=0)
that hold a supported family with safetensors weights and a fast tokenizer. Models over $MHA_MAX_PARAMS parameters
(default 1.5 billion: float32 on a laptop) are listed with their size and refused in one sentence."""

from __future__ import annotations

import functools
import json
import os
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path

from mha_core.engine import bundled
from mha_core.engine.model import MODEL_DIR_ENV, ModelLoadError, bundled_dirs, check_model_dir, resolve_model_dir

MODELS_DIR_ENV = "MHA_MODELS_DIR"  # each subfolder is a model the app offers in its list
HF_CACHE_ENV = "MHA_HF_CACHE"  # "0": leave the Hugging Face cache out of the list
MAX_PARAMS_ENV = "MHA_MAX_PARAMS"
DEFAULT_MAX_PARAMS = 1_500_000_000
BUNDLED, MODELS_DIR, HF_CACHE = "bundled", "models_dir", "hf_cache"


@dataclass(frozen=True)
class ModelChoice:
    """A model the app offers: the name shown (and kept in the URL), its folder, where it was found, its size."""

    name: str
    path: Path
    source: str = MODELS_DIR  # BUNDLED, MODELS_DIR or HF_CACHE
    family: str | None = None  # config.json's model_type, where it was read
    parameters: int | None = None  # counted from the safetensors headers, where read
    refused: str | None = None  # why it is listed but cannot be chosen (over the size limit)

    @property
    def label(self) -> str:
        """How the list shows it: a refused model with its size."""
        if self.refused is None:
            return self.name
        return f"{self.name} ({self.parameters / 1e9:.1f} B parameters: too large)"

    def as_json(self) -> dict:
        """The CLI's `models` entry; a folder not read for the list (bundled, $MHA_MODELS_DIR) is read here."""
        family, parameters = self.family, self.parameters
        if family is None and (self.path / "config.json").is_file():
            family, parameters = read_config(self.path).get("model_type"), safetensors_parameters(self.path)
        return {"name": self.name, "family": family, "source": self.source, "parameters": parameters}


def max_parameters() -> int:
    try:
        return int(float(os.environ.get(MAX_PARAMS_ENV) or DEFAULT_MAX_PARAMS))
    except ValueError:
        return DEFAULT_MAX_PARAMS


def hub_cache_root() -> Path:
    explicit = os.environ.get("HF_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    return Path(home).expanduser() / "hub" if home else Path.home() / ".cache" / "huggingface" / "hub"


def safetensors_parameters(folder: Path) -> int:
    """Parameters in a folder's safetensors files, from their headers (8 bytes of length, then JSON): no tensor read.
    A tied head stored once counts once, as the model's own parameters() do."""
    total = 0
    for path in folder.glob("*.safetensors"):
        with path.open("rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            header = json.loads(file.read(min(length, 100_000_000)))
        total += sum(prod(entry["shape"]) for key, entry in header.items()  # integer buffers (position ids) are
                     if key != "__metadata__" and entry["dtype"].startswith(("F", "BF")))  # not parameters
    return total


def read_config(folder: Path) -> dict:
    """A folder's config.json, or {} when it cannot be read as a JSON object."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def family_of(folder: Path) -> str | None:
    """The model_type of a folder the loader would accept (a supported family, safetensors, a tokenizer, no custom
    code: model.check_model_dir's own checks), else None."""
    try:
        return check_model_dir(folder).get("model_type")
    except ModelLoadError:
        return None


def hub_cache_models() -> tuple[ModelChoice, ...]:
    """The usable models of the hub cache as "org/name", at the revision refs/main names, sized by their headers;
    scanned again only when the cache's folder changes (every page asks for the list on every rerun)."""
    if os.environ.get(HF_CACHE_ENV, "1") == "0":
        return ()
    root = hub_cache_root()
    try:
        stamp = root.stat().st_mtime_ns
    except OSError:
        return ()
    return scanned_cache(root, stamp, max_parameters())


@functools.lru_cache(maxsize=4)
def scanned_cache(root: Path, stamp: int, limit: int) -> tuple[ModelChoice, ...]:
    try:
        repos = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("models--"))
    except OSError:
        return ()
    found = []
    for repo in repos:
        try:
            snapshot = repo / "snapshots" / (repo / "refs" / "main").read_text(encoding="utf-8").strip()
            family = family_of(snapshot) if snapshot.is_dir() else None
            parameters = safetensors_parameters(snapshot) if family else 0
        except (OSError, ValueError, struct.error, KeyError, TypeError):
            continue
        if family:
            name = repo.name.removeprefix("models--").replace("--", "/", 1)
            refused = (f"{name} has {parameters / 1e9:.1f} billion parameters, over this server's limit of "
                       f"{limit / 1e9:.1f} billion ({MAX_PARAMS_ENV})") if parameters > limit else None
            found.append(ModelChoice(name, snapshot, HF_CACHE, family, parameters, refused))
    return tuple(found)


def available_models() -> tuple[ModelChoice, ...]:
    """The models a visitor may choose, in this order: $MHA_MODEL_DIR if set (the default), the bundled models, each
    subfolder of $MHA_MODELS_DIR by name, the hub cache's models. Only whoever starts the server decides."""
    choices = []
    if os.environ.get(MODEL_DIR_ENV):
        path = resolve_model_dir(None)
        choices.append(ModelChoice(path.name or str(path), path))
    choices += [ModelChoice(name, path, BUNDLED) for name, path in bundled_dirs().items()]
    root = os.environ.get(MODELS_DIR_ENV)
    if root:
        try:
            folders = sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            folders = []
        choices += [ModelChoice(p.name, p) for p in folders]
    choices += hub_cache_models()
    unique = {}
    for choice in choices:
        unique.setdefault(choice.name, choice)
    return tuple(unique.values())


def default_choice(choices: tuple[ModelChoice, ...], language: str) -> ModelChoice:
    """The model a page opens with: the first listed, except that Chinese opens with the first bundled model that
    reads Chinese as words (Gemma 3), where one is listed: the others read most Chinese characters as [UNK] or as
    byte fragments."""
    if language == "zh":
        for choice in choices:
            bundle = bundled.bundle_at(Path(choice.path)) if choice.source == BUNDLED else None
            if bundle is not None and bundle.reads_chinese:
                return choice
    return choices[0]


def model_notice(path: Path) -> str | None:
    """The terms a model's licence asks to be shown where it is offered (Gemma's), or None."""
    bundle = bundled.bundle_at(Path(path))
    return None if bundle is None else bundle.notice
