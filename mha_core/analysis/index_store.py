"""The corpus index on disk (issue 37): shards merged into one vector index per layer and kind (faiss), the pieces'
metadata and the sentences in Parquet, and index.json, written last, that names the model, the layers and every
file's size and SHA-256. An index is opened read-only and memory-mapped (thirty students search one copy in the
page cache), after its files are checked: a folder that is not an index, a truncated or corrupted file, an index of
another model — each is one sentence, and faiss never reads a damaged file.

Files: index.json; pieces.parquet (n rows, META_COLUMNS, in sentence order); sentences.parquet (id, text);
L{layer}.{kind}.faiss (inner product on the stored unit vectors, index_pass); where the index is compressed (IVF-PQ),
also L{layer}.{kind}.npy, the vectors in float16 (n,W), to rescore the candidates exactly.

Shapes: n pieces, W a kind's vector width (D for hidden states, H*Dh for the heads' outputs).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from mha_core.analysis.index_pass import HEADS, KINDS, META_COLUMNS, CorpusPlan, shard_path, vector_width
from mha_core.engine.bundled import file_sha256
from mha_core.engine.model import LoadedModel
from mha_core.engine.tokens import InputError
from mha_core.i18n import N_

FORMAT, VERSION = "mha-corpus-index", 1
MANIFEST = "index.json"
TRAIN_SAMPLE = 65_536  # vectors the IVF-PQ's centroids and codebooks are trained on (faiss asks 39 a list)
TRAIN_ITERATIONS = 12  # k-means rounds (faiss's default 25 took twice as long for the same recall, bench_index.py)
PQ_BITS = 8
NPROBE = 48  # a compressed index's lists visited per query (set once, when it is opened)
ADD_CHUNK = 131_072  # vectors added to a compressed index at a time (memory stays ~ a chunk)


class IndexFileError(InputError):
    """An index folder that cannot be used; the message is one sentence naming the folder or file."""


def model_fingerprint(model: LoadedModel) -> str:
    """The model's identity beyond its name: its configuration and the first embedding rows (another checkpoint of
    the same family differs there)."""
    digest = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    digest.update(model.embeddings.word[:4].detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def file_name(layer: int, kind: str, suffix: str = "faiss") -> str:
    return f"L{layer}.{kind}.{suffix}"


def shard_files(folder: Path, n_shards: int) -> list[object]:
    """The shards as memory-mapped Parquet files (a column is read only when asked for)."""
    import pyarrow.parquet as pq

    return [pq.ParquetFile(shard_path(folder, s), memory_map=True) for s in range(n_shards)]


def piece_order(shards: list[object]) -> object:
    """The pieces' order in the index: by sentence, then position (whatever order the workers finished in)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = pa.concat_tables([shard.read(columns=["sentence", "position"]) for shard in shards])
    return pc.sort_indices(keys, sort_keys=[("sentence", "ascending"), ("position", "ascending")])


def column_of(shards: list[object], name: str, order: object) -> object:
    """One column over every shard, in the index's order (one column in memory at a time: a 1,000,000-piece index's
    columns together are gigabytes). Joined into one array before it is reordered: a chunked array's take() costs
    seconds per shard."""
    import pyarrow as pa

    return pa.concat_arrays([chunk for shard in shards for chunk in shard.read(columns=[name]).column(name).chunks]
                            ).take(order)


def vectors_of(column: object) -> np.ndarray:
    """(n,W) a fixed-size list array as a numpy array."""
    return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), column.type.list_size)


