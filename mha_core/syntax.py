"""Syntactic heads, Clark et al. (2019) exactly: word-level attention, dep2head / head2dep
predictions, per-relation accuracy against the best fixed-offset baseline.

Shapes: B sentences, L layers, H heads, T word pieces, W words, R relations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.budget import forward_bytes, planned_bytes
from mha_core.corpora import ParsedSentence
from mha_core.encoder import run
from mha_core.model import LoadedModel
from mha_core.roles import HeadRoles, RoleAccumulator
from mha_core.tokens import InputError
from mha_core.words import membership, pool_pieces

EXCLUDED_RELATIONS = ("root", "punct")
ALL = "all"
BASELINE_OFFSETS = (-3, -2, -1, 1, 2, 3)
MIN_DEPENDENTS = 100  # Voita et al.: a head needs this many dependents to be labelled
MIN_GAIN = 0.10  # … and must beat the relation's baseline by 10 points
DIRECTIONS = ("dep2head", "head2dep")
TOKEN_BUDGET = 6144  # pieces per batch (B x T): sorted batches with little padding
MAPS_MB = 128  # attention maps (every head) of one batch: long texts go in smaller batches
Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class RelationScore:
    relation: str
    count: int  # dependents with this relation
    correct: np.ndarray  # (2,L,H) int: correct predictions, index 0 dep2head, 1 head2dep
    baseline_offset: int  # the best fixed offset k: predict head = word i + k
    baseline_correct: int

    @property
    def accuracy(self) -> np.ndarray:
        return self.correct / max(self.count, 1)  # (2,L,H)

    @property
    def baseline_accuracy(self) -> float:
        return self.baseline_correct / max(self.count, 1)

    def best(self) -> tuple[int, int, int, float]:
        """(direction, layer, head, accuracy) of the best head; ties to the lowest index."""
        d, layer, head = np.unravel_index(int(np.argmax(self.accuracy)), self.accuracy.shape)
        return int(d), int(layer), int(head), float(self.accuracy[d, layer, head])

    @property
    def syntactic(self) -> bool:
        """Voita's rule: enough dependents and a gain of at least 10 points over the baseline."""
        return self.count >= MIN_DEPENDENTS and self.best()[3] >= self.baseline_accuracy + MIN_GAIN


@dataclass(frozen=True)
class SyntaxResult:
    sentences: int  # scored
    skipped: int  # longer than the model's maximum length
    relations: dict[str, RelationScore]  # by relation, plus "all"; sorted by count

    def head_labels(self) -> dict[tuple[int, int], str]:
        """(layer, head) -> "syntactic (rel)" for each relation's best head that passes Voita's rule (the most
        frequent relation first when one head is best for several)."""
        labels = {}
        for rel, score in self.relations.items():
            if rel != "all" and score.syntactic:
                _, layer, head, _ = score.best()
                labels.setdefault((layer, head), f"syntactic ({rel})")
        return labels


def word_attention(maps: Tensor, word_ids: Sequence[int | None], n_words: int) -> Tensor:
    """Piece maps (L,H,T,T) -> word maps (L,H,W,W): rows averaged over a word's pieces, columns
    summed over a word's pieces; special tokens (word id None) are dropped as keys."""
    groups = [[p for p, w in enumerate(word_ids[: maps.shape[-1]]) if w == word] for word in range(n_words)]
    return pool_pieces(maps, torch.from_numpy(membership(groups, maps.shape[-1])).to(maps.dtype))


def predict_heads(words_map: Tensor) -> Tensor:
    """(L,H,W,W) -> (2,L,H,W) predicted head (0-based word) for every word, both directions."""
    w = words_map.shape[-1]
    masked = words_map.masked_fill(torch.eye(w, dtype=torch.bool), float("-inf"))  # j != i
    dep2head = masked.argmax(dim=-1)  # argmax_j W[i, j]
    head2dep = masked.argmax(dim=-2)  # argmax_j W[j, i]  (Clark's transpose)
    return torch.stack([dep2head, head2dep])


