"""The lesson's step "Is attention the explanation?" (issue 81), right after the pronoun step: on the class's
sentence and model, the chosen head's attention beside input × gradient and occlusion (analysis.explain), and what
the step says about them, computed from the same numbers the figure draws (as teaching.claims does for every step).

What is explained is the Explanations page's target: a decoder is asked which noun the pronoun refers to (the two
nouns the Coreference page compares, each read as its first piece), logit(answer) − logit(wrong); without such a
pronoun, or where a noun is no piece the model writes (byte fragments, [UNK]), its own next piece; an encoder's
coreference margin. The head is the one whose output moves that number most (gradient × output). Only the cheap
methods: one gradient pass and one batch of copies without a word (a new sentence in a few seconds on 2 cores).
Comprehensiveness at k = 1 needs no more runs: removing a method's top word changes the number by exactly
occlusion's score of that word.

Shapes: W words the methods are compared on (the removable ones: no special piece, none of the target's own).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.analysis.explain.explain import explain
from mha_core.analysis.explain.faithfulness import rank_correlation
from mha_core.analysis.explain.targets import COREF, MASKED
from mha_core.engine.loading.model import LoadedModel
from mha_core.messages import N_
from mha_core.teaching.claims import Claim, claim
from mha_core.teaching.examples import question_for, readable_first_piece

ATTENTION, GRADIENT, OCCLUSION = "attention_head", "inputxgrad", "occlusion"
LESSON_METHODS = (ATTENTION, GRADIENT, OCCLUSION)


@dataclass(frozen=True)
class Asked:
    """What the model reads and which pieces its answer compares (None, None: its own next piece, or an encoder's
    coreference margin); the nouns asked about as written ("" where none is)."""

    text: str
    answer: str | None
    wrong: str | None
    answer_word: str = ""
    wrong_word: str = ""


def asked_of(model: LoadedModel, sentence: str) -> Asked:
    if not model.causal:
        return Asked(sentence, None, None)
    question = question_for(sentence, model.name)
    if question is None:
        return Asked(sentence, None, None)
    answer, wrong = (readable_first_piece(model, word) for word in (question.answer, question.wrong))
    if not answer or not wrong:  # a noun the model cannot write as a piece of its own: its own next piece instead
        return Asked(question.text, None, None, question.answer, question.wrong)
    return Asked(question.text, answer.strip(), wrong.strip(), question.answer, question.wrong)


@dataclass(frozen=True)
class AttentionBeside:
    """The step's figure: each method's score of each word, and what the number explained is."""

    model: str
    asked: Asked
    kind: str  # the target's kind (analysis.explain.targets)
    answer: str  # the answer piece (a coreference margin: the first noun)
    wrong: str | None
    pronoun: str  # a coreference margin's pronoun ("" otherwise)
    probe_head: int | None  # a coreference margin's last-layer head
    score: float  # the number explained
    head: tuple[int, int]  # (layer, head): the head whose output moves it most
    words: tuple[str, ...]  # W
    scores: dict[str, np.ndarray]  # method -> (W,)

    def top(self, method: str) -> int:
        """The word the method scores highest (the earlier on a tie)."""
        return int(np.argmax(self.scores[method]))

    def correlation(self, method: str) -> float:
        """Spearman's ρ between the method's word scores and occlusion's (nan where either is constant)."""
        return rank_correlation(self.scores[method], self.scores[OCCLUSION])

    def drop(self, method: str) -> float:
        """How much removing the method's top word lowers the number: comprehensiveness at k = 1, which is
        occlusion's score of that word."""
        return float(self.scores[OCCLUSION][self.top(method)])


def attention_beside(model: LoadedModel, sentence: str) -> AttentionBeside:
    """The step's numbers for the class's sentence on `model` (module docstring)."""
    asked = asked_of(model, sentence)
    found = explain(model, asked.text, asked.answer, asked.wrong, LESSON_METHODS, measure=False)
    shown = list(found.removable)
    target, probe = found.target, found.target.probe
    return AttentionBeside(model.name, asked, target.kind, target.answer.strip(),
                           None if target.wrong is None else target.wrong.strip(),
                           probe.words[0] if probe is not None else "", probe.head if probe is not None else None,
                           found.score, found.head, tuple(found.words[u].strip() for u in shown),
                           {name: found.methods[name].word_scores[shown] for name in LESSON_METHODS})


