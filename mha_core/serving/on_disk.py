"""Results fixed by a model and files the app ships (the induction probe; the bundled corpora's head roles,
syntactic heads and head distances; an offered example's patching grid), kept in the user's cache beside the
converted models and the indexes (issue 44). A server's first visitor, and every process after the first, reads them
in milliseconds instead of computing them again (Gemma 3 over the Chinese treebank: about 40 s on 2 cores for its
roles, about as long again for its head distances; the induction probe on a bundled decoder: about 9 s; an example's
patching grid on SmolLM2: about 10 s); `make prepare` writes most of them before the class, and the app writes one
at its first use.

A file is read only by the code that wrote it: its name holds the model's fingerprint, a digest of the inputs and one
of the engine's and the analyses' code, so an edit to either computes afresh (and the file it replaces is removed).
The file is NumPy's .npz read without pickle; its structure is JSON that may name only the classes of KEPT_CLASSES. A
file that cannot be read so (truncated, edited, foreign), or holds another kind of result, is computed again and
written over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from mha_core.analysis.corpus.passes import HeadDistances
from mha_core.analysis.corpus.syntax import CorpusAnalysis, RelationScore, SyntaxResult
from mha_core.analysis.heads.induction import InductionScores
from mha_core.analysis.heads.roles import HeadRoles
from mha_core.analysis.index.store import model_fingerprint
from mha_core.analysis.lm.patching import PatchGrid
from mha_core.engine.batching import CorpusSelection, Progress
from mha_core.engine.held import kept
from mha_core.engine.loading.bundled import cache_name, cache_root
from mha_core.engine.loading.model import LoadedModel
from mha_core.serving.server import Server, Wait

T = TypeVar("T")
KEPT_CLASSES = {cls.__name__: cls for cls in (CorpusAnalysis, SyntaxResult, RelationScore, HeadRoles,
                                               InductionScores, HeadDistances, CorpusSelection, PatchGrid)}
CODE_PACKAGES = ("engine", "analysis")  # mha_core's packages whose code makes a kept result
TREE = "__tree__"  # the .npz entry holding the structure; the others are its arrays


class NotKept(Exception):
    """No usable file: it is missing, or cannot be read as a kept result."""


@kept("code digest", 1)
def code_digest() -> str:
    """SHA-256 of the engine's and the analyses' source files (names and bytes), read once per process."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for package in CODE_PACKAGES for p in (root / package).rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def kept_path(model: LoadedModel, kind: str, inputs: object) -> Path:
    """Where `kind` computed on `model` from `inputs` (JSON-able: what else the result depends on) is kept."""
    own_name = cache_name(Path(model.name).name)  # the model folder's own name, not its whole path
    folder = cache_root() / "analyses" / f"{own_name}-{model_fingerprint(model)}"
    what = json.dumps([inputs, str(model.embeddings.word.dtype), str(model.device)], sort_keys=True, default=str)
    return folder / f"{kind}-{hashlib.sha256(what.encode()).hexdigest()[:16]}-{code_digest()}.npz"


