"""Words of a sentence in either language, and the text a model reads them as.

Chinese is split by jieba (its dictionary, no HMM guesses), English at spaces and punctuation; a sentence given
with spaces between its words (a hand-aligned file's) keeps them. Chinese words are joined without spaces when the
model reads them, English words with one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mha_core.engine.tokens import InputError, is_wide
from mha_core.engine.words import segmented_words
from mha_core.messages import N_

LANGUAGES = {"zh": N_("Chinese"), "en": N_("English")}  # the languages a translation reads and writes
ENGLISH_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")
BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}  # treebank escapes


def check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise InputError("unknown_translation_language", N_("Translation reads and writes {languages}, not "
                                                            "{language!r}."), languages=", ".join(LANGUAGES),
                         language=str(language)[:20])
    return language


def split_words(text: str, language: str) -> tuple[str, ...]:
    """The words of `text`: given ones where it is spaced Chinese (or a list), else jieba's (Chinese) or words and
    punctuation marks (English)."""
    check_language(language)
    text = " ".join(BRACKETS.get(word, word) for word in text.split())
    if not text:
        raise InputError("translation_text_empty", N_("The sentence is empty."))
    if language == "en":
        return tuple(ENGLISH_WORD.findall(text))
    if " " in text:  # words given, split by spaces
        return tuple(text.split())
    word_of = segmented_words(text)
    words: list[str] = []
    for i, char in enumerate(text):
        if i and word_of[i] == word_of[i - 1]:
            words[-1] += char
        else:
            words.append(char)
    return tuple(words)


def joined(words: Sequence[str], language: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The text a model reads for `words`, and each word's (start, end) characters in it: Chinese words touch, an
    English word (and a Latin word inside Chinese) is set apart by one space."""
    text, spans = "", []
    for word in words:
        spaced = bool(text) and (language == "en" or not (is_wide(text[-1]) or is_wide(word[0])))
        spaced = spaced and not (language == "en" and re.fullmatch(r"[.,;:!?%)\]}']", word))
        text += " " if spaced else ""
        spans.append((len(text), len(text) + len(word)))
        text += word
    return text, tuple(spans)
