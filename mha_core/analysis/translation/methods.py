"""The alignment methods `align --method` runs and the Translation page compares, each read from the model's own runs
of the pair, each with settings chosen on the development half of the hand alignments only (fit.py; the bundled
model's are shipped in assets/alignment/methods.json, written by benchmarks/bench_align.py --write):

- heads: one direction's chosen heads (heads.py), the translation read as the continuation of the source;
- both: both directions (both_ways.py), each direction's chosen heads averaged, each word of that direction's
  continuation linked to its strongest word, the two one-way alignments symmetrized (symmetric.py);
- hidden: what the representations say (hidden.py, SimAlign): the chosen layers' word similarity, both runs
  averaged, read by ArgMax or IterMax;
- weighted: every head of both directions and both ways of reading rows, weighted by a logistic regression fitted
  on the development half's sure links (attention only);
- ensemble: the weighted heads and each chosen layer's word similarity in one logistic regression.

Every matrix is (T,S) in both_ways.CANONICAL order; links (source word, target word).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.analysis.translation.align import ROWS, argmax_links, column_links
from mha_core.analysis.translation.both_ways import DIRECTIONS, BothWays
from mha_core.analysis.translation.choices import METHODS
from mha_core.analysis.translation.gold import Links
from mha_core.analysis.translation.hidden import matched_links, pooled_similarity
from mha_core.analysis.translation.symmetric import symmetrized

THRESHOLD = "threshold"  # a weighted method's decoding: every cell above the threshold (else a symmetrization)
LOG_FLOOR = 1e-3  # attention enters the regression as log(scaled weight + LOG_FLOOR): a link is a ratio, not a sum
Head = tuple[str, str, int, int]  # (direction, rows, layer, head)


def masked(matrix: np.ndarray, allowed: np.ndarray, floor: float = -np.inf) -> np.ndarray:
    return np.where(allowed, matrix, floor)


def one_way_links(matrix: np.ndarray, direction: str) -> Links:
    """A direction's own links: each word of its continuation to its strongest word of its source (the zh → en
    run's English words are the rows of a CANONICAL matrix, the en → zh run's Chinese words its columns)."""
    return argmax_links(matrix) if direction == DIRECTIONS[0] else column_links(matrix)


@dataclass(frozen=True)
class BothChoice:
    """Both directions' heads and the symmetrization, chosen together on the development half."""

    rule: str  # symmetric.SYMMETRIZATIONS
    pooling: str  # run.POOLINGS
    heads: tuple[Head, ...]  # each direction's chosen heads, in the order chosen
    development_aer: float

    def direction_matrix(self, ways: BothWays, direction: str) -> np.ndarray:
        """(T,S) the mean of this direction's chosen heads' maps, columns scaled."""
        chosen = [(rows, layer, head) for d, rows, layer, head in self.heads if d == direction]
        return np.mean([ways.maps(direction, rows, self.pooling)[layer, head] for rows, layer, head in chosen], axis=0)

    def links(self, ways: BothWays) -> tuple[Links, np.ndarray]:
        """The symmetrized links and the matrix shown: the two directions' mean maps, each scaled to mean 1."""
        allowed = ways.allowed()
        matrices = [self.direction_matrix(ways, direction) for direction in DIRECTIONS]
        one_way = [one_way_links(masked(m, allowed), d) for m, d in zip(matrices, DIRECTIONS, strict=True)]
        shown = np.mean([m / (m.mean() + 1e-9) for m in matrices], axis=0)
        return symmetrized(*one_way, self.rule), shown

    def as_json(self) -> dict:
        return {"rule": self.rule, "pooling": self.pooling, "heads": [list(h) for h in self.heads],
                "development_aer": round(self.development_aer, 4)}

    @classmethod
    def from_json(cls, data: dict) -> BothChoice:
        return cls(data["rule"], data["pooling"], tuple((d, r, int(layer), int(h)) for d, r, layer, h in data["heads"]),
                   float(data["development_aer"]))


@dataclass(frozen=True)
class HiddenChoice:
    """The layers, pooling and matching of the representations' alignment, chosen on the development half."""

    matching: str  # hidden.MATCHINGS
    pooling: str
    layers: tuple[int, ...]  # hidden states averaged: 0 the embeddings, l the output of layer l
    development_aer: float

    def links(self, ways: BothWays) -> tuple[Links, np.ndarray]:
        similarity = pooled_similarity(ways.similarities(self.pooling), self.layers)
        return matched_links(similarity, self.matching, ways.allowed()), similarity

    def as_json(self) -> dict:
        return {"matching": self.matching, "pooling": self.pooling, "layers": list(self.layers),
                "development_aer": round(self.development_aer, 4)}

    @classmethod
    def from_json(cls, data: dict) -> HiddenChoice:
        return cls(data["matching"], data["pooling"], tuple(int(x) for x in data["layers"]),
                   float(data["development_aer"]))


