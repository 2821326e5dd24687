"""Each both-ways method's settings chosen on hand-aligned pairs (the development half: the held-back half is never
read here), and a choice measured on other pairs.

- both: for each pooling and symmetrization, heads picked greedily (each step adds the head, of either direction and
  either way of reading rows, that lowers the symmetrized AER most; stop when none does or at MAX_HEADS), starting
  from each direction's best head; candidates are each direction's CANDIDATES heads whose own one-way AER is lowest.
- hidden: the pooling, the matching and the run of consecutive layers whose similarity aligns best.
- weighted, ensemble: a logistic regression (C = REGULARIZATION) on every cell's features, the cell a sure link or
  not; the pooling and the decoding (rule, threshold) chosen on out-of-fold probabilities (INNER_FOLDS folds of
  the pairs), then the regression fitted on them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mha_core.analysis.translation.align import ROWS
from mha_core.analysis.translation.both_ways import DIRECTIONS, BothWays
from mha_core.analysis.translation.gold import AlignedPair, Links, aer
from mha_core.analysis.translation.hidden import MATCHINGS, matched_links
from mha_core.analysis.translation.methods import (
    THRESHOLD,
    BothChoice,
    Head,
    HiddenChoice,
    MethodChoices,
    WeightedChoice,
    candidate_links,
    features,
    masked,
    one_way_links,
)
from mha_core.analysis.translation.run import POOLINGS
from mha_core.analysis.translation.symmetric import SYMMETRIZATIONS, symmetrized

MAX_HEADS = 8
CANDIDATES = 12
REGULARIZATION = 0.1
FOLDS = 5  # a cross-validation's
INNER_FOLDS = 3  # the folds the decoding of a regression is chosen on
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5)
DECODINGS = (THRESHOLD, "intersection", "grow-diag", "grow-diag-final-and")
Choice = BothChoice | HiddenChoice | WeightedChoice


def head_matrices(ways: Sequence[BothWays], pooling: str) -> list[dict[Head, np.ndarray]]:
    """Per pair, every head's (T,S) scaled map, keyed (direction, rows, layer, head)."""
    out = []
    for pair in ways:
        heads = {}
        for direction in DIRECTIONS:
            for rows in ROWS:
                maps = pair.maps(direction, rows, pooling)
                heads.update({(direction, rows, layer, head): maps[layer, head]
                              for layer, head in np.ndindex(*maps.shape[:2])})
        out.append(heads)
    return out


def heads_aer(matrices: list[dict[Head, np.ndarray]], allowed: list[np.ndarray], pairs: Sequence[AlignedPair],
              heads: Sequence[Head], rule: str) -> float:
    """The symmetrized AER of these heads (one-way AER where they are all of one direction)."""
    links = []
    for pair_heads, kinds in zip(matrices, allowed, strict=True):
        one_way = [one_way_links(masked(np.mean([pair_heads[h] for h in heads if h[0] == d], axis=0), kinds), d)
                   for d in DIRECTIONS if any(h[0] == d for h in heads)]
        links.append(symmetrized(*one_way, rule) if len(one_way) == 2 else one_way[0])
    return aer(links, pairs)


def ranked_heads(matrices: list[dict[Head, np.ndarray]], allowed: list[np.ndarray], pairs: Sequence[AlignedPair]
                 ) -> dict[str, list[Head]]:
    """Per direction, the CANDIDATES heads whose own one-way alignment has the lowest AER, best first."""
    own = {h: heads_aer(matrices, allowed, pairs, [h], "union") for h in matrices[0]}
    return {d: sorted((h for h in own if h[0] == d), key=own.get)[:CANDIDATES] for d in DIRECTIONS}


