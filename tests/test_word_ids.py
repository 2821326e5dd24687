"""Words from pieces for every kind of tokenizer: merged pieces are the words a reader sees (issue 77: Gemma 3
called a whole English sentence word 0, so "merge words" made it one unit)."""

from __future__ import annotations

import pytest

from mha_core.engine.tokens import spaced_words, tokenize
from mha_core.engine.words import word_units

SENTENCE = "The animal didn't cross the street because it was tired."
WORDS = ["The", "animal", "didn't", "cross", "the", "street", "because", "it", "was", "tired."]


def sentencepiece_tokenizer(metaspace: bool):
    """A SentencePiece-style tokenizer: Gemma's (spaces become '▁' before a split on spaces that then finds none:
    the tokenizer calls the whole text word 0) or Llama/T5's (a Metaspace split: one word per '▁')."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["▁the", "▁animal", "▁didn", "'", "t", "▁cross", "▁street", "▁because", "▁it", "▁was", "▁tired", "."]
    letters = sorted(set("".join(pieces)) | set("▁Theac"))
    vocab = [("<unk>", 0.0), *[(p, -1.0) for p in pieces], *[(c, -5.0) for c in letters]]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=0))
    if metaspace:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    else:
        tokenizer.normalizer = normalizers.Replace(" ", "▁")
        tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<unk>")


def merged_words(tokenizer, text: str) -> list[str]:
    batch = tokenize(tokenizer, text, 64)
    units = word_units(batch.texts[0], batch.tokens[0], batch.word_ids[0], batch.offsets[0])
    return [label.strip() for label, special in zip(units.labels, units.special, strict=True) if not special]


@pytest.mark.parametrize("metaspace", [False, True])
def test_sentencepiece_pieces_merge_into_the_words_between_spaces(metaspace):
    tokenizer = sentencepiece_tokenizer(metaspace)
    assert merged_words(tokenizer, SENTENCE) == WORDS
    assert merged_words(tokenizer, "it  was\n\ntired") == ["it", "", "was", "", "tired"]  # blank pieces: own units


def test_tokenizers_that_split_at_spaces_keep_their_words(bundled):
    """WordPiece (BERT) splits punctuation off as words of its own: the split at spaces leaves its words as they
    were, on the tiny models' tokenizer and the bundled encoder's."""
    batch = tokenize(bundled.tokenizer, SENTENCE, 64)
    assert spaced_words(SENTENCE, batch.word_ids[0], batch.offsets[0]) == batch.word_ids[0]
    assert merged_words(bundled.tokenizer, SENTENCE) == [
        "The", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "tired", "."]


def test_words_are_split_at_spaces_only_between_pieces():
    text = "ab cd"
    assert spaced_words(text, [None, 0, 0, 0, None], [(0, 0), (0, 1), (1, 3), (3, 5), (0, 0)]) == (
        None, 0, 0, 1, None)  # "a" "b " "cd": the space ends a piece; "cd" starts a word
    assert spaced_words(text, [0, 0, 0], [(0, 1), (1, 2), (2, 5)]) == (0, 0, 1)  # " cd" starts with the space
    assert spaced_words(text, [0, 1], [(0, 2), (3, 5)]) == (0, 1)  # the tokenizer's own words kept


@pytest.mark.slow
def test_gemma_merges_english_pieces_into_its_words(gemma):
    """The bundled Gemma 3 (SentencePiece with '▁' word starts) merges an English sentence into its words, and a
    Chinese one into jieba's words as before."""
    from mha_core import run
    from mha_core.engine.words import text_units

    english = [label.strip() for label in text_units(run(gemma, SENTENCE), 0, True).labels[1:]]
    assert english == WORDS
    chinese = text_units(run(gemma, "那只动物没有过马路，因为它太累了。"), 0, True).labels[1:]
    assert chinese[:6] == ("那", "只", "动物", "没有", "过", "马路")
