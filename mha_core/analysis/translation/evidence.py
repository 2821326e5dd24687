"""What the shipped choices were made from, pair by pair, so that a test can re-derive them without rerunning the
model on every pair (issue 79), and recompute a fixed sample of the pairs exactly:

- heads.json, each direction: `development_counts`, for every development pair, each head's argmax links (heads in
  (layer, head) order) and then each (rule, k) of the ranked heads (LINK_RULES x k = 1..MAX_COMBINED), counted as
  "|A|:|A∩S|+|A∩P|" under the chosen pooling, rows and scaling; the head AERs, their ranking and the (rule, k)
  chosen follow from these counts alone (derived_choice). `options`: every (pooling, rows, scaling) tried and its
  best combined AER, the chosen one the least.
- methods.json: `held_back_links`, each chosen row of the table (`heads zh-en`, `both`, ...), its links on every
  held-back pair (Pharaoh, CANONICAL order); the row's held-back AER, precision and recall are these links'.

benchmarks/bench_align.py --write stores them, --check recomputes every pair and every choice and fails on a
difference.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from mha_core.analysis.translation.align import LINK_RULES, WordMaps, links_of
from mha_core.analysis.translation.both_ways import DIRECTIONS, BothWays, turned
from mha_core.analysis.translation.gold import AlignedPair, Links
from mha_core.analysis.translation.heads import MAX_COMBINED, HeadChoice, ranked_heads

SAMPLE_SEED = 79
SAMPLE_SIZE = 6  # pairs of each half a test recomputes with the model
Counts = tuple[tuple[int, int], ...]  # (|A|, |A∩S| + |A∩P|) of each candidate, for one pair


def sample(n_pairs: int, size: int = SAMPLE_SIZE) -> list[int]:
    """The fixed random sample of pair indices a test recomputes."""
    return sorted(random.Random(SAMPLE_SEED).sample(range(n_pairs), size))


def parsed(line: str) -> Links:
    return frozenset(tuple(int(i) for i in link.split("-")) for link in line.split())


def counted(links: Links, pair: AlignedPair) -> tuple[int, int]:
    return len(links), len(links & pair.sure) + len(links & pair.possible)


def aer_of(counts: Sequence[tuple[int, int]], pairs: Sequence[AlignedPair]) -> float:
    """gold.aer from each pair's counts (the same sums, the same float)."""
    hits = sum(h for _, h in counts)
    total = sum(n + len(p.sure) for (n, _), p in zip(counts, pairs, strict=True))
    return 1.0 - hits / total if total else 1.0


def head_counts(maps: WordMaps, pair: AlignedPair) -> Counts:
    """Each head's argmax links on one pair (maps scaled as chosen), counted, heads in (layer, head) order."""
    allowed = maps.allowed()
    return tuple(counted(links_of(head_map, "argmax", allowed), pair) for layer_maps in maps.maps
                 for head_map in layer_maps)


def combined_counts(maps: WordMaps, pair: AlignedPair, ranked: Sequence[tuple[int, int]]) -> Counts:
    """Each (rule, k) of the ranked heads' mean map on one pair, counted (rules in LINK_RULES order, k from 1)."""
    allowed = maps.allowed()
    return tuple(counted(links_of(maps.combined(ranked[:k]), rule, allowed), pair) for rule in LINK_RULES
                 for k in range(1, MAX_COMBINED + 1))


def written(counts: Counts) -> str:
    return " ".join(f"{n}:{h}" for n, h in counts)


def read(line: str) -> Counts:
    return tuple(tuple(int(x) for x in entry.split(":")) for entry in line.split())


def derived_choice(entry: dict, pairs: Sequence[AlignedPair]) -> HeadChoice:
    """The choice heads.choose makes, from heads.json's stored development counts alone: each head's AER, the heads
    ranked by it, the (rule, k) of least combined AER."""
    counts = [read(line) for line in entry["development_counts"]]
    shape = np.array(entry["aers"]).shape
    n_heads = shape[0] * shape[1]
    aers = np.array([aer_of([c[i] for c in counts], pairs) for i in range(n_heads)]).reshape(shape)
    ranked = ranked_heads(aers)
    keys = [(rule, k) for rule in LINK_RULES for k in range(1, MAX_COMBINED + 1)]
    scores = {key: aer_of([c[n_heads + i] for c in counts], pairs) for i, key in enumerate(keys)}
    rule, k = min(scores, key=scores.get)
    return HeadChoice(entry["direction"], aers, tuple(ranked[:k]), scores[rule, k], float(entry["diagonal_aer"]),
                      entry["rows"], rule, entry["scaling"], entry["pooling"])


def one_way_links(choice: HeadChoice, ways: BothWays) -> Links:
    """A one-direction head choice's links read from both ways' runs, in CANONICAL order."""
    maps = ways.runs[choice.direction].word_maps(choice.rows, choice.pooling).scaled(choice.scaling)
    made = links_of(maps.combined(choice.heads), choice.rule, maps.allowed())
    return made if choice.direction == DIRECTIONS[0] else turned(made)


def row_key(method: str, setting: str) -> str:
    """A table row's name in held_back_links: `heads zh-en`, `both`."""
    return f"{method} {setting}" if method == "heads" else method
