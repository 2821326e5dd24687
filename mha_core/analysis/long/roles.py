"""Roles that only show on long texts (issue 24), read from results that keep q, k and the log-sum-exp
(long_text.run_long):

- Attention sinks as a text grows (Xiao et al. 2023, "Efficient streaming language models with attention sinks"):
  each head's mean weight on the first token at several lengths.
- Retrieval heads (Wu et al. 2024, "Retrieval head mechanistically explains long-context factuality"): a fact (the
  needle) is put at a chosen depth of a long filler text, then a question makes the model copy it. With the answer
  written after the question, each answer piece the model predicts (its top next piece is the needle's piece) is
  copied; a head's retrieval score is the share of copied pieces for which its strongest key is the needle's piece
  being copied.

Shapes: K lengths, L layers, H heads, T pieces, A the code's pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.analysis.corpus.readers import bundled_corpus
from mha_core.analysis.lm.head import lm_head, predicts_next
from mha_core.analysis.long.text import check_long_budget, map_block, run_long
from mha_core.engine.budget import BudgetError
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

SINK_LENGTHS = (512, 2048, 8192)
NEEDLE_LENGTH = 2048
NEEDLE_DEPTH = 0.5
CODE = "48162"  # five different digits: each a piece of its own in the bundled decoders' tokenizers
NEEDLE = " The secret code for the blue door is {code}. "
QUESTION = " What is the secret code for the blue door? The secret code for the blue door is {code}."
Progress = Callable[[int, int], None]


def filler(n_chars: int) -> str:
    """The bundled corpus's sentences one after another, repeated to at least n_chars characters."""
    sentences = bundled_corpus()
    text, i = [], 0
    while sum(len(s) + 1 for s in text) < n_chars:
        text.append(sentences[i % len(sentences)])
        i += 1
    return " ".join(text)


def sink_lengths(model: LoadedModel, lengths: tuple[int, ...] = SINK_LENGTHS) -> tuple[int, ...]:
    """The lengths this model can read (its own limit included when a length is beyond it)."""
    limit = model.arch.long_max_length
    return tuple(sorted({min(n, limit) for n in lengths}))


def affordable_lengths(model: LoadedModel, lengths: tuple[int, ...]) -> tuple[tuple[int, ...], BudgetError | None]:
    """(the lengths whose forward fits the memory budget, the refusal of the shortest that does not, or None):
    known before any work starts (long_text.check_long_budget)."""
    fitting = []
    for n in lengths:
        try:
            check_long_budget(model, n)
        except BudgetError as refusal:
            return tuple(fitting), refusal
        fitting.append(n)
    return tuple(fitting), None


def first_token_share(result: object, b: int = 0) -> np.ndarray:
    """(L,H) each head's mean weight on the first token over text b's rows: one key column per layer, rebuilt."""
    n = result.lengths[b]
    return np.stack([map_block(result, b, layer, slice(None), range(n), range(1))[..., 0].mean(-1).numpy()
                     for layer in range(result.n_layers)])


@dataclass(frozen=True)
class SinkGrowth:
    lengths: tuple[int, ...]  # K lengths read, in pieces
    first: np.ndarray  # (K,L,H) each head's mean weight on the first token at each length


def sink_growth(model: LoadedModel, lengths: tuple[int, ...] = SINK_LENGTHS, progress: Progress | None = None
                ) -> SinkGrowth:
    """The first token's share of every head on the bundled filler text cut to each length (refused before any work
    when the longest is over the memory budget: BudgetError)."""
    lengths = sink_lengths(model, lengths)
    check_long_budget(model, max(lengths))
    text = filler(8 * max(lengths))  # a piece is at most a few characters: enough for every length
    shares, total = [], len(lengths) * model.n_layers

    def report(i: int) -> Progress | None:  # layers done over every length's forward
        return None if progress is None else lambda done, _: progress(i * model.n_layers + done, total)

    for i, n in enumerate(lengths):
        shares.append(first_token_share(run_long(model, text, report(i), max_pieces=n)))
    return SinkGrowth(lengths, np.stack(shares))


