"""Faithfulness over data, a table per model: every method's mean AOPC comprehensiveness and sufficiency and its
mean seconds over the bundled corpus's sentences (each model's own target: a decoder's own next piece, an encoder's
coreference margin where the sentence has a pronoun with two nouns before it) or over GAP (decoders: the snippet
continued with " The word '<pronoun>' refers to", the named antecedent's first word against the other name's).
A text the target cannot be read on (no pronoun, a name of several pieces) is counted as skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_core.analysis.coref.sentence import PROBE
from mha_core.analysis.explain.choices import DEFAULT_STEPS, METHODS
from mha_core.analysis.explain.explain import Explanation, explain
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError
from mha_core.i18n import N_

CORPUS, GAP = "corpus", "gap"
DATASETS = (CORPUS, GAP)
GAP_PROBE = PROBE.removesuffix(" the")  # " The word '{pronoun}' refers to": a name follows, not "the"


@dataclass(frozen=True)
class DatasetTable:
    model: str
    dataset: str
    explained: int  # texts explained
    skipped: int  # texts whose target could not be read
    comprehensiveness: dict[str, float]  # method -> mean AOPC comprehensiveness
    sufficiency: dict[str, float]  # method -> mean AOPC sufficiency
    seconds: dict[str, float]  # method -> mean seconds

    def ranking(self) -> list[tuple[str, float]]:
        """Methods from the most faithful down, by mean comprehensiveness minus mean sufficiency."""
        rated = {name: self.comprehensiveness[name] - self.sufficiency[name] for name in self.comprehensiveness}
        return sorted(rated.items(), key=lambda item: -item[1])

    def as_json(self) -> dict:
        ranking = self.ranking()
        return {"model": self.model, "dataset": self.dataset, "explained": self.explained, "skipped": self.skipped,
                "methods": {name: {"aopc_comprehensiveness": self.comprehensiveness[name],
                                   "aopc_sufficiency": self.sufficiency[name], "seconds": self.seconds[name]}
                            for name in self.comprehensiveness},
                "ranking": [[name, value] for name, value in ranking],
                "most_faithful": ranking[0][0] if ranking else None,
                "by": ranking[0][1] - ranking[1][1] if len(ranking) > 1 else None}


def first_word(name: str) -> str:
    return name.split()[0] if name.split() else name


def dataset_items(model: LoadedModel, dataset: str, limit: int, gap_file: str | Path | None
                  ) -> Iterator[tuple[str, str | None, str | None]]:
    """(text, answer, wrong) of each text of the dataset, at most `limit`."""
    if dataset == CORPUS:
        from mha_core.analysis.corpus.readers import bundled_corpus

        yield from ((text, None, None) for text in bundled_corpus()[:limit])
        return
    if dataset != GAP:
        raise InputError("unknown_dataset", N_("Unknown dataset {dataset!r}: choose one of {datasets}."),
                         dataset=dataset, datasets=", ".join(DATASETS))
    if not model.causal or gap_file is None:
        raise InputError("gap_needs_decoder_and_file", N_("GAP is read by a decoder, from a GAP file (--gap-file); "
                                                          "{model} is an encoder or no file was given."),
                         model=model.name)
    from mha_core.analysis.corpus.readers import read_gap

    for example in read_gap(Path(gap_file), limit).examples:
        right, other = (example.a, example.b) if example.a_coref else (example.b, example.a)
        yield (example.text.rstrip() + GAP_PROBE.format(pronoun=example.pronoun), first_word(right),
               first_word(other))


def dataset_table(model: LoadedModel, dataset: str, limit: int = 20, gap_file: str | Path | None = None,
                  steps: int = DEFAULT_STEPS, methods: Sequence[str] = METHODS) -> DatasetTable:
    """Every method of `methods` on each text of the dataset, its faithfulness averaged (module docstring)."""
    found: list[Explanation] = []
    skipped = 0
    for text, answer, wrong in dataset_items(model, dataset, limit, gap_file):
        try:
            explanation = explain(model, text, answer, wrong, methods, steps)
        except InputError:
            skipped += 1
            continue
        if explanation.removable:
            found.append(explanation)
        else:
            skipped += 1

    def mean(read: object) -> dict[str, float]:
        names = found[0].methods if found else ()
        return {name: float(np.mean([read(e.methods[name]) for e in found])) for name in names}

    return DatasetTable(model.name, dataset, len(found), skipped,
                        mean(lambda m: m.faithfulness.aopc_comprehensiveness),
                        mean(lambda m: m.faithfulness.aopc_sufficiency), mean(lambda m: m.seconds))
