"""The corpus indexes a server offers and the searches a page asks for (issue 37).

Each text model gets an index of the bundled corpus, built once at first use (or by `make prepare`) into the user's
cache beside the converted models; a server lists more with $MHA_INDEX_DIR (folders, separated like PATH: each an
index, or a folder of indexes). Indexes are opened once per process, memory-mapped read-only, and shared by every
visitor; a search is kept by what it depends on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mha_core.analysis.index.build import BUNDLED_CHINESE_SOURCE, BUNDLED_SOURCE, build_index, bundled_sentences
from mha_core.analysis.index.build import Progress as BuildProgress
from mha_core.analysis.index.search import TOP, SearchResult, search
from mha_core.analysis.index.store import (
    MANIFEST,
    VERSION,
    IndexFileError,
    OpenIndex,
    model_fingerprint,
    read_manifest,
)
from mha_core.engine.held import kept
from mha_core.engine.loading.bundled import bundle_at, cache_name, cache_root
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.i18n import Worded
from mha_core.messages import N_
from mha_core.serving.computed.text import of, result_of
from mha_core.serving.server import Server, Wait
from mha_core.teaching.examples import focus_words

INDEX_ENV = "MHA_INDEX_DIR"
BUNDLED_LAYERS = 7  # layers of a bundled index, spread from the embeddings to the last layer's output


@dataclass(frozen=True)
class IndexChoice:
    folder: str
    corpus: str  # the corpus's name (its file, or "bundled corpus")
    pieces: int
    layers: tuple[int, ...]
    bundled: bool  # the bundled corpus's index in the cache (built at first use)


def spread_layers(n_layers: int, count: int = BUNDLED_LAYERS) -> tuple[int, ...]:
    """`count` layers from 0 (the embeddings) to n_layers (the last output), evenly spread; every layer if fewer."""
    return tuple(sorted({round(n_layers * i / (count - 1)) for i in range(count)}))


def bundled_index_dir(model: LoadedModel, source: str = BUNDLED_SOURCE) -> Path:
    corpus = "" if source == BUNDLED_SOURCE else "-zh"
    return cache_root() / "indexes" / f"{cache_name(model.name)}-{model_fingerprint(model)}{corpus}-v{VERSION}"


def bundled_sources(model: LoadedModel) -> tuple[str, ...]:
    """The bundled corpora a model's index is offered for: the English corpus, and the Chinese treebank for a
    bundled model that reads Chinese as words (Gemma 3; the others read it as [UNK] or byte fragments)."""
    reads_chinese = getattr(bundle_at(model.model_dir), "reads_chinese", False)
    return (BUNDLED_SOURCE, BUNDLED_CHINESE_SOURCE) if reads_chinese else (BUNDLED_SOURCE,)


def chinese_first(model: LoadedModel, language: str) -> bool:
    """Whether a corpus page opens on the Chinese treebank: for the Chinese interface, on a model that reads Chinese
    as words (else on the bundled English corpus)."""
    return language == "zh" and BUNDLED_CHINESE_SOURCE in bundled_sources(model)


def listed_folders() -> list[Path]:
    """The index folders $MHA_INDEX_DIR names: each entry an index, or a folder whose sub-folders are indexes."""
    found = []
    for entry in filter(None, os.environ.get(INDEX_ENV, "").split(os.pathsep)):
        folder = Path(entry)
        if (folder / MANIFEST).is_file():
            found.append(folder)
        elif folder.is_dir():
            found += sorted(sub for sub in folder.iterdir() if (sub / MANIFEST).is_file())
    return found


def index_choices(model: LoadedModel) -> list[IndexChoice]:
    """The bundled corpus's index (built or not) and every listed index built with this model."""
    choices = [IndexChoice(str(bundled_index_dir(model, source)), source, 0, spread_layers(model.n_layers),
                           bundled=True) for source in bundled_sources(model)]
    for folder in listed_folders():
        try:
            manifest = read_manifest(folder)
        except IndexFileError:
            continue
        if manifest.model == model.name and manifest.data.get("fingerprint") == model_fingerprint(model):
            choices.append(IndexChoice(str(folder), manifest.data["corpus"], manifest.data["pieces"], manifest.layers,
                                       bundled=False))
    return choices