def greedy_heads(matrices: list[dict[Head, np.ndarray]], allowed: list[np.ndarray], pairs: Sequence[AlignedPair],
                 rule: str, ranked: dict[str, list[Head]]) -> tuple[tuple[Head, ...], float]:
    """Heads added one at a time, each the candidate that lowers the symmetrized AER most."""
    chosen = [ranked[d][0] for d in DIRECTIONS]
    best = heads_aer(matrices, allowed, pairs, chosen, rule)
    while len(chosen) < MAX_HEADS:
        scores = {h: heads_aer(matrices, allowed, pairs, [*chosen, h], rule)
                  for d in DIRECTIONS for h in ranked[d] if h not in chosen}
        head = min(scores, key=scores.get)
        if scores[head] >= best:
            break
        chosen.append(head)
        best = scores[head]
    return tuple(chosen), best


def both_by_rule(ways: Sequence[BothWays], pairs: Sequence[AlignedPair]) -> dict[str, BothChoice]:
    """Each symmetrization's heads and pooling, chosen on these pairs."""
    allowed = [w.allowed() for w in ways]
    best: dict[str, BothChoice] = {}
    for pooling in POOLINGS:
        matrices = head_matrices(ways, pooling)
        ranked = ranked_heads(matrices, allowed, pairs)
        for rule in SYMMETRIZATIONS:
            heads, score = greedy_heads(matrices, allowed, pairs, rule, ranked)
            if rule not in best or score < best[rule].development_aer:
                best[rule] = BothChoice(rule, pooling, heads, score)
    return best


def choose_both(ways: Sequence[BothWays], pairs: Sequence[AlignedPair]) -> BothChoice:
    return min(both_by_rule(ways, pairs).values(), key=lambda choice: choice.development_aer)


def hidden_by_matching(ways: Sequence[BothWays], pairs: Sequence[AlignedPair]) -> dict[str, HiddenChoice]:
    """Each matching's pooling and run of consecutive layers, chosen on these pairs."""
    allowed = [w.allowed() for w in ways]
    best: dict[str, HiddenChoice] = {}
    for pooling in POOLINGS:
        totals = [np.cumsum(np.mean(w.similarities(pooling), axis=0), axis=0) for w in ways]  # (L+1,T,S) running sums
        n_states = totals[0].shape[0]
        for first, last in ((a, b) for a in range(n_states) for b in range(a, n_states)):
            means = [(t[last] - (t[first - 1] if first else 0)) / (last - first + 1) for t in totals]
            for matching in MATCHINGS:
                score = aer([matched_links(m, matching, a) for m, a in zip(means, allowed, strict=True)], pairs)
                if matching not in best or score < best[matching].development_aer:
                    best[matching] = HiddenChoice(matching, pooling, tuple(range(first, last + 1)), score)
    return best


def choose_hidden(ways: Sequence[BothWays], pairs: Sequence[AlignedPair]) -> HiddenChoice:
    return min(hidden_by_matching(ways, pairs).values(), key=lambda choice: choice.development_aer)


def sure_cells(pair: AlignedPair) -> np.ndarray:
    """(T,S) 1 where a sure link is."""
    cells = np.zeros((len(pair.target), len(pair.source)), dtype=np.float32)
    for s, t in pair.sure:
        cells[t, s] = 1.0
    return cells


def regression(cells: Sequence[np.ndarray], labels: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """(mean, scale, weights, intercept) of a logistic regression on the pairs' (T,S,F) cells."""
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([c.reshape(-1, c.shape[-1]) for c in cells]).astype(np.float32)
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    fitted = LogisticRegression(C=REGULARIZATION, max_iter=3000).fit((x - mean) / scale,
                                                                    np.concatenate([y.ravel() for y in labels]))
    return mean, scale, fitted.coef_[0], float(fitted.intercept_[0])


def probabilities(cells: np.ndarray, mean: np.ndarray, scale: np.ndarray, weights: np.ndarray,
                  intercept: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-((cells - mean) / scale @ weights + intercept)))


def folds(n: int, k: int = FOLDS) -> list[list[int]]:
    """k folds of consecutive pairs (the file's order)."""
    return [list(part) for part in np.array_split(np.arange(n), k) if len(part)]