def encoded(value: object, arrays: dict[str, np.ndarray]) -> object:
    """`value` as JSON, its arrays moved into `arrays` (named by their order)."""
    if dataclasses.is_dataclass(value) and type(value).__name__ in KEPT_CLASSES:
        return {"class": type(value).__name__,
                "fields": {f.name: encoded(getattr(value, f.name), arrays) for f in dataclasses.fields(value)}}
    if isinstance(value, np.ndarray):
        arrays[f"a{len(arrays)}"] = value
        return {"array": f"a{len(arrays) - 1}"}
    if isinstance(value, dict):
        return {"dict": [[encoded(k, arrays), encoded(v, arrays)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"tuple": [encoded(v, arrays) for v in value]}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{type(value).__name__} is not kept on disk")


def decoded(tree: object, arrays: dict[str, np.ndarray]) -> object:
    """The value `encoded` wrote; only KEPT_CLASSES are built (KeyError, TypeError otherwise)."""
    if not isinstance(tree, dict):
        return tree
    if "class" in tree:
        fields = {name: decoded(v, arrays) for name, v in tree["fields"].items()}
        return KEPT_CLASSES[tree["class"]](**fields)
    if "array" in tree:
        return arrays[tree["array"]]
    if "dict" in tree:
        return {_hashable(decoded(k, arrays)): decoded(v, arrays) for k, v in tree["dict"]}
    return tuple(decoded(v, arrays) for v in tree["tuple"])


def _hashable(key: object) -> object:
    if isinstance(key, (list, dict, np.ndarray)):
        raise TypeError("a kept dictionary's key is a value")
    return key


def read(path: Path, expected: type[T]) -> T:
    """The `expected` result kept in `path`; NotKept when there is none there, it cannot be read as one, or it holds
    another kind of result (a file planted under another's name is computed again, never drawn as this one)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        value = decoded(json.loads(str(arrays.pop(TREE))), arrays)
    except (OSError, EOFError, zipfile.BadZipFile, ValueError, KeyError, TypeError, AttributeError,
            RecursionError) as err:
        raise NotKept(str(path)) from err
    if not isinstance(value, expected):
        raise NotKept(f"{path} holds {type(value).__name__}, not {expected.__name__}")
    return value


def write(path: Path, value: object) -> None:
    """Keep `value` in `path`: written beside it then moved into place (a reader never sees half a file; processes
    writing at once each leave a whole one), older code's files of the same inputs removed. A cache that cannot be
    written (read-only, full) keeps nothing: the value is computed again next time."""
    arrays: dict[str, np.ndarray] = {}
    tree = json.dumps(encoded(value, arrays))
    work = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, work = tempfile.mkstemp(dir=path.parent, prefix=".writing-", suffix=".npz")
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **{TREE: np.array(tree)}, **arrays)
        os.replace(work, path)
        work = None
        for older in path.parent.glob(f"{path.name.rsplit('-', 1)[0]}-*.npz"):  # the same inputs, older code
            if older != path:
                older.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        if work is not None:
            Path(work).unlink(missing_ok=True)


def written(path: Path, value: T) -> T:
    """`value`, kept in `path` (write)."""
    write(path, value)
    return value


def content_digest(inputs: object) -> str:
    """The SHA-256 of JSON-able inputs (a corpus's sentences): a kept result's name for what it was computed from."""
    return hashlib.sha256(json.dumps(inputs, ensure_ascii=False).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class OnDisk:
    """One kind of result kept on disk, said once: where it is kept for a model and its arguments (path), the result
    read back (kept: NotKept when there is none of this code), and the result computed and written (keep). The
    arguments are what the result depends on besides the model (a corpus's sentences); `inputs(*args)` names them
    in the file's name, `compute(model, *args, progress)` makes the result."""

    kind: str
    expected: type
    inputs: Callable[..., object]
    compute: Callable[..., object]

    def path(self, model: LoadedModel, *args: object) -> Path:
        return kept_path(model, self.kind, self.inputs(*args))

    def kept(self, model: LoadedModel, *args: object) -> object:
        return read(self.path(model, *args), self.expected)

    def keep(self, model: LoadedModel, *args: object, progress: Progress | None = None) -> object:
        return written(self.path(model, *args), self.compute(model, *args, progress))

    def read_or_queued(self, server: Server, store: str, key: tuple, label: str, wait: Wait, model: LoadedModel,
                       *args: object) -> object:
        """The kept result, read once for the server, else computed and kept through the heavy-work queue."""
        return read_or_queued(server, store, key, label, lambda: self.kept(model, *args),
                              lambda progress: self.keep(model, *args, progress=progress), wait)


def read_or_queued(server: Server, store: str, key: tuple, label: str, read: Callable[[], T],
                   keep: Callable[[Progress], T], wait: Wait) -> T:
    """read() (a kept file) once for the server, in its `store`; when it is not kept, keep(progress) through the
    heavy-work queue."""
    with contextlib.suppress(NotKept):
        return server.kept(store, key, read)
    return server.queued(store, key, label, keep, wait)
