"""Translation's alignment methods (issue 83), each rule against a plain loop written here: Moses' symmetrizations
(intersection, union, grow-diag, grow-diag-final, grow-diag-final-and), SimAlign's ArgMax and IterMax, the pooling of
a word's pieces (sum, max, first) and the pair-standardized similarity; the both-ways choices find planted heads and
layers and the regression a planted head, on synthetic runs; on a tiny random Llama, the hidden states after a shared
start equal a whole run's, and a pair's runs both ways hold every pooling's maps as a loop over the run computes them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import run
from mha_core.analysis.translation import fit, hidden, symmetric
from mha_core.analysis.translation.align import ROWS
from mha_core.analysis.translation.both_ways import DIRECTIONS, BothWays, both_ways
from mha_core.analysis.translation.gold import AlignedPair, aer, newswire_pairs, precision_recall
from mha_core.analysis.translation.methods import THRESHOLD, decoded
from mha_core.analysis.translation.run import POOLINGS, DirectionRun, pooled
from mha_core.engine.cache import layers_after_start
from mha_core.engine.tokens import tokenize
from tests.test_translation import SOURCE, TARGET, llama  # noqa: F401 -- the tiny Llama fixture

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def moses(forward: set, backward: set, n_source: int, n_target: int, final: str | None) -> set:
    """Koehn's pseudocode (statmt.org, AlignWords) as written: a grid loop, words aligned looked up in the links."""
    links, union = set(forward & backward), forward | backward
    aligned_source = lambda s: any(a == s for a, _ in links)  # noqa: E731
    aligned_target = lambda t: any(b == t for _, b in links)  # noqa: E731
    added = True
    while added:
        added = False
        for s in range(n_source):
            for t in range(n_target):
                if (s, t) not in links:
                    continue
                for ds, dt in NEIGHBOURS:
                    new = (s + ds, t + dt)
                    if new in union and new not in links and (not aligned_source(new[0]) or
                                                              not aligned_target(new[1])):
                        links.add(new)
                        added = True
    for one_way in (forward, backward) if final else ():
        for s in range(n_source):
            for t in range(n_target):
                free = [not aligned_source(s), not aligned_target(t)]
                if (s, t) in one_way and (s, t) not in links and (all(free) if final == "and" else any(free)):
                    links.add((s, t))
    return links


def random_links(rng: np.random.Generator, n_source: int, n_target: int, rows: bool) -> set:
    """One-way links: each target word to one source word (rows), or each source word to one target word."""
    if rows:
        return {(int(rng.integers(n_source)), t) for t in range(n_target)}
    return {(s, int(rng.integers(n_target))) for s in range(n_source)}


def test_symmetrizations_against_moses_pseudocode():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n_source, n_target = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        forward, backward = random_links(rng, n_source, n_target, True), random_links(rng, n_source, n_target, False)
        expected = {"intersection": forward & backward, "union": forward | backward,
                    "grow-diag": moses(forward, backward, n_source, n_target, None),
                    "grow-diag-final": moses(forward, backward, n_source, n_target, "or"),
                    "grow-diag-final-and": moses(forward, backward, n_source, n_target, "and")}
        for rule, links in expected.items():
            assert symmetric.symmetrized(frozenset(forward), frozenset(backward), rule) == links, (rule, forward,
                                                                                                   backward)
    assert set(symmetric.SYMMETRIZATIONS) == set(expected)


def simalign_itermax(sim: np.ndarray, max_count: int = 2, alpha: float = 0.9) -> np.ndarray:
    """SimAlign's iter_max (cisnlp/simalign, simalign.py) in its own order (m source rows x n target columns)."""
    m, n = sim.shape
    forward = np.eye(n)[sim.argmax(axis=1)]
    backward = np.eye(m)[sim.argmax(axis=0)]
    inter = forward * backward.transpose()
    if min(m, n) <= 2:
        return inter
    count = 1
    while count < max_count:
        mask_x = 1.0 - np.tile(inter.sum(1)[:, np.newaxis], (1, n)).clip(0.0, 1.0)
        mask_y = 1.0 - np.tile(inter.sum(0)[np.newaxis, :], (m, 1)).clip(0.0, 1.0)
        mask = ((alpha * mask_x) + (alpha * mask_y)).clip(0.0, 1.0)
        mask_zeros = 1.0 - ((1.0 - mask_x) * (1.0 - mask_y))
        if mask_x.sum() < 1.0 or mask_y.sum() < 1.0:
            mask *= 0.0
            mask_zeros *= 0.0
        new_sim = sim * mask
        fwd = np.eye(n)[new_sim.argmax(axis=1)] * mask_zeros
        bac = np.eye(m)[new_sim.argmax(axis=0)].transpose() * mask_zeros
        new_inter = fwd * bac
        if np.array_equal(inter + new_inter, inter):
            break
        inter = inter + new_inter
        count += 1
    return inter


