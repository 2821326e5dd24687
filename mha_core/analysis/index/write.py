"""Writing a corpus index's files from its shards (issue 37), streamed a shard at a time so that the build's memory is
bounded by the budget, not by the corpus (issue 43: a 298,520-piece build grew by 2.3 GB when every column was
gathered whole). The pieces keep the shards' order (each shard's sentences whole); index.json is written last.

Shapes: n pieces, W a kind's vector width, s a shard's pieces.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from mha_core.analysis.index.checks import vector_files
from mha_core.analysis.index.passes import HEADS, KINDS, META_COLUMNS, CorpusPlan, kinds_at, shard_path, vector_width
from mha_core.analysis.index.store import FORMAT, MANIFEST, VERSION, file_name, model_fingerprint
from mha_core.engine.budget import planned_bytes, release_freed_memory
from mha_core.engine.loading.bundled import file_sha256
from mha_core.engine.loading.model import LoadedModel

TRAIN_SAMPLE = 65_536  # vectors the IVF-PQ's centroids and codebooks are trained on at most (faiss asks 39 a list)
TRAIN_ITERATIONS = 12  # k-means rounds (faiss's default 25 took twice as long for the same recall, bench_index.py)
PQ_BITS = 8
SAMPLE_SHARE = 6  # the training sample holds at most this fraction of the planned budget


def shard_column(folder: Path, shard: int, name: str) -> np.ndarray:
    """(s,W) one shard's vectors of column `name`, read into memory of its own (nothing stays mapped)."""
    import pyarrow.parquet as pq

    column = pq.read_table(shard_path(folder, shard), columns=[name], memory_map=False).column(name)
    flat = column.combine_chunks()
    return flat.flatten().to_numpy(zero_copy_only=False).reshape(len(flat), flat.type.list_size)


def shard_vectors(folder: Path, n_shards: int, name: str) -> Iterator[np.ndarray]:
    for shard in range(n_shards):
        yield shard_column(folder, shard, name)