def out_of_fold(cells: list[np.ndarray], labels: list[np.ndarray]) -> list[np.ndarray]:
    """Each pair's (T,S) probability from a regression fitted on the other INNER_FOLDS folds."""
    predicted: list[np.ndarray] = [np.empty(0)] * len(cells)
    for fold in folds(len(cells), INNER_FOLDS):
        rest = [i for i in range(len(cells)) if i not in fold]
        fitted = regression([cells[i] for i in rest], [labels[i] for i in rest])
        for i in fold:
            predicted[i] = probabilities(cells[i], *fitted)
    return predicted


def best_decoding(predicted: list[np.ndarray], allowed: list[np.ndarray], pairs: Sequence[AlignedPair]
                  ) -> tuple[float, str, float]:
    """(AER, rule, threshold) of the decoding (DECODINGS x THRESHOLDS) that aligns best."""
    scores = []
    predicted = [masked(p, a, 0.0) for p, a in zip(predicted, allowed, strict=True)]
    for rule in DECODINGS:
        candidates = [candidate_links(p, rule, a) for p, a in zip(predicted, allowed, strict=True)]
        for threshold in THRESHOLDS:
            links = [frozenset(link for link in c if p[link[1], link[0]] > threshold)
                     for c, p in zip(candidates, predicted, strict=True)]
            scores.append((aer(links, pairs), rule, threshold))
    return min(scores)


def fit_weighted(ways: Sequence[BothWays], pairs: Sequence[AlignedPair], layers: tuple[int, ...] = ()
                 ) -> WeightedChoice:
    allowed, labels = [w.allowed() for w in ways], [sure_cells(p) for p in pairs]
    best = None
    for pooling in POOLINGS:
        cells = [features(w, pooling, layers) for w in ways]
        score, rule, threshold = best_decoding(out_of_fold(cells, labels), allowed, pairs)
        if best is None or score < best[0]:
            best = (score, rule, threshold, pooling, cells)
    score, rule, threshold, pooling, cells = best
    mean, scale, weights, intercept = regression(cells, labels)
    return WeightedChoice(pooling, layers, mean, scale, weights, intercept, rule, threshold, REGULARIZATION, score)


def all_states(ways: Sequence[BothWays]) -> tuple[int, ...]:
    """Every hidden state's index (the embeddings, then each layer's output): the ensemble reads them all."""
    return tuple(range(ways[0].similarities(POOLINGS[0])[0].shape[0]))


CHOOSERS: dict[str, Callable[[Sequence[BothWays], Sequence[AlignedPair]], Choice]] = {
    "both": choose_both, "hidden": choose_hidden, "weighted": fit_weighted,
    "ensemble": lambda ways, pairs: fit_weighted(ways, pairs, all_states(ways)),
}


def choose_all(ways: Sequence[BothWays], pairs: Sequence[AlignedPair]) -> MethodChoices:
    """Every both-ways method chosen on these pairs."""
    return MethodChoices(*(CHOOSERS[method](ways, pairs) for method in ("both", "hidden", "weighted", "ensemble")))


def cross_validated(choose: Callable[[Sequence[BothWays], Sequence[AlignedPair]], dict[str, Choice]],
                    ways: Sequence[BothWays], pairs: Sequence[AlignedPair], k: int = FOLDS) -> dict[str, list[Links]]:
    """Each pair's links by each choice `choose` makes (keyed as it keys them), made on the other folds (k folds of
    consecutive pairs): what the choice does on pairs it has not seen."""
    links: dict[str, list[Links]] = {}
    for fold in folds(len(pairs), k):
        rest = [i for i in range(len(pairs)) if i not in fold]
        for key, choice in choose([ways[i] for i in rest], [pairs[i] for i in rest]).items():
            made = links.setdefault(key, [frozenset()] * len(pairs))
            for i in fold:
                made[i] = choice.links(ways[i])[0]
    return links
