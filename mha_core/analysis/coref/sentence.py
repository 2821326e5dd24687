"""Coreference in one sentence (the Coreference page; gap.py scores a GAP corpus): which heads link a pronoun to
which earlier noun, and how a minimal pair of sentences changes that. Word level as in GAP scoring: mean over the
pronoun's pieces of the sum over the candidate's pieces.

Shapes: L layers, H heads, C candidates.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.analysis.coref.gap import candidate_scores, span_pieces
from mha_core.analysis.heads.roles import ranked_heads
from mha_core.engine.held import kept
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import without_spaces
from mha_core.i18n import Explained, quoted, tr
from mha_core.messages import N_

PRONOUNS = {"it", "he", "she", "they", "him", "her", "them", "his", "its", "their", "hers", "theirs", "himself",
            "herself", "itself", "themselves", "它", "他", "她", "它们", "他们", "她们"}
JIEBA_POS = {"n": "NOUN", "nr": "PROPN", "ns": "PROPN", "nt": "PROPN", "nz": "PROPN", "r": "PRON", "x": "PUNCT",
             "w": "PUNCT", "v": "VERB", "a": "ADJ", "d": "ADV", "p": "ADP", "c": "CCONJ", "m": "NUM", "q": "NOUN"}
CANDIDATE_POS = ("NOUN", "PROPN")
MAX_PAIR_CHANGES = 3  # a minimal pair differs in at most this many words
TABLE_HEADS = 12  # heads listed in the inspector's table (and counted by its headline)
PROBE = " The word '{pronoun}' refers to the"  # the question about a pronoun: a last token after every change
TAGS_KEPT_CHARS = 1000  # sentences up to this long keep their tags (512 of them: about 25 MB at most)
PROBE_ZH = "句中的“{pronoun}”是指"  # the same question for Chinese text


class InspectorError(Explained):
    """A choice the inspector cannot work with; the message says what to change."""


@dataclass(frozen=True)
class Word:
    text: str
    start: int  # character offset in the sentence
    pos: str  # spaCy's coarse part of speech
    index: int  # position among the sentence's words


def sentence_words(text: str) -> list[Word]:
    """The words of a sentence with a coarse part of speech: spaCy's for spaced text, jieba's for Chinese. A
    sentence is tagged once (a page asks several times a run, and again on a rerun); a long text each time."""
    return list(tagged_sentence(text) if len(text) <= TAGS_KEPT_CHARS else tagged_words(text))


def tagged_words(text: str) -> tuple[Word, ...]:
    if without_spaces(text):
        return tuple(chinese_words(text))
    from mha_core.analysis.corpus.readers import spacy_pipeline

    pipeline = spacy_pipeline()
    doc = pipeline.make_doc(text)
    for name, component in pipeline.pipeline:  # the parser's trees are not read here (a third of the time)
        if name != "parser":
            doc = component(doc)
    return doc_words(doc)


def doc_words(doc: object) -> tuple[Word, ...]:
    """A tagged spaCy Doc's words (spaces left out)."""
    words = [t for t in doc if not t.is_space]
    return tuple(Word(t.text, t.idx, t.pos_, k) for k, t in enumerate(words))


_TAGGED_TOGETHER: dict[str, tuple[Word, ...]] = {}  # tag_together's words, while tagged_sentence takes them


def _tags(text: str) -> tuple[Word, ...]:
    together = _TAGGED_TOGETHER.get(text)
    return tagged_words(text) if together is None else together


tagged_sentence = kept("tagged sentences", 512)(_tags)  # listed by serving.caches.held()


def tag_together(texts: Sequence[str]) -> list[list[Word]]:
    """sentence_words of each text, its spaced sentences tagged by one spaCy pipe (the same words and tags as one by
    one, for about 40 % less CPU a sentence in pipes of 8), then kept as sentence_words keeps a sentence."""
    from mha_core.analysis.corpus.readers import spacy_pipeline

    new = [text for text in dict.fromkeys(texts) if len(text) <= TAGS_KEPT_CHARS and not without_spaces(text)]
    for text, doc in zip(new, spacy_pipeline().pipe(new, disable=["parser"]), strict=True):
        _TAGGED_TOGETHER[text] = doc_words(doc)
    words = [sentence_words(text) for text in texts]
    for text in new:  # one that was kept already: its words from the pipe are not needed
        _TAGGED_TOGETHER.pop(text, None)
    return words


