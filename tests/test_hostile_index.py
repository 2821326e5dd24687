"""A tampered or damaged corpus index (issue 43): every case is one sentence naming the file — from the Python API
(IndexFileError) and from the CLI (exit 2, one line) — never a traceback, and a file that is not the index's own
(outside the folder, a link, unlisted) is refused without a word about it. Table-driven over one built tiny index."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mha_core.analysis.index.build import build_index, text_corpus
from mha_core.analysis.index.search import search_text
from mha_core.analysis.index.store import IndexFileError, OpenIndex
from mha_core.cli import main

LINES = ["The cat sat on the mat.", "It was tired.", "A dog barked at the cat.", "The animal crossed the street."]


@pytest.fixture(scope="module")
def built(tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-index")
    (root / "lines.txt").write_text("\n".join(LINES * 5) + "\n", encoding="utf-8")
    build_index(tiny, text_corpus(root / "lines.txt"), [0, 1, 2], root / "index")
    return root / "index"


def manifest(folder: Path) -> dict:
    return json.loads((folder / "index.json").read_text(encoding="utf-8"))


def save(folder: Path, data: dict) -> None:
    (folder / "index.json").write_text(json.dumps(data), encoding="utf-8")


def rehash(folder: Path, name: str) -> None:
    """The manifest's size and SHA-256 of `name` made to match the file now there (a tamperer's update)."""
    data = manifest(folder)
    raw = (folder / name).read_bytes()
    data["files"][name].update(bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest())
    save(folder, data)


def random_faiss(folder: Path) -> None:
    (folder / "L1.hidden.faiss").write_bytes(np.random.default_rng(0).bytes(4096))
    rehash(folder, "L1.hidden.faiss")


def linked_faiss(folder: Path) -> None:
    (folder / "L1.hidden.faiss").unlink()
    os.symlink("/etc/passwd", folder / "L1.hidden.faiss")
    rehash(folder, "L1.hidden.faiss")


def narrow_faiss(folder: Path) -> None:
    import faiss

    index = faiss.IndexFlatIP(8)
    index.add(np.ones((manifest(folder)["pieces"], 8), dtype=np.float32))
    faiss.write_index(index, str(folder / "L1.hidden.faiss"))
    rehash(folder, "L1.hidden.faiss")


def edit(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        data = manifest(folder)
        change(data)
        save(folder, data)
    return apply


def deep_manifest(folder: Path) -> None:
    (folder / "index.json").write_text('{"format": "mha-corpus-index", "files": ' + "[" * 100_000 + "]" * 100_000
                                       + "}", encoding="utf-8")


def short_parquet(folder: Path) -> None:
    path = folder / "pieces.parquet"
    path.write_bytes(path.read_bytes()[:200])
    rehash(folder, "pieces.parquet")


def garbled_parquet(folder: Path) -> None:
    path = folder / "sentences.parquet"
    data = bytearray(path.read_bytes())
    data[8:80] = bytes(72)
    path.write_bytes(bytes(data))
    rehash(folder, "sentences.parquet")


def far_sentence_id(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(folder / "pieces.parquet")
    ids = table.column("sentence").to_pylist()
    ids[0] = 10**9
    table = table.set_column(table.schema.get_field_index("sentence"), "sentence", pa.array(ids, pa.int32()))
    pq.write_table(table, folder / "pieces.parquet")
    rehash(folder, "pieces.parquet")


def unlisted(name: str, target: str) -> Callable[[Path], None]:
    """The manifest lists `name` (outside the folder, or a stray) with `target`'s size and hash."""
    def apply(folder: Path) -> None:
        data = manifest(folder)
        data["files"][name] = data["files"].pop(target)
        save(folder, data)
    return apply


def outside_link(folder: Path) -> None:
    outside = folder.parent / "elsewhere.parquet"
    shutil.move(folder / "sentences.parquet", outside)
    os.symlink(outside, folder / "sentences.parquet")


def swapped(a: str, b: str) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / a).rename(folder / "swap")
        (folder / b).rename(folder / a)
        (folder / "swap").rename(folder / b)
        rehash(folder, a)
        rehash(folder, b)
    return apply


