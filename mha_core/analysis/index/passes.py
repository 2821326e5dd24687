"""The model's pass for the corpus index (issue 37): which sentences it reads, in which shards, and one shard's rows —
every piece's metadata and its vectors at the chosen layers.

Layer L of an index is what attention layer L reads and writes: the hidden state hidden_states[L] (0 = the
embeddings, as transformers counts; L = n_layers the last layer's output, after the final norm) and the outputs of
layer L's heads (each head's context vector before W_O, for L < n_layers). Vectors are stored ready for cosine
search by inner product: a hidden state as a unit vector; the heads' outputs each made a unit vector and the H of
them joined and divided by √H, so that the inner product of two pieces is the mean of their heads' cosines, and a
query that keeps only some heads (the head mask) scores the mean over those heads.

Shapes: B sentences of a shard, T pieces (padded), D d_model, H query heads, Dh head dim, n pieces of a shard.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mha_core.analysis.corpus.readers import ParsedSentence, word_spans
from mha_core.engine.batching import empty_length, length_batches, map_batches, piece_lengths, select_texts
from mha_core.engine.budget import planned_bytes
from mha_core.engine.forward import run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.words import text_units

HIDDEN, HEADS = "hidden", "heads"
KINDS = (HIDDEN, HEADS)
SHARD_PIECES = 2048  # pieces a shard holds at most: a unit of work (and of retry) for a worker
EXACT_MAX_BYTES = 256 * 2**20  # a layer's vectors (float32) up to this size are searched exactly: a flat search of
#                                256 MB (174,762 pieces of 384) answers in 21 ms at p95 on one core
EXACT_BUDGET_SHARE = 3  # and up to this fraction of the planned memory budget (a flat index is built in one array)
META_COLUMNS = ("sentence", "position", "piece", "word", "word_index", "start", "end", "pos", "deprel", "head")


@dataclass(frozen=True)
class CorpusPlan:
    """What the pass reads: the sentences kept, cut into shards, and what was left out and why."""

    source: str  # the corpus's name (its file name, or "bundled corpus")
    sentences: tuple[ParsedSentence, ...]  # S kept sentences (words and tags where the corpus has them)
    ids: tuple[int, ...]  # S each one's id: its 0-based line (plain text) or sentence (CoNLL-U)
    shards: tuple[tuple[int, ...], ...]  # indices into `sentences`, one tuple a shard (a batch of the pass)
    unreadable: tuple[int, ...]  # ids of sentences the model reads no piece of (only control characters)
    too_long: tuple[int, ...]  # ids of sentences over the model's maximum pieces
    pieces: int  # pieces to index (the model's special pieces are not)
    layers: tuple[int, ...]
    exact: bool  # every layer's vectors small enough to search exactly (EXACT_MAX_BYTES)


def vector_width(model: LoadedModel, kind: str) -> int:
    return model.d_model if kind == HIDDEN else model.n_heads * model.head_dim


def kinds_at(model: LoadedModel, layer: int) -> tuple[str, ...]:
    """What an index holds at `layer`: the hidden state, and the heads' outputs where a layer L runs heads."""
    return KINDS if layer < model.n_layers else (HIDDEN,)


