"""Texts -> padded word-piece batches, with word ids, character offsets and truncation counts.

Shapes: B texts, T word pieces of the longest text (after truncation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from mha_core.engine.pieces import is_wide, readable_pieces, unknown_flags, whole_text
from mha_core.messages import N_, InputError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class TokenBatch:
    texts: tuple[str, ...]  # B
    input_ids: Tensor  # (B,T) int64, padded with the pad id
    attention_mask: Tensor  # (B,T) 1 real, 0 padding
    tokens: tuple[tuple[str, ...], ...]  # B x T_b word pieces as the tokenizer names them, specials included
    labels: tuple[tuple[str, ...], ...]  # B x T_b the same pieces as a reader sees them (readable_pieces)
    word_ids: tuple[tuple[int | None, ...], ...]  # B x T_b word index per piece, None for specials
    offsets: tuple[tuple[tuple[int, int], ...], ...]  # B x T_b character span in the text
    n_tokens: tuple[int, ...]  # B pieces before truncation (specials included)
    unknown: tuple[tuple[bool, ...], ...] = ()  # B x T_b the tokenizer's unknown piece ([UNK]): it read nothing there
    left_out: tuple[int, ...] = ()  # B pieces left out after the leading specials (tokenize_ending), none when ()
    token_type_ids: Tensor | None = None  # (B,T) sentence pairs: the tokenizer's token types (BERT: 0 A, 1 B)
    segments: tuple[tuple[int | None, ...], ...] = ()  # B x T_b sentence pairs: 0, 1, or None for a special piece
    features: Tensor | None = None  # (B,C,F) Whisper's encoder: log-mel frames in (C mel bins, F frames); the
    #                                 batch's "pieces" are then the encoder's positions (F/2, 20 ms each);
    #                                 (B,C,Hpx,Wpx) a Vision Transformer's pixels: its "pieces" are [CLS] and patches
    grid: tuple[int, int] | None = None  # images: (rows, columns) of patches

    def one(self, b: int) -> TokenBatch:
        """Text b alone, as tokenize() makes a batch of that text only (its own length: no padding)."""
        n = len(self.tokens[b])
        rows = slice(b, b + 1)

        def own(values: tuple) -> tuple:
            return values[rows] if values else ()

        def cut(t: Tensor | None) -> Tensor | None:
            return None if t is None else t[rows, :n].clone()  # (1,T_b)

        return TokenBatch(texts=own(self.texts), input_ids=cut(self.input_ids), attention_mask=cut(self.attention_mask),
                          tokens=own(self.tokens), labels=own(self.labels), word_ids=own(self.word_ids),
                          offsets=own(self.offsets), n_tokens=own(self.n_tokens), unknown=own(self.unknown),
                          left_out=own(self.left_out), token_type_ids=cut(self.token_type_ids),
                          segments=own(self.segments), features=None if self.features is None else self.features[rows],
                          grid=self.grid)


MAX_INPUT_CHARS = 200_000  # the longest text a page or command takes (far above any model's pieces): absurd pastes


TextsLike = str | Sequence[str] | Sequence[Sequence[str]]


def as_text_list(texts: TextsLike) -> tuple[list[str] | list[list[str]], bool]:
    """Normalise input: a str, a list of str, or a list of pre-split word lists."""
    if isinstance(texts, str):
        items: list = [texts]
    else:
        items = list(texts)
    if not items:
        raise InputError('no_text_given', N_('No text given.'))
    pre_split = not isinstance(items[0], str)
    items = [whole_text(item) if isinstance(item, str) else [whole_text(word) for word in item] for item in items]
    for i, item in enumerate(items):
        joined = item if isinstance(item, str) else " ".join(item)
        if not joined.strip():
            if len(items) == 1:
                raise InputError("text_empty", N_("The text is empty."))
            raise InputError("nth_text_empty", N_("Text {number} is empty."), number=i + 1)
    return items, pre_split


def tokenize(tokenizer: PreTrainedTokenizerBase, texts: TextsLike, max_length: int, bos: int | None = None,
             keep_mask: bool = False, pairs: Sequence[str] | None = None) -> TokenBatch:
    """Tokenize and pad on the right; texts longer than `max_length` pieces are cut (never refused). `bos`: a
    token id put first in every text (decoders whose tokenizer adds no special token), as a special piece.
    A typed special token ("[SEP]") is text, except the mask token where `keep_mask` (a masked-LM head fills it).
    `pairs`: a second text for each text (sentence pairs, segments A and B: tokenize_pairs)."""
    if pairs is not None:
        return tokenize_pairs(tokenizer, texts, pairs, max_length)
    items, pre_split = as_text_list(texts)
    keep = keep_mask and tokenizer.mask_token is not None and any(tokenizer.mask_token in str(t) for t in items)
    enc = tokenizer(
        items, is_split_into_words=pre_split, truncation=True, max_length=max_length - (bos is not None),
        split_special_tokens=not keep, padding=True, return_tensors="pt", return_offsets_mapping=True,
    )
    ids, mask = enc["input_ids"], enc["attention_mask"]  # (B,T)
    if keep:
        check_typed_specials(tokenizer, ids, mask)
    if bos is not None:
        ids = torch.cat([torch.full((ids.shape[0], 1), bos, dtype=ids.dtype), ids], dim=1)  # (B,1+T)
        mask = torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)
    lengths = mask.sum(dim=1).tolist()
    lead = 0 if bos is None else 1  # pieces put before what the tokenizer made
    tokens, labels, word_ids, offsets = [], [], [], []
    for b, n in enumerate(lengths):
        if not any(w is not None for w in enc.word_ids(b)):
            raise InputError(
                "text_no_readable_piece",
                N_("Text {b} has no word pieces the model can read (only control or blank characters)."),
                b=b + 1,
            )
        tokens.append(tuple(tokenizer.convert_ids_to_tokens(ids[b, :n].tolist())))
        labels.append(readable_pieces(tokenizer, ids[b, :n].tolist(), tokens[-1]))
        offsets.append(tuple([(0, 0)] * lead + [tuple(o) for o in enc["offset_mapping"][b, : n - lead].tolist()]))
        words = tuple([None] * lead + enc.word_ids(b)[: n - lead])
        word_ids.append(words if pre_split else spaced_words(items[b], words, offsets[-1]))
    return TokenBatch(
        texts=tuple(t if isinstance(t, str) else " ".join(t) for t in items),
        input_ids=ids,
        attention_mask=mask,
        tokens=tuple(tokens),
        labels=tuple(labels),
        word_ids=tuple(word_ids),
        offsets=tuple(offsets),
        n_tokens=tuple(
            n + lead
            for n in untruncated_lengths(tokenizer, items, pre_split, [n - lead for n in lengths], max_length - lead)
        ),
        unknown=tuple(unknown_flags(tokenizer, t) for t in tokens),
    )


def spaced_words(text: str, word_ids: Sequence[int | None], offsets: Sequence[tuple[int, int]]
                 ) -> tuple[int | None, ...]:
    """The tokenizer's words split wherever the text has white space between two pieces, numbered again from 0:
    a SentencePiece tokenizer that turns spaces into '▁' before it splits (Gemma) calls a whole sentence word 0,
    while its words start at each '▁'. Tokenizers that split at spaces themselves (WordPiece, byte-level BPE,
    Metaspace) keep their words; specials (None) stay None."""
    numbered, word, last = [], -1, None  # last: (tokenizer's word, end offset) of the previous word piece
    for wid, (start, end) in zip(word_ids, offsets, strict=True):
        if wid is None:
            numbered.append(None)
            continue
        gap = text[last[1] - 1:start + 1] if last is not None and last[1] > 0 else text[start:start + 1]
        if last is None or wid != last[0] or any(c.isspace() for c in gap):
            word += 1
        numbered.append(word)
        last = (wid, max(end, start + 1))
    return tuple(numbered)


def tokenize_pairs(tokenizer: PreTrainedTokenizerBase, texts: TextsLike, pairs: Sequence[str], max_length: int
                   ) -> TokenBatch:
    """Sentence pairs as the tokenizer joins them (BERT: "[CLS] A [SEP] B [SEP]", token types 0 and 1; RoBERTa: "<s> A
    </s></s> B </s>", no token types), the longer text cut first where the pair is over `max_length`. Each pair's
    text is "A B": the second text's offsets and word numbers follow the first's, so that words, unknown characters
    and merged pieces read the pair as one text; `segments` says which text each piece is of."""
    items, pre_split = as_text_list(texts)
    seconds, _ = as_text_list(list(pairs))
    if pre_split or len(seconds) != len(items):
        raise InputError("pairs_not_one_per_text", N_("Give one second text for each text, as plain text."))
    enc = tokenizer(items, seconds, truncation="longest_first", max_length=max_length, split_special_tokens=True,
                    padding=True, return_tensors="pt", return_offsets_mapping=True)
    ids, mask = enc["input_ids"], enc["attention_mask"]  # (B,T)
    lengths = mask.sum(dim=1).tolist()
    tokens, labels, word_ids, offsets, segments = [], [], [], [], []
    for b, n in enumerate(lengths):
        shift, words = len(items[b]) + 1, 1 + max((w for w, s in zip(enc.word_ids(b), enc.sequence_ids(b), strict=True)
                                                    if s == 0 and w is not None), default=-1)
        segment = enc.sequence_ids(b)[:n]
        tokens.append(tuple(tokenizer.convert_ids_to_tokens(ids[b, :n].tolist())))
        labels.append(readable_pieces(tokenizer, ids[b, :n].tolist(), tokens[-1]))
        word_ids.append(tuple(w if s != 1 or w is None else w + words for w, s in zip(enc.word_ids(b)[:n], segment,
                                                                                          strict=True)))
        offsets.append(tuple((a + shift, e + shift) if s == 1 else (a, e)
                             for (a, e), s in zip(enc["offset_mapping"][b, :n].tolist(), segment, strict=True)))
        word_ids[-1] = spaced_words(f"{items[b]} {seconds[b]}", word_ids[-1], offsets[-1])
        segments.append(tuple(segment))
    # (B,T) the token types the tokenizer gives (BERT: 0 then 1); a model whose tokenizer gives none reads zeros
    types = enc["token_type_ids"] * mask if "token_type_ids" in enc else torch.zeros_like(ids)
    return TokenBatch(texts=tuple(f"{a} {b}" for a, b in zip(items, seconds, strict=True)), input_ids=ids,
                      attention_mask=mask, tokens=tuple(tokens), labels=tuple(labels), word_ids=tuple(word_ids),
                      offsets=tuple(offsets),
                      n_tokens=untruncated_lengths(tokenizer, items, False, lengths, max_length, seconds),
                      unknown=tuple(unknown_flags(tokenizer, t) for t in tokens), token_type_ids=types,
                      segments=tuple(segments))


def whole(tokenizer: PreTrainedTokenizerBase, text: str, bos: int | None = None, keep_mask: bool = False
          ) -> TokenBatch:
    """One text tokenized with nothing cut. A piece holds at least one byte of the text (a byte-level BPE reads a
    Chinese character as up to three pieces: a bound in characters cut SmolLM2's Chinese sentences), plus the
    specials; a normalizer that expands characters can still go beyond it: then the count before cutting decides."""
    batch = tokenize(tokenizer, text, len(text.encode("utf-8")) + 8, bos, keep_mask)
    if batch.n_tokens[0] > int(batch.attention_mask[0].sum()):
        batch = tokenize(tokenizer, text, batch.n_tokens[0] + 8, bos, keep_mask)
    return batch


def tokenize_ending(tokenizer: PreTrainedTokenizerBase, text: str, max_length: int, bos: int | None = None,
                    keep_mask: bool = False) -> TokenBatch:
    """One text read for a prediction at its end: whole when it fits in `max_length` pieces, else its leading
    special pieces and its last pieces, the ones between left out and counted (`left_out`): never the end cut, where
    the prediction is made."""
    full = whole(tokenizer, text, bos, keep_mask)
    n = int(full.attention_mask[0].sum())
    if n <= max_length:
        return full
    lead = next(i for i, w in enumerate(full.word_ids[0]) if w is not None)  # [CLS], a first token
    kept = [*range(lead), *range(n - (max_length - lead), n)]
    pick = lambda values: tuple(values[i] for i in kept)  # noqa: E731
    return TokenBatch(full.texts, full.input_ids[:, kept], full.attention_mask[:, kept], (pick(full.tokens[0]),),
                      (pick(full.labels[0]),), (pick(full.word_ids[0]),), (pick(full.offsets[0]),), full.n_tokens,
                      (pick(full.unknown[0]),) if full.unknown else (), (n - len(kept),))


def check_typed_specials(tokenizer: PreTrainedTokenizerBase, ids: Tensor, mask: Tensor) -> None:
    """With typed special tokens read as such, only the mask token may be typed: the others would re-cut the text."""
    special = set(tokenizer.all_special_ids) - {tokenizer.mask_token_id}
    for b, n in enumerate(mask.sum(dim=1).tolist()):
        typed = [i for i in ids[b, 1 : n - 1].tolist() if i in special]  # between the pieces the tokenizer adds
        if typed:
            raise InputError(
                "special_piece_in_text",
                N_(
                    "Text {b} holds the special piece {typed}: with {mask_token} in the text, no other special piece "
                    "may be typed."
                ),
                b=b + 1,
                typed=tokenizer.convert_ids_to_tokens(typed[0]),
                mask_token=tokenizer.mask_token,
            )


def ids_batch(
    tokenizer: PreTrainedTokenizerBase, sequences: Sequence[Sequence[int]], special: Sequence[Sequence[bool]]
) -> TokenBatch:
    """A batch made of token ids rather than text (synthetic inputs such as repeated random tokens), padded on
    the right; special[b][i] marks the pieces that stand for no word ([CLS], [BOS], [SEP])."""
    n = max(len(ids) for ids in sequences)
    input_ids = torch.full((len(sequences), n), tokenizer.pad_token_id or 0, dtype=torch.long)
    for b, ids in enumerate(sequences):
        input_ids[b, : len(ids)] = torch.tensor(ids)
    tokens = tuple(tuple(tokenizer.convert_ids_to_tokens(list(ids))) for ids in sequences)
    word_ids = tuple(tuple(None if s else i for i, s in enumerate(flags)) for flags in special)
    return TokenBatch(
        texts=tuple(" ".join(t) for t in tokens),
        input_ids=input_ids,
        attention_mask=pad_mask([len(ids) for ids in sequences]),
        tokens=tokens,
        labels=tokens,
        word_ids=word_ids,
        offsets=tuple(((0, 0),) * len(ids) for ids in sequences),
        n_tokens=tuple(len(ids) for ids in sequences),
    )


def untruncated_lengths(
    tokenizer: PreTrainedTokenizerBase, items: list, pre_split: bool, lengths: list[int], max_length: int,
    pairs: Sequence[str] | None = None,
) -> tuple[int, ...]:
    """Piece counts before truncation (of each text, or of each pair with its second text in `pairs`); re-tokenizes
    only the texts that hit the limit."""
    counts = list(lengths)
    for b, n in enumerate(lengths):
        if n >= max_length:
            full = tokenizer(items[b], text_pair=None if pairs is None else pairs[b], is_split_into_words=pre_split,
                             truncation=False, verbose=False, split_special_tokens=True)
            counts[b] = len(full["input_ids"])
    return tuple(counts)


def pad_mask(lengths: Sequence[int], device: torch.device | str = "cpu") -> Tensor:
    """(B,T) mask with 1 on the first lengths[b] positions."""
    t = max(lengths)
    return (torch.arange(t, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]).long()


def without_spaces(text: str) -> bool:
    """Text written without spaces between words (it holds wide characters): its words come from a segmenter, its
    probes and pronouns are Chinese."""
    return any(is_wide(c) for c in text)


def word_pieces(batch: TokenBatch, b: int, word: str) -> tuple[int, ...]:
    """The pieces of text b that spell the first whole-word occurrence of `word` (case-insensitive), found by
    character offsets, so it holds for every tokenizer (WordPiece's "##", byte-level BPE's leading space,
    SentencePiece's "▁"); () when the text has no such word or the model's cut left it out. Chinese is written
    without spaces, so a word of wide characters (它, 动物) matches its first occurrence anywhere."""
    pattern = re.escape(word) if without_spaces(word) else rf"(?<!\w){re.escape(word)}(?!\w)"
    match = re.search(pattern, batch.texts[b], re.IGNORECASE)
    if match is None:
        return ()
    start, end = match.span()
    return tuple(i for i, (first, last) in enumerate(batch.offsets[b]) if last > first and first < end and last > start)
