"""The example sentences the pages offer, in English and Chinese (assets/examples.json).

An English example is offered on every model. A Chinese example is offered only on the models it was measured on
(`offered_on`): each says what it shows there (`shows`: the heads and the model's answer, as measured) and what a
test rechecks (`claims`); `not_offered` records why the other bundled models do not get it (MiniLM reads most
Chinese characters as [UNK], SmolLM2 reads byte fragments). A minimal pair (`pair`) has the same number of pieces
on the models it is offered for, so patching can put pieces back position by position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mha_core.analysis.inspector import PROBE_ZH
from mha_core.analysis.predict import first_piece
from mha_core.engine.model import LoadedModel
from mha_core.engine.tokens import without_spaces

EXAMPLES_FILE = Path(__file__).resolve().parents[2] / "assets" / "examples.json"
DEFAULT_LANGUAGE = "en"


@dataclass(frozen=True)
class Example:
    language: str  # "en" or "zh"
    text: str
    pair: str | None = None  # its minimal-pair partner
    pronoun: str | None = None  # the word the Heads page's token view starts from
    antecedent: str | None = None  # what the pronoun refers to (the key the token view starts with)
    other: str | None = None  # the wrong candidate (patching's wrong answer)
    offered_on: tuple[str, ...] | None = None  # model names; None: every model
    shows: dict[str, str] = field(default_factory=dict)  # model name -> what it shows there, measured
    claims: dict[str, dict] = field(default_factory=dict)  # model name -> {"heads", "answer", "over"}, rechecked
    not_offered: dict[str, str] = field(default_factory=dict)  # model -> why not

    def offered(self, model_name: str) -> bool:
        return self.offered_on is None or model_name in self.offered_on


def load_examples(path: Path = EXAMPLES_FILE) -> tuple[Example, ...]:
    items = json.loads(path.read_text(encoding="utf-8"))
    return tuple(Example(**{**item, "offered_on": tuple(item["offered_on"]) if "offered_on" in item else None})
                 for item in items)


EXAMPLES = load_examples()


def examples_for(language: str, model_name: str) -> tuple[Example, ...]:
    """The examples offered in `language` on this model; where none is (Chinese on a model that reads no Chinese),
    the English ones, which every model reads."""
    offered = tuple(e for e in EXAMPLES if e.language == language and e.offered(model_name))
    return offered or tuple(e for e in EXAMPLES if e.language == DEFAULT_LANGUAGE)


def example_of(text: str) -> Example | None:
    return next((e for e in EXAMPLES if e.text == text), None)


def focus_words(text: str) -> tuple[str, str]:
    """(pronoun, antecedent) the pages start from for `text`: an example's own (她, 玛丽), else "it" and "animal"
    (found in the text by AttentionResult.word_pieces, or not at all)."""
    example = example_of(text)
    if example is not None and example.pronoun and example.antecedent:
        return example.pronoun, example.antecedent
    return "it", "animal"


def default_pair(text: str, model_name: str) -> Example | None:
    """The example that forms a minimal pair with `text` on this model, else the first pair in the text's language
    (Chinese for text without spaces) offered on it, else None."""
    example = example_of(text)
    if example is not None and example.pair and example.offered(model_name):
        return example
    language = "zh" if without_spaces(text) else DEFAULT_LANGUAGE
    return next((e for e in EXAMPLES if e.language == language and e.pair and e.offered(model_name)), None)


PROBES = {"en": " The word '{pronoun}' refers to the", "zh": PROBE_ZH}  # Chinese: the Coreference page's question


@dataclass(frozen=True)
class Question:
    """What the Predictions page asks by default about a sentence: a continuation that makes the model name the
    pronoun's antecedent, the minimal pair's other sentence, and the two answers' first pieces."""

    probe: str
    corrupted: str
    corrupted_probe: str  # the probe for the corrupted sentence: about its own pronoun (她 → 他)
    answer: str
    wrong: str


def default_question(model: LoadedModel, text: str) -> Question:
    example = default_pair(text, model.name)
    if example is None:
        return Question("", "", "", "", "")
    partner = example_of(example.pair)
    probe = PROBES[example.language]
    return Question(probe.format(pronoun=example.pronoun), example.pair,
                    probe.format(pronoun=partner.pronoun if partner else example.pronoun),
                    first_piece(model, example.antecedent), first_piece(model, example.other))