def test_argmax_and_itermax_against_simalign_s_loop():
    rng = np.random.default_rng(3)
    grew = 0
    for _ in range(300):
        sim = rng.random((int(rng.integers(1, 10)), int(rng.integers(1, 10))))  # (S,T) as SimAlign holds it
        inter = {(int(s), int(t)) for s in range(sim.shape[0]) for t in range(sim.shape[1])
                 if sim[s].argmax() == t and sim[:, t].argmax() == s}
        assert hidden.matched_links(sim.T, "argmax") == inter
        expected = {(int(s), int(t)) for s, t in zip(*np.nonzero(simalign_itermax(sim)), strict=True)}
        assert hidden.matched_links(sim.T, "itermax") == expected
        grew += len(expected) > len(inter)
    assert grew > 50  # the second round adds links in most matrices


def test_pooling_a_word_s_pieces_against_a_loop():
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.random((2, 3, 7)).astype(np.float32))
    groups = [[0], [1, 2, 3], [4, 6]]
    for pooling in POOLINGS:
        for total in (True, False):
            ours = pooled(x, groups, pooling, dim=2, total=total)
            for w, group in enumerate(groups):
                values = [x[:, :, p] for p in group]
                naive = {"first": values[0], "max": torch.stack(values).max(dim=0).values,
                         "sum": sum(values) if total else sum(values) / len(values)}[pooling]
                assert (ours[:, :, w] - naive).abs().max().item() <= 1e-6, (pooling, total, w)


def test_the_similarity_standardizes_each_dimension_over_the_pair_s_words():
    rng = np.random.default_rng(6)
    source, target = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 2, 5))
    source[:, :, 0] += 100.0  # a massive dimension every word shares
    target[:, :, 0] += 100.0
    ours = hidden.layer_similarity(torch.from_numpy(source), torch.from_numpy(target)).numpy()
    for layer in range(3):
        words = np.concatenate([source[layer], target[layer]])
        standard = (words - words.mean(axis=0)) / (words.std(axis=0) + 1e-6)
        for t in range(2):
            for s in range(4):
                a, b = standard[4 + t], standard[s]
                cosine = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
                assert abs(ours[layer, t, s] - (cosine + 1) / 2) <= 1e-5
    assert ours.max() < 0.99  # the shared dimension no longer makes every pair alike


def synthetic_ways(pairs: list[AlignedPair], seed: int, planted: dict) -> list[BothWays]:
    """Runs of random maps (2 layers x 2 heads) and similarities (3 states) where `planted` cells follow the sure
    links: {direction: [(rows, layer, head, parity)]} (parity: only the links of even or odd continuation words;
    None: all) and "hidden": a state index."""
    rng = np.random.default_rng(seed)
    ways = []
    for pair in pairs:
        runs = {}
        for direction in DIRECTIONS:
            source, target = (pair.source, pair.target) if direction == DIRECTIONS[0] else (pair.target, pair.source)
            gold = pair.sure if direction == DIRECTIONS[0] else {(t, s) for s, t in pair.sure}
            maps, similarity = {}, {}
            for pooling in POOLINGS:
                for rows in ROWS:
                    m = rng.random((2, 2, len(target), len(source))).astype(np.float32) * 0.5
                    for rows_planted, layer, head, parity in planted[direction]:
                        for s, t in gold:
                            if rows_planted == rows and parity in (None, t % 2):
                                m[layer, head, t, s] += 1.0
                    maps[pooling, rows] = m
                sim = rng.random((3, len(target), len(source))).astype(np.float32) * 0.5
                for s, t in gold:
                    sim[planted["hidden"], t, s] += 0.5
                similarity[pooling] = sim
            runs[direction] = DirectionRun(source, target, "", maps, similarity)
        ways.append(BothWays(pair.source, pair.target, runs))
    return ways


def feature(direction: str, rows: str, layer: int, head: int) -> int:
    """A head's column of methods.features on 2 layers x 2 heads."""
    return (DIRECTIONS.index(direction) * len(ROWS) + ROWS.index(rows)) * 4 + layer * 2 + head


