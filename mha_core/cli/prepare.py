"""`prepare [--json OUT]`: what the first visitors of a new machine would otherwise wait for, done once before the
class (`make run`, `make serve` and `make test` call it through `make prepare`):

- every installed bundled model converted into the cache (Gemma 3 from GGUF: about 25 s on 2 cores);
- the bundled corpora's search indexes for each bundled text model (the Chinese treebank's on Gemma: about 25 s);
- for each bundled text model, the results its pages read that depend only on it and the bundled files, kept where
  the pages read them (serving.on_disk): the induction probe (Roles, Across a corpus; 1-18 s) and its analysis of
  the bundled corpora (Gemma's of the Chinese treebank: about 50 s);
- UMAP's compiled code kept on disk (numba: about 20 s; the query–key view's first UMAP otherwise).

Each is skipped when it is there already (a second run takes seconds) and is built as the app builds it at first
use, so the app finds it where it looks. One line on stderr a step; the JSON lists each step's seconds. On a
fresh 2-core machine: about 5 minutes in all; about 10 s once done."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from mha_core.cli.common import write_json

UMAP_POINTS = 60  # umap-learn's exact neighbours (pynndescent's, from 4,096 points, cannot be kept: numba says so)


def timed(steps: list[dict], what: str, name: str, work: Callable[[], object]) -> None:
    """Run one step, say it on stderr, and note its seconds."""
    print(f"prepare: {what}: {name} …", file=sys.stderr, flush=True)
    started = time.perf_counter()
    work()
    seconds = round(time.perf_counter() - started, 1)
    steps.append({"step": what, "name": name, "seconds": seconds})
    print(f"prepare: {what}: {name}: {seconds} s", file=sys.stderr, flush=True)


def convert_bundled(steps: list[dict]) -> dict[str, Path]:
    """Every installed bundled model's converted folder (converted now where it is not yet)."""
    from mha_core.engine.loading import bundled
    from mha_core.engine.loading.model import bundled_dirs

    folders = bundled_dirs()
    for name, folder in folders.items():
        bundle = bundled.bundle_at(folder)
        if bundle is not None and not bundled.is_converted(folder):
            timed(steps, "convert", name, lambda bundle=bundle: bundled.ensure(bundle))
    return folders


def prepare_text_models(steps: list[dict], folders: dict[str, Path], index: bool, analyses: bool) -> None:
    """For each bundled model that reads text, one loaded at a time: the bundled corpora's indexes, then the results
    its pages read that depend only on it and the bundled files."""
    from mha_core.engine.arch import ENCODER_DECODERS, VISION
    from mha_core.engine.loading.folder import read_config
    from mha_core.engine.loading.model import load_model

    for name, folder in folders.items():
        if read_config(folder).get("model_type") in (*VISION, *ENCODER_DECODERS):
            continue  # no bundled corpus: it reads images, or is an encoder–decoder (Whisper: sound)
        model = load_model(folder)
        if index:
            index_bundled(steps, name, model)
        if analyses:
            analyse_bundled(steps, name, model)
        del model


def index_bundled(steps: list[dict], name: str, model: object) -> None:
    """The bundled corpora's indexes (serving.computed.index.build_bundled, where the search tab looks)."""
    from mha_core.serving.computed.index import MANIFEST, build_bundled, bundled_index_dir, bundled_sources

    for source in bundled_sources(model):
        if not (bundled_index_dir(model, source) / MANIFEST).is_file():
            timed(steps, "index", f"{name} ({source})", lambda source=source: build_bundled(model, source=source))


@lru_cache(maxsize=2)
def trees_of(source: str) -> list:
    """A bundled corpus's parsed sentences, parsed once for every model (spaCy: about 2.5 s)."""
    from mha_core.serving.computed.corpus import bundled_trees

    return bundled_trees(source)


def analyse_bundled(steps: list[dict], name: str, model: object) -> None:
    """The induction probe and the bundled corpora's analyses (Roles, Across a corpus) and head distances (Across a
    corpus's map), kept where the pages read them (serving.on_disk): each computed when no readable file of this
    code is there."""
    from mha_core.serving import on_disk
    from mha_core.serving.computed import corpus as computed_corpus
    from mha_core.serving.computed.index import bundled_sources
    from mha_core.serving.computed.text import INDUCTION

    kept: list[tuple[str, on_disk.OnDisk, tuple]] = [("induction", INDUCTION, ())]
    for source in bundled_sources(model):
        kept.append((source, computed_corpus.ANALYSIS, (trees_of(source),)))
        kept.append((f"{source}, head distances", computed_corpus.DISTANCES, (computed_corpus.bundled_texts(source),)))
    for what, result, args in kept:
        try:
            result.kept(model, *args)
        except on_disk.NotKept:
            timed(steps, "analyse", f"{name} ({what})", lambda result=result, args=args: result.keep(model, *args))


def compile_umap(steps: list[dict]) -> None:
    """UMAP's numba code compiled and kept (analysis.heads.projection.keep_compiled): a later process reads it in
    under a second (the step then takes umap-learn's import, about 3 s)."""
    import numpy as np

    from mha_core.analysis.heads.projection import UMAP, nonlinear

    points = np.random.default_rng(0).normal(size=(UMAP_POINTS, 16)).astype(np.float32)
    timed(steps, "compile", "UMAP", lambda: nonlinear(points, UMAP))


def cmd_prepare(args: argparse.Namespace) -> None:
    steps: list[dict] = []
    started = time.perf_counter()
    folders = convert_bundled(steps)
    if not (args.no_index and args.no_analyses):
        prepare_text_models(steps, folders, not args.no_index, not args.no_analyses)
    if not args.no_umap:
        compile_umap(steps)
    write_json({"steps": steps, "seconds": round(time.perf_counter() - started, 1)}, args.json)


def add_prepare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="convert the bundled models, build their corpus indexes, analyse their bundled "
                       "corpora and compile UMAP once, before the first visitors (each step skipped when done)")
    p.add_argument("--no-index", action="store_true", help="leave the bundled corpora's indexes to their first use")
    p.add_argument("--no-analyses", action="store_true",
                   help="leave the induction probe and the bundled corpora's analyses to their first use")
    p.add_argument("--no-umap", action="store_true", help="leave UMAP's compilation to its first use")
    p.add_argument("--json", default="-", help="the steps run and their seconds ('-': stdout)")
    p.set_defaults(func=cmd_prepare)
