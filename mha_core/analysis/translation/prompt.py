"""The few-shot prompt a decoder translates with: two fixed example pairs, then the sentence. The same prompt in the
app, the CLI and the API; Gemma 3 270M translates greedily with it both ways (zh -> en, en -> zh).

    Chinese: 我每天早上喝一杯茶。
    English: I drink a cup of tea every morning.
    Chinese: 这本书很有意思。
    English: This book is very interesting.
    Chinese: {source}
    English:{ translation, written by the model or given for forced alignment}
"""

from __future__ import annotations

from dataclasses import dataclass

from mha_core.analysis.translation.words import LANGUAGES, check_language, joined
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

EXAMPLE_PAIRS = (
    {"zh": "我每天早上喝一杯茶。", "en": "I drink a cup of tea every morning."},
    {"zh": "这本书很有意思。", "en": "This book is very interesting."},
)
LABELS = {"zh": "Chinese", "en": "English"}  # the prompt's line labels (English: the model reads them so)


@dataclass(frozen=True)
class Prompted:
    """A source (and maybe its translation) inside the prompt: the text and where each word lies in it."""

    text: str  # the whole prompt (with the translation where given)
    source_spans: tuple[tuple[int, int], ...]  # S (start, end) characters of each source word
    target_spans: tuple[tuple[int, int], ...]  # T, () before a translation is written
    prompt_end: int  # characters of the prompt proper (the translation starts after them)
    examples_end: int  # characters of the example pairs: the start every prompt in this direction shares


def check_pair(source_language: str, target_language: str) -> None:
    check_language(source_language)
    check_language(target_language)
    if source_language == target_language:
        raise InputError("same_translation_languages", N_("The source and the target are both {language}: choose "
                                                          "two languages."), language=LANGUAGES[source_language])


def prompt_for(source_words: tuple[str, ...], source_language: str, target_language: str,
               target_words: tuple[str, ...] = ()) -> Prompted:
    """The prompt around `source_words`, with `target_words` appended as the model's continuation (forced
    alignment) when given."""
    check_pair(source_language, target_language)
    examples = "".join(f"{LABELS[source_language]}: {pair[source_language]}\n{LABELS[target_language]}: "
                       f"{pair[target_language]}\n" for pair in EXAMPLE_PAIRS)
    head = f"{examples}{LABELS[source_language]}: "
    source, source_spans = joined(source_words, source_language)
    text = f"{head}{source}\n{LABELS[target_language]}:"
    prompt_end = len(text)
    target_spans: tuple[tuple[int, int], ...] = ()
    if target_words:
        target, spans = joined(target_words, target_language)
        target_spans = tuple((prompt_end + 1 + a, prompt_end + 1 + b) for a, b in spans)
        text += " " + target
    shifted = tuple((len(head) + a, len(head) + b) for a, b in source_spans)
    return Prompted(text, shifted, target_spans, prompt_end, len(examples))