@dataclass(frozen=True)
class NeedleProbe:
    text: str  # the filler with the needle, the question and its answer
    n_pieces: int  # T
    depth: float  # where the needle sits in the filler, 0 (start) to 1 (end)
    code: tuple[str, ...]  # A the code's pieces
    needle: tuple[int, ...]  # A their positions in the needle
    answer: tuple[int, ...]  # A their positions in the answer after the question
    predicted: tuple[str, ...]  # A the model's top next piece just before each answer piece
    copied: tuple[bool, ...]  # A whether that is the code's piece
    scores: np.ndarray  # (L,H) retrieval score: of the copied pieces, the share where the head's strongest key is
    #                     the needle's piece being copied

    @property
    def success(self) -> float:
        """The share of the code's pieces the model copies."""
        return float(np.mean(self.copied))


def needle_lengths(limit: int) -> list[int]:
    """The probe's lengths a model reading `limit` pieces can take: 512, 1,024, … up to it (its limit if below)."""
    return [n for n in (512, 1024, 2048, 4096, 8192) if n <= limit] or [limit]


def default_needle_length(lengths: list[int]) -> int:
    """NEEDLE_LENGTH, or the longest offered below it, or the shortest offered."""
    return max((n for n in lengths if n <= NEEDLE_LENGTH), default=lengths[0])


def pieces_in(offsets: tuple[tuple[int, int], ...], start: int, stop: int) -> tuple[int, ...]:
    """The pieces whose characters lie in [start, stop)."""
    return tuple(i for i, (a, b) in enumerate(offsets) if b > a and a >= start and b <= stop)


def needle_text(n_chars: int, depth: float) -> tuple[str, int, int]:
    """(text, where the needle's code starts, where the answer's code starts), in characters."""
    hay = filler(n_chars)
    cut = hay.find(". ", int(len(hay) * depth))  # at a sentence's end
    cut = len(hay) if cut < 0 or depth >= 1 else cut + 1
    before = hay[:cut] + NEEDLE.format(code=CODE)
    text = before + hay[cut:] + QUESTION.format(code=CODE)
    return text, len(before) - len(CODE) - 2, len(text) - len(CODE) - 1


def needle_probe(model: LoadedModel, n_pieces: int = NEEDLE_LENGTH, depth: float = NEEDLE_DEPTH,
                 progress: Progress | None = None) -> NeedleProbe:
    """The probe on about n_pieces pieces with the needle at `depth`; every head's retrieval score."""
    if not predicts_next(model):
        raise InputError("needle_needs_next_piece", N_("The needle probe needs a model that predicts the next piece "
                                                       "(a decoder with its language-model head); {name} has none."),
                         name=model.name)
    if not 0 <= depth <= 1:
        raise InputError("needle_depth", N_("The needle's depth is a share of the text, from 0 to 1, not {depth}."),
                         depth=depth)
    n_pieces = min(n_pieces, model.arch.long_max_length)
    check_long_budget(model, n_pieces)  # refused before any work
    sample = filler(4000)
    chars_per_piece = len(sample) / len(model.tokenizer(sample)["input_ids"])
    text, needle_at, answer_at = needle_text(int((n_pieces - 90) * chars_per_piece), depth)
    result = run_long(model, text, progress)
    offsets = result.batch.offsets[0]
    needle = pieces_in(offsets, needle_at, needle_at + len(CODE))
    answer = pieces_in(offsets, answer_at, answer_at + len(CODE))
    if result.truncated[0] or not needle or len(needle) != len(answer):
        raise InputError("needle_not_read", N_("{name} cannot read the probe whole at {n} pieces; choose fewer."),
                         name=model.name, n=n_pieces)
    ids = result.batch.input_ids[0]
    with torch.inference_mode():
        logits = lm_head(model)(result.hidden_states[-1][0, [a - 1 for a in answer]])  # (A,V)
    top = logits.argmax(-1)
    copied = top == ids[list(answer)]  # (A,)
    queries = range(answer[0] - 1, answer[-1])  # the rows that predict each answer piece
    scores = np.zeros((result.n_layers, result.n_heads))
    for layer in range(result.n_layers):
        strongest = map_block(result, 0, layer, slice(None), queries, range(result.lengths[0])).argmax(-1)  # (H,A)
        hits = (strongest == torch.tensor(needle)) & copied
        scores[layer] = (hits.sum(-1) / max(int(copied.sum()), 1)).numpy()
    return NeedleProbe(text, result.lengths[0], depth, tuple(result.tokens[0][i] for i in needle), needle, answer,
                       tuple(model.tokenizer.convert_ids_to_tokens(top.tolist())), tuple(copied.tolist()), scores)