def default_index(choices: list[IndexChoice], language: str) -> IndexChoice:
    """The index the search opens on: the Chinese treebank's for the Chinese interface where the model has one,
    else the first (the bundled English corpus's)."""
    chinese = [c for c in choices if c.bundled and c.corpus == BUNDLED_CHINESE_SOURCE]
    return chinese[0] if language == "zh" and chinese else choices[0]


def index_bytes(indexes: Iterable[OpenIndex]) -> int:
    """What opened indexes may hold: their files' bytes (memory-mapped read-only, so at most that much is resident; a
    stated estimate)."""
    return sum(entry["bytes"] for index in indexes for entry in index.manifest.data["files"].values())


@kept("opened indexes", 16, weigh=index_bytes, measured=False)
def _opened(folder: str, stamp: int) -> OpenIndex:
    return OpenIndex(folder)


def open_index(folder: str) -> OpenIndex:
    """An index opened once per process (again only when its index.json changes)."""
    manifest = Path(folder) / MANIFEST
    return _opened(folder, manifest.stat().st_mtime_ns if manifest.is_file() else 0)


def build_bundled(model: LoadedModel, progress: BuildProgress | None = None, source: str = BUNDLED_SOURCE) -> str:
    """The bundled corpus's index for `model` (the app's, `make prepare`'s), built into a private folder then moved
    into place, as engine.bundled.ensure converts a model: processes building it at once — the first move wins, the
    others' copies are dropped — and a build stopped part-way leaves nothing behind."""
    final = bundled_index_dir(model, source)
    if (final / MANIFEST).is_file():
        return str(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
    try:
        build_index(model, bundled_sentences(source), spread_layers(model.n_layers), work / "index",
                    progress=progress)
        os.replace(work / "index", final)
    except OSError:
        if not (final / MANIFEST).is_file():
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return str(final)


def bundled_index_of(server: Server, model: LoadedModel, source: str, wait: Wait) -> str:
    """The folder of a bundled corpus's index for `model`, built first if it is not in the cache yet."""
    if (bundled_index_dir(model, source) / MANIFEST).is_file():
        return str(bundled_index_dir(model, source))
    label = Worded(N_("Indexing the bundled corpus with {model} (once for this model)") if source == BUNDLED_SOURCE
                   else N_("Indexing the Chinese treebank with {model} (once for this model)"), model=model.name)
    stages = {"shards": 0, "index": 1}  # each stage half of the bar
    return server.queued("small", ("bundled index", of(model), source), label, lambda progress: build_bundled(
        model, lambda stage, done, total: progress(stages[stage] * total + done, 2 * total), source), wait)


def index_of(server: Server, folder: str) -> OpenIndex:
    """The index in `folder`, checked and opened once per process (open_index), shared by every visitor."""
    return open_index(folder)


def default_query(result: AttentionResult, layers: tuple[int, ...]) -> tuple[int, int]:
    """Where a search starts: the sentence's pronoun (its first piece, as the token views start from it), else its
    first piece that is not a special one; the middle of the index's layers."""
    pronoun = focus_words(result.batch.texts[0])[0]
    pieces = result.word_pieces(0, pronoun) if pronoun else ()
    words = result.word_ids[0]
    first = pieces[0] if pieces else next((t for t, w in enumerate(words) if w is not None), 0)
    return first, layers[len(layers) // 2]


def search_of(server: Server, model: LoadedModel, folder: str, text: str, position: int, layer: int,
              heads: tuple[int, ...], top: int = TOP) -> SearchResult:
    """The corpus pieces nearest to piece `position` of `text` (see index_search.search)."""
    def compute() -> SearchResult:
        result = result_of(server, model, (text,), "explicit")
        return search(open_index(folder), model, result, position, layer, heads, top)

    return server.kept("small", ("search", of(model), folder, text, position, layer, heads, top), compute)
