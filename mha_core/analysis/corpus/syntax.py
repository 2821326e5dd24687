"""Syntactic heads, Clark et al. (2019) exactly: word-level attention, dep2head / head2dep
predictions, per-relation accuracy against the best fixed-offset baseline.

Shapes: B sentences, L layers, H heads, T word pieces, W words, R relations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.corpus.readers import ParsedSentence
from mha_core.analysis.heads.roles import HeadRoles, RoleAccumulator
from mha_core.engine.batching import Progress, map_batches
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import json_floats
from mha_core.engine.tokens import InputError
from mha_core.engine.words import merge_pieces, word_groups
from mha_core.messages import N_

EXCLUDED_RELATIONS = ("root", "punct")
ALL = "all"
BASELINE_OFFSETS = (-3, -2, -1, 1, 2, 3)
MIN_DEPENDENTS = 100  # Voita et al.: a head needs this many dependents to be labelled
MIN_GAIN = 0.10  # … and must beat the relation's baseline by 10 points
DIRECTIONS = ("dep2head", "head2dep")
# Clark et al. 2019, BERT-base on the WSJ Penn Treebank (Stanford dependencies): best head % (best offset %).
CLARK_BERT_BASE = {"det": (94.3, 51.7), "dobj": (86.8, 40.0), "pobj": (76.3, 34.6), "poss": (80.5, 47.7)}
CLARK_NAMES = {"obj": "dobj", "nmod:poss": "poss"}  # Universal Dependencies' names of the same relations


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
    def clark_reference(self) -> tuple[float, float] | None:
        """Clark et al.'s best head and baseline (%) for this relation in BERT-base, where they report it (another
        model and treebank: for comparison only)."""
        return CLARK_BERT_BASE.get(CLARK_NAMES.get(self.relation, self.relation))

    @property
    def syntactic(self) -> bool:
        """Voita's rule: enough dependents and a gain of at least 10 points over the baseline."""
        return self.count >= MIN_DEPENDENTS and self.best()[3] >= self.baseline_accuracy + MIN_GAIN


@dataclass(frozen=True)
class SyntaxResult(Drawable):
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

    def relation_rows(self) -> list[dict[str, object]]:
        """One row per relation (its count, best head and direction, accuracy, the best fixed offset, Voita's verdict,
        Clark et al.'s BERT-base figure): the rows the CLI writes and the Roles page's table shows."""
        rows = []
        for rel, score in self.relations.items():
            direction, layer, head, accuracy = score.best()
            rows.append({"relation": rel, "count": score.count, "best_layer": layer, "best_head": head,
                         "best_direction": DIRECTIONS[direction], "best_accuracy": accuracy,
                         "baseline_offset": score.baseline_offset, "baseline_accuracy": score.baseline_accuracy,
                         "syntactic": score.syntactic, "accuracy": score.accuracy,  # (2,L,H)
                         "clark_bert_base": score.clark_reference})
        return rows

    def as_json(self) -> dict:
        relations = {row.pop("relation"): {**row, "accuracy": json_floats(row["accuracy"])}
                     for row in self.relation_rows()}
        return {"sentences": self.sentences, "skipped": self.skipped, "relations": relations}


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
        raise InputError(
            "corpus_nothing_fits",
            N_("None of the {sentences:,} sentences fits the model's {max_length} word pieces."),
            sentences=len(sentences),
            max_length=model.max_length,
        )
    done = 0
    for batch in map_batches([lengths[i] for i in keep], model.n_layers * model.n_heads, model=model):
        chosen = [sentences[keep[i]] for i in batch]
        result = run(model, [list(s.words) for s in chosen], path="explicit")
        for b, sentence in enumerate(chosen):
            maps = result.text_maps(b)  # (L,H,T_b,T_b)
            groups = word_groups(result.word_ids[b][: maps.shape[-1]], len(sentence.words))
            words_map = merge_pieces(maps, groups)  # (L,H,W,W)
            acc.add(sentence, predict_heads(words_map))
            if roles is not None:
                roles.add(maps.numpy(), result.labels[b], [w is None for w in result.word_ids[b]], model.causal)
        done += len(batch)
        if progress:
            progress(done, len(keep))
    return acc.result(skipped=len(sentences) - len(keep))
