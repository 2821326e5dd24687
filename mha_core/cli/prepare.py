"""`prepare [--json OUT]`: what the first visitors of a new machine would otherwise wait for, done once before the
class (`make run`, `make serve` and `make test` call it through `make prepare`):

- every installed bundled model converted into the cache (Gemma 3 from GGUF: about 25 s on 2 cores);
- the bundled corpora's search indexes for each bundled text model (the Chinese treebank's on Gemma: about 25 s);
- UMAP's compiled code kept on disk (numba: about 20 s; the query–key view's first UMAP otherwise).

Each is skipped when it is there already (a second run takes seconds) and is built as the app builds it at first
use, so the app finds it where it looks. One line on stderr a step; the JSON lists each step's seconds. On a
fresh 2-core machine: 125 s in all; about 10 s once done."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
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


def index_bundled(steps: list[dict], folders: dict[str, Path]) -> None:
    """The bundled corpora's indexes (serving.computed.index.build_bundled, where the search tab looks) for each
    bundled model that reads text, one model loaded at a time."""
    from mha_core.engine.arch import ENCODER_DECODERS, VISION
    from mha_core.engine.loading.folder import read_config
    from mha_core.engine.loading.model import load_model
    from mha_core.serving.computed.index import MANIFEST, build_bundled, bundled_index_dir, bundled_sources

    for name, folder in folders.items():
        if read_config(folder).get("model_type") in (*VISION, *ENCODER_DECODERS):
            continue  # no bundled index: it reads images, or is an encoder–decoder (Whisper: sound)
        model = load_model(folder)
        for source in bundled_sources(model):
            if not (bundled_index_dir(model, source) / MANIFEST).is_file():
                timed(steps, "index", f"{name} ({source})", lambda model=model, source=source: build_bundled(
                    model, source=source))
        del model


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
    if not args.no_index:
        index_bundled(steps, folders)
    if not args.no_umap:
        compile_umap(steps)
    write_json({"steps": steps, "seconds": round(time.perf_counter() - started, 1)}, args.json)


def add_prepare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="convert the bundled models, build their corpus indexes and compile UMAP once, "
                       "before the first visitors (each step skipped when done)")
    p.add_argument("--no-index", action="store_true", help="leave the bundled corpora's indexes to their first use")
    p.add_argument("--no-umap", action="store_true", help="leave UMAP's compilation to its first use")
    p.add_argument("--json", default="-", help="the steps run and their seconds ('-': stdout)")
    p.set_defaults(func=cmd_prepare)
