"""The corpus index built on Ray Data (issue 37): a model replica that dies mid-build (a fault injected in the worker:
its process ends at its first try of one shard, as a killed one does) is restarted and its shard retried, and the
index equals the one built in one process. The build on Ray runs the CLI's main() in this process (tests.conftest.cli:
the driver's torch and transformers are imported already, where a `python -m mha_core` imported them again), on the
local Ray it starts and shuts down; its replicas are Ray's own worker processes, which read the fault and the
checkout's path from the environment they inherit."""

from __future__ import annotations

import signal

import faiss
import numpy as np
import pytest

from mha_core.analysis.index.on_ray import FAULT_ENV
from mha_core.analysis.index.store import OpenIndex
from tests.conftest import ROOT, SHARED_DATA, cli

pytestmark = [pytest.mark.slow,  # Ray Data's own settings, warned about in the driver (this process's, as Ray's user)
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]

EWT = SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu"
FAULTY_SHARD = 2  # of 8 shards (12 sentences in shards of 48 pieces): the other replica has more to do
ARGS = ("--conllu", str(EWT), "--limit", "12", "--layers", "0,3", "--shard-pieces", "48", "--model",
        "all-MiniLM-L6-v2")


def stored(index: OpenIndex, layer: int, kind: str) -> np.ndarray:
    vectors = index.vectors(layer, kind)
    return faiss.rev_swig_ptr(vectors.get_xb(), vectors.ntotal * vectors.d).reshape(vectors.ntotal, vectors.d)


@pytest.mark.long
def test_a_killed_replica_leaves_the_index_as_one_process_builds_it(tmp_path, monkeypatch):
    one = cli("index", *ARGS, "--out", str(tmp_path / "one"), "--json", str(tmp_path / "one.json"))
    assert one.returncode == 0, one.stderr
    marker = tmp_path / "died"
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the replicas' (Ray's workers inherit the environment)
    monkeypatch.setenv(FAULT_ENV, f"{FAULTY_SHARD}:{marker}")  # a replica dies at its first try of the shard
    on_sigterm = signal.getsignal(signal.SIGTERM)  # ray.init sets its own in the driver: this process's kept
    try:
        build = cli("index", *ARGS, "--out", str(tmp_path / "ray"), "--ray", "--workers", "2", "--json",
                    str(tmp_path / "ray.json"))
    finally:
        signal.signal(signal.SIGTERM, on_sigterm)
    assert build.returncode == 0, build.stderr
    assert marker.exists()  # a replica died at the shard, and the build went on
    a, b = OpenIndex(tmp_path / "one"), OpenIndex(tmp_path / "ray")
    shards = b.manifest.data["built"]["shards"]
    assert shards > FAULTY_SHARD and b.manifest.data["built"]["shards_computed"] == shards
    assert b.manifest.data["built"]["ray"] == "local"
    assert a.pieces.equals(b.pieces)
    for layer, kind in ((0, "hidden"), (3, "hidden"), (0, "heads"), (3, "heads")):
        np.testing.assert_allclose(stored(a, layer, kind), stored(b, layer, kind), atol=1e-6)
