"""The corpus index on disk (issue 37): shards merged (write.py) into one vector index per layer and kind
(faiss), the pieces' metadata and the sentences in Parquet, and index.json, written last, that names the model, the
layers and every file's size, SHA-256 and contents. An index is opened read-only and memory-mapped (thirty students
search one copy in the page cache), after its files are checked: a folder that is not an index, a truncated or
corrupted file, an index of another model, a file that is not the index's own — each is one sentence
(checks.py), and faiss never reads a damaged file.

Files: index.json; pieces.parquet (n rows, META_COLUMNS, in the build's shard order, each sentence whole);
sentences.parquet (id, text); L{layer}.{kind}.faiss (inner product on the stored unit vectors, index_pass); where
the index is compressed (IVF-PQ), also L{layer}.{kind}.npy, the vectors in float16 (n,W), to rescore the candidates
exactly.

Shapes: n pieces, W a kind's vector width (D for hidden states, H*Dh for the heads' outputs).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from mha_core.analysis.index.checks import (
    PIECE_COLUMNS,
    IndexFileError,
    check_files,
    check_manifest,
    check_sentence_ids,
    file_name,
    load_manifest_json,
    read_faiss,
    read_rows,
    read_table,
)
from mha_core.engine.loading.model import LoadedModel
from mha_core.messages import N_

FORMAT, VERSION = "mha-corpus-index", 2  # 2: each vector file's layer, kind, count and width listed (issue 43)
MANIFEST = "index.json"
NPROBE = 48  # a compressed index's lists visited per query (set once, when it is opened)


def model_fingerprint(model: LoadedModel) -> str:
    """The model's identity beyond its name: its configuration and the first embedding rows (another checkpoint of
    the same family differs there)."""
    digest = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    digest.update(model.embeddings.word[:4].detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


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
    """index.json, checked for its format and every field the index reads; one sentence when the folder is not an
    index or its manifest is damaged."""
    path = folder / MANIFEST
    if not folder.is_dir():
        raise IndexFileError("index_not_folder", N_("{folder} is not a folder"), folder=str(folder))
    if not path.is_file():
        raise IndexFileError("index_no_manifest", N_("{folder} is not a corpus index: it has no index.json (build one "
                                                     "with python -m mha_core index)"), folder=str(folder))
    data = load_manifest_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), dict):
        raise IndexFileError("index_bad_manifest_format", N_("{path} is damaged or not a corpus index's manifest"),
                             path=str(path))
    if data.get("version") != VERSION:
        raise IndexFileError("index_version", N_("{folder} is a corpus index of format {found}; this version reads "
                                                 "format {version}: build it again"),
                             folder=str(folder), found=data.get("version"), version=VERSION)
    check_manifest(path, data)
    return Manifest(folder, data)


class OpenIndex:
    """A checked index, its files memory-mapped read-only: metadata in Arrow, vectors in faiss (and float16 rows for
    rescoring a compressed index). Every file is checked as it is opened (index_checks)."""

    def __init__(self, folder: str | Path) -> None:
        if not isinstance(folder, str | Path):
            raise IndexFileError("index_folder_type", N_("An index is opened from its folder (a path), not {given}."),
                                 given=type(folder).__name__)
        self.manifest = read_manifest(Path(folder))
        check_files(self.folder, self.manifest.data["files"])
        check_sentence_ids(self.pieces, self.sentences, self.folder / "pieces.parquet")
        self._faiss: dict[tuple[int, str], object] = {}
        self._rows: dict[tuple[int, str], np.ndarray] = {}
        self.verified: set[tuple[int, str]] = set()  # (layer, kind) whose vectors were found to be the model's own

    @property
    def folder(self) -> Path:
        return self.manifest.folder

    @cached_property
    def pieces(self) -> object:
        return read_table(self.folder / "pieces.parquet", PIECE_COLUMNS, self.manifest.data["pieces"])

    @cached_property
    def sentences(self) -> object:
        return read_table(self.folder / "sentences.parquet", {"id": "int", "text": "string"},
                          self.manifest.data["sentences"])

    @cached_property
    def sentence_text(self) -> dict[int, str]:
        table = self.sentences
        return dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))

    def entry(self, layer: int, kind: str, suffix: str = "faiss") -> dict:
        return self.manifest.data["files"][file_name(layer, kind, suffix)]

    def vectors(self, layer: int, kind: str) -> object:
        """The faiss index of `layer`'s `kind` vectors, memory-mapped."""
        if (layer, kind) not in self._faiss:
            entry = self.entry(layer, kind)
            opened = read_faiss(self.folder / file_name(layer, kind), self.manifest.exact, entry["vectors"],
                                entry["width"])
            if not self.manifest.exact:
                opened.nprobe = NPROBE
            self._faiss[layer, kind] = opened
        return self._faiss[layer, kind]

    def rows(self, layer: int, kind: str) -> np.ndarray:
        """(n,W) float16, memory-mapped: a compressed index's vectors, for rescoring its candidates."""
        if (layer, kind) not in self._rows:  # checked and mapped once, as the faiss file is
            entry = self.entry(layer, kind, "npy")
            self._rows[layer, kind] = read_rows(self.folder / file_name(layer, kind, "npy"), entry["vectors"],
                                                entry["width"])
        return self._rows[layer, kind]
