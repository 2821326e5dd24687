"""The corpus index built on Ray Data (issue 37): a model replica killed mid-build is restarted and its shard retried,
and the index equals the one built in one process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import pytest

from mha_core.analysis.index_store import OpenIndex
from tests.conftest import ROOT, SHARED_DATA, cli

pytestmark = pytest.mark.slow

EWT = SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu"
ARGS = ("--conllu", str(EWT), "--limit", "60", "--layers", "0,3", "--shard-pieces", "64", "--model",
        "all-MiniLM-L6-v2")


def replica_pids() -> list[int]:
    """Processes of Ray Data's actors running the index's model (titled ray::MapWorker(MapBatches(ShardWorker)))."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if entry.name.isdigit() and title.startswith(b"ray::") and b"ShardWorker" in title:
            found.append(int(entry.name))
    return found


def kill_a_replica_after_first_shard(build: subprocess.Popen, shards: Path) -> int:
    """SIGKILL one model replica once the first shard is written; returns the shards written by then."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and build.poll() is None:
        written = len(list(shards.glob("*.parquet"))) if shards.is_dir() else 0
        victims = replica_pids()
        if written and victims:
            os.kill(victims[0], signal.SIGKILL)
            return written
        time.sleep(0.02)
    raise AssertionError(f"no shard and replica to kill: {build.poll()=}")


def stored(index: OpenIndex, layer: int, kind: str) -> np.ndarray:
    vectors = index.vectors(layer, kind)
    return faiss.rev_swig_ptr(vectors.get_xb(), vectors.ntotal * vectors.d).reshape(vectors.ntotal, vectors.d)


def test_a_killed_replica_leaves_the_index_as_one_process_builds_it(tmp_path):
    one = cli("index", *ARGS, "--out", str(tmp_path / "one"), "--json", str(tmp_path / "one.json"))
    assert one.returncode == 0, one.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    build = subprocess.Popen([sys.executable, "-m", "mha_core", "index", *ARGS, "--out", str(tmp_path / "ray"),
                              "--ray", "--workers", "2", "--json", str(tmp_path / "ray.json")],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = kill_a_replica_after_first_shard(build, tmp_path / "ray" / "shards")
    _, stderr = build.communicate(timeout=300)
    assert build.returncode == 0, stderr
    a, b = OpenIndex(tmp_path / "one"), OpenIndex(tmp_path / "ray")
    shards = b.manifest.data["built"]["shards"]
    assert written < shards and b.manifest.data["built"]["shards_computed"] == shards
    assert b.manifest.data["built"]["ray"] == "local"
    assert a.pieces.equals(b.pieces)
    for layer, kind in ((0, "hidden"), (3, "hidden"), (0, "heads"), (3, "heads")):
        np.testing.assert_allclose(stored(a, layer, kind), stored(b, layer, kind), atol=1e-6)
