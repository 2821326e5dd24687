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

from mha_core.analysis.coref.sentence import (
    Word,
    candidates_before,
    default_pronoun,
    probe_for,
    sentence_words,
    with_probe,
)
from mha_core.analysis.explain import targets
from mha_core.analysis.lm.predict import first_piece, first_piece_id
from mha_core.app_files import ASSETS
from mha_core.engine.held import kept
from mha_core.engine.loading.model import LoadedModel

EXAMPLES_FILE = ASSETS / "examples.json"
DEFAULT_LANGUAGE = "en"
SPOKEN = {"en": "The animal didn't cross the street because it was too tired.",  # what espeak-ng says for Whisper
          "zh": "动物没有过马路，因为它太累了。"}
# the Translation page's first sentence in each source language, and the pronouns whose alignment it points out
TRANSLATED = {"zh": "那只动物没有过马路，因为它太累了。",
              "en": "The animal didn't cross the street because it was too tired."}
PRONOUNS = {"zh": ("它", "他", "她", "它们", "他们", "她们", "牠"),
            "en": ("it", "he", "she", "they", "him", "her", "them")}


def written_language(text: str) -> str:
    """"zh" for a text with Chinese characters in it, else "en" (what the lesson speaks and translates it from)."""
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"


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


# A pronoun's counterpart for a minimal pair made from any sentence: one word changes, and with it which candidate
# the pronoun can name (it → he prefers the animate one; 她 → 他 the other person).
PRONOUN_SWAPS = {"he": "she", "she": "he", "him": "her", "her": "him", "his": "her", "hers": "his", "it": "he",
                 "its": "his", "himself": "herself", "herself": "himself", "itself": "himself", "they": "she",
                 "他": "她", "她": "他", "它": "他", "他们": "她们", "她们": "他们", "它们": "他们"}

# What the pronoun's referent is said to be, for one referent and for the other ("because it was too tired": the
# animal; "too wide": the street; the trophy "was too big" to fit the suitcase, which "was too small"): swapping one
# for its partner is the minimal pair (Winograd schemas, the seeds' pair).
ATTRIBUTE_SWAPS = {"tired": "wide", "wide": "tired", "exhausted": "busy", "busy": "exhausted", "scared": "dangerous",
                   "dangerous": "scared", "sleepy": "long", "long": "sleepy", "big": "small", "large": "small",
                   "small": "big", "heavy": "weak", "weak": "heavy", "累": "宽", "宽": "累", "困": "长", "长": "困",
                   "大": "小", "小": "大"}


@dataclass(frozen=True)
class Focus:
    """What the pages ask about a sentence by default: its pronoun, the candidate it names and the other candidate,
    and the minimal pair's other sentence. An example's own (measured) where the sentence is one, else derived from
    the sentence's words: the first pronoun with a noun before it, the first such noun, the last other one, and the
    sentence with the pronoun swapped for its counterpart. Fields are "" where the sentence has none."""

    pronoun: str
    antecedent: str
    other: str
    pair: str


@kept("sentence focus", 256)
def focus(text: str, model_name: str = "") -> Focus:
    example = example_of(text)
    words = sentence_words(text)
    found = default_pronoun(words)
    if example is not None and example.pronoun:
        found = next((w.index for w in words if w.text == example.pronoun), found)
    if found is None:
        return Focus("", "", "", "")
    pronoun = words[found]
    candidates = [words[i].text for i in candidates_before(words, found)]
    antecedent = (example.antecedent if example and example.antecedent else next(iter(candidates), ""))
    other = (example.other if example and example.other else
             next((c for c in reversed(candidates) if c != antecedent), ""))
    return Focus(pronoun.text, antecedent, other, minimal_pair(text, words, pronoun, example, model_name))


def compared(names: list[str], found: Focus) -> tuple[int, int]:
    """Which two of the candidates `names` the Coreference page compares by default (indices into `names`): the
    focus's antecedent and its other candidate, else the first two."""
    first = names.index(found.antecedent) if found.antecedent in names else 0
    second = names.index(found.other) if found.other in names and names.index(found.other) != first else 1
    return first, second