def test_the_both_ways_choices_find_what_follows_the_gold_links():
    pairs = newswire_pairs("zh")[:8]
    planted = {"zh-en": [("self", 1, 0, None)], "en-zh": [("previous", 0, 1, None)], "hidden": 2}
    ways = synthetic_ways(pairs, 11, planted)
    both = fit.choose_both(ways, pairs)
    assert ("zh-en", "self", 1, 0) in both.heads and ("en-zh", "previous", 0, 1) in both.heads
    assert both.development_aer == pytest.approx(aer([both.links(w)[0] for w in ways], pairs))
    chosen = fit.choose_hidden(ways, pairs)
    assert 2 in chosen.layers and chosen.development_aer < 0.5
    weighted = fit.fit_weighted(ways, pairs)
    strongest = set(np.argsort(-weighted.weights)[:2].tolist())
    assert strongest == {feature("zh-en", "self", 1, 0), feature("en-zh", "previous", 0, 1)}
    links = [weighted.links(w)[0] for w in ways]
    assert aer(links, pairs) < 0.2 and precision_recall(links, pairs)[0] > 0.8


def test_the_greedy_choice_adds_the_head_that_completes_another():
    """Two heads of one direction each follow half the gold links (the even and the odd English words'): the mean of
    both aligns every word, so the greedy choice takes the second after the first."""
    pairs = newswire_pairs("zh")[:8]
    planted = {"zh-en": [("self", 1, 0, 0), ("self", 0, 1, 1)], "en-zh": [("self", 1, 1, None)], "hidden": 0}
    ways = synthetic_ways(pairs, 12, planted)
    both = fit.choose_both(ways, pairs)
    assert {("zh-en", "self", 1, 0), ("zh-en", "self", 0, 1)} <= set(both.heads)


def test_a_weighted_method_s_decoding_against_a_loop():
    rng = np.random.default_rng(9)
    for _ in range(50):
        probability = rng.random((int(rng.integers(1, 7)), int(rng.integers(1, 7))))
        allowed = rng.random(probability.shape) > 0.2
        allowed[:, 0] = True
        kept = np.where(allowed, probability, 0.0)
        above = {(s, t) for t in range(kept.shape[0]) for s in range(kept.shape[1]) if kept[t, s] > 0.3}
        assert decoded(probability, THRESHOLD, 0.3, allowed) == above
        rows = {(int(np.argmax(kept[t])), t) for t in range(kept.shape[0])}
        columns = {(s, int(np.argmax(kept[:, s]))) for s in range(kept.shape[1])}
        grown = moses(rows, columns, kept.shape[1], kept.shape[0], "and")
        assert decoded(probability, "grow-diag-final-and", 0.3, allowed) == grown & above


def test_hidden_states_after_a_shared_start_equal_a_whole_run_s(llama):  # noqa: F811
    text = "Chinese: 我喝茶。\nEnglish: I drink tea.\nChinese: " + SOURCE
    batch = tokenize(llama.tokenizer, text, llama.max_length, bos=llama.bos_id)
    whole = run(llama, text, path="explicit")
    k, maps, states = layers_after_start(llama, batch, text[:30], before=12)
    assert 5 < k <= 12 and states.shape == (llama.n_layers + 1, whole.batch.input_ids.shape[1] - k, llama.d_model)
    for layer in range(llama.n_layers):  # the last of the whole run's states is after the final norm: not compared
        assert (states[layer] - whole.hidden_states[layer][0, k:]).abs().max().item() <= 1e-5
    assert (maps - whole.text_maps(0)[:, :, k:]).abs().max().item() <= 1e-6


def test_both_ways_reads_the_pair_in_either_order_with_the_same_words(llama):  # noqa: F811
    asked = both_ways(llama, SOURCE, TARGET, "zh", "en", ("sum",))
    turned = both_ways(llama, TARGET, asked.source_words, "en", "zh", ("first",))
    assert asked.target_words == turned.target_words and asked.source_words == turned.source_words
    zh_en = asked.maps("zh-en", "self", "sum", columns=False)
    assert zh_en.shape == (llama.n_layers, llama.n_heads, len(asked.target_words), len(asked.source_words))
    en_zh = asked.maps("en-zh", "self", "sum", columns=False)  # the Chinese words' rows, turned
    assert en_zh.shape == zh_en.shape
    assert np.allclose(en_zh[0, 0].T, asked.runs["en-zh"].maps["sum", "self"][0, 0])
    assert all(s.shape == (llama.n_layers + 1, *zh_en.shape[2:]) for s in asked.similarities("sum"))
