"""Passes over many texts: which texts of a corpus a pass reads (caps on pieces per text and per corpus), and
batches of them sorted by length, so padding stays small, cut so that one batch's maps and forward fit the memory
budget; progress reports.

Shapes: B texts in a batch, T pieces (the longest text of the batch), H heads of every layer (L*H).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mha_core.engine.budget import forward_bytes, planned_bytes
from mha_core.engine.loading.model import LoadedModel

# Pieces per batch (B x T) of a corpus's forwards: sorted batches with little padding. Large enough that the matrix
# products stay efficient (M = B x T rows), small enough that a batch's activations and maps stay in the cache and its
# padding small. 512 against 6,144 on the bundled models, both warmed: a corpus pass 18-31 % less CPU, the syntactic
# heads 3-23 % less, the same results (benchmarks/bench_batches.py); more in a process's first pass.
TOKEN_BUDGET = 512
MAPS_MB = 128  # attention maps (every head) of one batch: long texts go in smaller batches
Progress = Callable[[int, int], None]  # (done, total)


def length_batches(lengths: Sequence[int], budget: int | None = None) -> list[list[int]]:
    """Indices grouped by similar length so padding stays small; each batch ~`budget` pieces (TOKEN_BUDGET)."""
    budget = budget or TOKEN_BUDGET
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, current = [], []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > budget:
            batches.append(current)
            current = []
        current.append(i)
    return batches + ([current] if current else [])


def map_batches(lengths: Sequence[int], n_heads: int, maps_mb: int | None = None, budget: int | None = None,
                model: LoadedModel | None = None) -> list[list[int]]:
    """length_batches, cut further so that one batch's maps of all `n_heads` heads (L*H) stay within
    `maps_mb` (float32): a 1,024-piece text of a 270-head model alone holds 1.1 GB of maps; with `model`, also so
    that the batch's explicit forward fits the memory budget (budget.py)."""
    out = []
    for batch in length_batches(lengths, budget):
        longest = max(lengths[i] for i in batch)
        size = max(1, (maps_mb or MAPS_MB) * 2**20 // (n_heads * longest * longest * 4))
        if model is not None:
            size = min(size, max(1, planned_bytes() // forward_bytes(model, 1, longest, keeps_maps=True)))
        out += [batch[i:i + size] for i in range(0, len(batch), size)]
    return out


MAX_CHARS_PER_PIECE = 32  # no piece covers more characters (but an unknown long word): a longer text is over


def piece_lengths(model: LoadedModel, texts: Sequence[str]) -> list[int]:
    """Pieces per text exactly as `run` makes and cuts them (specials included; a typed "[SEP]" or
    "<|im_start|>" is text, split into ordinary pieces as `tokenize` splits it). A text of more than
    MAX_CHARS_PER_PIECE characters per position the model has is not tokenized (a 19.5 MB line took 26 s and
    3.7 GB): it counts max_length + 1, more than the model reads."""
    too_long = MAX_CHARS_PER_PIECE * model.max_length
    short = [text for text in texts if len(text) <= too_long]
    ids = iter(model.tokenizer(short, truncation=False, verbose=False, split_special_tokens=True)["input_ids"]
               if short else [])
    lead = int(model.bos_id is not None)  # run() puts the model's first token before every text
    return [min(len(next(ids)) + lead, model.max_length) if len(text) <= too_long else model.max_length + 1
            for text in texts]


CORPUS_TEXT_MAX_PIECES = 256  # a corpus text longer than this is left out: its cost grows with its length squared
CORPUS_MAX_PIECES = 100_000  # pieces analysed per corpus (about a minute on 2 cores for MiniLM); later texts wait


@dataclass(frozen=True)
class CorpusSelection:
    """Which texts of a corpus are analysed, and which are left out and why (1-based text numbers)."""

    keep: tuple[int, ...]  # 0-based indices of the analysed texts, in order
    unreadable: tuple[int, ...]  # numbers of texts with no piece the model reads (only control characters)
    too_long: tuple[int, ...]  # numbers of texts over the per-text cap
    beyond_cap: int  # texts left out once the corpus cap in pieces was reached
    max_text: int
    max_total: int

    @property
    def left_out(self) -> bool:
        return bool(self.unreadable or self.too_long or self.beyond_cap)


def select_texts(lengths: Sequence[int], empty_length: int, max_text: int = CORPUS_TEXT_MAX_PIECES,
                 max_total: int = CORPUS_MAX_PIECES, blank: Sequence[bool] = ()) -> CorpusSelection:
    """Texts in order while the corpus stays within `max_total` pieces; a text of `empty_length` pieces (only the
    model's own special pieces) is unreadable, one over `max_text` too long; `blank` texts are left out silently."""
    keep, unreadable, too_long, total = [], [], [], 0
    for i, n in enumerate(lengths):
        if i < len(blank) and blank[i]:
            continue
        if n <= empty_length:
            unreadable.append(i + 1)
        elif n > max_text:
            too_long.append(i + 1)
        elif total + n > max_total:
            rest = sum(1 for j in range(i, len(lengths)) if not (j < len(blank) and blank[j]))
            return CorpusSelection(tuple(keep), tuple(unreadable), tuple(too_long), rest, max_text, max_total)
        else:
            keep.append(i)
            total += n
    return CorpusSelection(tuple(keep), tuple(unreadable), tuple(too_long), 0, max_text, max_total)


def empty_length(model: LoadedModel) -> int:
    """Pieces of a text with no readable piece: the tokenizer's own specials plus the model's first token."""
    return len(model.tokenizer("", split_special_tokens=True)["input_ids"]) + int(model.bos_id is not None)
