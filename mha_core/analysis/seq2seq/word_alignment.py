"""The word alignment a cross-attention head implies between a source and its target (translation): each target
piece's most-attended source word (argmax), and the symmetric alignment (the pairs that are each other's argmax,
both ways: the target piece's favourite source word, and that word's favourite target piece).

Shapes: T target pieces (the decoder's input; row t writes piece t + 1), S source pieces, W source words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.engine.seq2seq.forward import Seq2SeqResult


@dataclass(frozen=True)
class WordAlignment:
    target: tuple[str, ...]  # the target pieces aligned (the decoder's inputs after its prompt, specials left out)
    source_words: tuple[str, ...]  # W the source's words
    weights: np.ndarray  # (T',W) each target piece's attention to each source word (its pieces' weights summed)
    argmax: tuple[int, ...]  # T' each target piece's most-attended source word
    symmetric: tuple[tuple[int, int], ...]  # (target piece, source word) pairs that are each other's argmax


def source_words(result: Seq2SeqResult, b: int = 0) -> tuple[tuple[str, ...], list[list[int]]]:
    """The source's words and each one's pieces (the tokenizer's word ids; specials left out)."""
    batch = result.encoder.batch
    words: dict[int, list[int]] = {}
    for i, word in enumerate(batch.word_ids[b]):
        if word is not None:
            words.setdefault(word, []).append(i)
    groups = [words[w] for w in sorted(words)]
    text = batch.texts[b]
    spans = [batch.offsets[b][g[0]][0] for g in groups], [batch.offsets[b][g[-1]][1] for g in groups]
    return tuple(text[s:e] for s, e in zip(*spans, strict=True)), groups


def word_alignment(result: Seq2SeqResult, layer: int, head: int | None = None, b: int = 0) -> WordAlignment:
    """The alignment one head implies (`head` None: the layer's heads averaged), over the target's written pieces."""
    cross = result.text_maps("cross", b)[layer].numpy()  # (H,T,S)
    z = cross.mean(0) if head is None else cross[head]  # (T,S)
    names, groups = source_words(result, b)
    specials = {i for i, w in enumerate(result.decoder.batch.word_ids[b]) if w is None}
    rows = [t for t in range(z.shape[0] - 1) if t + 1 not in specials]  # row t writes piece t + 1
    weights = np.stack([z[rows][:, g].sum(-1) for g in groups], axis=-1) if groups and rows else np.zeros((0, 0))
    argmax = tuple(int(i) for i in weights.argmax(-1)) if weights.size else ()
    back = weights.argmax(0) if weights.size else np.zeros(0, int)  # each word's favourite target piece
    symmetric = tuple((t, w) for t, w in enumerate(argmax) if back[w] == t)
    labels = result.decoder.labels[b]
    return WordAlignment(tuple(labels[t + 1] for t in rows), names, weights, argmax, symmetric)
