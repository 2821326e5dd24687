"""Texts -> padded word-piece batches, with word ids, character offsets and truncation counts.

Shapes: B texts, T word pieces of the longest text (after truncation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


class InputError(ValueError):
    """Bad user input; the message is one sentence for the user."""


@dataclass(frozen=True)
class TokenBatch:
    texts: tuple[str, ...]  # B
    input_ids: Tensor  # (B,T) int64, padded with the pad id
    attention_mask: Tensor  # (B,T) 1 real, 0 padding
    tokens: tuple[tuple[str, ...], ...]  # B x T_b word pieces, specials included
    word_ids: tuple[tuple[int | None, ...], ...]  # B x T_b word index per piece, None for specials
    offsets: tuple[tuple[tuple[int, int], ...], ...]  # B x T_b character span in the text
    n_tokens: tuple[int, ...]  # B pieces before truncation (specials included)


TextsLike = str | Sequence[str] | Sequence[Sequence[str]]


def as_text_list(texts: TextsLike) -> tuple[list[str] | list[list[str]], bool]:
    """Normalise input: a str, a list of str, or a list of pre-split word lists."""
    if isinstance(texts, str):
        items: list = [texts]
    else:
        items = list(texts)
    if not items:
        raise InputError("No text given.")
    pre_split = not isinstance(items[0], str)
    for i, item in enumerate(items):
        joined = item if isinstance(item, str) else " ".join(item)
        if not joined.strip():
            raise InputError("The text is empty." if len(items) == 1 else f"Text {i + 1} is empty.")
    return items, pre_split


def tokenize(tokenizer: object, texts: TextsLike, max_length: int, bos: int | None = None) -> TokenBatch:
    """Tokenize and pad on the right; texts longer than `max_length` pieces are cut (never refused). `bos`: a
    token id put first in every text (decoders whose tokenizer adds no special token), as a special piece."""
    items, pre_split = as_text_list(texts)
    enc = tokenizer(
        items, is_split_into_words=pre_split, truncation=True, max_length=max_length - (bos is not None),
        split_special_tokens=True,  # a typed "[SEP]" is text, not a separator
        padding=True, return_tensors="pt", return_offsets_mapping=True,
    )
    ids, mask = enc["input_ids"], enc["attention_mask"]  # (B,T)
    if bos is not None:
        ids = torch.cat([torch.full((ids.shape[0], 1), bos, dtype=ids.dtype), ids], dim=1)  # (B,1+T)
        mask = torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)
    lengths = mask.sum(dim=1).tolist()
    lead = 0 if bos is None else 1  # pieces put before what the tokenizer made
    tokens, word_ids, offsets = [], [], []
    for b, n in enumerate(lengths):
        if not any(w is not None for w in enc.word_ids(b)):
            raise InputError(f"Text {b + 1} has no word pieces the model can read (only control or blank characters).")
        tokens.append(tuple(tokenizer.convert_ids_to_tokens(ids[b, :n].tolist())))
        word_ids.append(tuple([None] * lead + enc.word_ids(b)[: n - lead]))
        offsets.append(tuple([(0, 0)] * lead + [tuple(o) for o in enc["offset_mapping"][b, : n - lead].tolist()]))
    return TokenBatch(
        texts=tuple(t if isinstance(t, str) else " ".join(t) for t in items),
        input_ids=ids, attention_mask=mask,
        tokens=tuple(tokens), word_ids=tuple(word_ids), offsets=tuple(offsets),
        n_tokens=tuple(n + lead for n in untruncated_lengths(
            tokenizer, items, pre_split, [n - lead for n in lengths], max_length - lead)),
    )


def untruncated_lengths(
    tokenizer: object, items: list, pre_split: bool, lengths: list[int], max_length: int
) -> tuple[int, ...]:
    """Piece counts before truncation; re-tokenizes only the texts that hit the limit."""
    counts = list(lengths)
    for b, n in enumerate(lengths):
        if n >= max_length:
            full = tokenizer(
                items[b], is_split_into_words=pre_split, truncation=False, verbose=False, split_special_tokens=True
            )
            counts[b] = len(full["input_ids"])
    return tuple(counts)


def pad_mask(lengths: Sequence[int], device: torch.device | str = "cpu") -> Tensor:
    """(B,T) mask with 1 on the first lengths[b] positions."""
    t = max(lengths)
    return (torch.arange(t, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]).long()
