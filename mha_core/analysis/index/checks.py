"""What a corpus index's folder must be before any of it is read (issue 43): index.json of the expected shape, every
file the index reads listed there and nothing else, each a regular file inside the folder of the size and SHA-256 the
build wrote; then, as each file is opened, its contents as the manifest says (a faiss index of the listed kind,
count and width; Parquet tables of the index's columns, their sentence ids consistent). Anything else is one
sentence naming the file (IndexFileError); a file that is not the index's own is refused without a word about it.

Shapes: n pieces, W a kind's vector width.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import numpy as np

from mha_core.analysis.index.passes import HIDDEN, KINDS, META_COLUMNS
from mha_core.engine.held import Held, register, value_bytes
from mha_core.engine.loading.bundled import file_sha256
from mha_core.engine.tokens import InputError
from mha_core.messages import N_, Worded

MAX_MANIFEST_BYTES = 64 * 2**20  # index.json holds the left-out sentence ids: a few MB for millions of lines
SEARCHES = ("exact", "ivfpq")
SHA256 = re.compile(r"[0-9a-f]{64}")


class IndexFileError(InputError):
    """An index folder that cannot be used; the message is one sentence naming the folder or file."""


def file_name(layer: int, kind: str, suffix: str = "faiss") -> str:
    return f"L{layer}.{kind}.{suffix}"


def vector_files(layers: list[int], n_layers: int, exact: bool) -> dict[str, tuple[int, str]]:
    """{file name: (layer, kind)} of every vector file an index of these layers has (heads where a layer runs
    them; a compressed index also keeps each kind's float16 rows)."""
    suffixes = ("faiss",) if exact else ("faiss", "npy")
    return {file_name(layer, kind, suffix): (layer, kind) for layer in layers
            for kind in KINDS if kind == HIDDEN or layer < n_layers for suffix in suffixes}


def bad_manifest(path: Path, what: str, **values: object) -> IndexFileError:
    return IndexFileError("index_bad_manifest", N_("{path} is damaged or not a corpus index's manifest: {what}"),
                          path=str(path), what=Worded(what, **values))


def load_manifest_json(path: Path) -> object:
    """index.json parsed; None where it is not JSON (too large, not UTF-8, nested past Python's limit)."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def whole(value: object, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_manifest(path: Path, data: dict) -> None:
    """Every field the index reads, of its type; the files listed exactly those an index of its layers has."""
    for key in ("model", "fingerprint", "corpus"):
        if not isinstance(data.get(key), str):
            raise bad_manifest(path, N_("its {key!r} is not a text"), key=key)
    for key, low in (("n_layers", 1), ("n_heads", 1), ("sentences", 1), ("pieces", 1)):
        if not whole(data.get(key), low):
            raise bad_manifest(path, N_("its {key!r} is not a whole number of at least {low}"), key=key, low=low)
    layers = data.get("layers")
    if not (isinstance(layers, list) and layers and all(whole(x) and x <= data["n_layers"] for x in layers)
            and layers == sorted(set(layers))):
        raise bad_manifest(path, N_("its 'layers' are not the model's layers, 0 to {last}, in order"),
                           last=data["n_layers"])
    widths = data.get("widths")
    if not (isinstance(widths, dict) and all(whole(widths.get(kind), 1) for kind in KINDS)):
        raise bad_manifest(path, N_("its 'widths' do not give each kind's vector width"))
    if data.get("search") not in SEARCHES:
        raise bad_manifest(path, N_("its 'search' is neither 'exact' nor 'ivfpq'"))
    check_listed_files(path, data)


def check_listed_files(path: Path, data: dict) -> None:
    files = data["files"]
    vectors = vector_files(data["layers"], data["n_layers"], data["search"] == "exact")
    if set(files) != {"pieces.parquet", "sentences.parquet", *vectors}:
        raise bad_manifest(path, N_("it does not list the files an index of layers {layers} has"),
                           layers=", ".join(map(str, data["layers"])))
    for name, entry in files.items():
        if not (isinstance(entry, dict) and whole(entry.get("bytes")) and isinstance(entry.get("sha256"), str)
                and SHA256.fullmatch(entry["sha256"])):
            raise bad_manifest(path, N_("its entry for {name} has no size and SHA-256"), name=name)
        if name in vectors:
            layer, kind = vectors[name]
            said = (entry.get("layer"), entry.get("kind"), entry.get("vectors"), entry.get("width"))
            if said != (layer, kind, data["pieces"], data["widths"][kind]):
                raise bad_manifest(path, N_("its entry for {name} does not say layer {layer}'s {kind} vectors, "
                                            "{pieces:,} of width {width}"), name=name, layer=layer, kind=kind,
                                   pieces=data["pieces"], width=data["widths"][kind])


_hashed: dict[tuple, bool] = {}  # (file, size, mtime) already hashed in this process
register("index hashes", lambda: Held("index hashes", len(_hashed), value_bytes(dict(_hashed)), True))


def check_files(folder: Path, files: dict) -> None:
    """Every listed file present, a regular file inside `folder` (a link is not followed), of its size (a truncated
    copy) and of its SHA-256 (a corrupted one); each file is hashed once per process while unchanged."""
    for name, expected in files.items():
        path = folder / name
        try:
            found = os.lstat(path)
        except OSError:
            raise IndexFileError("index_file_missing", N_("{path} is missing: the index is incomplete"),
                                 path=str(path)) from None
        if not stat.S_ISREG(found.st_mode):
            raise IndexFileError("index_file_not_regular", N_("{path} is not a regular file of the index's folder: "
                                                              "it is refused"), path=str(path))
        if found.st_size != expected["bytes"]:
            raise IndexFileError("index_file_truncated", N_("{path} has {size:,} bytes where the index wrote "
                                                            "{expected:,}: it is truncated or was changed"),
                                 path=str(path), size=found.st_size, expected=expected["bytes"])
        key = (str(path), found.st_size, found.st_mtime_ns)
        if key not in _hashed:
            if file_sha256(path) != expected["sha256"]:
                raise IndexFileError("index_file_corrupted", N_("{path} is corrupted: its contents differ from what "
                                                                "the index wrote"), path=str(path))
            _hashed[key] = True


def unreadable(path: Path, what: str) -> IndexFileError:
    return IndexFileError("index_file_unreadable", N_("{path} cannot be read as {what}: the file is damaged or not "
                                                      "the index's own"), path=str(path), what=Worded(what))


def read_faiss(path: Path, exact: bool, count: int, width: int) -> object:
    """The faiss index at `path` (memory-mapped, read-only), checked against the manifest: its kind (flat for an
    exact index, IVF-PQ for a compressed one), its vector count and width, the inner product as its metric."""
    import faiss

    flags = faiss.IO_FLAG_READ_ONLY | (faiss.IO_FLAG_MMAP_IFC if exact else faiss.IO_FLAG_MMAP)
    try:
        opened = faiss.read_index(str(path), flags)
    except (RuntimeError, MemoryError, ValueError):
        raise unreadable(path, N_("a faiss vector index")) from None
    kind = faiss.IndexFlat if exact else faiss.IndexIVFPQ
    if not isinstance(opened, kind) or opened.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise IndexFileError("index_faiss_kind", N_("{path} is not the {search} inner-product index the manifest "
                                                    "lists"), path=str(path), search="exact" if exact else "ivfpq")
    if (opened.ntotal, opened.d) != (count, width):
        raise IndexFileError("index_faiss_shape", N_("{path} holds {found:,} vectors of width {found_width}; the "
                                                     "manifest lists {count:,} of width {width}"), path=str(path),
                             found=opened.ntotal, found_width=opened.d, count=count, width=width)
    return opened


def read_rows(path: Path, count: int, width: int) -> np.ndarray:
    """(n,W) float16, memory-mapped: a compressed index's vectors, checked for their shape and type."""
    try:
        rows = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        raise unreadable(path, N_("a NumPy array")) from None
    if rows.shape != (count, width) or rows.dtype != np.float16:
        raise IndexFileError("index_rows_shape", N_("{path} holds {shape} {dtype} rows; the manifest lists "
                                                    "{count:,} × {width} float16"), path=str(path),
                             shape=" × ".join(map(str, rows.shape)), dtype=str(rows.dtype), count=count, width=width)
    return rows


def read_table(path: Path, columns: dict[str, str], rows: int) -> object:
    """A Parquet table with these columns (name: 'int' or 'string') and `rows` rows, memory-mapped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, memory_map=True)
    except (pa.ArrowException, OSError):
        raise unreadable(path, N_("a Parquet table")) from None
    test = {"int": pa.types.is_integer, "string": pa.types.is_string}
    wrong = [name for name, kind in columns.items()
             if name not in table.schema.names or not test[kind](table.schema.field(name).type)]
    if wrong or table.num_rows != rows:
        raise IndexFileError("index_table_shape", N_("{path} does not hold the index's {rows:,} rows of columns "
                                                     "{columns}"), path=str(path), rows=rows,
                             columns=", ".join(columns))
    return table


PIECE_COLUMNS = {name: "int" if name in ("sentence", "position", "word_index", "start", "end", "head") else "string"
                 for name in META_COLUMNS}


def check_sentence_ids(pieces: object, sentences: object, path: Path) -> None:
    """Every piece's sentence is one the sentences' table holds, and every id there is unique."""
    import pyarrow.compute as pc

    ids, used = sentences.column("id"), pieces.column("sentence")
    unique = pc.count_distinct(ids).as_py() == len(ids)
    if used.null_count or ids.null_count or not unique or not pc.all(pc.is_in(used, value_set=ids)).as_py():
        raise IndexFileError("index_sentence_ids", N_("{path} names sentences the index's sentences.parquet does "
                                                      "not hold"), path=str(path))