def target_claims(found: AttentionBeside) -> tuple[Claim, ...]:
    """What number the methods explain, and where the model's answer is not a reader's."""
    if found.kind == COREF:
        values = dict(pronoun=found.pronoun, a=found.answer, b=found.wrong, head=found.probe_head, score=found.score)
        said = claim(N_("An encoder writes no next word, so the number explained is the coreference margin: in the "
                        "last layer's head {head}, where it is largest, '{pronoun}' gives '{a}' {score:.2f} more "
                        "attention than '{b}'."), **values) if found.score > 0 else claim(
            N_("An encoder writes no next word, so the number explained is the coreference margin, read in the last "
               "layer's head {head}, where it is largest: there '{pronoun}' gives '{a}' less attention than '{b}' "
               "({score:.2f}), so on this model even that head does not link them."), **values)
        return said, claim(N_("'{pronoun}', '{a}' and '{b}' are what the margin is read on, so they are never "
                              "removed and not compared below."), pronoun=found.pronoun, a=found.answer, b=found.wrong)
    if found.kind == MASKED:
        return (claim(N_("The number explained: the probability of '{answer}' at the mask, {score:.2f}."),
                      answer=found.answer, score=found.score),)
    if found.wrong is None:
        return own_piece_claims(found)
    values = dict(model=found.model, answer=found.answer, wrong=found.wrong, score=found.score)
    said = [claim(N_("Asked which word the pronoun refers to, {model} prefers '{answer}' to '{wrong}' by {score:.2f} "
                     "(the difference of their logits): that is the number each method explains."), **values)
            if found.score > 0 else
            claim(N_("Asked which word the pronoun refers to, {model} prefers '{wrong}' to '{answer}' (the difference "
                     "of their logits is {score:.2f}): on this model the answer is not the one a reader gives. The "
                     "methods explain that number all the same."), **values)]
    said += [claim(N_("{model} writes '{word}' in several pieces: its first, '{piece}', is compared."),
                   model=found.model, word=word, piece=piece)
             for word, piece in ((found.asked.answer_word, found.answer), (found.asked.wrong_word, found.wrong))
             if word != piece]
    return tuple(said)


def own_piece_claims(found: AttentionBeside) -> tuple[Claim, ...]:
    said = claim(N_("The number explained: the log-probability of {model}'s own next piece, '{answer}': {score:.2f}."),
                 model=found.model, answer=found.answer, score=found.score)
    if not found.asked.answer_word:
        return (claim(N_("This sentence has no pronoun with two nouns before it, so no two answers are compared."),),
                said)
    return (claim(N_("{model} writes '{a}' or '{b}' with no piece of its own (it reads them as byte fragments or as "
                     "an unknown piece), so no two answers are compared."), model=found.model,
                  a=found.asked.answer_word, b=found.asked.wrong_word), said)


def shown_2dp(value: float) -> float:
    """`value` as a claim shows it to 2 decimals, without the sign of a negative zero (a correlation of -0.001 read
    "-0.00" on Gemma 3's step)."""
    return round(value, 2) + 0.0


def ranking_claims(found: AttentionBeside) -> tuple[Claim, ...]:
    """Which word each method ranks first, whether they agree, and their rank correlation with occlusion."""
    first = {method: found.words[found.top(method)] for method in LESSON_METHODS}
    layer, head = found.head
    said = [claim(N_("Layer {layer}, head {head}, the head whose output moves that number most, looks most at "
                     "'{attention}'; input × gradient ranks '{gradient}' first; removing one word at a time "
                     "(occlusion), '{occlusion}' matters most."), layer=layer, head=head,
                  attention=first[ATTENTION], gradient=first[GRADIENT], occlusion=first[OCCLUSION])]
    if len(set(first.values())) == 1:
        said.append(claim(N_("All three agree on '{word}'."), word=first[ATTENTION]))
    rho = {method: shown_2dp(found.correlation(method)) for method in (ATTENTION, GRADIENT)}
    if not any(np.isnan(list(rho.values()))):
        said.append(claim(N_("Over the {n} words, the rank correlation with occlusion is {attention:.2f} for the "
                             "head's attention and {gradient:.2f} for input × gradient (1: the same order; 0: "
                             "unrelated)."), n=len(found.words), attention=rho[ATTENTION], gradient=rho[GRADIENT]))
    else:
        said.append(claim(N_("A rank correlation with occlusion cannot be computed here: a method gives every one of "
                             "the {n} words the same score."), n=len(found.words)))
    return tuple(said)


def verdict_claims(found: AttentionBeside) -> tuple[Claim, ...]:
    """How much each method's top word moves the number (comprehensiveness at k = 1), and what that says."""
    drops = {method: found.drop(method) for method in LESSON_METHODS}
    said = claim(N_("Removing the head's top word changes the number by {attention:.2f}, input × gradient's by "
                    "{gradient:.2f}; the word that matters most changes it by {occlusion:.2f}."),
                 attention=drops[ATTENTION], gradient=drops[GRADIENT], occlusion=drops[OCCLUSION])
    if drops[OCCLUSION] <= 0:
        return said, claim(N_("No single word's removal lowers the number: here it does not rest on any one word, so "
                              "no method's top word can be checked this way."),)
    if found.top(ATTENTION) == found.top(OCCLUSION):
        return said, claim(N_("Here the head's attention does point at the word the answer depends on most."),)
    if drops[ATTENTION] <= 0:
        return said, claim(N_("So here attention is not the explanation: removing the word the head looks at most "
                              "does not lower the number at all."),)
    return said, claim(N_("So here attention is not the explanation: the word the head looks at most moves the "
                          "number {share:.0%} as much as the word that matters most."),
                       share=drops[ATTENTION] / drops[OCCLUSION])


def explanation_claims(found: AttentionBeside) -> tuple[Claim, ...]:
    """The step's sentences: the number explained, the methods' rankings, and the verdict."""
    if not found.words:
        return (*target_claims(found), claim(N_("Every word of this sentence is part of what is measured: no word is "
                                                "left to compare."),))
    return (*target_claims(found), *ranking_claims(found), *verdict_claims(found))