def write_pieces(folder: Path, n_shards: int) -> None:
    """pieces.parquet: the metadata, a row group per shard."""
    import pyarrow.parquet as pq

    writer = None
    try:
        for shard in range(n_shards):
            table = pq.read_table(shard_path(folder, shard), columns=list(META_COLUMNS), memory_map=False)
            writer = writer or pq.ParquetWriter(folder / "pieces.parquet", table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def flat_header(width: int, count: int) -> bytes:
    """The bytes faiss writes before the vectors of a flat inner-product index of `count` vectors of `width` (the
    vectors follow as float32, in order), read off faiss's own file of one vector: its count (ntotal, bytes 8-16)
    and its vector's length in floats (the header's last 8 bytes) set to `count`'s. Checked first: the header so
    made, for three vectors, gives faiss's own file byte for byte (a faiss that writes another layout is named)."""
    import faiss

    def serialized(n: int) -> bytes:
        index = faiss.IndexFlatIP(width)
        index.add(np.ones((n, width), dtype=np.float32))
        return bytes(faiss.serialize_index(index))

    def header(n: int) -> bytes:
        made = bytearray(of_one[: len(of_one) - width * 4])
        made[8:16], made[-8:] = n.to_bytes(8, "little"), (n * width).to_bytes(8, "little")
        return bytes(made)

    of_one = serialized(1)
    if header(3) + np.ones((3, width), dtype=np.float32).tobytes() != serialized(3):
        raise RuntimeError(f"faiss {faiss.__version__} writes a flat index in a layout this build does not know")
    return header(count)


def write_exact(folder: Path, plan: CorpusPlan, name: str, width: int, path: Path) -> None:
    """The flat index's file written a shard at a time: the column never whole in memory (4x the corpus's pieces
    grew a build by one column's 4x, 42 MB more for 37,762 pieces of 384 floats)."""
    written = 0
    with path.open("wb") as out:
        out.write(flat_header(width, plan.pieces))
        for rows in shard_vectors(folder, len(plan.shards), name):
            out.write(np.ascontiguousarray(rows, dtype=np.float32).tobytes())
            written += len(rows)
    if written != plan.pieces:  # the header counted the plan's pieces: a file that disagrees is never left whole
        path.unlink()
        raise ValueError(f"the shards hold {written:,} vectors of {name}; the plan counts {plan.pieces:,}")


def pq_parts(width: int, n_heads: int, kind: str) -> int:
    """Sub-quantizers: about 8 dimensions each; for the heads' outputs, a whole number in each head so that a masked
    head's codes add nothing to the score."""
    step = n_heads if kind == HEADS else 1
    parts = max(step, (width // 8) // step * step)
    while width % parts:
        parts -= step
    return parts


def training_sample(folder: Path, plan: CorpusPlan, name: str, width: int) -> np.ndarray:
    """(m,W) float32 rows drawn with a fixed seed (the same corpus gives the same index): up to TRAIN_SAMPLE, and no
    more than a share of the budget."""
    m = min(plan.pieces, TRAIN_SAMPLE, max(planned_bytes() // SAMPLE_SHARE // (width * 4), 1024))
    chosen = np.sort(np.random.default_rng(0).choice(plan.pieces, size=m, replace=False))
    sample, at, taken = np.empty((m, width), dtype=np.float32), 0, 0
    for rows in shard_vectors(folder, len(plan.shards), name):
        mine = chosen[(chosen >= at) & (chosen < at + len(rows))] - at
        sample[taken:taken + len(mine)] = rows[mine]
        taken, at = taken + len(mine), at + len(rows)
    return sample


def compressed_index(folder: Path, plan: CorpusPlan, name: str, width: int, n_heads: int, kind: str,
                     rows_path: Path) -> object:
    """IVF-PQ on the inner product: 4·√n lists (at least 16, at most a list per 39 training vectors), codes of ~1
    byte per 8 dimensions, trained on a sample, then filled a shard at a time; the float16 rows that rescore its
    candidates are written beside it as they pass."""
    import faiss

    sample = training_sample(folder, plan, name, width)
    lists = max(16, min(int(4 * math.sqrt(plan.pieces)), len(sample) // 39))
    quantizer = faiss.IndexFlatIP(width)
    index = faiss.IndexIVFPQ(quantizer, width, lists, pq_parts(width, n_heads, kind), PQ_BITS,
                             faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = index.pq.cp.niter = TRAIN_ITERATIONS
    index.train(sample)
    del sample
    with rows_path.open("wb") as rows_file:
        np.lib.format.write_array_header_1_0(rows_file, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
                                                         "fortran_order": False, "shape": (plan.pieces, width)})
        for rows in shard_vectors(folder, len(plan.shards), name):
            rows_file.write(rows.astype(np.float16).tobytes())
            index.add(np.ascontiguousarray(rows, dtype=np.float32))
    return index


def write_vectors(folder: Path, plan: CorpusPlan, model: LoadedModel, layer: int, kind: str) -> None:
    import faiss

    name, width = f"{kind}_{layer}", vector_width(model, kind)
    if plan.exact:
        write_exact(folder, plan, name, width, folder / file_name(layer, kind))
        return
    rows_path = folder / file_name(layer, kind, "npy")
    partial = rows_path.with_suffix(".part")
    index = compressed_index(folder, plan, name, width, model.n_heads, kind, partial)
    partial.replace(rows_path)
    faiss.write_index(index, str(folder / file_name(layer, kind)))


def merge(folder: Path, plan: CorpusPlan, model: LoadedModel, built: dict,
          progress: Callable[[int, int], None] | None = None) -> dict:
    """The shards as the index's files, then index.json (written last: a folder without it is no index). Returns
    the manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_pieces(folder, len(plan.shards))
    sentences = pa.table({"id": pa.array(plan.ids, pa.int32()), "text": [s.text for s in plan.sentences]})
    pq.write_table(sentences, folder / "sentences.parquet")
    steps = [(layer, kind) for layer in plan.layers for kind in kinds_at(model, layer)]
    for done, (layer, kind) in enumerate(steps):
        write_vectors(folder, plan, model, layer, kind)
        release_freed_memory()
        if progress is not None:
            progress(done + 1, len(steps))
    manifest = manifest_of(folder, plan, model, built)
    shutil.rmtree(folder / "shards", ignore_errors=True)
    partial = folder / (MANIFEST + ".tmp")
    partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    partial.replace(folder / MANIFEST)
    return manifest


def manifest_of(folder: Path, plan: CorpusPlan, model: LoadedModel, built: dict) -> dict:
    vectors = vector_files(list(plan.layers), model.n_layers, plan.exact)
    sizes = {name: (folder / name).stat().st_size for name in ["pieces.parquet", "sentences.parquet", *vectors]}
    widths = {kind: vector_width(model, kind) for kind in KINDS}

    def entry(name: str, size: int) -> dict:
        layer_kind = vectors.get(name)
        said = {} if layer_kind is None else {"layer": layer_kind[0], "kind": layer_kind[1], "vectors": plan.pieces,
                                              "width": widths[layer_kind[1]]}
        return {"bytes": size, "sha256": file_sha256(folder / name), **said}

    return {
        "format": FORMAT, "version": VERSION, "model": model.name, "fingerprint": model_fingerprint(model),
        "layers": list(plan.layers), "n_layers": model.n_layers, "n_heads": model.n_heads, "widths": widths,
        "corpus": plan.source, "sentences": len(plan.sentences), "pieces": plan.pieces,
        "search": "exact" if plan.exact else "ivfpq",
        "left_out": {"unreadable": list(plan.unreadable), "too_long": list(plan.too_long)},
        "bytes": sum(sizes.values()), "bytes_per_piece": round(sum(sizes.values()) / max(plan.pieces, 1), 1),
        "files": {name: entry(name, size) for name, size in sizes.items()},
        "built": built,
    }