def plan_pass(model: LoadedModel, source: str, sentences: Sequence[ParsedSentence], ids: Sequence[int],
              layers: Sequence[int], shard_pieces: int = SHARD_PIECES) -> CorpusPlan:
    """Shards of sentences of similar length (little padding), each within `shard_pieces` pieces and the memory
    budget of one explicit forward."""
    lengths = piece_lengths(model, [s.text for s in sentences])
    specials = empty_length(model)
    chosen = select_texts(lengths, specials, max_text=model.max_length, max_total=2**62)
    keep = list(chosen.keep)
    kept_lengths = [lengths[i] for i in keep]
    shards = [tuple(batch[i] for i in cut) for batch in length_batches(kept_lengths, shard_pieces)
              for cut in map_batches([kept_lengths[j] for j in batch], model.n_layers * model.n_heads, model=model)]
    pieces = sum(n - specials for n in kept_lengths)
    widest = max(vector_width(model, kind) for kind in KINDS)
    return CorpusPlan(source, tuple(sentences[i] for i in keep), tuple(ids[i] for i in keep), tuple(shards),
                      tuple(ids[n - 1] for n in chosen.unreadable), tuple(ids[n - 1] for n in chosen.too_long),
                      pieces, tuple(layers), pieces * widest * 4 <= min(EXACT_MAX_BYTES,
                                                                        planned_bytes() // EXACT_BUDGET_SHARE))


def piece_words(result: AttentionResult, b: int, sentence: ParsedSentence) -> list[tuple[str, int]]:
    """T_b (word, word_index) of each piece: the corpus's word whose characters it covers (1-based, 0 for none);
    a corpus without words: the model's own word (its pieces merged), numbered from 1."""
    offsets = result.batch.offsets[b]
    if sentence.words:
        spans = word_spans(sentence)
        found = []
        for start, end in offsets:
            w = next((k for k, (ws, we) in enumerate(spans) if start < we and end > ws), None)
            found.append(("", 0) if w is None else (sentence.words[w], w + 1))
        return found
    units = text_units(result, b, merge_words=True)
    words: list[tuple[str, int]] = [("", 0)] * len(offsets)
    number = 0
    for label, group, special in zip(units.labels, units.groups, units.special, strict=True):
        number += not special
        for i in group:
            words[i] = ("", 0) if special else (label.strip(), number)
    return words


def unit_rows(x: torch.Tensor) -> np.ndarray:
    """(..., W) each last-axis row made a unit vector (a zero row stays zero), float32."""
    x = x.float()
    return (x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)).numpy()


def head_rows(context: torch.Tensor) -> np.ndarray:
    """(n,H,Dh) the heads' outputs -> (n,H*Dh): each head a unit vector, joined, over √H (a unit vector)."""
    n, n_heads = context.shape[:2]
    return unit_rows(context).reshape(n, -1) / n_heads**0.5


def shard_columns(model: LoadedModel, plan: CorpusPlan, shard: int) -> dict[str, object]:
    """One shard's rows, piece by piece in sentence order: META_COLUMNS, then per layer `hidden_L` (n,D) and
    `heads_L` (n,H*Dh) float32 (float16 where the index is compressed)."""
    chosen = plan.shards[shard]
    result = run(model, [plan.sentences[i].text for i in chosen], path="explicit")
    meta: dict[str, list] = {name: [] for name in META_COLUMNS}
    where: list[tuple[int, int]] = []  # (b, t) of each indexed piece
    for b, i in enumerate(chosen):
        sentence, words = plan.sentences[i], piece_words(result, b, plan.sentences[i])
        for t, word_id in enumerate(result.word_ids[b]):
            if word_id is None:
                continue  # the model's special pieces are not indexed
            where.append((b, t))
            add_meta(meta, plan.ids[i], t, result, b, sentence, words[t])
    bs, ts = torch.tensor([w[0] for w in where]), torch.tensor([w[1] for w in where])
    dtype = np.float32 if plan.exact else np.float16
    vectors: dict[str, object] = {}
    for layer in plan.layers:
        vectors[f"{HIDDEN}_{layer}"] = unit_rows(result.hidden_states[layer][bs, ts]).astype(dtype)  # (n,D)
        if HEADS in kinds_at(model, layer):
            context = result.layer_context[layer][bs, :, ts]  # (n,H,Dh)
            vectors[f"{HEADS}_{layer}"] = head_rows(context).astype(dtype)  # (n,H*Dh)
    return {**meta, **vectors}


def add_meta(meta: dict[str, list], sentence_id: int, t: int, result: AttentionResult, b: int,
             sentence: ParsedSentence, word: tuple[str, int]) -> None:
    start, end = result.batch.offsets[b][t]
    w = word[1] - 1
    tagged = sentence.words and w >= 0
    meta["sentence"].append(sentence_id)
    meta["position"].append(t)
    meta["piece"].append(result.labels[b][t])
    meta["word"].append(word[0])
    meta["word_index"].append(word[1])
    meta["start"].append(start)
    meta["end"].append(end)
    meta["pos"].append(sentence.upos[w] if tagged and sentence.upos and sentence.upos[w] != "_" else None)
    meta["deprel"].append(sentence.deprels[w] if tagged and sentence.deprels else None)
    meta["head"].append(sentence.heads[w] if tagged and sentence.heads else None)


def shard_table(columns: dict[str, object]) -> object:
    """The shard's columns as an Arrow table (vectors as fixed-size lists)."""
    import pyarrow as pa

    arrays, names = [], []
    for name, values in columns.items():
        if isinstance(values, np.ndarray):
            flat = pa.array(values.reshape(-1))
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, values.shape[1]))
        else:
            arrays.append(pa.array(values, type=meta_type(name)))
        names.append(name)
    return pa.table(arrays, names=names)


def meta_type(name: str) -> object:
    import pyarrow as pa

    return {"sentence": pa.int32(), "position": pa.int32(), "word_index": pa.int32(), "start": pa.int32(),
            "end": pa.int32(), "head": pa.int32()}.get(name, pa.string())


def shard_bytes(model: LoadedModel, plan: CorpusPlan, shard: int) -> bytes:
    """One shard as Parquet bytes: what a worker hands back (no file system shared with the driver needed). Only the
    metadata is dictionary-encoded: pyarrow's default tries it on every vector column too, then falls back (a
    MiniLM-wide shard of 415 pieces written in 60 ms, and a third larger, against 4 ms)."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(shard_table(shard_columns(model, plan, shard)), buffer, compression="none",
                   use_dictionary=list(META_COLUMNS))
    return buffer.getvalue()


def shard_path(folder: Path, shard: int) -> Path:
    return folder / "shards" / f"part-{shard:06d}.parquet"


def write_shard(folder: Path, shard: int, data: bytes) -> None:
    """Atomically: a shard file exists whole or not at all, so a build killed mid-write never finds half a shard."""
    path = shard_path(folder, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, path)


def missing_shards(folder: Path, plan: CorpusPlan) -> list[int]:
    """Shards not written yet (a build that stopped resumes from here, redoing none that are done)."""
    return [s for s in range(len(plan.shards)) if not shard_path(folder, s).is_file()]
