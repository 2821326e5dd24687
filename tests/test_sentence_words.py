"""A sentence's words and parts of speech are tagged once (a page asks several times a run, and again on a rerun)."""

from __future__ import annotations

from mha_core.analysis.coref import sentence
from mha_core.analysis.corpus.readers import read_conllu
from tests.conftest import SHARED_DATA


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


def test_sentences_tagged_together_get_the_words_and_tags_each_gets_alone(monkeypatch):
    """tag_together (a class's sentences in one spaCy pipe) gives each sentence the words and parts of speech it gets
    tagged alone, on real sentences of every length, and keeps them where sentence_words reads them."""
    texts = [s.text for s in read_conllu(SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu", limit=160)]
    texts += ["她说他明天会来。", "The river was wide. " * 60]  # Chinese (jieba) and a long text: each read alone
    alone = [list(sentence.tagged_words(text)) for text in texts]
    sentence.tagged_sentence.cache_clear()
    tagged_alone = []
    monkeypatch.setattr(sentence, "tagged_words", lambda text: tagged_alone.append(text) or alone[texts.index(text)])
    together = [words for i in range(0, len(texts), 8) for words in sentence.tag_together(texts[i:i + 8])]
    monkeypatch.undo()
    assert together == alone
    assert tagged_alone == texts[-2:]  # only the Chinese and the long text, each alone: the rest in the pipes
    kept = sentence.tagged_sentence.cache_info()
    assert sentence.sentence_words(texts[0]) == alone[0]
    assert sentence.tagged_sentence.cache_info().hits == kept.hits + 1  # read from what tag_together kept
    assert not sentence._TAGGED_TOGETHER  # nothing left behind, even for a sentence tagged twice
    sentence.tag_together(texts[:3])
    assert not sentence._TAGGED_TOGETHER
