"""What a server may hold in memory at once, stated before anyone visits (issue 33): the stores shared by every
visitor (each bounded by bytes), the computations that may run at the same time (each bounded by the per-computation
budget, $MHA_COMPUTE_MB), and the models kept loaded. deploy/ prints it at start; docs/teachers/server.md explains it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mha_core.engine.budget import budget_bytes

MB = 2**20
# name: (entries, megabytes) of every store shared by a server's visitors (mha_core.serving.store.SharedStore)
STORES = {
    "results": (64, 300),  # forward results of typed sentences
    "views": (64, 450),  # a text's maps after the display options (a 512-piece view holds 75 MB)
    "figures": (256, 150),  # built figure dicts
    "small": (512, 400),  # parses, walkthrough tensors, grids, value-weighted maps
    "corpus analyses": (8, 200),  # role metrics and syntactic heads of a corpus
    "sentence analyses": (64, 100),  # the same for one sentence
    "corpus passes": (3, 1536),  # a corpus pass keeps query and key vectors for the query-key view
    "long": (4, 1600),  # long texts' q, k and log-sum-exp (about 750 MB at 8,192 pieces)
}
COMPUTE_SLOTS = 2  # forwards, view builds and light analyses at once per process (each within the budget)
MODELS_KEPT_ENV, DEFAULT_MODELS_KEPT = "MHA_MODELS_KEPT", 3


def models_kept() -> int:
    """Loaded models a process keeps ($MHA_MODELS_KEPT, default 3; the least recently used goes first): a server with
    the memory for every model it lists keeps them all, so no visitor who switches model waits for one to load."""
    raw = os.environ.get(MODELS_KEPT_ENV, "").strip()
    return max(1, int(raw)) if raw.isdigit() else DEFAULT_MODELS_KEPT


MODELS_KEPT = models_kept()  # read when the process starts: the pages' model cache is made with this many entries


@dataclass(frozen=True)
class MemoryPlan:
    stores: int  # bytes: every shared store full
    computations: int  # how many computations may run at once (compute slots and heavy-work slots)
    per_computation: int  # bytes each may add ($MHA_COMPUTE_MB)
    models: int  # bytes: the largest `kept` listed models, loaded
    kept: int  # models kept loaded ($MHA_MODELS_KEPT)

    @property
    def total(self) -> int:
        return self.stores + self.computations * self.per_computation + self.models

    def said(self) -> str:
        gb = lambda n: f"{n / 2**30:.1f} GB"  # noqa: E731
        return (f"this server may hold up to {gb(self.total)}: shared stores {gb(self.stores)}, "
                f"{self.computations} computations at once × {gb(self.per_computation)} (MHA_COMPUTE_MB), "
                f"models {gb(self.models)} ({self.kept} kept loaded, MHA_MODELS_KEPT)")


def memory_plan(model_bytes: list[int], heavy_slots: int, kept: int = MODELS_KEPT) -> MemoryPlan:
    """The plan for a process whose listed models weigh `model_bytes`, whose heavy-work queue runs `heavy_slots`
    jobs at once and which keeps `kept` models loaded."""
    largest = sorted(model_bytes, reverse=True)[:kept]
    return MemoryPlan(sum(mb for _, mb in STORES.values()) * MB, COMPUTE_SLOTS + heavy_slots, budget_bytes(),
                      sum(largest), kept)
