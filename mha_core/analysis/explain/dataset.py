"""Faithfulness over data, a table per model: every method's mean AOPC comprehensiveness and sufficiency and its
mean seconds over a seeded sample of the bundled corpus's sentences (each model's own target: a decoder's own next
piece, an encoder's coreference margin where the sentence has a pronoun with two nouns before it) or of a GAP file
(decoders: the snippet's sentences from the first of the pronoun and the two names to the last of them, continued
with " The word '<pronoun>' refers to", the named antecedent's first word against the other name's; the sentences
before and after, half a snippet on average, are left out to halve the runs' length). Texts are read in the sample's
order until `limit` are explained; a text the target cannot be read on (no pronoun, a name of several pieces, no
word to remove) is counted as skipped.

A method is the more faithful the larger its comprehensiveness minus its sufficiency (removing its top words moves
the score most, keeping only them moves it least); the table ranks the methods by the mean of that difference over
the texts, with its standard error, and counts the texts on which each method ranks first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_core.analysis.coref.sentence import PROBE
from mha_core.analysis.corpus.readers import GapExample
from mha_core.analysis.explain.choices import DEFAULT_STEPS, METHODS, SHORT
from mha_core.analysis.explain.explain import Explanation, check_methods, explain
from mha_core.analysis.explain.integrated import check_steps
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

CORPUS, GAP = "corpus", "gap"
DATASETS = (CORPUS, GAP)
GAP_PROBE = PROBE.removesuffix(" the")  # " The word '{pronoun}' refers to": a name follows, not "the"
Item = tuple[str, str | None, str | None]  # (text, answer, wrong)
SENTENCE_END = re.compile(r"[.!?][\"')]?\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class DatasetTable:
    model: str
    dataset: str
    seed: int  # of the sample's order
    explained: int  # texts explained
    skipped: int  # texts read whose target could not be read
    steps: int  # Integrated Gradients' steps
    comprehensiveness: dict[str, float]  # method -> mean AOPC comprehensiveness
    sufficiency: dict[str, float]  # method -> mean AOPC sufficiency
    seconds: dict[str, float]  # method -> mean seconds
    margins: dict[str, tuple[float, ...]]  # method -> per text, AOPC comprehensiveness - AOPC sufficiency
    pieces: float  # mean pieces per text explained

    def faithful(self, name: str) -> float:
        return self.comprehensiveness[name] - self.sufficiency[name]

    def standard_error(self, name: str) -> float:
        margins = np.asarray(self.margins[name])
        return float(margins.std(ddof=1) / np.sqrt(len(margins))) if len(margins) > 1 else float("nan")

    def wins(self, name: str) -> int:
        """The texts on which `name` has the largest margin (ties: each method tied counts it)."""
        if not self.margins:
            return 0
        table = np.array(list(self.margins.values()))  # (M,N)
        return int((np.asarray(self.margins[name]) >= table.max(0)).sum())

    def ranking(self) -> list[tuple[str, float]]:
        """Methods from the most faithful down, by mean comprehensiveness minus mean sufficiency."""
        return sorted(((name, self.faithful(name)) for name in self.comprehensiveness), key=lambda item: -item[1])

    def lead(self) -> tuple[float, int] | None:
        """How far the most faithful method is ahead of the second: the difference of their means, and on how many
        texts its margin is the larger."""
        ranking = self.ranking()
        if len(ranking) < 2:
            return None
        (first, a), (second, b) = ranking[:2]
        return a - b, int((np.asarray(self.margins[first]) > np.asarray(self.margins[second])).sum())

    def as_json(self) -> dict:
        ranking, lead = self.ranking(), self.lead()
        return {"model": self.model, "dataset": self.dataset, "seed": self.seed, "explained": self.explained,
                "skipped": self.skipped, "steps": self.steps, "pieces": self.pieces,
                "methods": {name: {"aopc_comprehensiveness": self.comprehensiveness[name],
                                   "aopc_sufficiency": self.sufficiency[name], "seconds": self.seconds[name],
                                   "standard_error": self.standard_error(name), "wins": self.wins(name),
                                   "margins": list(self.margins[name])}
                            for name in self.comprehensiveness},
                "ranking": [[name, value] for name, value in ranking],
                "most_faithful": ranking[0][0] if ranking else None,
                "by": None if lead is None else lead[0], "ahead_on": None if lead is None else lead[1]}


def first_word(name: str) -> str:
    return name.split()[0] if name.split() else name


def sampled(items: Sequence[Item], seed: int) -> list[Item]:
    """The items in the seeded sample's order (the same order on every run)."""
    return [items[i] for i in np.random.default_rng(seed).permutation(len(items))]


