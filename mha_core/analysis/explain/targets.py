"""What an explanation explains: one number the model computes from a text, read the same way on the text and on
any copy of it with pieces removed.

- A decoder with its head: the next piece after the last piece; with a wrong piece, logit(answer) - logit(wrong)
  (as the patching and attribution views read it); alone, the answer's log-probability (answer: the model's own
  next piece unless given).
- An encoder with a masked-LM head and a mask token in the text: at the mask, logit(answer) - logit(wrong), or the
  answer's probability (answer: the model's own fill unless given).
- Any other encoder: the coreference margin (as the Coreference page and the ablation's measure read it): in the
  last-layer head where it is largest, the pronoun's attention to the first candidate minus the second.

A copy of the text keeps some of its pieces (`kept`, positions into the text's pieces); the target's pieces (the
mask, the pronoun and the candidates) are never removed.

Shapes: B rows, T pieces, D d_model, H heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from mha_core.analysis.lm.head import LmHead, lm_head, token_id
from mha_core.analysis.lm.measures import CorefProbe, coref_margins, coref_probe
from mha_core.engine.attention import EXPLICIT
from mha_core.engine.forward import forward
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch, without_spaces
from mha_core.messages import N_

NEXT_PIECE, MASKED, COREF = "next_piece", "masked", "coref_margin"


@dataclass(frozen=True)
class Target:
    kind: str  # NEXT_PIECE, MASKED or COREF
    position: int  # the piece whose output is read (the last piece, the mask, the pronoun's first piece)
    answer: str  # the answer piece, or the first candidate
    wrong: str | None  # the wrong piece, or the second candidate
    answer_id: int | None
    wrong_id: int | None
    fixed: tuple[int, ...]  # pieces never removed: the target's own
    head: LmHead | None = None
    probe: CorefProbe | None = None

    def score(self, final: Tensor, maps: Tensor, kept: Sequence[Sequence[int]] | None = None) -> Tensor:
        """(B,) the target of each row from its final states (B,T,D) and last layer's maps (B,H,T,T); row b holds
        the pieces kept[b] of the text (all when None)."""
        rows = range(final.shape[0])
        if self.kind == COREF:
            return torch.stack([coref_margins(maps[b:b + 1], self.moved_probe(None if kept is None else kept[b]))[0]
                                for b in rows])
        at = [self.read_at(None if kept is None else kept[b]) for b in rows]
        states = final[torch.arange(len(at)), torch.tensor(at)]  # (B,D)
        if self.wrong_id is not None:
            logits = self.head(states, torch.tensor([self.answer_id, self.wrong_id]))  # (B,2)
            return logits[:, 0] - logits[:, 1]
        logits = self.head(states).float()  # (B,V)
        if self.kind == MASKED:
            return torch.softmax(logits, dim=-1)[:, self.answer_id]
        return torch.log_softmax(logits, dim=-1)[:, self.answer_id]

    def read_at(self, kept: Sequence[int] | None) -> int:
        if kept is None:
            return self.position
        return len(kept) - 1 if self.kind == NEXT_PIECE else list(kept).index(self.position)

    def moved_probe(self, kept: Sequence[int] | None) -> CorefProbe:
        if kept is None:
            return self.probe
        where = {p: i for i, p in enumerate(kept)}
        p = self.probe
        return CorefProbe([where[i] for i in p.pronoun], [where[i] for i in p.a], [where[i] for i in p.b], p.head,
                          p.words)

    def as_json(self, score: float) -> dict:
        return {"kind": self.kind, "answer": self.answer, "wrong": self.wrong, "answer_id": self.answer_id,
                "wrong_id": self.wrong_id, "position": self.position, "score": score}


def word_piece(model: LoadedModel, word: str) -> int:
    """The one piece `word` is as it follows a space (Chinese: as typed); an InputError naming its pieces if it is
    several."""
    word = word.strip()
    return token_id(model, word if without_spaces(word) else " " + word)


def targets_of(model: LoadedModel) -> str:
    """The kinds of target this model has (a masked-LM head's needs a mask token in the text)."""
    head = lm_head(model)
    kinds = (COREF,) if head is None else (NEXT_PIECE,) if not head.masked else (MASKED, COREF)
    return ", ".join(kinds)


def target_for(model: LoadedModel, batch: TokenBatch, answer: str | None = None, wrong: str | None = None
               ) -> Target:
    """The target of text 0 of `batch` (module docstring)."""
    head = lm_head(model)
    n = int(batch.attention_mask[0].sum())
    masks = [] if head is None or not head.masked else (
        batch.input_ids[0, :n] == model.tokenizer.mask_token_id).nonzero()[:, 0].tolist()
    if head is not None and (not head.masked or masks):
        position = n - 1 if not head.masked else masks[0]
        wrong_id = None if wrong is None else word_piece(model, wrong)
        answer_id = own_answer(model, head, batch, position) if answer is None else word_piece(model, answer)
        if answer_id == wrong_id:
            raise InputError("answer_is_wrong", N_("The answer and the wrong word are the same piece {piece!r}: "
                                                   "choose a different wrong word."),
                             piece=model.tokenizer.decode([answer_id]))
        shown = [model.tokenizer.decode([i]) for i in (answer_id, wrong_id) if i is not None]
        return Target(NEXT_PIECE if not head.masked else MASKED, position, shown[0],
                      shown[1] if wrong_id is not None else None, answer_id, wrong_id,
                      () if not head.masked else (position,), head)
    if answer is not None or wrong is not None:
        raise InputError("no_head_for_target", N_("{model} has no head that predicts {answer!r}: its targets are "
                                                  "{targets}."), model=model.name, answer=answer or wrong,
                         targets=targets_of(model))
    result = forward(model, batch, EXPLICIT)
    probe = coref_probe(batch, result.layer_probs[-1][:, :, :n, :n].float())
    fixed = tuple(sorted({*probe.pronoun, *probe.a, *probe.b}))
    return Target(COREF, probe.pronoun[0], probe.words[1], probe.words[2], None, None, fixed, probe=probe)


@torch.inference_mode()
def own_answer(model: LoadedModel, head: LmHead, batch: TokenBatch, position: int) -> int:
    """The piece the model itself puts at `position` (its most likely)."""
    result = forward(model, batch, EXPLICIT)
    return int(head(result.hidden_states[-1][0, position]).argmax())


@dataclass(frozen=True)
class Question:
    """A decoder's question about a sentence's pronoun, and the two nouns before it as answer and wrong word."""

    text: str  # the sentence continued with " The word 'it' refers to the" (or its Chinese)
    answer: str  # the noun the Coreference page compares first (teaching.examples.question_for)
    wrong: str  # the other
