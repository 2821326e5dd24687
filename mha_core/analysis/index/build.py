"""Building a corpus index (issue 37): the corpus read into sentences, the pass planned in shards, the shards
computed in this process or on Ray (on_ray.py: the same shards, byte for byte), then merged (write.py).

A build writes into its folder as it goes: build.json (what is being built), shards/ (each shard whole or absent),
then the index's files and index.json. A build that stopped — killed, out of power, a worker lost — is run again
with the same command and redoes only the shards that are missing; a folder holding another build or anything else
is refused, never overwritten.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mha_core.analysis.corpus.readers import (
    ParsedSentence,
    bundled_corpus,
    chinese_treebank,
    read_conllu,
    read_text_lines,
    spacy_parse,
)
from mha_core.analysis.index.passes import SHARD_PIECES, CorpusPlan, missing_shards, plan_pass, shard_bytes, write_shard
from mha_core.analysis.index.store import MANIFEST, IndexFileError, model_fingerprint
from mha_core.analysis.index.write import merge
from mha_core.engine.budget import release_freed_memory
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

Progress = Callable[[str, int, int], None]  # (stage, done, total): stage "shards" then "index"
BUILD = "build.json"
BUNDLED_SOURCE = "bundled corpus"
BUNDLED_CHINESE_SOURCE = "Chinese treebank"  # the bundled one: UD Chinese GSDSimp (analysis.corpora.CHINESE_TREEBANK)


def conllu_corpus(path: Path, limit: int | None = None) -> tuple[str, list[ParsedSentence], list[int]]:
    """A CoNLL-U file: each sentence with its words, parts of speech, relations and heads; ids 0-based."""
    sentences = read_conllu(path, limit)
    return path.name, sentences, list(range(len(sentences)))


def text_corpus(path: Path, limit: int | None = None, parse: bool = False
                ) -> tuple[str, list[ParsedSentence], list[int]]:
    """Plain text, one sentence a line (ids: 0-based line numbers; blank lines are not sentences); `parse`: words,
    parts of speech and relations from spaCy's English parser."""
    lines = read_text_lines(path, limit)
    ids = [i for i, line in enumerate(lines) if line]
    texts = [lines[i] for i in ids]
    sentences = spacy_parse(texts) if parse else [ParsedSentence((), (), (), text) for text in texts]
    return path.name, sentences, ids


def bundled_sentences(source: str = BUNDLED_SOURCE) -> tuple[str, list[ParsedSentence], list[int]]:
    """A bundled corpus: the project's own (assets/corpus.txt, parsed by spaCy), or the Chinese treebank (gold
    trees); ids count its sentences from 0."""
    sentences = chinese_treebank() if source == BUNDLED_CHINESE_SOURCE else spacy_parse(bundled_corpus())
    return source, sentences, list(range(len(sentences)))


def check_layers(model: LoadedModel, layers: Sequence[int]) -> tuple[int, ...]:
    if model.arch.image:
        raise InputError("index_images", N_("{model} reads images; a corpus index is built from text"),
                         model=model.name)
    if model.arch.audio:
        raise InputError("index_audio", N_("{model} hears audio; a corpus index is built from text"),
                         model=model.name)
    chosen = tuple(sorted(set(layers)))
    wrong = [layer for layer in chosen if not 0 <= layer <= model.n_layers]
    if not chosen or wrong:
        raise InputError("index_layers", N_("layers are 0 (the embeddings) to {last} (the last layer's output) for "
                                            "{model}; {wrong} is not"), last=model.n_layers, model=model.name,
                         wrong=", ".join(map(str, wrong)) or "none")
    return chosen


def build_record(model: LoadedModel, plan: CorpusPlan) -> dict:
    """What a build is, so that a resumed one is the same build."""
    return {"model": model.name, "fingerprint": model_fingerprint(model), "layers": list(plan.layers),
            "corpus": plan.source, "sentences": len(plan.sentences), "pieces": plan.pieces,
            "shards": [list(shard) for shard in plan.shards]}


def claim_folder(folder: Path, record: dict) -> None:
    """An empty folder, or one holding this same build stopped part-way; anything else is refused."""
    if (folder / MANIFEST).is_file():
        raise IndexFileError("index_exists", N_("{folder} already holds an index: choose another --out or delete it "
                                                "first"), folder=str(folder))
    if folder.exists() and not folder.is_dir():
        raise IndexFileError("index_out_file", N_("{folder} is a file, not a folder"), folder=str(folder))
    started = folder / BUILD
    if started.is_file():
        try:
            before = json.loads(started.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            before = None
        if before != record:
            raise IndexFileError("index_other_build", N_("{folder} holds a stopped build of another corpus, model or "
                                                         "layers: choose another --out"), folder=str(folder))
        return
    if folder.is_dir() and any(folder.iterdir()):
        raise IndexFileError("index_out_not_empty", N_("{folder} is not empty and holds no index: choose an empty or "
                                                       "new folder"), folder=str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    started.write_text(json.dumps(record), encoding="utf-8")


def build_index(model: LoadedModel, corpus: tuple[str, Sequence[ParsedSentence], Sequence[int]],
                layers: Sequence[int], out: str | Path, ray: str | None = None, workers: int | None = None,
                shard_pieces: int = SHARD_PIECES, progress: Progress | None = None) -> dict:
    """The index of `corpus` (source, sentences, ids) at `layers` in folder `out`, its model pass in this process, or
    on Ray where `ray` is given ("local": a Ray started for the build, `workers` replicas, default every core; else
    a running cluster's address). Returns index.json's contents."""
    source, sentences, ids = corpus
    folder = Path(out)
    plan = plan_pass(model, source, sentences, ids, check_layers(model, layers), shard_pieces)
    if not plan.sentences:
        raise InputError("index_nothing", N_("the model reads none of the corpus's {n:,} sentences"), n=len(ids))
    claim_folder(folder, build_record(model, plan))
    started, todo, first = time.perf_counter(), missing_shards(folder, plan), []

    def report(done: int) -> None:
        first.extend([] if first else [time.perf_counter() - started])  # the start's cost: Ray, the replicas
        if progress:
            progress("shards", done, len(todo))

    if ray is None or not todo:  # (a resumed build with every shard written starts no Ray)
        for done, shard in enumerate(todo):
            write_shard(folder, shard, shard_bytes(model, plan, shard))
            release_freed_memory()  # each shard's forward is within the budget, and so is the build
            report(done + 1)
        used = {"ray": ray, "workers": 1 if ray is None else 0}
    else:
        from mha_core.analysis.index.on_ray import shards_on_ray

        used = shards_on_ray(model, plan, folder, todo, ray, workers, report)
    passed = time.perf_counter() - started
    whole = len(todo) == len(plan.shards) > 1
    built = {**used, "shards": len(plan.shards), "shards_computed": len(todo), "pass_seconds": round(passed, 2),
             "first_shard_seconds": round(first[0], 2) if first else None,
             "pieces_per_second": round(plan.pieces / passed, 1) if whole else None,
             # after the first shard (the start paid): the rate a longer build approaches
             "steady_pieces_per_second": round(plan.pieces * (1 - 1 / len(todo)) / (passed - first[0]), 1)
             if whole and passed > first[0] else None}
    manifest = merge(folder, plan, model, built, (lambda d, n: progress("index", d, n)) if progress else None)
    (folder / BUILD).unlink(missing_ok=True)
    return manifest
