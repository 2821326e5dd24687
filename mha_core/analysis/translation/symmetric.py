"""Two one-way alignments of a pair made one, as phrase-based translation symmetrised its aligners (Koehn et al. 2003;
Moses' grow-diag-final, statmt.org/moses/?n=FactoredTraining.AlignWords).

The two ways: the translation read as the continuation of the source (each translation word to the source word its
heads attend to most) and the source read as the continuation of the translation (each source word to its translation
word). Links are (source word, translation word) pairs in either.

SYMMETRIZATIONS, each measured on the hand alignments (benchmarks/bench_align.py):
- intersection: the links both ways make (few, sure);
- union: the links either way makes (many);
- grow-diag: the intersection, then every link of the union next to a link already made (a side or a corner) that
  aligns a word not aligned yet, until none is added;
- grow-diag-final: then each way's remaining links that align a word not aligned yet;
- grow-diag-final-and: then each way's remaining links whose two words are both not aligned yet.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from mha_core.analysis.translation.gold import Links

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))  # Moses' order


class Growing:
    """An alignment being grown, with the words it aligns on each side."""

    def __init__(self, links: Links) -> None:
        self.links = sorted(links)  # in the order Moses' loop visits them: source word, then translation word
        self.made = set(links)
        self.source = {s for s, _ in links}
        self.target = {t for _, t in links}

    def add(self, link: tuple[int, int]) -> None:
        bisect.insort(self.links, link)
        self.made.add(link)
        self.source.add(link[0])
        self.target.add(link[1])

    def aligns_a_new_word(self, link: tuple[int, int]) -> bool:
        return link[0] not in self.source or link[1] not in self.target

    def aligns_two_new_words(self, link: tuple[int, int]) -> bool:
        return link[0] not in self.source and link[1] not in self.target


def grow_diag(growing: Growing, union: Links) -> None:
    """Sweep the links in order (a link added ahead of the sweep is visited in the same sweep, one behind it in the
    next), adding each neighbour in the union that aligns a new word, until a sweep adds none."""
    added = True
    while added:
        added, i = False, 0
        while i < len(growing.links):
            s, t = growing.links[i]
            for ds, dt in NEIGHBOURS:
                near = (s + ds, t + dt)
                if near in union and near not in growing.made and growing.aligns_a_new_word(near):
                    growing.add(near)
                    added = True
                    if near < (s, t):
                        i += 1  # inserted behind the sweep: the current link moved one on
            i += 1


def final(growing: Growing, one_way: Links, both_new: bool) -> None:
    """Each of `one_way`'s links, in order, that aligns a new word (both_new: two new words)."""
    for link in sorted(one_way):
        fits = growing.aligns_two_new_words(link) if both_new else growing.aligns_a_new_word(link)
        if fits and link not in growing.made:
            growing.add(link)


def grown(forward: Links, backward: Links, finished: str | None = None) -> Links:
    """grow-diag from the intersection, then (finished: "final" or "final-and") both ways' remaining links."""
    growing = Growing(forward & backward)
    grow_diag(growing, forward | backward)
    if finished is not None:
        for one_way in (forward, backward):
            final(growing, one_way, both_new=finished == "final-and")
    return frozenset(growing.links)


SYMMETRIZATIONS: dict[str, Callable[[Links, Links], Links]] = {
    "intersection": lambda forward, backward: forward & backward,
    "union": lambda forward, backward: forward | backward,
    "grow-diag": lambda forward, backward: grown(forward, backward),
    "grow-diag-final": lambda forward, backward: grown(forward, backward, "final"),
    "grow-diag-final-and": lambda forward, backward: grown(forward, backward, "final-and"),
}


def symmetrized(forward: Links, backward: Links, rule: str) -> Links:
    """One alignment from two one-way ones by SYMMETRIZATIONS[rule]."""
    return SYMMETRIZATIONS[rule](forward, backward)