def chinese_words(text: str) -> list[Word]:
    """jieba's words and parts of speech (its dictionary, no guessing of unknown words), as spaCy's coarse tags."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(60)
    words, start = [], 0
    for piece in jieba.posseg.cut(text, HMM=False):
        found = text.index(piece.word, start)
        start = found + len(piece.word)
        if piece.word.strip():
            tag = JIEBA_POS.get(piece.flag, JIEBA_POS.get(piece.flag[:1], "X"))
            words.append(Word(piece.word, found, tag, len(words)))
    return words


def default_pronoun(words: Sequence[Word]) -> int | None:
    """The first third-person pronoun that has a noun before it, else the first pronoun."""
    pronouns = [w.index for w in words if w.text.lower() in PRONOUNS]
    with_candidates = [i for i in pronouns if candidates_before(words, i)]
    return (with_candidates or pronouns or [None])[0]


def candidates_before(words: Sequence[Word], pronoun: int) -> list[int]:
    """Nouns and proper nouns before the pronoun (word indices)."""
    return [w.index for w in words[:pronoun] if w.pos in CANDIDATE_POS]


@dataclass(frozen=True)
class AntecedentScores:
    pronoun: Word
    candidates: tuple[Word, ...]  # C
    scores: np.ndarray  # (C,L,H) attention from the pronoun to each candidate

    def margin(self, a: int, b: int) -> np.ndarray:
        """(L,H) score of candidate a minus candidate b (indices into `candidates`)."""
        return self.scores[a] - self.scores[b]

    def preferred(self) -> np.ndarray:
        return self.scores.argmax(axis=0)  # (L,H) candidate index, ties to the earliest

    def top_two_margin(self) -> np.ndarray:
        """(L,H) how strongly each head prefers its favourite over the runner-up."""
        ordered = np.sort(self.scores, axis=0)
        return ordered[-1] - ordered[-2] if len(self.candidates) > 1 else ordered[-1]

    def ranked_heads(self) -> list[tuple[int, int]]:
        return ranked_heads(self.top_two_margin())

    def headline(self, top: int = TABLE_HEADS) -> str:
        """One sentence by the table's rule (heads ranked by how clearly they prefer their favourite), then what
        all heads and all layers say; it states what it counts, so it cannot contradict the table."""
        names = [c.text for c in self.candidates]
        preferred = self.preferred()  # (L,H)
        top_heads = self.ranked_heads()[:top]
        in_table = np.bincount([preferred[lh] for lh in top_heads], minlength=len(names))
        overall = np.bincount(preferred.ravel(), minlength=len(names))
        layers = np.bincount([cand for _, cand, _ in self.layer_verdicts()], minlength=len(names))
        leader = int(in_table.argmax())
        counts = lambda c: ", ".join(f"{int(c[i])} {quoted(n)}" for i, n in enumerate(names))  # noqa: E731
        return tr("Of the {top} heads with the clearest preference (the table), {leading} prefer '{leader}'. All "
                  "{heads} heads: {overall}; layers by their heads' majority ({layers} layers): {by_layer}.",
                  top=len(top_heads), leading=int(in_table[leader]), leader=names[leader], heads=preferred.size,
                  overall=counts(overall), layers=len(preferred), by_layer=counts(layers))

    def layer_verdicts(self) -> list[tuple[int, int, int]]:
        """Per layer: (layer, candidate most heads prefer, how many heads)."""
        pref = self.preferred()
        out = []
        for layer, row in enumerate(pref):
            counts = np.bincount(row, minlength=len(self.candidates))
            out.append((layer, int(counts.argmax()), int(counts.max())))
        return out


def unplaced_word_error(word: Word, offsets: Sequence[tuple[int, int]], max_length: int) -> InspectorError:
    """Why a chosen word has no piece: the text was cut before it, or the tokenizer's pieces do not map back to
    it (their character offsets miss it)."""
    if word.start >= max((end for _, end in offsets), default=0):
        return InspectorError(
            "word_beyond_cut",
            N_("'{word}' lies beyond the model's {max_length:,} word pieces: choose an earlier word."),
            word=word.text,
            max_length=max_length,
        )
    return InspectorError(
        "word_not_in_pieces",
        N_(
            "The tokenizer's pieces do not map back to '{word}' (their character offsets miss it): choose another word."
        ),
        word=word.text,
    )


def antecedent_scores(
    result: AttentionResult, b: int, words: Sequence[Word], pronoun: int, candidates: Sequence[int]
) -> AntecedentScores:
    """Scores of every candidate for text b of `result` (words from `sentence_words` of that text)."""
    if not candidates:
        raise InspectorError(
            "coref_no_candidate_before",
            N_("No candidate is chosen for '{text}': add a word, or pick a later token."),
            text=words[pronoun].text,
        )
    offsets = result.batch.offsets[b]
    pieces = [span_pieces(offsets, words[i].start, len(words[i].text)) for i in (pronoun, *candidates)]
    missing = [words[i] for i, found in zip((pronoun, *candidates), pieces, strict=True) if not found]
    if missing:
        raise unplaced_word_error(missing[0], offsets, result.max_length)
    maps = result.text_maps(b)  # (L,H,T,T)
    scores = torch.stack([candidate_scores(maps, pieces[0], c) for c in pieces[1:]])  # (C,L,H)
    return AntecedentScores(words[pronoun], tuple(words[i] for i in candidates), scores.numpy())


@dataclass(frozen=True)
class PairAlignment:
    """Word i of one sentence aligns with word i of the other; these positions differ."""

    positions: tuple[int, ...]
    changed: tuple[tuple[str, str], ...]  # (word in 1, word in 2) at each of those positions


def align_pair(first: Sequence[Word], second: Sequence[Word], max_changes: int = MAX_PAIR_CHANGES) -> PairAlignment:
    """Align a minimal pair: same number of words, at most `max_changes` substitutions."""
    if not second:
        raise InspectorError(
            "pair_second_empty",
            N_("The second sentence is empty: type a sentence that differs in a few words."),
        )
    if len(first) != len(second):
        raise InspectorError(
            "pair_lengths_differ",
            N_("The sentences differ in length ({first} vs {second} words): a minimal pair swaps words one for one."),
            first=len(first),
            second=len(second),
        )
    a, b = [w.text.lower() for w in first], [w.text.lower() for w in second]
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    if any(tag in ("insert", "delete") for tag, *_ in matcher.get_opcodes()):
        raise InspectorError(
            "pair_not_aligned",
            N_("The sentences do not align word for word: a minimal pair swaps words one for one."),
        )
    positions = tuple(i for i in range(len(a)) if a[i] != b[i])
    changed = tuple((first[i].text, second[i].text) for i in positions)
    if not changed:
        raise InspectorError(
            "pair_identical", N_("The two sentences are the same: change a word in the second one.")
        )
    if len(changed) > max_changes:
        raise InspectorError(
            "pair_too_many_changes",
            N_("The sentences differ in {changed} words; a minimal pair differs in at most {max_changes}."),
            changed=len(changed),
            max_changes=max_changes,
        )
    return PairAlignment(positions, changed)


@dataclass(frozen=True)
class PairComparison:
    """Margins of candidate a over b in both sentences of a minimal pair, per head."""

    margin_1: np.ndarray  # (L,H)
    margin_2: np.ndarray  # (L,H)

    @property
    def delta(self) -> np.ndarray:
        return self.margin_2 - self.margin_1  # (L,H)

    @property
    def flips(self) -> np.ndarray:
        return human_flips(self.margin_1, self.margin_2)  # (L,H) bool


def compare_pair(first: AntecedentScores, second: AntecedentScores, a: int, b: int) -> PairComparison:
    return PairComparison(first.margin(a, b), second.margin(a, b))


def human_flips(margin_1: np.ndarray, margin_2: np.ndarray) -> np.ndarray:
    """(L,H) True where a head prefers candidate a in sentence 1 and candidate b in sentence 2,
    as a reader does when the antecedent changes from a to b."""
    return (margin_1 > 0) & (margin_2 < 0)


def blind_to_change(causal: bool, pronoun: int, alignment: PairAlignment) -> bool:
    """In a causal model a word attends only to words up to itself: changes after the pronoun cannot change its
    attention, so the pair's margins are equal by construction."""
    return causal and min(alignment.positions) > pronoun


def probe_for(text: str, pronoun: str) -> str:
    """The question about `pronoun` that continues `text` (" The word 'it' refers to the", 句中的“她”是指): its last
    word comes after every change of a minimal pair, and the next piece is the model's answer."""
    return (PROBE_ZH if without_spaces(text) else PROBE).format(pronoun=pronoun)


def with_probe(text: str, pronoun: Word) -> str:
    """The sentence continued with the question about the pronoun (probe_for)."""
    return text.rstrip() + probe_for(text, pronoun.text)