def dataset_items(model: LoadedModel, dataset: str, gap_file: str | Path | None) -> list[Item]:
    """(text, answer, wrong) of each text of the dataset, in the file's order."""
    if dataset == CORPUS:
        from mha_core.analysis.corpus.readers import bundled_corpus

        return [(text, None, None) for text in bundled_corpus()]
    if dataset != GAP:
        raise InputError("unknown_dataset", N_("Unknown dataset {dataset!r}: choose one of {datasets}."),
                         dataset=dataset, datasets=", ".join(DATASETS))
    if not model.causal:
        raise InputError("gap_needs_decoder", N_("GAP is read by a decoder (it scores the name the model writes after "
                                                 "the snippet); {model} is an encoder."), model=model.name)
    if gap_file is None:
        raise InputError("gap_needs_file", N_("GAP needs its file: give --gap-file (a GAP .tsv file)."))
    from mha_core.analysis.corpus.readers import read_gap

    items = []
    for example in read_gap(Path(gap_file)).examples:
        right, other = (example.a, example.b) if example.a_coref else (example.b, example.a)
        items.append((gap_window(example) + GAP_PROBE.format(pronoun=example.pronoun), first_word(right),
                      first_word(other)))
    return items


def gap_window(example: GapExample) -> str:
    """The snippet's sentences from the one holding the first of the pronoun and the two names to the one holding
    the last (a sentence ends at . ! or ? and a space before a capital, a digit, a quote or a bracket)."""
    text = example.text
    spans = [(at, at + len(word)) for at, word in ((example.pronoun_offset, example.pronoun),
                                                   (example.a_offset, example.a), (example.b_offset, example.b))]
    first, last = min(start for start, _ in spans), max(end for _, end in spans)
    bounds = [m.end() for m in SENTENCE_END.finditer(text)]
    start = max((b for b in bounds if b <= first), default=0)
    end = min((b for b in bounds if b >= last), default=len(text))
    return text[start:end].strip()


def explained_items(model: LoadedModel, items: Sequence[Item], limit: int, explain_one: Callable[[Item], Explanation]
                    ) -> Iterator[Explanation | None]:
    """Each item's explanation in order (None: skipped), until `limit` are explained."""
    found = 0
    for item in items:
        try:
            explanation = explain_one(item)
        except InputError:
            yield None
            continue
        usable = bool(explanation.removable)
        found += usable
        yield explanation if usable else None
        if found >= limit:
            return


def dataset_table(model: LoadedModel, dataset: str, limit: int = 20, gap_file: str | Path | None = None,
                  steps: int = DEFAULT_STEPS, methods: Sequence[str] = METHODS, seed: int = 0,
                  progress: Callable[[int, int], None] | None = None) -> DatasetTable:
    """Every method of `methods` on texts of the dataset until `limit` are explained, their faithfulness averaged
    (module docstring); `progress(explained, limit)` after each text. Bad methods or steps are refused before any
    text, not counted as every text skipped."""
    methods = check_methods(methods)
    check_steps(steps)
    items = sampled(dataset_items(model, dataset, gap_file), seed)
    found: list[Explanation] = []
    skipped = 0
    for explanation in explained_items(model, items, limit, lambda item: explain(
            model, *item, methods=methods, steps=steps, curves=SHORT)):
        if explanation is None:
            skipped += 1
            continue
        found.append(explanation)
        if progress is not None:
            progress(len(found), limit)
    names = found[0].methods if found else ()

    def per_text(read: Callable) -> dict[str, np.ndarray]:
        return {name: np.array([read(e.methods[name]) for e in found]) for name in names}

    comprehensiveness = per_text(lambda m: m.faithfulness.aopc_comprehensiveness)
    sufficiency = per_text(lambda m: m.faithfulness.aopc_sufficiency)
    return DatasetTable(model.name, dataset, seed, len(found), skipped, steps,
                        {n: float(v.mean()) for n, v in comprehensiveness.items()},
                        {n: float(v.mean()) for n, v in sufficiency.items()},
                        {n: float(v.mean()) for n, v in per_text(lambda m: m.seconds).items()},
                        {n: tuple(float(x) for x in comprehensiveness[n] - sufficiency[n]) for n in names},
                        float(np.mean([len(e.ids) for e in found])) if found else 0.0)
