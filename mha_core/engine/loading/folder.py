"""Reading a model folder without trusting it (issue 33): every file a listing or a load reads before building a model
— config.json, refs/main, the safetensors headers — is read only if it is a regular file, only up to a size cap, and
parsed so that no content (deep nesting, a number where a name belongs, a negative or absurd shape) can raise
anything but one ModelLoadError sentence; the config's sizes are checked against the weights' headers before
transformers builds anything (a config asking for 10⁹ layers would otherwise be built before it is refused)."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from collections.abc import Iterable
from pathlib import Path

from mha_core.messages import N_, Explained, Worded, shortened

CONFIG_MAX_BYTES = 1 << 20  # a config.json is a few KB
REF_MAX_BYTES = 256  # refs/main holds a revision's hash
HEADER_MAX_BYTES = 16 << 20  # a safetensors header: about 100 bytes per tensor
MAX_DIM = 1 << 40  # no tensor has a side this long
MAX_LAYERS, MAX_WIDTH = 10_000, 1 << 20  # sizes a config may ask for at all
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers?|h|blocks?)\.(\d+)\.")
EMBEDDING_NAMES = ("embed_tokens.weight", "word_embeddings.weight", "wte.weight")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers")
WIDTH_KEYS = ("hidden_size", "n_embd", "dim", "d_model")


class ModelLoadError(Explained):
    """A model directory that cannot be used; the message is one sentence for the user."""


NOT_REGULAR = N_("{path} is not a regular file (a pipe, socket or device): it is never read.")


def refused(code: str, template: str, **values: object) -> ModelLoadError:
    return ModelLoadError(code, template, **values)


def read_small(path: Path, limit: int, name: str | None = None) -> bytes:
    """The bytes of `path` (`name` in messages), which must be a regular file of at most `limit` bytes (a FIFO, a
    device or a huge file is refused before it is opened for reading: nothing blocks and nothing big is read)."""
    name = name or path.name
    try:
        info = path.stat()
    except OSError as err:
        raise refused("file_unreadable", N_("{path} cannot be read ({reason})."), path=name,
                      reason=err.strerror or err.__class__.__name__) from None
    if not stat.S_ISREG(info.st_mode):
        raise refused("not_regular_file", NOT_REGULAR, path=name)
    if info.st_size > limit:
        raise refused("file_too_large", N_("{path} has {size:,} bytes, over the {limit:,} such a file may have."),
                      path=name, size=info.st_size, limit=limit)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as file:
        return file.read(limit + 1)[:limit]


def parse_json(raw: bytes | str, what: str) -> object:
    """JSON text of `what` (a file's name), or ModelLoadError: invalid text, or nesting Python cannot follow."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as err:
        reason = Worded(N_("nested too deeply")) if isinstance(err, RecursionError) else err.__class__.__name__
        raise refused("json_invalid", N_("{what} is not valid JSON ({reason})."), what=what, reason=reason) from None


def read_config(folder: Path) -> dict:
    """config.json as a dict (ModelLoadError otherwise)."""
    config = parse_json(read_small(folder / "config.json", CONFIG_MAX_BYTES), "config.json")
    if not isinstance(config, dict):
        raise refused("config_not_object", N_("config.json is not a JSON object."))
    return config


def read_revision(repo: Path) -> Path:
    """The snapshot folder refs/main names in a Hugging Face cache repository: a plain revision name inside the
    repository's snapshots/ (never a path out of it)."""
    revision = read_small(repo / "refs" / "main", REF_MAX_BYTES, "refs/main").decode("utf-8", "replace").strip()
    if not re.fullmatch(r"[0-9A-Za-z._-]{1,100}", revision) or revision in (".", ".."):
        raise refused("ref_not_revision", N_("refs/main does not name a revision ({revision})."),
                      revision=revision[:40])
    snapshots = (repo / "snapshots").resolve()
    snapshot = (snapshots / revision).resolve()
    if snapshot.parent != snapshots or not snapshot.is_dir():
        raise refused("revision_missing", N_("refs/main names {revision}, which is not a snapshot of this "
                                             "repository."), revision=revision)
    return repo / "snapshots" / revision


UNREADABLE_WEIGHTS = N_("{path} is no readable safetensors weights: {reason}.")


def safetensors_header(path: Path) -> dict[str, dict]:
    """A safetensors file's header (8 bytes of length, then JSON), checked: each tensor's dtype a name, its shape
    non-negative whole numbers below MAX_DIM. Nothing but the header is read."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise refused("not_regular_file", NOT_REGULAR, path=path.name)
        with path.open("rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            if length > min(HEADER_MAX_BYTES, info.st_size):
                raise refused("header_too_long", UNREADABLE_WEIGHTS, path=path.name,
                              reason=Worded(N_("its header claims {length:,} bytes"), length=length))
            header = parse_json(file.read(length), path.name)
    except (OSError, struct.error):
        raise refused("weights_unreadable", UNREADABLE_WEIGHTS, path=path.name,
                      reason=Worded(N_("it cannot be read"))) from None
    if not isinstance(header, dict):
        raise refused("header_not_object", UNREADABLE_WEIGHTS, path=path.name,
                      reason=Worded(N_("its header is not a JSON object")))
    tensors = {key: entry for key, entry in header.items() if key != "__metadata__"}
    for key, entry in tensors.items():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        good = (isinstance(entry, dict) and isinstance(entry.get("dtype"), str) and isinstance(shape, list)
                and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < MAX_DIM for n in shape))
        if not good:
            raise refused("header_tensor_invalid", N_("{path} describes tensor {key} with no valid dtype and shape."),
                          path=path.name, key=str(key)[:60])
    return tensors


def weight_headers(folder: Path) -> dict[str, dict]:
    """Every tensor of the folder's *.safetensors files, by name."""
    tensors: dict[str, dict] = {}
    for path in sorted(folder.glob("*.safetensors")):
        tensors.update(safetensors_header(path))
    return tensors


def parameter_count(tensors: dict[str, dict]) -> int:
    """Floating-point parameters in the headers (integer buffers such as position ids are not parameters)."""
    return sum(math.prod(entry["shape"]) for entry in tensors.values() if entry["dtype"].startswith(("F", "BF")))


def config_number(config: dict, keys: Iterable[str]) -> int | None:
    """The first of `keys` the config has, which must be a whole number from 1 to a sane maximum."""
    for key in keys:
        if config.get(key) is not None:
            value = config[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise refused("config_size_invalid", N_("config.json's {key} is {value}, not a whole number."),
                              key=key, value=str(value)[:30])
            return value
    return None


SIZES_DIFFER = N_("The weights do not match the sizes in config.json: it asks for {asked}, the weights hold {held}.")


def check_sizes(config: dict, tensors: dict[str, dict]) -> None:
    """The config's layer count and width against the weights' headers, before anything is built."""
    layers = config_number(config, LAYER_KEYS)
    width = config_number(config, WIDTH_KEYS)
    if (layers or 0) > MAX_LAYERS or (width or 0) > MAX_WIDTH:
        raise refused("config_sizes_absurd", N_("config.json asks for {layers:,} layers of width {width:,}, more than "
                                                "any model this server can hold."), layers=layers or 0,
                      width=width or 0)
    held = {int(m.group(1)) for name in tensors for m in [LAYER_INDEX.search(name)] if m}
    if layers is not None and held and layers > max(held) + 1:
        raise refused("config_layers_missing", SIZES_DIFFER, asked=Worded(N_("{n:,} layers"), n=layers),
                      held=Worded(N_("{n:,} layers"), n=max(held) + 1))
    embedding = next((entry for name, entry in tensors.items() if name.endswith(EMBEDDING_NAMES)), None)
    if width is not None and embedding is not None and len(embedding["shape"]) == 2 and (
            embedding["shape"][1] != width):
        raise refused("config_width_mismatch", SIZES_DIFFER, asked=Worded(N_("width {n:,}"), n=width),
                      held=Worded(N_("embeddings {n:,} wide"), n=embedding["shape"][1]))


SHOWN_PATH_CHARS = 80  # long paths are cut in messages


def shown(path: str | Path) -> str:
    """A path for a message, cut to SHOWN_PATH_CHARS characters."""
    return shortened(str(path), SHOWN_PATH_CHARS)
