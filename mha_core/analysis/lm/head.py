"""The language-model head: how a model's final states become logits over its vocabulary.

- A decoder's head is the unembedding W_U: its input embeddings when tied, else the folder's lm_head.weight (the
  app loads the base model, which leaves the head out). It predicts the next piece.
- An encoder saved with a masked-LM head (BertForMaskedLM, RobertaForMaskedLM, DistilBertForMaskedLM weights) has
  a dense layer, an activation and a LayerNorm before W_U (tied to the input embeddings unless the folder holds
  its own) and a bias. It fills in the tokenizer's mask token where the text has one.
- all-MiniLM-L6-v2, a sentence-embedding model, has none.

Shapes: D d_model, V vocabulary, n states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch, readable_pieces
from mha_core.engine.weights import Norm, activation_fn
from mha_core.i18n import tr
from mha_core.messages import N_


def stored_tensors(model: LoadedModel) -> dict[str, Tensor]:
    """The head's tensors the folder holds, as the model loaded and checked them (engine/loading/unembedding.py):
    held by the model, on its device and in its dtype."""
    return dict(model.head_tensors)


SLICE_PIECES, SLICE_ROWS = 4096, 64  # the smallest slice of the loss's logits (3 MB): a budget that leaves less
#                                      is exceeded by that much rather than the loss made in millions of tiny products


@dataclass(frozen=True)
class LmHead:
    """logits = W_U · transform(states) + bias; transform is the masked-LM head's LayerNorm(act(dense ·)), else
    nothing."""

    w_u: Tensor  # (V,D)
    bias: Tensor | None  # (V,)
    dense: tuple[Tensor, Tensor] | None  # (D,D) weight and (D,) bias: masked-LM heads only
    activation: str | None
    norm: Norm | None
    masked: bool  # fills in a mask token (an encoder) instead of predicting the next piece
    softcap: float | None = None  # Gemma 2: logits -> tanh(logits / c) · c
    holds_model_weights: ClassVar[bool] = True  # its tensors are the model's: a result keeping it weighs none of them

    def transform(self, states: Tensor) -> Tensor:
        """(..., D) -> (..., D)"""
        if self.dense is None:
            return states
        return self.norm(activation_fn(self.activation)(F.linear(states, *self.dense)))

    def __call__(self, states: Tensor, ids: Tensor | None = None) -> Tensor:
        """(..., D) final states -> (..., V) logits, or (..., len(ids)) for the vocabulary rows `ids` only."""
        logits = self.uncapped(states, ids)
        return logits if self.softcap is None else torch.tanh(logits / self.softcap) * self.softcap

    def uncapped(self, states: Tensor, ids: Tensor | None = None) -> Tensor:
        """The logits before Gemma 2's final soft-cap (what direct logit attribution decomposes)."""
        w_u, bias = (self.w_u, self.bias) if ids is None else (
            self.w_u[ids], None if self.bias is None else self.bias[ids])
        return F.linear(self.transform(states), w_u, bias)

    def cross_entropy(self, states: Tensor, targets: Tensor, free_bytes: int) -> Tensor:
        """(M,D) final states and (M,) target ids -> (M,) -log p(target), with the vocabulary's logits made a slice
        of rows and of the vocabulary at a time within `free_bytes` (never (M,V) at once): each slice is one large
        matrix product (a 262,144-piece vocabulary's logits, made a position at a time for 73 variants, took 68 s
        on one core; in slices, 3 s), and the log-sum-exp is carried over the slices."""
        vocabulary = self.w_u.shape[0]
        x = self.transform(states).float()  # (M,D)
        least = min(vocabulary, SLICE_PIECES)  # a slice's vocabulary pieces at least, however small the budget
        rows = min(len(x), max(SLICE_ROWS, free_bytes // (3 * 4 * least)))
        out = torch.empty(len(x))
        for r0 in range(0, len(x), rows):
            part, wanted = x[r0:r0 + rows], targets[r0:r0 + rows]
            width = min(vocabulary, max(least, free_bytes // (3 * 4 * len(part))))
            total = torch.full((len(part),), -torch.inf)
            chosen = torch.zeros(len(part))
            for v0 in range(0, vocabulary, width):
                logits = self.slice_logits(part, v0, min(v0 + width, vocabulary))  # (r,w)
                total = torch.logaddexp(total, torch.logsumexp(logits, dim=-1))
                inside = (wanted >= v0) & (wanted < v0 + logits.shape[1])
                chosen[inside] = logits[inside, wanted[inside] - v0]
            out[r0:r0 + rows] = total - chosen
        return out

    def slice_logits(self, transformed: Tensor, start: int, stop: int) -> Tensor:
        """(M,D) transformed states -> (M, stop - start) float32 logits of vocabulary rows start..stop, soft-capped."""
        bias = None if self.bias is None else self.bias[start:stop]
        logits = F.linear(transformed, self.w_u[start:stop].to(transformed.dtype),
                          None if bias is None else bias.to(transformed.dtype))
        return logits if self.softcap is None else torch.tanh(logits / self.softcap) * self.softcap


def read_at(masked: bool) -> tuple[str, str, str]:
    """How a page and a chart name what a head predicts at a position: (preposition, one, several), in the running
    context's language."""
    if masked:
        return tr("at"), tr("piece for that place"), tr("pieces for that place")
    return tr("after"), tr("next piece"), tr("next pieces")


def answer_slot(model: LoadedModel) -> str:
    """What a question to the model ends with: nothing for a head that predicts the next piece, the mask token (and a
    full stop) for a masked-LM head, which fills in a place rather than continuing the text."""
    head = lm_head(model)
    return f" {model.tokenizer.mask_token}." if head is not None and head.masked else ""


def masked_head(model: LoadedModel) -> LmHead | None:
    """An encoder's masked-LM head, where its family has one (arch.masked_head names its tensors) and the folder
    holds it."""
    names = model.arch.masked_head
    if names is None:
        return None
    dense, norm, decoder, bias = names.dense, names.norm, names.decoder, names.bias
    cast = stored_tensors(model)  # the names engine/loading/unembedding.head_names asked the folder for
    if f"{dense}.weight" not in cast:
        return None
    config = model.config
    return LmHead(cast.get(f"{decoder}.weight", model.embeddings.word), cast.get(bias, cast.get(f"{decoder}.bias")),
                  (cast[f"{dense}.weight"], cast[f"{dense}.bias"]), names.activation,
                  Norm(cast[f"{norm}.weight"], cast[f"{norm}.bias"], getattr(config, "layer_norm_eps", 1e-12), False),
                  masked=True)


def lm_head(model: LoadedModel) -> LmHead | None:
    """The model's language-model head, or None (an encoder without a masked-LM head, a decoder saved without its
    head)."""
    if not model.causal:
        return masked_head(model)
    softcap = model.arch.final_softcap
    if getattr(model.config, "tie_word_embeddings", False):
        return LmHead(model.embeddings.word, None, None, None, None, False, softcap)
    head = stored_tensors(model).get(model.arch.unembedding)
    return None if head is None else LmHead(head, None, None, None, None, False, softcap)


def has_lm_head(model: LoadedModel) -> bool:
    return lm_head(model) is not None


def predicts_next(model: LoadedModel) -> bool:
    """A head that predicts the next piece (a decoder's): what generation and next-piece losses need."""
    head = lm_head(model)
    return head is not None and not head.masked


def check_lm_head(model: LoadedModel) -> LmHead:
    head = lm_head(model)
    if head is None:
        raise InputError(
            "no_lm_head",
            N_(
                "{name} has no language-model head (it predicts no piece): predictions need a decoder saved with its "
                "head, tied or separate, or an encoder saved with its masked-LM head."
            ),
            name=model.name,
        )
    return head


def check_next_piece_head(model: LoadedModel) -> LmHead:
    """The head of a model that predicts the next piece (generation and next-piece losses need one)."""
    head = check_lm_head(model)
    if head.masked:
        raise InputError(
            "masked_lm_cannot_continue",
            N_(
                "{name} fills in masked pieces; it does not predict the next piece, so it cannot continue a text: "
                "choose a decoder."
            ),
            name=model.name,
        )
    return head


def lm_logits(model: LoadedModel, states: Tensor) -> Tensor:
    """(..., D) final-normed states -> (..., V) logits through the language-model head."""
    return check_lm_head(model)(states)


PIECES_NAMED = 12  # of a typed answer that is several pieces, the pieces its refusal names


def token_id(model: LoadedModel, piece: str) -> int:
    """The id of `piece`, which must be one piece of the vocabulary as typed (with its leading space where the
    tokenizer marks one); anything else is an InputError naming the pieces it splits into."""
    ids = model.tokenizer(piece, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        named = ids[:PIECES_NAMED]  # a pasted page's thousands of pieces: the first few, then "…"
        shown = readable_pieces(model.tokenizer, named, model.tokenizer.convert_ids_to_tokens(named))
        shown = [*shown, "…"] if len(ids) > PIECES_NAMED else list(shown)
        raise InputError(
            "answer_not_one_piece",
            N_("{piece!r} is {ids} pieces of {name}'s vocabulary ({value}): choose one piece."),
            piece=piece.strip() or piece,  # as typed: not the space the tokenizer is asked with
            ids=len(ids),
            name=model.name,
            value=" | ".join(shown) or "none",
        )
    return int(ids[0])


def chosen_position(model: LoadedModel, batch: TokenBatch, position: int | None) -> int:
    """Where a prediction is read: `position`, else a masked-LM head's first mask token, else the last piece."""
    n = int(batch.attention_mask[0].sum())
    if position is None and check_lm_head(model).masked:
        masks = (batch.input_ids[0, :n] == model.tokenizer.mask_token_id).nonzero()[:, 0]
        if not len(masks):
            raise InputError(
                "mask_token_missing",
                N_("{name} fills in a masked piece: type {mask_token} where the word to predict goes."),
                name=model.name,
                mask_token=model.tokenizer.mask_token,
            )
        return int(masks[0])
    position = n - 1 if position is None else position
    if not 0 <= position < n:
        raise InputError(
            "piece_position_out_of_range",
            N_("The position must be from 0 to {n} (the text has {n2} pieces)."),
            n=n - 1,
            n2=n,
        )
    return position
