"""One pass over a corpus that keeps what the corpus views need: head distances (distances.py), head
metrics for the role labels (roles.py), and every token's query and key vectors in every layer, for the joint
query-key view (qk_view.py), for the first sentences up to a memory budget.

Shapes: L layers, H query heads, G key/value heads, N = L*H heads in layer-major order (head h of layer l is
l*H + h), B sentences in a batch, T pieces (padded), M tokens kept, Dh head dim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.corpus.distances import MDS_SEED, HeadMap, embed_heads, js_sums, real_rows
from mha_core.analysis.heads.roles import HeadRoles, RoleAccumulator
from mha_core.engine.arch import Architecture
from mha_core.engine.batching import (
    CORPUS_MAX_PIECES,
    CORPUS_TEXT_MAX_PIECES,
    CorpusSelection,
    Progress,
    empty_length,
    map_batches,
    piece_lengths,
    select_texts,
)
from mha_core.engine.forward import run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError
from mha_core.i18n import tr
from mha_core.messages import N_

QK_MAX_MB = 512  # query and key vectors kept for the query-key view (float32, every layer)
QK_MAX_TOKENS = 20_000  # and at most this many tokens (each is two points in the browser)


@dataclass(frozen=True)
class HeadDistances:
    """What the head-similarity map draws: the heads' distances and role metrics over a corpus (a CorpusPass without
    its query and key vectors: kilobytes, so the bundled corpora's are kept on disk)."""

    texts: tuple[str, ...]  # the sentences, as typed
    n_layers: int
    n_heads: int
    distance: np.ndarray  # (N,N) mean JS divergence (nats) between heads' attention rows
    rows: int  # query rows the distances and role metrics average over
    roles: HeadRoles | None  # head metrics over the same rows (role labels); None when not asked for
    selection: CorpusSelection | None = None  # which texts of the given corpus were analysed

    @property
    def heads(self) -> tuple[tuple[int, int], ...]:
        """N (layer, head) pairs, layer-major, 0-based: the rows and columns of `distance`."""
        return tuple((layer, head) for layer in range(self.n_layers) for head in range(self.n_heads))

    def head_map(self, seed: int = MDS_SEED) -> HeadMap:
        return embed_heads(self.distance, self.heads, seed)


@dataclass(frozen=True, kw_only=True)
class CorpusPass(HeadDistances):
    """HeadDistances, and every kept token's query and key vectors for the query-key view."""

    n_kv_heads: int
    causal: bool  # decoders: query i sees keys 0..i
    arch: Architecture  # how the model scores (windows per layer, scale, soft-cap, ALiBi), to recompute a row
    # Tokens kept for the query-key view: the first `kept` sentences, in order, a sentence's tokens contiguous.
    kept: int
    starts: np.ndarray  # (kept+1,) sentence t's tokens are rows starts[t]:starts[t+1]
    labels: tuple[str, ...]  # M pieces as a reader sees them
    spans: np.ndarray  # (M,2) character span of each piece in its sentence ((0,0) for special tokens)
    special: np.ndarray  # (M,) bool: [CLS]/[SEP]/[BOS]-like pieces
    layer_q: tuple[Tensor, ...]  # L x (M,H,Dh) float32, after RoPE
    layer_k: tuple[Tensor, ...]  # L x (M,G,Dh) float32, after RoPE

    def distances(self) -> HeadDistances:
        """The part the head-similarity map draws, without the vectors."""
        return HeadDistances(**{f.name: getattr(self, f.name) for f in fields(HeadDistances)})

    @cached_property
    def sentence_of(self) -> np.ndarray:
        """(M,) the sentence of each kept token."""
        return np.repeat(np.arange(self.kept), np.diff(self.starts))

    @cached_property
    def position(self) -> np.ndarray:
        """(M,) each kept token's position in its sentence (0 = first piece)."""
        return np.arange(len(self.labels)) - np.repeat(self.starts[:-1], np.diff(self.starts))


