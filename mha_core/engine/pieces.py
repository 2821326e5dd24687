"""Word pieces as a reader should see them: markers decoded, whitespace visible, a character split over several
byte-level pieces labelled by that character and its part, and pieces the tokenizer could not read named.

Shapes: T pieces of one text.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def whole_text(value: str) -> str:
    """`value` as UTF-8 can carry it: a lone surrogate (a byte a terminal could not decode, in argv; a broken paste)
    becomes U+FFFD, a pair its character; the length is kept where there is no pair (offsets hold)."""
    if not isinstance(value, str):
        raise TypeError(f"expected text, not {type(value).__name__}")
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte pieces (Llama, Gemma)


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet: the printable character that stands for each byte, back to the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


BYTE_LEVEL = byte_level_alphabet()


def piece_bytes(token: str) -> bytes | None:
    """The raw bytes of a byte-level piece ('Ġæ' -> b' \\xe6') or a byte-fallback piece ('<0xE6>'); None otherwise."""
    fallback = BYTE_FALLBACK.fullmatch(token)
    if fallback:
        return bytes([int(fallback.group(1), 16)])
    if token and all(c in BYTE_LEVEL for c in token):
        return bytes(BYTE_LEVEL[c] for c in token)
    return None


def decode_owned(raw: bytes) -> tuple[list[str], list[int]]:
    """UTF-8 characters of `raw` and, per byte, the index of the character it belongs to (a byte that starts no
    valid character is its own U+FFFD)."""
    chars, owner, i = [], [], 0
    while i < len(raw):
        for size in (1, 2, 3, 4):
            try:
                char = raw[i:i + size].decode("utf-8")
                break
            except UnicodeDecodeError:
                continue
        else:
            char, size = "\ufffd", 1
        chars.append(char)
        owner += [len(chars) - 1] * size
        i += size
    return chars, owner


def character_parts(raw: Sequence[bytes]) -> list[str]:
    """Labels for consecutive pieces whose bytes spell characters only together: each piece shows the characters
    it touches, a character split over n pieces marked with its part, 动¹/₂ then 动²/₂."""
    chars, owner = decode_owned(b"".join(raw))
    touched, start = [], 0
    for piece in raw:
        touched.append(sorted(set(owner[start:start + len(piece)])))
        start += len(piece)
    holders = {c: [k for k, t in enumerate(touched) if c in t] for c in range(len(chars))}
    labels = []
    for k, chars_here in enumerate(touched):
        parts = []
        for c in chars_here:
            split = len(holders[c]) > 1
            mark = f"{str(holders[c].index(k) + 1).translate(SUPERSCRIPT)}/{str(len(holders[c])).translate(SUBSCRIPT)}"
            parts.append(chars[c] + (mark if split else ""))
        labels.append("".join(parts).translate(VISIBLE_WHITESPACE))
    return labels


def readable_pieces(tokenizer: PreTrainedTokenizerBase, ids: list[int], tokens: Sequence[str]) -> tuple[str, ...]:
    """Each piece decoded on its own, so byte-level BPE and SentencePiece markers (Ġ, ▁, Ċ) read as text, with
    spaces and newlines shown as ␣ and ↵. Pieces that each hold part of a multi-byte character (Chinese, emoji)
    are labelled by the character and their part (character_parts); BERT's word pieces (##ing) stay as they are."""
    decoded = tokenizer.batch_decode([[i] for i in ids], clean_up_tokenization_spaces=False)
    labels = [token if not text or token.startswith("##") else text.translate(VISIBLE_WHITESPACE)
              for token, text in zip(tokens, decoded, strict=True)]
    partial = [("\ufffd" in text and piece_bytes(token) is not None) for token, text in zip(tokens, decoded,
                                                                                          strict=True)]
    i = 0
    while i < len(tokens):
        if not partial[i]:
            i += 1
            continue
        end = i
        while end < len(tokens) and partial[end]:
            end += 1
        labels[i:end] = character_parts([piece_bytes(token) for token in tokens[i:end]])
        i = end
    return tuple(labels)


def unknown_flags(tokenizer: PreTrainedTokenizerBase, tokens: Sequence[str]) -> tuple[bool, ...]:
    """Per piece: the tokenizer's unknown token ([UNK]), which stands for text it could not read."""
    unk = getattr(tokenizer, "unk_token", None)
    return tuple(unk is not None and token == unk for token in tokens)


def unknown_spans(text: str, unknown: Sequence[bool], offsets: Sequence[tuple[int, int]]) -> list[str]:
    """The parts of `text` the model reads as its unknown piece (analysis.display.unknown_note words them)."""
    return [text[start:end] for flag, (start, end) in zip(unknown, offsets, strict=False) if flag and end > start]


def is_wide(char: str) -> bool:
    """A character of a script written without spaces between words (Chinese, Japanese, Korean) or an emoji."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def fragmented_chars(text: str, offsets: Sequence[tuple[int, int]]) -> set[str]:
    """The wide characters a byte-level tokenizer cuts into several pieces covering the same character (SmolLM2 reads
    动 as 动¹/₂ 动²/₂); empty when every wide character is whole (analysis.display.fragments_note words them)."""
    pieces_of = Counter((start, end) for start, end in offsets if end > start)
    return {text[start:end] for (start, end), count in pieces_of.items()
            if count > 1 and any(is_wide(c) for c in text[start:end])}
