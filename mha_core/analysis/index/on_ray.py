"""The corpus index's model pass on Ray Data (issue 37): shards mapped over model replicas (one actor a core, each
loading the model once), each shard handed back as Parquet bytes and written by the driver as it arrives — so the
workers need no file system shared with the driver, only the model (the same folder, or the same name in each
node's Hugging Face cache). Ray Data restarts a lost actor and retries its shard (max_restarts and
max_task_retries -1, Ray Data's default for actor pools); shards already written are never sent again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mha_core.analysis.index.passes import CorpusPlan, shard_bytes, write_shard
from mha_core.analysis.index.store import IndexFileError
from mha_core.engine.loading.model import LoadedModel
from mha_core.messages import N_

LOCAL = "local"
FAULT_ENV = "MHA_INDEX_FAULT"  # "K:MARKER" (tests): a replica dies on its first attempt at shard K, MARKER then written


def injected_fault(shard: int) -> None:
    """The fault a test injects (FAULT_ENV): the replica's process ends at once, as a killed one does, the first time
    it is handed shard K; Ray Data must restart it and retry the shard."""
    spec = os.environ.get(FAULT_ENV, "")
    target, _, marker = spec.partition(":")
    if target.isdigit() and int(target) == shard and marker and not Path(marker).exists():
        Path(marker).touch()
        os._exit(1)


class ShardWorker:
    """One model replica: Ray Data calls it with one shard number at a time."""

    def __init__(self, model_dir: str, plan: CorpusPlan) -> None:
        import torch

        from mha_core.engine.loading.model import load_model

        torch.set_num_threads(1)  # one actor a core: threads inside would only contend
        self.model, self.plan = load_model(model_dir), plan

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        shards = [int(s) for s in batch["shard"]]
        for shard in shards:
            injected_fault(shard)
        data = [shard_bytes(self.model, self.plan, s) for s in shards]
        return {"shard": np.array(shards), "data": np.array(data, dtype=object)}


def start_ray(address: str, workers: int | None) -> int:
    """Connect to a running cluster, or start a local Ray for this build; the replicas to run."""
    import ray

    if address == LOCAL:
        cores = workers or os.cpu_count() or 1
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 ignore_reinit_error=True)
        return cores
    try:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False, configure_logging=False, ignore_reinit_error=True)
    except (ConnectionError, RuntimeError, ValueError, OSError) as err:
        raise IndexFileError("index_ray_unreachable", N_("cannot reach a Ray cluster at {address}: {error}"),
                             address=address, error=first_line(err)) from None
    return workers or max(1, int(ray.cluster_resources().get("CPU", 1)))


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A HOST:PORT (or ray://HOST:PORT) address answers within `timeout` seconds: Ray itself retries an unreachable
    one for minutes."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if host and port.isdigit():
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def shards_on_ray(model: LoadedModel, plan: CorpusPlan, folder: Path, todo: Sequence[int], address: str,
                  workers: int | None, report: Callable[[int], None]) -> dict:
    """Compute the shards `todo` on Ray and write each as it arrives; returns what ran."""
    import logging

    import ray

    logging.getLogger("ray").setLevel(logging.ERROR)  # the build reports its own progress
    started_here = not ray.is_initialized()
    replicas = start_ray(address, workers)
    done = 0
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        items = ray.data.from_items([{"shard": s} for s in todo], override_num_blocks=len(todo))
        computed = items.map_batches(ShardWorker, fn_constructor_kwargs={"model_dir": str(model.model_dir),
                                                                         "plan": plan},
                                     batch_size=1, concurrency=min(replicas, len(todo)), num_cpus=1)
        for row in computed.iter_rows():
            write_shard(folder, int(row["shard"]), row["data"])
            done += 1
            report(done)
    except Exception as err:  # noqa: BLE001 - Ray's errors (a lost node, a replica that cannot start) are many kinds
        raise IndexFileError("index_ray_failed", N_("the build on Ray stopped ({error}); {done:,} of {total:,} shards "
                                                    "are written: run the same command again to finish the rest"),
                             error=first_line(err), done=done, total=len(todo)) from None
    finally:
        if started_here:
            ray.shutdown()
    return {"ray": address, "workers": replicas}