class SyntaxAccumulator:
    """Adds up correct predictions per relation over sentences, then builds a SyntaxResult."""

    def __init__(self, n_layers: int, n_heads: int) -> None:
        self.shape = (2, n_layers, n_heads)
        self.correct: dict[str, np.ndarray] = {}
        self.count: dict[str, int] = {}
        self.offsets: dict[str, np.ndarray] = {}
        self.sentences = 0

    def add(self, sentence: ParsedSentence, predicted: Tensor) -> None:
        """predicted (2,L,H,W) 0-based word indices."""
        gold = torch.tensor(sentence.heads) - 1  # (W,) 0-based; root -> -1
        hits = (predicted == gold).numpy()  # (2,L,H,W)
        for i, (rel, head) in enumerate(zip(sentence.deprels, sentence.heads, strict=True)):
            if rel in EXCLUDED_RELATIONS or head == 0:
                continue
            for key in (rel, ALL):
                self.correct.setdefault(key, np.zeros(self.shape, dtype=np.int64))
                self.correct[key] += hits[..., i]
                self.count[key] = self.count.get(key, 0) + 1
                offsets = self.offsets.setdefault(key, np.zeros(len(BASELINE_OFFSETS), dtype=np.int64))
                if head - 1 - i in BASELINE_OFFSETS:
                    offsets[BASELINE_OFFSETS.index(head - 1 - i)] += 1
        self.sentences += 1

    def result(self, skipped: int) -> SyntaxResult:
        scores = {}
        for rel in sorted(self.count, key=lambda r: (-self.count[r], r)):
            best = int(np.argmax(self.offsets[rel]))
            scores[rel] = RelationScore(rel, self.count[rel], self.correct[rel], BASELINE_OFFSETS[best],
                                        int(self.offsets[rel][best]))
        return SyntaxResult(self.sentences, skipped, scores)


def length_batches(lengths: Sequence[int], budget: int = TOKEN_BUDGET) -> list[list[int]]:
    """Indices grouped by similar length so padding stays small; each batch ~`budget` pieces."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, current = [], []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > budget:
            batches.append(current)
            current = []
        current.append(i)
    return batches + ([current] if current else [])


def map_batches(lengths: Sequence[int], n_heads: int, maps_mb: int | None = None, budget: int = TOKEN_BUDGET,
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

    def note(self, unit: str = "line") -> str:
        """One sentence on what was left out ("" when nothing was)."""
        parts = []
        if self.unreadable:
            parts.append(f"{len(self.unreadable):,} {unit}(s) with nothing the model can read "
                         f"({numbers(self.unreadable)})")
        if self.too_long:
            parts.append(f"{len(self.too_long):,} {unit}(s) over {self.max_text:,} word pieces "
                         f"({numbers(self.too_long)})")
        if self.beyond_cap:
            parts.append(f"the last {self.beyond_cap:,} {unit}(s), past the cap of {self.max_total:,} word pieces "
                         "per corpus")
        return ("Left out: " + "; ".join(parts) + ".") if parts else ""


def numbers(items: Sequence[int], shown: int = 10) -> str:
    text = ", ".join(f"{n:,}" for n in items[:shown])
    return text + (f" and {len(items) - shown:,} more" if len(items) > shown else "")


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


def piece_counts(model: LoadedModel, sentences: Sequence[ParsedSentence]) -> list[int]:
    enc = model.tokenizer([list(s.words) for s in sentences], is_split_into_words=True, truncation=False,
                          verbose=False, split_special_tokens=True)
    return [len(ids) for ids in enc["input_ids"]]


@dataclass(frozen=True)
class CorpusAnalysis:
    syntax: SyntaxResult
    roles: HeadRoles  # piece-level head metrics over the same sentences


def analyse_corpus(model: LoadedModel, sentences: Sequence[ParsedSentence],
                   progress: Progress | None = None) -> CorpusAnalysis:
    """Syntactic heads and head metrics in one pass over the sentences."""
    roles = RoleAccumulator()
    syntax = analyse_syntax(model, sentences, progress, roles)
    return CorpusAnalysis(syntax, roles.result())


def analyse_syntax(model: LoadedModel, sentences: Sequence[ParsedSentence],
                   progress: Progress | None = None, roles: RoleAccumulator | None = None) -> SyntaxResult:
    """Clark's syntactic-head analysis over parsed sentences, in padded batches (optionally also
    adding every sentence's maps to a RoleAccumulator)."""
    acc = SyntaxAccumulator(model.n_layers, model.n_heads)
    lengths = piece_counts(model, sentences)
    keep = [i for i, n in enumerate(lengths) if n <= model.max_length]
    if not keep:
        raise InputError(f"None of the {len(sentences):,} sentences fits the model's {model.max_length} word pieces.")
    done = 0
    for batch in map_batches([lengths[i] for i in keep], model.n_layers * model.n_heads, model=model):
        chosen = [sentences[keep[i]] for i in batch]
        result = run(model, [list(s.words) for s in chosen], path="explicit")
        for b, sentence in enumerate(chosen):
            maps = result.text_maps(b)  # (L,H,T_b,T_b)
            words_map = word_attention(maps, result.word_ids[b], len(sentence.words))  # (L,H,W,W)
            acc.add(sentence, predict_heads(words_map))
            if roles is not None:
                roles.add(maps.numpy(), result.labels[b], [w is None for w in result.word_ids[b]], model.causal)
        done += len(batch)
        if progress:
            progress(done, len(keep))
    return acc.result(skipped=len(sentences) - len(keep))
