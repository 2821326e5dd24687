"""Hand alignments to measure heads against, and the alignment error rate (Och & Ney 2003).

The bundled set: 150 Chinese–English newswire sentence pairs hand-aligned with sure and possible links (John
DeNero's zh_en_word_alignment_data, MIT licence, a subset of the NIST 2002 MT evaluation; assets/alignment/). Its
first half is the development set the heads are chosen on; its second half is held back and only reported.
Pharaoh format: "i-j" links source word i to target word j (0-based), "i-j-P" a possible link.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mha_core.app_files import ASSETS

ALIGNMENT_DIR = ASSETS / "alignment"
NEWSWIRE = "zh_en_newswire"
Links = frozenset[tuple[int, int]]  # (source word, target word)


@dataclass(frozen=True)
class AlignedPair:
    source: tuple[str, ...]  # S words
    target: tuple[str, ...]  # T words
    sure: Links
    possible: Links  # the sure links included, as AER counts them


def read_pharaoh(line: str) -> tuple[Links, Links]:
    """A line of links -> (sure, possible ∪ sure)."""
    sure, possible = set(), set()
    for link in line.split():
        i, j, *kind = link.split("-")
        (possible if kind == ["P"] else sure).add((int(i), int(j)))
    return frozenset(sure), frozenset(sure | possible)


def pharaoh(links: Iterable[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def newswire_pairs(source_language: str = "zh") -> list[AlignedPair]:
    """The bundled set in the direction asked: zh -> en as stored, en -> zh with every link turned round."""
    lines = {ext: (ALIGNMENT_DIR / f"{NEWSWIRE}.{ext}").read_text(encoding="utf-8").splitlines()
             for ext in ("zh", "en", "align")}
    pairs = []
    for zh, en, links in zip(lines["zh"], lines["en"], lines["align"], strict=True):
        sure, possible = read_pharaoh(links)
        if source_language == "zh":
            pairs.append(AlignedPair(tuple(zh.split()), tuple(en.split()), sure, possible))
        else:
            turned = lambda ls: frozenset((j, i) for i, j in ls)  # noqa: E731
            pairs.append(AlignedPair(tuple(en.split()), tuple(zh.split()), turned(sure), turned(possible)))
    return pairs


def halves(pairs: Sequence[AlignedPair]) -> tuple[list[AlignedPair], list[AlignedPair]]:
    """(development, held back): the first and the second half, in the file's order."""
    middle = len(pairs) // 2
    return list(pairs[:middle]), list(pairs[middle:])


def aer(predicted: Sequence[Links], pairs: Sequence[AlignedPair]) -> float:
    """AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|), counted over the whole set."""
    hits = sum(len(a & p.sure) + len(a & p.possible) for a, p in zip(predicted, pairs, strict=True))
    total = sum(len(a) + len(p.sure) for a, p in zip(predicted, pairs, strict=True))
    return 1.0 - hits / total if total else 1.0


def diagonal(n_source: int, n_target: int) -> Links:
    """The baseline that knows only the lengths: target word j links to the source word at the same share of the
    sentence."""
    scale = (n_source - 1) / max(n_target - 1, 1)
    return frozenset((round(j * scale), j) for j in range(n_target))


def precision_recall(predicted: Sequence[Links], pairs: Sequence[AlignedPair]) -> tuple[float, float]:
    """(precision |A∩P| / |A|, recall |A∩S| / |S|) over the whole set (Och & Ney 2003)."""
    made = sum(len(a) for a in predicted)
    possible = sum(len(a & p.possible) for a, p in zip(predicted, pairs, strict=True))
    sure = sum(len(a & p.sure) for a, p in zip(predicted, pairs, strict=True))
    return (possible / made if made else 0.0), sure / max(sum(len(p.sure) for p in pairs), 1)
