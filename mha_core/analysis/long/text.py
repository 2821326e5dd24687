"""Long texts, up to the model's own limit (at most arch.LONG_MAX_PIECES): run_long reads one keeping each layer's
q, k and the kernel's log-sum-exp (no map); any block of a head's map, a head's map downsampled, one query's row
and every head's summaries are then computed a band of query rows at a time, so that memory grows with T, never
with T² (on the explicit path, from the kept maps).

Shapes: L layers, H heads, T pieces of the text, R rows in a block, C columns, Dh head dim, NB distance bins,
M downsampled cells per side.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from mha_core.engine.arch import MAX_PIECES
from mha_core.engine.attention import (
    EXPLICIT,
    FUSED,
    blocked_keys,
    kv_head,
    rebuild_log_probs,
    rebuild_probs,
    scores_bias,
)
from mha_core.engine.forward import Progress, check_forward_budget, forward, fused_kernel_causal
from mha_core.engine.loading.model import LoadedModel, for_long_texts
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import TextsLike, tokenize
from mha_core.messages import N_

BLOCK_ROWS = 256  # query rows rebuilt at once: (H,256,T) float32 is 75 MB for 9 heads at 8,192 pieces
LOCAL_WINDOW = 3  # "local" attention: keys within ±3 tokens of the query
MAX_CELLS = 1000  # a downsampled map has at most this many cells per side
ZOOM_MAX = 256  # an exact block shown with its token labels has at most this many rows and columns
TOP_KEYS = 10  # keys listed for one query row
SUMMARIES = {  # HeadSummaries field: what a page calls it
    "entropy": N_("entropy (nats)"),
    "first": N_("weight on the first token"),
    "previous": N_("weight on the previous token"),
    "local": N_("weight within ±{window} tokens"),
    "distance": N_("mean attended distance (tokens)"),
}


def is_long(n_pieces: int) -> bool:
    """A text read the long way (q, k and log-sum-exp kept, every map rebuilt on demand): over arch.MAX_PIECES."""
    return n_pieces > MAX_PIECES


def may_be_long(text: str) -> bool:
    """Whether any tokenizer could make more than MAX_PIECES pieces of `text`. A piece spells at least one byte of
    the text's UTF-8 as the tokenizer normalises it (NFKD: the most a normalisation adds), but for the specials and
    a first word's marker (SentencePiece's ▁): a text of at most MAX_PIECES // 2 such bytes is short without
    tokenizing it (a classroom sentence's count cost ~1 ms of a click)."""
    return len(unicodedata.normalize("NFKD", text).encode()) > MAX_PIECES // 2


def count_long_pieces(model: LoadedModel, text: str) -> int:
    """How many pieces the model reads of `text` up to its own long limit (arch.long_max_length)."""
    long_model = for_long_texts(model)
    return len(tokenize(long_model.tokenizer, text, long_model.max_length, bos=long_model.bos_id).tokens[0])


def run_long(model: LoadedModel, texts: TextsLike, progress: Progress | None = None,
             max_pieces: int | None = None) -> AttentionResult:
    """Every layer of a long text (up to the model's own limit, at most arch.LONG_MAX_PIECES pieces, or
    `max_pieces`) on the fused path, keeping each layer's q and k (after RoPE) and the log-sum-exp and the last
    hidden states only: no map; each is rebuilt a block at a time from those (a model that caps its scores runs the
    explicit path, whose maps the memory budget allows only for shorter texts)."""
    long_model = for_long_texts(model)
    if max_pieces is not None and max_pieces < long_model.max_length:
        long_model = replace(long_model, arch=replace(long_model.arch, max_length=max_pieces))
    batch = tokenize(long_model.tokenizer, texts, long_model.max_length, bos=long_model.bos_id)
    return forward(long_model, batch, long_path(model), keep_hidden=False, progress=progress)


def long_path(model: LoadedModel) -> str:
    """The fused path, whose result keeps no map; the explicit one for a model that caps its scores."""
    return FUSED if model.arch.fused_exact else EXPLICIT


def check_long_budget(model: LoadedModel, n_pieces: int) -> None:
    """Refuse, before any work and in one sentence (BudgetError), reading one text of `n_pieces` as run_long does."""
    path = long_path(model)
    long_model = for_long_texts(model)
    check_forward_budget(long_model, 1, n_pieces, path, keep_hidden=False,
                         kernel_causal=fused_kernel_causal(long_model, False, path))


def kept_bytes(result: AttentionResult) -> int:
    """What a result holds in memory: q, k, the log-sum-exp or the maps and contexts, the hidden states kept."""
    tensors = [*result.layer_q, *result.layer_k, *(result.layer_lse or ()), *(result.layer_probs or ()),
               *(result.layer_context or ()), *result.hidden_states]
    return sum(t.numel() * t.element_size() for t in tensors)


def block_bias(result: AttentionResult, b: int, layer: int, heads: slice, rows: range, cols: range
               ) -> Tensor | None:
    """(1|h,R,C) what the model added to these scores of text b (within its length: no padding): the causal mask
    and the layer's window (attention.blocked_keys, the rule of the whole map), ALiBi's bias on the keys' positions
    (attention.scores_bias); None when nothing."""
    bias = None
    if result.causal:
        blocked = blocked_keys(torch.tensor(rows), torch.tensor(cols), result.window(layer))  # (R,C)
        if blocked.any():
            bias = (blocked.float() * torch.finfo(torch.float32).min)[None]  # (1,R,C)
    if result.alibi:
        mask = result.batch.attention_mask[b:b + 1, :result.lengths[b]]  # the text's own pieces: no padding
        alibi = scores_bias(mask, torch.float32, False, alibi_heads=result.n_heads)[0]  # (H,1,T)
        alibi = alibi[heads][:, :, cols.start:cols.stop]  # (h,1,C)
        bias = alibi if bias is None else torch.maximum(bias + alibi, torch.tensor(torch.finfo(torch.float32).min))
    return bias


def map_block(result: AttentionResult, b: int, layer: int, heads: slice, rows: range, cols: range,
              out: Tensor | None = None) -> Tensor:
    """(h,R,C) float32: the exact attention weights of these heads, query rows and key columns of text b; on the
    fused path rebuilt from q, k and the log-sum-exp for this block only. `out`: a (h,R,C) buffer to write them in
    (reused from block to block: a fresh large tensor costs its page faults)."""
    r, c = slice(rows.start, rows.stop), slice(cols.start, cols.stop)
    if result.path != FUSED:
        probs = result.layer_probs[layer][b, heads, r, c].float()  # (h,R,C)
        return probs if out is None else out.copy_(probs)
    q, k, lse = block_inputs(result, b, layer, heads, r, c)
    bias = block_bias(result, b, layer, heads, rows, cols)
    if out is None:
        return rebuild_probs(q, k, lse, bias, result.scale)  # (h,R,C)
    return rebuild_log_probs(q, k, lse, bias, result.scale, out=out).exp_()


def block_inputs(result: AttentionResult, b: int, layer: int, heads: slice, r: slice, c: slice
                 ) -> tuple[Tensor, Tensor, Tensor]:
    """(q (h,R,Dh), k (h,C,Dh), lse (h,R)) of these heads: each query head with its key/value head's keys."""
    kv = [kv_head(h, result.n_heads, result.layer_k[layer].shape[1]) for h in range(result.n_heads)[heads]]
    return result.layer_q[layer][b, heads, r], result.layer_k[layer][b, kv, c], result.layer_lse[layer][b, heads, r]


class Scratch:
    """Float32 buffers reused from block to block (a fresh 75 MB tensor costs more in page faults than its exp)."""

    def __init__(self) -> None:
        self.buffers: dict[str, Tensor] = {}

    def padded(self, name: str, heads: int, rows: int, cols: int) -> Tensor:
        """(heads, rows, rows + cols + rows): each row's `cols` values between `rows` zeros on either side."""
        shape = (heads, rows, cols + 2 * rows)
        size = math.prod(shape)
        if name not in self.buffers or self.buffers[name].numel() < size:
            self.buffers[name] = torch.empty(size)
        padded = self.buffers[name][:size].view(shape)
        padded[..., :rows].zero_()
        padded[..., rows + cols:].zero_()
        return padded


@dataclass(frozen=True)
class Band:
    """Every head's weights p and log p for a band of query rows, in Scratch's padded rows (zeros either side)."""

    p_rows: Tensor  # (H,R,R+C+R)
    logp_rows: Tensor  # (H,R,R+C+R)  log p where p > 0; 0 in the padding; finite where p = 0
    rows: range  # the band's query positions
    cols: range  # its keys' positions

    @property
    def p(self) -> Tensor:
        """(H,R,C) the weights themselves."""
        r = len(self.rows)
        return self.p_rows[..., r:r + len(self.cols)]


def log_band(result: AttentionResult, b: int, layer: int, rows: range, cols: range, scratch: Scratch) -> Band:
    """Every head's p and log p of these rows and keys of text b: on the fused path log p = scores − lse directly
    (no logarithm to take); masked keys get p = 0 and a finite log p (the float minimum minus the LSE rounds to the
    minimum), so that p · log p is 0 there."""
    h, r, c = result.n_heads, len(rows), len(cols)
    p_rows, logp_rows = scratch.padded("p", h, r, c), scratch.padded("logp", h, r, c)
    p, logp = p_rows[..., r:r + c], logp_rows[..., r:r + c]  # (H,R,C) views: written in place
    if result.path != FUSED:
        p.copy_(map_block(result, b, layer, slice(None), rows, cols))
        torch.where(p > 0, p.clamp_min(1e-38).log(), torch.zeros(()), out=logp)
    else:
        k = result.layer_k[layer][b, :, cols.start:cols.stop]  # (G,C,Dh): each key/value head once
        g, r_g = k.shape[0], h // k.shape[0] * r  # a key/value head's query heads' rows, stacked
        q = result.layer_q[layer][b, :, rows.start:rows.stop].reshape(g, r_g, -1)  # (G,H/G·R,Dh)
        lse = result.layer_lse[layer][b, :, rows.start:rows.stop].reshape(g, r_g)
        rebuild_log_probs(q, k, lse, None, result.scale, out=logp.view(g, r_g, c))
        for part in masked_keys(result, layer, rows, cols):  # the bias only where it can be nonzero
            logp[..., part.start - cols.start:part.stop - cols.start].add_(
                block_bias(result, b, layer, slice(None), rows, part))
        torch.exp(logp, out=p)
    return Band(p_rows, logp_rows, rows, cols)


def masked_keys(result: AttentionResult, layer: int, rows: range, cols: range) -> list[range]:
    """Disjoint key ranges of this band that hold every key block_bias can change: all of them with ALiBi; in a
    decoder the keys after the band's first row, and in a windowed layer those before (the band's R × R corner, not
    R × C)."""
    if result.alibi:
        return [cols]
    if not result.causal:
        return []
    after = range(max(rows.start + 1, cols.start), cols.stop)
    window = result.window(layer)
    before = range(cols.start, min(rows.stop - window, after.start)) if window is not None else range(0)
    return [part for part in (before, after) if len(part)]


def distance_histogram(band: Band) -> tuple[Tensor, Tensor]:
    """((H,E) weight summed over the band's rows by signed distance d = query − key, (E,) each entry's d), with
    E = R + C − 1 distances from the largest down. Read off the padded rows as a skewed view (row r shifted by r:
    entry e of row r is the key at distance d_max − e, or a padding zero): one sum over rows, no copy."""
    h, r, width = band.p_rows.shape
    n_dist = r + len(band.cols) - 1
    skewed = band.p_rows.as_strided((h, r, n_dist), (r * width, width + 1, 1), band.p_rows.storage_offset() + 1)
    d_max = band.rows.stop - 1 - band.cols.start
    return skewed.sum(1), d_max - torch.arange(n_dist)


def visible_keys(result: AttentionResult, layer: int, rows: range, n: int) -> range:
    """The keys any of these query rows can see: up to the last row in a decoder, from the first row's window."""
    window = result.window(layer)
    start = max(0, rows.start - window + 1) if window is not None else 0
    return range(start, rows.stop if result.causal else n)


def block_side(n: int, max_cells: int = MAX_CELLS) -> int:
    """The side, in pieces, of the blocks a map of n pieces is pooled into (at most max_cells blocks a side)."""
    return max(1, math.ceil(n / max_cells))


def row_blocks(n: int, size: int = BLOCK_ROWS) -> list[range]:
    return [range(start, min(start + size, n)) for start in range(0, n, size)]


def distance_edges(n: int) -> tuple[int, ...]:
    """Log-spaced distance bins 0, 1, 2–3, 4–7, … up to n − 1: edges (0, 1, 2, 4, 8, …, ≥ n)."""
    edges = [0, 1]
    while edges[-1] < n:
        edges.append(edges[-1] * 2)
    return tuple(edges)


@dataclass(frozen=True)
class HeadSummaries:
    """Every head of one text summarised over its query rows (means over the T rows)."""

    entropy: np.ndarray  # (L,H) a row's entropy in nats
    first: np.ndarray  # (L,H) weight on the first token (an attention sink)
    previous: np.ndarray  # (L,H) weight on the previous token (rows 1..T-1)
    local: np.ndarray  # (L,H) weight within ±window tokens of the query
    distance: np.ndarray  # (L,H) attended distance |i − j| in tokens
    profile: np.ndarray  # (L,H,NB) weight by distance bin [edges[k], edges[k+1])
    edges: tuple[int, ...]  # NB+1 distance-bin edges
    window: int  # the ±window of `local`
    n_tokens: int  # T


def band_sums(band: Band, edges: tuple[int, ...], window: int) -> dict[str, Tensor]:
    """Per head, the sums over the band's rows of each summary: the entropy from p · log p (one dot product per
    head over the padded rows), the weight on the first key directly, everything that depends on the distance
    (previous, local, attended distance, distance bins) from the band's distance histogram in one product."""
    hist, d = distance_histogram(band)  # (H,E), (E,)
    far = d.abs()
    bins = [(far >= lo) & (far < hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    weights = torch.stack([*bins, far <= window, far, d == 1], -1).float()  # (E,NB+3)
    sums = hist @ weights  # (H,NB+3)
    entropy = [torch.dot(p.view(-1), logp.view(-1)) for p, logp in zip(band.p_rows, band.logp_rows, strict=True)]
    first = band.p[..., 0].sum(-1) if band.cols.start == 0 else torch.zeros(hist.shape[0])
    return {"entropy": -torch.stack(entropy), "first": first, "previous": sums[:, -1], "local": sums[:, -3],
            "distance": sums[:, -2], "profile": sums[:, :len(bins)]}


def head_summaries(result: AttentionResult, b: int = 0, window: int = LOCAL_WINDOW, block: int = BLOCK_ROWS,
                   progress: Callable[[int, int], None] | None = None) -> HeadSummaries:
    """Every head's summaries of text b, a block of rows and one layer's heads at a time (no full map is built)."""
    n = result.lengths[b]
    edges = distance_edges(n)
    totals = {name: torch.zeros(result.n_layers, result.n_heads) for name in
              ("entropy", "first", "previous", "local", "distance")}
    profile = torch.zeros(result.n_layers, result.n_heads, len(edges) - 1)
    scratch = Scratch()
    for layer in range(result.n_layers):
        for rows in row_blocks(n, block):
            cols = visible_keys(result, layer, rows, n)
            sums = band_sums(log_band(result, b, layer, rows, cols, scratch), edges, window)
            for name, total in totals.items():
                total[layer] += sums[name]
            profile[layer] += sums["profile"]
        if progress is not None:
            progress(layer + 1, result.n_layers)
    means = {name: (total / (max(n - 1, 1) if name == "previous" else n)).numpy() for name, total in totals.items()}
    return HeadSummaries(profile=(profile / n).numpy(), edges=edges, window=window, n_tokens=n, **means)


def downsampled_map(result: AttentionResult, b: int, layer: int, head: int, how: str = "max",
                    max_cells: int = MAX_CELLS, block: int = BLOCK_ROWS) -> tuple[np.ndarray, int]:
    """((M,M) cells, side): one head's map of text b pooled into side × side blocks (side = ⌈T / max_cells⌉), each
    cell the block's maximum or mean weight; rows rebuilt a band of blocks at a time."""
    n = result.lengths[b]
    side = block_side(n, max_cells)
    m = math.ceil(n / side)
    out = np.zeros((m, m), dtype=np.float32)
    band = side * max(1, block // side)  # whole cells of rows per band
    padded = torch.zeros(band, m * side)  # (band,M·side): whole cells, the columns past the text zeros
    for rows in row_blocks(n, band):
        whole = -(-len(rows) // side) * side  # the band's rows in whole cells
        cols = visible_keys(result, layer, rows, n)  # the keys no row of the band sees are zeros: no exp for them
        padded[len(rows):whole].zero_()  # a short last band: rows past the text are zeros too
        padded[:, :cols.start].zero_()  # a window's band: keys the band before saw (later keys are still zeros)
        band_map = padded[None, :len(rows), cols.start:cols.stop]  # (1,R,C) written in place
        map_block(result, b, layer, slice(head, head + 1), rows, cols, out=band_map)
        by_cols = padded[:whole].view(whole, m, side)  # (r·side,M,side): each row's cells, contiguous
        by_cols = by_cols.amax(-1) if how == "max" else by_cols.sum(-1)  # (r·side,M)
        cells = by_cols.view(whole // side, side, m)  # (r,side,M)
        pooled = cells.amax(1) if how == "max" else cells.sum(1) / cell_counts(rows, side, n, m)
        out[rows.start // side: rows.start // side + pooled.shape[0]] = pooled.numpy()
    return out, side


def cell_counts(rows: range, side: int, n: int, m: int) -> Tensor:
    """(r,M) how many real cells of the map each pooled cell covers (edge cells are partial)."""
    row_sizes = torch.tensor([min(side, rows.stop - s) for s in range(rows.start, rows.stop, side)],
                             dtype=torch.float32)
    col_sizes = torch.tensor([min(side, n - s) for s in range(0, n, side)], dtype=torch.float32)
    return row_sizes[:, None] * col_sizes[None, :m]


def query_row(result: AttentionResult, b: int, layer: int, head: int, query: int) -> np.ndarray:
    """(T,) one query's exact weights over every key of text b."""
    keys = range(result.lengths[b])
    return map_block(result, b, layer, slice(head, head + 1), range(query, query + 1), keys)[0, 0].numpy()


def chosen_rows(result: AttentionResult, heads: list[tuple[int, int]], rows: range) -> dict:
    """The chosen heads' query rows over the whole of text 0 (what `attention --heads --rows` writes and the Heads
    page exports): {"tokens", "heads", "rows": [A, B], "attention": [n_heads][B − A][T], "path", "backend",
    "truncated", "n_tokens"}, the attention made a band of rows at a time as it is written (serving.export.stream_json:
    one head's whole map at 8,192 pieces is 67 million numbers)."""
    return {"tokens": list(result.tokens[0]), "heads": [list(h) for h in heads], "rows": [rows.start, rows.stop],
            "attention": (row_bands(result, layer, head, rows) for layer, head in heads), "path": result.path,
            "backend": result.backend, "truncated": result.truncated[0], "n_tokens": result.n_tokens[0]}


def row_bands(result: AttentionResult, layer: int, head: int, rows: range) -> Iterator[Tensor]:
    """One head's rows over every key of text 0, one row at a time, rebuilt BLOCK_ROWS rows at a time."""
    keys = range(result.lengths[0])
    for start in range(rows.start, rows.stop, BLOCK_ROWS):
        yield from map_block(result, 0, layer, slice(head, head + 1), range(start, min(start + BLOCK_ROWS, rows.stop)),
                             keys)[0]


def top_row_keys(row: np.ndarray, k: int = TOP_KEYS) -> list[tuple[int, float]]:
    """The k keys with the most weight in a row, strongest first: (position, weight)."""
    top = np.argsort(-row, kind="stable")[:k]
    return [(int(j), float(row[j])) for j in top]


def zoom_ranges(n: int, query_start: int, key_start: int, size: int = ZOOM_MAX) -> tuple[range, range]:
    """The rows and columns of an exact block of at most `size` a side starting at (query_start, key_start), moved
    back inside the text where it would run past its end."""
    size = max(1, min(size, n))
    q0, k0 = (min(max(start, 0), n - size) for start in (query_start, key_start))
    return range(q0, q0 + size), range(k0, k0 + size)