def features(ways: BothWays, pooling: str, layers: tuple[int, ...] = ()) -> np.ndarray:
    """(T,S,F) what a weighted method reads of each cell: every head's log scaled weight in each direction and way of
    reading rows (F = 2 x 2 x L x H), then each run's similarity at `layers` (2 x len(layers))."""
    parts = []
    for direction in DIRECTIONS:
        for rows in ROWS:
            maps = np.log(ways.maps(direction, rows, pooling) + LOG_FLOOR)  # (L,H,T,S)
            parts.append(maps.reshape(-1, *maps.shape[2:]).transpose(1, 2, 0))
    parts.extend(similarity[list(layers)].transpose(1, 2, 0) for similarity in ways.similarities(pooling))
    return np.concatenate(parts, axis=-1).astype(np.float32)


def candidate_links(probability: np.ndarray, rule: str, allowed: np.ndarray) -> Links:
    """Before the threshold: every allowed cell (THRESHOLD), or the two one-way argmax alignments of a (T,S) link
    probability symmetrized by `rule`."""
    probability = masked(probability, allowed, 0.0)
    if rule == THRESHOLD:
        return frozenset((int(s), int(t)) for t, s in zip(*np.nonzero(allowed), strict=True))
    return symmetrized(argmax_links(probability), column_links(probability), rule)


def decoded(probability: np.ndarray, rule: str, threshold: float, allowed: np.ndarray) -> Links:
    """Links from a (T,S) link probability: candidate_links whose probability (0 where not allowed) is above
    `threshold`."""
    kept = masked(probability, allowed, 0.0)
    return frozenset((s, t) for s, t in candidate_links(probability, rule, allowed) if kept[t, s] > threshold)


@dataclass(frozen=True)
class WeightedChoice:
    """A logistic regression over features(): fitted on the development half's sure links (fit.py)."""

    pooling: str
    layers: tuple[int, ...]  # the similarity layers read (none: attention only)
    mean: np.ndarray  # (F,) each feature's mean on the development half
    scale: np.ndarray  # (F,) and its spread
    weights: np.ndarray  # (F,) of the standardized features
    intercept: float
    rule: str  # THRESHOLD or a symmetrization
    threshold: float
    regularization: float  # the inverse strength C the fit used
    development_aer: float  # measured out of fold (fit.py)

    def probability(self, ways: BothWays) -> np.ndarray:
        """(T,S) each cell's link probability."""
        z = (features(ways, self.pooling, self.layers) - self.mean) / self.scale @ self.weights + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def links(self, ways: BothWays) -> tuple[Links, np.ndarray]:
        probability = self.probability(ways)
        return decoded(probability, self.rule, self.threshold, ways.allowed()), probability

    def as_json(self) -> dict:
        return {"pooling": self.pooling, "layers": list(self.layers), "mean": self.mean.round(6).tolist(),
                "scale": self.scale.round(6).tolist(), "weights": self.weights.round(6).tolist(),
                "intercept": round(self.intercept, 6), "rule": self.rule, "threshold": self.threshold,
                "regularization": self.regularization, "development_aer": round(self.development_aer, 4)}

    @classmethod
    def from_json(cls, data: dict) -> WeightedChoice:
        vector = lambda key: np.array(data[key], dtype=np.float64)  # noqa: E731
        return cls(data["pooling"], tuple(int(x) for x in data["layers"]), vector("mean"), vector("scale"),
                   vector("weights"), float(data["intercept"]), data["rule"], float(data["threshold"]),
                   float(data["regularization"]), float(data["development_aer"]))


@dataclass(frozen=True)
class MethodChoices:
    """Every both-ways method's settings for one model."""

    both: BothChoice
    hidden: HiddenChoice
    weighted: WeightedChoice
    ensemble: WeightedChoice

    def of(self, method: str) -> BothChoice | HiddenChoice | WeightedChoice:
        return {"both": self.both, "hidden": self.hidden, "weighted": self.weighted, "ensemble": self.ensemble}[method]

    def as_json(self) -> dict:
        return {method: self.of(method).as_json() for method in METHODS[1:]}

    @classmethod
    def from_json(cls, data: dict) -> MethodChoices:
        return cls(BothChoice.from_json(data["both"]), HiddenChoice.from_json(data["hidden"]),
                   WeightedChoice.from_json(data["weighted"]), WeightedChoice.from_json(data["ensemble"]))
