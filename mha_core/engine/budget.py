"""A memory budget for every computation a visitor (or a CLI call) can start.

Each computation estimates its peak memory from its shapes before it runs, then either fits: it is cut into
chunks sized from the same estimate (rows of an ablation grid, logits in position blocks, texts in batches),
or it is refused with one sentence that says which limit was hit. Whoever starts the server sets the budget
with $MHA_COMPUTE_MB (megabytes per computation, default DEFAULT_BUDGET_MB); a server runs at most as many
heavy computations at once as it has cores (serving: the work queue), so its memory stays within about
cores x budget plus the shared stores.

Shapes: B texts, T pieces, L layers, H query heads, G key/value heads, Dh head dim, D d_model, F MLP width.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache, partial
from typing import TYPE_CHECKING

from mha_core.engine.held import register_lru
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel

BUDGET_ENV = "MHA_COMPUTE_MB"
DEFAULT_BUDGET_MB = 1536
MB = 2**20
PLANNED_SHARE = 0.75  # of the budget that chunks are planned to fill; the rest covers the allocator's slack
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (glibc's malloc.h)
REUSED_BLOCK_BYTES = 32 * MB  # glibc's ceiling for its own moving mmap threshold on 64-bit (MMAP_THRESHOLD_MAX)


class BudgetError(InputError):
    """A computation that would not fit the memory budget; the message names the limit and what to do."""


def budget_bytes() -> int:
    """The budget per computation in bytes ($MHA_COMPUTE_MB, read at each call so a server's setting holds)."""
    raw = os.environ.get(BUDGET_ENV, "")
    try:
        mb = int(raw) if raw.strip() else DEFAULT_BUDGET_MB
    except ValueError:
        mb = DEFAULT_BUDGET_MB
    return max(mb, 64) * MB


def megabytes(n_bytes: int) -> str:
    return f"{n_bytes / MB:,.0f} MB"


def check_budget(needed: int, what: str, advice: str) -> None:
    """Refuse, in one sentence, a computation whose estimated peak is over the budget (`what` and `advice`: Worded,
    so that a page words the whole sentence in its language)."""
    budget = budget_bytes()
    if needed > budget:
        raise BudgetError(
            "over_memory_budget",
            N_(
                "{what} would need about {needed} of memory, over this server's limit of {budget} per computation "
                "({budget_env}); {advice}."
            ),
            what=what,
            needed=megabytes(needed),
            budget=megabytes(budget),
            budget_env=BUDGET_ENV,
            advice=advice,
        )


def element_size(model: LoadedModel) -> int:
    return model.embeddings.word.element_size()


def mlp_width(model: LoadedModel) -> int:
    return model.layers[0].mlp.w_in.shape[0] if model.layers else model.d_model


def layer_work_bytes(model: LoadedModel, rows: int, tokens: int, keeps_maps: bool = True) -> int:
    """What one layer's pass holds at its peak, per batch of `rows` texts of `tokens` pieces (measured against
    peak RSS on the bundled models): with maps (the explicit kernel), scores, masked scores and probabilities plus
    the previous layer's kept probabilities (4 maps; the fused kernel holds none); q, k, v, their rotated and
    repeated copies, the context, its edited and merged copies and the previous layer's kept vectors; seven (T,D)
    activations; the MLP's inner activations (three)."""
    e, h, g, dh = element_size(model), model.n_heads, model.n_kv_heads, model.head_dim
    maps = 4 * h * tokens * tokens if keeps_maps else 0  # (B,H,T,T) x 4
    vectors = (10 * h + 5 * g) * tokens * dh + 7 * tokens * model.d_model
    inner = 3 * tokens * mlp_width(model)  # (B,T,F) x 3
    return rows * (maps + vectors + inner) * e


def forward_bytes(model: LoadedModel, rows: int, tokens: int, keeps_maps: bool, keep_hidden: bool = True,
                  bias: bool = True) -> int:
    """Peak of one recompute of `rows` texts padded to `tokens` pieces: what the result keeps for every layer
    (hidden states, only the last for a long text's result; q and k; the maps and contexts on the explicit path,
    the LSE on the fused path), the attention bias (a decoder's (T,T) mask per kind of layer, per head with ALiBi,
    and its making; none in a fused kernel's own causal mode) plus one layer's transient work."""
    e, n_layers, h, g, dh = element_size(model), model.n_layers, model.n_heads, model.n_kv_heads, model.head_dim
    kept = (n_layers + 1 if keep_hidden else 1) * tokens * model.d_model
    kept += n_layers * (h + g) * tokens * dh
    kept += n_layers * h * (tokens * tokens + tokens * dh) if keeps_maps else n_layers * h * tokens
    arch, masks = model.arch, 0
    if bias and arch.causal:
        masks = len(set(arch.windows or (None,))) * (h if arch.alibi else 1) * 2 * tokens * tokens
    return rows * (kept + masks) * e + layer_work_bytes(model, rows, tokens, keeps_maps)


def planned_bytes() -> int:
    """The share of the budget that chunks are planned to fill."""
    return int(budget_bytes() * PLANNED_SHARE)


def rows_within(per_row: int, reserved: int = 0) -> int:
    """How many rows of `per_row` bytes fit in the planned share of the budget after `reserved` bytes (0 when
    not even one fits)."""
    return max(0, (planned_bytes() - reserved) // max(per_row, 1))


@partial(register_lru, "libc handle", each=1024)
@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


@cache
def reuse_freed_memory() -> bool:
    """Let glibc keep freed blocks of up to 32 MB in its heap for the next computation, and give the top of its
    heap back to the system only past 64 MB free there: the thresholds glibc moves to by itself once it has freed a
    32 MB block, set once so that a process's speed does not depend on what it freed first. Without them a forward's
    result (every map, q, k, each head's output, the hidden states: fresh memory) is handed back to the system when
    it is freed, and the next forward takes it again a 4 KB page fault at a time (a 128-piece MiniLM forward: about
    2,300 faults, 3-8 ms of system time against 45 ms of compute on one thread). release_freed_memory still gives
    everything back where a long computation asks. False where the C library has no mallopt (not glibc)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, REUSED_BLOCK_BYTES)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, 2 * REUSED_BLOCK_BYTES))


def release_freed_memory() -> None:
    """Give the memory freed by the last chunk back to the system (glibc keeps freed blocks of up to 32 MB in
    its heap, so without this a chunked computation's resident memory grows by a chunk's worth at each chunk)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