def compared_words(text: str, model_name: str = "") -> tuple[list[Word], int, list[int]] | None:
    """The text's words, its pronoun and the two nouns before it that the Coreference page compares by default
    (玛丽 and 约翰 in 玛丽把书给了约翰，因为她已经读过了; animal and street in the seeds), as word indices; None when
    the pronoun has fewer than two nouns before it."""
    words = sentence_words(text)
    pronoun = default_pronoun(words)  # the page's pronoun and candidates (views/parts/coreference.py pick_words)
    candidates = candidates_before(words, pronoun) if pronoun is not None else []
    if len(candidates) < 2:
        return None
    first, second = compared([words[i].text for i in candidates], focus(text, model_name))
    return words, pronoun, [candidates[first], candidates[second]]


def question_for(sentence: str, model_name: str = "") -> targets.Question | None:
    """The question the seeds ask a decoder about the sentence's pronoun, its answer and wrong word the two nouns
    the Coreference page compares (compared_words: 玛丽 and 约翰, not 玛丽 and 书); None without such a pronoun."""
    asked = compared_words(sentence, model_name)
    if asked is None:
        return None
    words, pronoun, (answer, wrong) = asked
    return targets.Question(with_probe(sentence, words[pronoun]), words[answer].text, words[wrong].text)


def minimal_pair(text: str, words: list[Word], pronoun: Word, example: Example | None, model_name: str) -> str:
    """An example's own partner (on a model it is offered on); else the sentence with the word after the pronoun
    that decides its referent swapped (tired → wide: the animal → the street, as the seeds' pair does); else with
    the pronoun swapped (it → he)."""
    if example is not None and example.pair and (not model_name or example.offered(model_name)):
        return example.pair
    deciding = next((w for w in words[pronoun.index + 1:] if w.text.lower() in ATTRIBUTE_SWAPS), None)
    if deciding is not None:
        return replaced(text, deciding, ATTRIBUTE_SWAPS[deciding.text.lower()])
    swap = PRONOUN_SWAPS.get(pronoun.text.lower())
    if swap is None:
        return ""
    return replaced(text, pronoun, swap)


def replaced(text: str, word: Word, by: str) -> str:
    """`text` with `word` replaced by `by` (capitalised as the word was)."""
    if word.text[:1].isupper():
        by = by[:1].upper() + by[1:]
    return text[:word.start] + by + text[word.start + len(word.text):]


def patched_unasked(first: str, second: str, model_name: str) -> bool:
    """Whether the Coreference page runs a minimal pair's patching grid before its visitor asks: for an offered
    example with its own partner (one grid per server, shared by everyone who opens it). A typed pair's grid runs the
    second sentence once per head (about half a second of a core for a short pair on MiniLM, in the heavy-work
    queue) and waits until its visitor asks: thirty students typing three sentences each at once queued ninety
    grids that most never scrolled to (benchmarks/bench_classroom.py --at-once)."""
    example = example_of(first)
    return example is not None and example.offered(model_name) and focus(first, model_name).pair == second


def focus_words(text: str) -> tuple[str, str]:
    """(pronoun, antecedent) the token views start from (see focus)."""
    found = focus(text)
    return found.pronoun, found.antecedent


@dataclass(frozen=True)
class Question:
    """What the Predictions page asks by default about a sentence: a continuation that makes the model name the
    pronoun's antecedent, the minimal pair's other sentence, and the two candidates' first pieces ("" throughout
    for a sentence without a pronoun: it is continued as it is)."""

    probe: str
    corrupted: str
    corrupted_probe: str  # the probe for the corrupted sentence: about its own pronoun (她 → 他)
    answer: str
    wrong: str


def default_question(model: LoadedModel, text: str) -> Question:
    found = focus(text, model.name)
    if not found.pronoun:
        return Question("", "", "", "", "")
    partner = focus(found.pair, model.name) if found.pair else None
    pronoun_2 = partner.pronoun if partner and partner.pronoun else found.pronoun
    return Question(probe_for(text, found.pronoun), found.pair, probe_for(text, pronoun_2),
                    readable_first_piece(model, found.antecedent), readable_first_piece(model, found.other))


def readable_first_piece(model: LoadedModel, word: str) -> str:
    """The word's first piece as text the Predictions page can rank (predict.first_piece); "" for no word, for the
    unknown piece ([UNK]: the model cannot read the word) and for a byte fragment of a character (a byte-level
    vocabulary reading Chinese): neither is the word."""
    if not word or first_piece_id(model, word) == model.tokenizer.unk_token_id:
        return ""
    piece = first_piece(model, word)
    return "" if "\ufffd" in piece else piece
