"""The menu of models a server offers its visitors. Only whoever starts the server decides what is on it:
$MHA_MODEL_DIR (the default, if set), the bundled models, each subfolder of $MHA_MODELS_DIR, and the models already in
the Hugging Face hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; off with MHA_HF_CACHE=0)
that hold a supported family with safetensors weights and a fast tokenizer. Models over $MHA_MAX_PARAMS parameters
(default 1.5 billion: float32 on a laptop) are listed with their size and refused in one sentence."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mha_core.engine.held import kept
from mha_core.engine.loading import bundled
from mha_core.engine.loading.dirs import MODEL_DIR_ENV, bundled_dirs, check_model_dir, resolve_model_dir
from mha_core.engine.loading.folder import ModelLoadError, parameter_count, read_config, read_revision, weight_headers
from mha_core.i18n import Worded, tr
from mha_core.messages import N_
from mha_core.serving.pages import ENCODER_ALONE, KINDS, TRANSLATION, WHOLE, page_at

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel

MODELS_DIR_ENV = "MHA_MODELS_DIR"  # each subfolder is a model the app offers in its list
HF_CACHE_ENV = "MHA_HF_CACHE"  # "0": leave the Hugging Face cache out of the list
MAX_PARAMS_ENV = "MHA_MAX_PARAMS"
DEFAULT_MAX_PARAMS = 1_500_000_000
BUNDLED, MODELS_DIR, HF_CACHE = "bundled", "models_dir", "hf_cache"
LISTING_SECONDS = 2.0  # the hub cache's folders read per listing; any left are named, unread (a slow disk)


@dataclass(frozen=True)
class ModelChoice:
    """A model the app offers: the name shown (and kept in the URL), its folder, where it was found, its size."""

    name: str
    path: Path
    source: str = MODELS_DIR  # BUNDLED, MODELS_DIR or HF_CACHE
    family: str | None = None  # config.json's model_type, where it was read
    parameters: int | None = None  # counted from the safetensors headers, where read
    refused: str | None = None  # why it is listed but cannot be chosen (a Worded sentence: over the size limit, …)

    @property
    def label(self) -> str:
        """How the list shows it: a refused model with why, in a word."""
        if self.refused is None:
            return self.name
        if self.parameters and self.parameters > max_parameters():
            return tr("{name} ({billions:.1f} B parameters: too large)", name=self.name,
                      billions=self.parameters / 1e9)
        return tr("{name} (cannot be used)", name=self.name)

    def as_json(self) -> dict:
        """The CLI's `models` entry; a folder not read for the list (bundled, $MHA_MODELS_DIR) is read here. Plain
        JSON whatever the folder holds: "usable" and, when it is not, "reason"."""
        family, parameters, reason = self.family, self.parameters, self.refused
        if family is None and reason is None:
            try:
                family = read_config(self.path).get("model_type")
                parameters = parameter_count(weight_headers(self.path))
            except ModelLoadError as err:
                family, reason = None, str(err)
        family = family if isinstance(family, str) else None
        return {"name": self.name, "family": family, "source": self.source, "parameters": parameters,
                "usable": reason is None, "reason": None if reason is None else str(reason)}


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


@kept("hub listings", 4)
def scanned_cache(root: Path, stamp: int, limit: int) -> tuple[ModelChoice, ...]:
    """Every model repository of the cache, usable or named with why not; read once per change of the cache's
    folder (a listing can take seconds on a slow disk), and for at most LISTING_SECONDS."""
    try:
        repos = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("models--"))
    except OSError:
        return ()
    deadline = time.monotonic() + LISTING_SECONDS
    found = []
    for repo in repos:
        name = repo.name.removeprefix("models--").replace("--", "/", 1)
        if time.monotonic() > deadline:
            late = Worded(N_("{name} was not read: listing the cache took over {seconds:.0f} s"), name=name,
                          seconds=LISTING_SECONDS)
            found.append(ModelChoice(name, repo, HF_CACHE, refused=late))
            continue
        found.append(cache_choice(repo, name, limit))
    return tuple(found)


def cache_choice(repo: Path, name: str, limit: int) -> ModelChoice:
    """One cache repository at the revision refs/main names: usable, or refused with one sentence (a folder that is
    not a model, an unsupported family, a broken file, sizes the weights do not hold, over the size limit)."""
    try:
        snapshot = read_revision(repo)
        family = check_model_dir(snapshot).get("model_type")
        parameters = parameter_count(weight_headers(snapshot))
    except ModelLoadError as err:
        return ModelChoice(name, repo, HF_CACHE, refused=Worded(N_("{name} cannot be used: {reason}"), name=name,
                                                               reason=err.said))
    refused = None
    if parameters > limit:
        refused = Worded(N_("{name} has {billions:.1f} billion parameters, over this server's limit of {limit:.1f} "
                            "billion ({env})"), name=name, billions=parameters / 1e9, limit=limit / 1e9,
                         env=MAX_PARAMS_ENV)
    return ModelChoice(name, snapshot, HF_CACHE, family, parameters, refused)


def default_kind(model: LoadedModel) -> str:
    """Which attention of an encoder–decoder a page reads unless the visitor says: a text model's encoder (every
    page's views apply), Whisper's cross-attention (its encoder hears frames of sound)."""
    return "cross" if model.arch.audio else "encoder"


# A model that works, on other pages than this one: said as a notice where the page falls back, not as an error.
READ_ON_OTHER_PAGES = frozenset({"page_reads_no_images", "page_reads_no_audio"})


def read_on_other_pages(error: ModelLoadError) -> bool:
    """Whether `error` only says this page cannot read a model that other pages read (page_model's refusals)."""
    return error.code in READ_ON_OTHER_PAGES


def page_model(model: LoadedModel, url_path: str | None, kind: str | None = None) -> LoadedModel:
    """The model as the page at `url_path` reads it (its declaration: serving/pages.py). An image model only on the
    pages that read images or weights. An encoder–decoder is read whole by the pages that read all of it (WHOLE) and
    by the pages with a picker for its kinds of attention (KINDS) unless `kind` is a text model's "encoder"; elsewhere,
    and for that kind, as its encoder alone (an encoder reading the sentence's pieces). An encoder that hears audio
    (Whisper's) cannot be read alone: refused in one sentence."""
    page = page_at(url_path)
    if model.arch.image and not (page and page.reads_images):
        raise ModelLoadError("page_reads_no_images",
                             N_("this page reads text, and {name} reads images: the Images, Walkthrough and Parameters "
                                "pages read it (as does python -m mha_core attention --image FILE)."),
                             name=model.name)
    if model.arch.image or not model.encoder_decoder:
        return model
    if model.arch.audio and not (page and page.reads_audio_models):
        raise ModelLoadError("page_reads_no_audio",
                             N_("this page reads a sentence's pieces with one stack of layers, and {name}'s encoder "
                                "hears audio: the Heads, Roles, Walkthrough, Predictions and Encoder–decoder pages "
                                "read it (the sentence spoken)."),
                             name=model.name)
    reads = page.encoder_decoder if page else ENCODER_ALONE
    if reads == WHOLE or (reads == KINDS and (kind != "encoder" or model.arch.audio)):
        return model
    return replace(model, decoder=None)


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


def listed_model_bytes() -> list[int]:
    """The float32 size of each usable listed model (its parameters from its safetensors headers)."""
    sizes = []
    for choice in available_models():
        entry = choice.as_json()
        if entry["usable"] and entry["parameters"]:
            sizes.append(4 * entry["parameters"])
    return sizes


def default_choice(choices: tuple[ModelChoice, ...], language: str, url_path: str | None = None) -> ModelChoice:
    """The model the page at `url_path` opens with: the first listed, except that a page declared to open on a
    bundled model (the Encoder–decoder page's Whisper, the Images page's DINOv2: pages.Page.opens_on) opens with it,
    and Chinese (and the Translation page) opens with the first bundled model that reads Chinese as words (Gemma 3),
    where one is listed: the others read most Chinese characters as [UNK] or as byte fragments."""
    bundles = {choice.name: bundled.bundle_at(Path(choice.path)) for choice in choices if choice.source == BUNDLED}
    page = page_at(url_path)
    if page is not None and page.opens_on is not None:  # its declaration's (serving/pages.py)
        return next((choice for choice in choices if getattr(bundles.get(choice.name), "name", None) == page.opens_on),
                    choices[0])
    if language == "zh" or page is TRANSLATION:  # the Translation page reads Chinese in either language
        for choice in choices:
            bundle = bundles.get(choice.name)
            if bundle is not None and bundle.reads_chinese:
                return choice
    return choices[0]


def model_notice(path: Path) -> str | None:
    """The terms a model's licence asks to be shown where it is offered (Gemma's), or None."""
    bundle = bundled.bundle_at(Path(path))
    return None if bundle is None else bundle.notice
