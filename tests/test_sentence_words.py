"""A sentence's words and parts of speech are tagged once (a page asks several times a run, and again on a rerun)."""

from __future__ import annotations

from mha_core.analysis.coref import sentence


def test_a_sentence_is_tagged_once_and_each_caller_gets_its_own_list():
    sentence.tagged_sentence.cache_clear()
    text = "The trophy didn't fit in the suitcase because it was too big."
    first = sentence.sentence_words(text)
    first.clear()  # a caller's list is its own
    again = sentence.sentence_words(text)
    assert sentence.tagged_sentence.cache_info().hits == 1
    assert [(w.text, w.pos) for w in again][:2] == [("The", "DET"), ("trophy", "NOUN")]
    assert again == list(sentence.tagged_words(text))  # the same tags as tagging it again


def test_a_long_text_is_tagged_each_time_and_not_kept():
    sentence.tagged_sentence.cache_clear()
    text = "The river was wide. " * (sentence.TAGS_KEPT_CHARS // 20 + 1)
    assert len(sentence.sentence_words(text)) == len(sentence.sentence_words(text)) > 100
    assert sentence.tagged_sentence.cache_info().currsize == 0