def qk_budget(model: LoadedModel, lengths: Sequence[int]) -> int:
    """How many leading sentences' query and key vectors fit QK_MAX_MB and QK_MAX_TOKENS."""
    per_token = model.n_layers * (model.n_heads + model.n_kv_heads) * model.head_dim * 4  # bytes, float32
    tokens = min(QK_MAX_TOKENS, QK_MAX_MB * 2**20 // per_token)
    total = np.cumsum(lengths)
    return int(np.searchsorted(total, tokens, side="right"))


def corpus_pass(model: LoadedModel, texts: Sequence[str], progress: Progress | None = None,
                keep_vectors: bool = True, with_roles: bool = True, max_pieces: int = CORPUS_MAX_PIECES) -> CorpusPass:
    """Head distances and (`with_roles`) head metrics over every query token, and (`keep_vectors`) the first
    sentences' query/key vectors, in padded batches. Blank texts are left out silently; texts with nothing the
    model reads, texts over CORPUS_TEXT_MAX_PIECES pieces and texts past `max_pieces` in all are left out and
    counted (`CorpusPass.selection`). `progress(done, total)` runs after each batch (it may raise to cancel)."""
    all_lengths = piece_lengths(model, texts)  # tokenized once: for the caps and for the batches
    selection = select_texts(all_lengths, empty_length(model), min(CORPUS_TEXT_MAX_PIECES, model.max_length),
                             max_pieces, blank=[not t.strip() for t in texts])
    if not selection.keep:
        raise InputError("corpus_empty", N_("No sentences to analyse: the corpus is empty. {left_out}"),
                         left_out=selection_note(selection))
    lengths = [all_lengths[i] for i in selection.keep]  # each within CORPUS_TEXT_MAX_PIECES (select_texts)
    texts = [texts[i] for i in selection.keep]
    kept = qk_budget(model, lengths) if keep_vectors else 0
    n = model.n_layers * model.n_heads
    js, rows, done, vectors = torch.zeros(n, n, dtype=torch.float64), 0, 0, {}
    roles = RoleAccumulator() if with_roles else None
    for batch in map_batches(lengths, n, model=model):
        result = run(model, [texts[i] for i in batch], path="explicit")
        maps = torch.stack([result.layer_maps(layer) for layer in range(model.n_layers)], 1).flatten(1, 2)  # (B,N,T,T)
        mask = result.batch.attention_mask
        js += js_sums(real_rows(maps, mask))
        rows += int(mask.sum())
        for b, i in enumerate(batch):
            if roles is not None:
                add_roles(roles, result, b, maps[b], model)
            if i < kept:
                vectors[i] = token_vectors(result, b)
        done += len(batch)
        if progress:
            progress(done, len(texts))
    corpus = assemble(model, texts, js / rows, rows, roles.result() if roles is not None else None,
                      [vectors[i] for i in range(kept)])
    return replace(corpus, selection=selection)


def add_roles(roles: RoleAccumulator, result: AttentionResult, b: int, maps: Tensor, model: LoadedModel) -> None:
    """Sentence b's maps (N,T,T), padding cut, into the role metrics."""
    t = result.lengths[b]
    special = [w is None for w in result.word_ids[b]]
    square = maps[:, :t, :t].reshape(model.n_layers, model.n_heads, t, t)  # (L,H,T_b,T_b)
    roles.add(square.numpy(), result.labels[b], special, model.causal)


def token_vectors(result: AttentionResult, b: int) -> tuple:
    """Sentence b's (labels, spans, special, per-layer q (T,H,Dh), per-layer k (T,G,Dh)) without padding."""
    t = result.lengths[b]
    q = tuple(lq[b, :, :t].transpose(0, 1).float() for lq in result.layer_q)  # L x (T,H,Dh)
    k = tuple(lk[b, :, :t].transpose(0, 1).float() for lk in result.layer_k)  # L x (T,G,Dh)
    return result.labels[b], result.batch.offsets[b], [w is None for w in result.word_ids[b]], q, k


def assemble(model: LoadedModel, texts: Sequence[str], distance: Tensor, rows: int, roles: HeadRoles | None,
             kept: list[tuple]) -> CorpusPass:
    lengths = [len(labels) for labels, *_ in kept]
    layers = range(model.n_layers)
    empty_q = torch.empty(0, model.n_heads, model.head_dim)
    empty_k = torch.empty(0, model.n_kv_heads, model.head_dim)
    return CorpusPass(
        texts=tuple(texts), n_layers=model.n_layers, n_heads=model.n_heads, n_kv_heads=model.n_kv_heads,
        distance=distance.numpy(), rows=rows, roles=roles, causal=model.causal, arch=model.arch,
        kept=len(kept), starts=np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]),
        labels=tuple(label for labels, *_ in kept for label in labels),
        spans=np.array([span for _, spans, *_ in kept for span in spans], dtype=np.int64).reshape(-1, 2),
        special=np.array([flag for _, _, flags, *_ in kept for flag in flags], dtype=bool),
        layer_q=tuple(torch.cat([v[3][layer] for v in kept]) if kept else empty_q for layer in layers),
        layer_k=tuple(torch.cat([v[4][layer] for v in kept]) if kept else empty_k for layer in layers),
    )


UNITS = {"line": (N_("{n:,} line(s) with nothing the model can read ({which})"),
                  N_("{n:,} line(s) over {max_text:,} word pieces ({which})"),
                  N_("the last {n:,} line(s), past the cap of {max_total:,} word pieces per corpus")),
         "sentence": (N_("{n:,} sentence(s) with nothing the model can read ({which})"),
                      N_("{n:,} sentence(s) over {max_text:,} word pieces ({which})"),
                      N_("the last {n:,} sentence(s), past the cap of {max_total:,} word pieces per corpus"))}


def numbers(items: Sequence[int], shown: int = 10) -> str:
    """The first `shown` numbers, then how many more."""
    text = ", ".join(f"{n:,}" for n in items[:shown])
    return text + (tr(" and {n:,} more", n=len(items) - shown) if len(items) > shown else "")


def selection_note(selection: CorpusSelection, unit: str = "line") -> str:
    """One sentence, in the running language, on what a corpus pass left out ("" when nothing was); `unit`: "line"
    (a text file) or "sentence"."""
    unreadable, too_long, beyond = UNITS[unit]
    parts = []
    if selection.unreadable:
        parts.append(tr(unreadable, n=len(selection.unreadable), which=numbers(selection.unreadable)))
    if selection.too_long:
        parts.append(tr(too_long, n=len(selection.too_long), max_text=selection.max_text,
                        which=numbers(selection.too_long)))
    if selection.beyond_cap:
        parts.append(tr(beyond, n=selection.beyond_cap, max_total=selection.max_total))
    return tr("Left out: {parts}.", parts=tr("; ").join(parts)) if parts else ""