CASES = {  # damage -> what the one sentence says (the file it names is checked too)
    "faiss of random bytes": (random_faiss, "L1.hidden.faiss cannot be read as a faiss vector index"),
    "faiss a link to /etc/passwd": (linked_faiss, "L1.hidden.faiss is not a regular file of the index's folder"),
    "faiss of width 8": (narrow_faiss, "L1.hidden.faiss holds .* vectors of width 8; the manifest lists"),
    "ivfpq said of an exact index": (edit(lambda d: d.update(search="ivfpq")), "index.json is damaged .* does not "
                                     "list the files"),
    "a key missing": (edit(lambda d: d.pop("pieces")), "index.json is damaged .*'pieces' is not a whole number"),
    "a file entry a string": (edit(lambda d: d["files"].update({"pieces.parquet": "x"})),
                              "index.json is damaged .*entry for pieces.parquet has no size"),
    "layers not numbers": (edit(lambda d: d.update(layers=["0"])), "index.json is damaged .*'layers'"),
    "a 100,000-deep manifest": (deep_manifest, "index.json is damaged or not a corpus index's manifest"),
    "a short Parquet": (short_parquet, "pieces.parquet cannot be read as a Parquet table"),
    "a garbled Parquet": (garbled_parquet, "sentences.parquet cannot be read as a Parquet table"),
    "a sentence id of 10⁹": (far_sentence_id, "pieces.parquet names sentences the index's sentences.parquet does "
                                              "not hold"),
    "a file left out of the list": (edit(lambda d: d["files"].pop("L2.hidden.faiss")), "does not list the files"),
    "/etc/shadow listed": (unlisted("/etc/shadow", "L2.hidden.faiss"), "does not list the files"),
    "../../etc/passwd listed": (unlisted("../../../../etc/passwd", "L2.hidden.faiss"), "does not list the files"),
    "a link leaving the folder": (outside_link, "sentences.parquet is not a regular file"),
    "a wrong vector count listed": (edit(lambda d: d["files"]["L1.hidden.faiss"].update(vectors=3)),
                                    "entry for L1.hidden.faiss does not say"),
    "layers swapped": (swapped("L1.hidden.faiss", "L2.hidden.faiss"), "L1.hidden.faiss does not hold layer 1's "
                                                                      "hidden vectors"),
    "kinds swapped": (swapped("L1.hidden.faiss", "L1.heads.faiss"), "L1.hidden.faiss does not hold layer 1's "
                                                                    "hidden vectors"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_index_is_one_sentence_naming_the_file(tiny, tiny_dir, built, tmp_path, capsys, case):
    damage, said = CASES[case]
    folder = tmp_path / "index"
    shutil.copytree(built, folder, symlinks=True)
    damage(folder)
    with pytest.raises(IndexFileError, match=said) as caught:
        search_text(OpenIndex(folder), tiny, "The cat was tired.", 1, 1)
    assert "\n" not in str(caught.value)
    assert "passwd" not in str(caught.value) and "shadow" not in str(caught.value)  # nothing said of the outside
    capsys.readouterr()
    code = main(["search", "--index", str(folder), "--text", "The cat was tired.", "--token", "1", "--layer", "1",
                 "--model-dir", str(tiny_dir)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_the_untouched_copy_searches(tiny, built, tmp_path):
    """The table's baseline: the same copy, undamaged, opens and searches (so each case fails by its damage)."""
    folder = tmp_path / "index"
    shutil.copytree(built, folder, symlinks=True)
    found = search_text(OpenIndex(folder), tiny, "The cat was tired.", 1, 1, top=3)
    assert len(found.matches) == 3 and found.matches[0].context in LINES


def test_another_checkpoint_of_the_same_name_is_named_once(tiny, built):
    """A fingerprint that differs from the model's: the sentence names the model once and says what differs."""
    import copy

    other = copy.copy(tiny)
    object.__setattr__(other, "embeddings", copy.copy(tiny.embeddings))
    object.__setattr__(other.embeddings, "word", tiny.embeddings.word + 1.0)
    with pytest.raises(IndexFileError, match=f"another checkpoint of {re.escape(tiny.name)}") as caught:
        search_text(OpenIndex(built), other, "The cat was tired.", 1, 1)
    assert str(caught.value).count(tiny.name) == 1


@pytest.mark.parametrize("family", ["whisper", "dinov2", "t5"])
def test_a_model_that_reads_no_sentence_alone_is_refused_before_it_runs(built, tmp_path, family):
    """Whisper raised AttributeError inside the forward, DINOv2 a TypeError in the tokenizer: now one sentence, and
    the CLI's search exits 2."""
    from mha_core.engine.loading.model import load_model
    from mha_core.engine.tokens import InputError
    from tests.tiny_models import make_tiny_seq2seq, make_tiny_vision

    folder = (make_tiny_vision if family == "dinov2" else make_tiny_seq2seq)(family, tmp_path / family)
    with pytest.raises(InputError, match="does not read a sentence alone .* searched with the text model it was "
                                         "built with"):
        search_text(OpenIndex(built), load_model(folder), "The cat was tired.", 1, 1)
