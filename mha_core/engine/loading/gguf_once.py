"""A GGUF file parsed once while it is converted.

transformers parses a GGUF file three times (for the tokenizer, the config and the weights), each time with gguf's
GGUFReader, which reads every field through `numpy.memmap` slices, and each slice pays memmap's own Python
(`__getitem__`, `__array_finalize__`): Gemma 3's 262,144 vocabulary pieces took 9 s a parse, 27 s of its conversion.
Within `one_parse_per_file()` a file is parsed once, over a plain array view of the same read-only mapping: the same
bytes, so the same fields and tensors (tests/test_gguf_once.py), in about 3 s.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import gguf
import numpy as np


class PlainArrayReader(gguf.GGUFReader):
    """GGUFReader over a plain ndarray view of its memmap (no copy): the reader assigns `self.data` once, first."""

    @property
    def data(self) -> np.ndarray:
        return self._plain

    @data.setter
    def data(self, mapped: np.ndarray) -> None:
        self._plain = mapped.view(np.ndarray)


ONE_AT_A_TIME = threading.Lock()  # the patch is the process's: two first uses converting at once take turns


@contextlib.contextmanager
def one_parse_per_file() -> Iterator[dict[str, PlainArrayReader]]:
    """Within the block, `gguf.GGUFReader(path)` (which transformers imports from gguf at each parse) gives one
    PlainArrayReader per file and mode; yields them, by "path:mode". One block at a time in a process (a server whose
    visitors choose two bundled decoders at their first use converts them in turn); conversion is the only reader of
    GGUF files here."""
    parsed: dict[str, PlainArrayReader] = {}

    def reader(path: os.PathLike[str] | str, mode: str = "r") -> PlainArrayReader:
        key = f"{os.fspath(path)}:{mode}"
        if key not in parsed:
            parsed[key] = PlainArrayReader(path, mode)
        return parsed[key]

    with ONE_AT_A_TIME:
        original = gguf.GGUFReader
        gguf.GGUFReader = reader
        try:
            yield parsed
        finally:
            gguf.GGUFReader = original