def exact_index(vectors: np.ndarray) -> object:
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def pq_parts(width: int, n_heads: int, kind: str) -> int:
    """Sub-quantizers: about 8 dimensions each; for the heads' outputs, a whole number in each head so that a masked
    head's codes add nothing to the score."""
    step = n_heads if kind == HEADS else 1
    parts = max(step, (width // 8) // step * step)
    while width % parts:
        parts -= step
    return parts


def compressed_index(vectors: np.ndarray, n_heads: int, kind: str) -> object:
    """IVF-PQ on the inner product: 4·√n lists (at least 16, at most a list per 39 training vectors), codes of ~1
    byte per 8 dimensions, trained on a sample drawn with a fixed seed (the same corpus gives the same index)."""
    import faiss

    n, width = vectors.shape
    lists = max(16, min(int(4 * math.sqrt(n)), min(n, TRAIN_SAMPLE) // 39))
    quantizer = faiss.IndexFlatIP(width)
    index = faiss.IndexIVFPQ(quantizer, width, lists, pq_parts(width, n_heads, kind), PQ_BITS,
                             faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = index.pq.cp.niter = TRAIN_ITERATIONS
    sample = np.random.default_rng(0).choice(n, size=min(n, TRAIN_SAMPLE), replace=False)
    index.train(np.ascontiguousarray(vectors[np.sort(sample)], dtype=np.float32))
    for start in range(0, n, ADD_CHUNK):
        index.add(np.ascontiguousarray(vectors[start:start + ADD_CHUNK], dtype=np.float32))
    return index


def write_vectors(folder: Path, vectors: np.ndarray, plan: CorpusPlan, model: LoadedModel, layer: int,
                  kind: str) -> None:
    import faiss

    if plan.exact:
        faiss.write_index(exact_index(vectors), str(folder / file_name(layer, kind)))
        return
    np.save(folder / file_name(layer, kind, "npy"), vectors.astype(np.float16))
    faiss.write_index(compressed_index(vectors, model.n_heads, kind), str(folder / file_name(layer, kind)))


def merge(folder: Path, plan: CorpusPlan, model: LoadedModel, built: dict,
          progress: Callable[[int, int], None] | None = None) -> dict:
    """The shards as the index's files, then index.json (written last: a folder without it is no index). Returns
    the manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shards = shard_files(folder, len(plan.shards))
    order = piece_order(shards)
    meta = pa.table({name: column_of(shards, name, order) for name in META_COLUMNS})
    pq.write_table(meta, folder / "pieces.parquet")
    sentences = pa.table({"id": pa.array(plan.ids, pa.int32()), "text": [s.text for s in plan.sentences]})
    pq.write_table(sentences, folder / "sentences.parquet")
    names = set(shards[0].schema_arrow.names)
    steps = [(layer, kind) for layer in plan.layers for kind in KINDS if f"{kind}_{layer}" in names]
    for done, (layer, kind) in enumerate(steps):
        write_vectors(folder, vectors_of(column_of(shards, f"{kind}_{layer}", order)), plan, model, layer, kind)
        if progress is not None:
            progress(done + 1, len(steps))
    del shards
    manifest = manifest_of(folder, plan, model, steps, built)
    shutil.rmtree(folder / "shards", ignore_errors=True)
    partial = folder / (MANIFEST + ".tmp")
    partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    partial.replace(folder / MANIFEST)
    return manifest


def manifest_of(folder: Path, plan: CorpusPlan, model: LoadedModel, steps: list, built: dict) -> dict:
    files = ["pieces.parquet", "sentences.parquet"] + [file_name(layer, kind) for layer, kind in steps]
    files += [] if plan.exact else [file_name(layer, kind, "npy") for layer, kind in steps]
    sizes = {name: (folder / name).stat().st_size for name in files}
    return {
        "format": FORMAT, "version": VERSION, "model": model.name, "fingerprint": model_fingerprint(model),
        "layers": list(plan.layers), "n_layers": model.n_layers, "n_heads": model.n_heads,
        "widths": {kind: vector_width(model, kind) for kind in KINDS},
        "corpus": plan.source, "sentences": len(plan.sentences), "pieces": plan.pieces,
        "search": "exact" if plan.exact else "ivfpq",
        "left_out": {"unreadable": list(plan.unreadable), "too_long": list(plan.too_long)},
        "bytes": sum(sizes.values()), "bytes_per_piece": round(sum(sizes.values()) / max(plan.pieces, 1), 1),
        "files": {name: {"bytes": size, "sha256": file_sha256(folder / name)} for name, size in sizes.items()},
        "built": built,
    }


@dataclass(frozen=True)
class Manifest:
    folder: Path
    data: dict

    @property
    def model(self) -> str:
        return self.data["model"]

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(self.data["layers"])

    @property
    def exact(self) -> bool:
        return self.data["search"] == "exact"

    def has(self, layer: int, kind: str) -> bool:
        return file_name(layer, kind) in self.data["files"]


def read_manifest(folder: Path) -> Manifest:
    """index.json, checked for its format; one sentence when the folder is not an index."""
    path = folder / MANIFEST
    if not folder.is_dir():
        raise IndexFileError("index_not_folder", N_("{folder} is not a folder"), folder=str(folder))
    if not path.is_file():
        raise IndexFileError("index_no_manifest", N_("{folder} is not a corpus index: it has no index.json (build one "
                                                     "with python -m mha_core index)"), folder=str(folder))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), dict):
        raise IndexFileError("index_bad_manifest", N_("{path} is damaged or not a corpus index's manifest"),
                             path=str(path))
    if data.get("version") != VERSION:
        raise IndexFileError("index_version", N_("{folder} is a corpus index of format {found}; this version reads "
                                                 "format {version}: build it again"),
                             folder=str(folder), found=data.get("version"), version=VERSION)
    return Manifest(folder, data)


_checked: dict[tuple, bool] = {}  # (file, size, mtime) already hashed in this process


def check_files(manifest: Manifest) -> None:
    """Every file present, of its size (a truncated copy) and of its SHA-256 (a corrupted one); each file is hashed
    once per process while unchanged."""
    for name, expected in manifest.data["files"].items():
        path = manifest.folder / name
        if not path.is_file():
            raise IndexFileError("index_file_missing", N_("{path} is missing: the index is incomplete"),
                                 path=str(path))
        stat = path.stat()
        if stat.st_size != expected["bytes"]:
            raise IndexFileError("index_file_truncated", N_("{path} has {size:,} bytes where the index wrote "
                                                            "{expected:,}: it is truncated or was changed"),
                                 path=str(path), size=stat.st_size, expected=expected["bytes"])
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in _checked:
            if file_sha256(path) != expected["sha256"]:
                raise IndexFileError("index_file_corrupted", N_("{path} is corrupted: its contents differ from what "
                                                                "the index wrote"), path=str(path))
            _checked[key] = True


class OpenIndex:
    """A checked index, its files memory-mapped read-only: metadata in Arrow, vectors in faiss (and float16 rows for
    rescoring a compressed index)."""

    def __init__(self, folder: str | Path) -> None:
        self.manifest = read_manifest(Path(folder))
        check_files(self.manifest)
        self._faiss: dict[tuple[int, str], object] = {}

    @property
    def folder(self) -> Path:
        return self.manifest.folder

    @cached_property
    def pieces(self) -> object:
        import pyarrow.parquet as pq

        return pq.read_table(self.folder / "pieces.parquet", memory_map=True)

    @cached_property
    def sentence_text(self) -> dict[int, str]:
        import pyarrow.parquet as pq

        table = pq.read_table(self.folder / "sentences.parquet", memory_map=True)
        return dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))

    def vectors(self, layer: int, kind: str) -> object:
        """The faiss index of `layer`'s `kind` vectors, memory-mapped."""
        if (layer, kind) not in self._faiss:
            import faiss

            flags = faiss.IO_FLAG_READ_ONLY | (faiss.IO_FLAG_MMAP_IFC if self.manifest.exact else faiss.IO_FLAG_MMAP)
            opened = faiss.read_index(str(self.folder / file_name(layer, kind)), flags)
            if not self.manifest.exact:
                opened.nprobe = NPROBE
            self._faiss[layer, kind] = opened
        return self._faiss[layer, kind]

    def rows(self, layer: int, kind: str) -> np.ndarray:
        """(n,W) float16, memory-mapped: a compressed index's vectors, for rescoring its candidates."""
        return np.load(self.folder / file_name(layer, kind, "npy"), mmap_mode="r")
