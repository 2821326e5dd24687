"""Which cross-attention heads follow the audio, and when each word is said.

Alignment heads are found from the data: a head whose most-attended frame moves forward with each written piece
(monotonic: the share of steps from one piece to the next where that frame does not move back) and sharply (the
mean weight of that frame), across a fair part of the clip. Word timestamps follow openai-whisper's: the alignment
heads' maps, each normalised over the pieces and median-filtered over time, averaged; dynamic time warping through
-map gives each piece's positions; a word starts where its first piece's path begins, trimmed of silence at its
ends.

Shapes: L decoder layers, H heads, T written pieces (rows), S encoder positions (20 ms each).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.engine.seq2seq.frames import POSITION_SECONDS

MONOTONIC = 0.85  # this share of steps at least: the most-attended frame stays or moves forward (1 back allowed)
BACK = 1  # positions (20 ms) a step may move back and still count as forward
SHARP = 0.12  # the most-attended frame's mean weight at least this
SPAN = 0.4  # the most-attended frames cover at least this share of the speech
MEDIAN_WIDTH = 7  # openai-whisper's median filter over frames
QUIET = 0.05  # a position this much quieter than the clip's loud level is silence (word spans are trimmed of it)
APPENDED = "\"'.。,，!！?？:：”)]}、"  # punctuation that belongs to the word before it


@dataclass(frozen=True)
class HeadScores:
    monotonic: np.ndarray  # (L,H) the share of steps whose most-attended frame does not move back
    sharp: np.ndarray  # (L,H) the most-attended frame's mean weight
    span: np.ndarray  # (L,H) the share of the speech its most-attended frames cover
    found: tuple[tuple[int, int], ...]  # (layer, head) passing all three, strongest first
    published: tuple[tuple[int, int], ...]  # the list the model's package gives, if any

    @property
    def agreeing(self) -> tuple[tuple[int, int], ...]:
        return tuple(h for h in self.found if h in set(self.published))


def score_heads(rows: np.ndarray, published: tuple[tuple[int, int], ...] = ()) -> HeadScores:
    """`rows` (L,H,T,S): the cross-attention rows that write the transcript, over the speech's positions."""
    n_layers, n_heads, t, s = rows.shape
    peaks = rows.argmax(-1)  # (L,H,T)
    steps = np.diff(peaks, axis=-1)  # (L,H,T-1)
    monotonic = (steps >= -BACK).mean(-1) if t > 1 else np.zeros((n_layers, n_heads))  # (L,H)
    sharp = rows.max(-1).mean(-1)  # (L,H)
    span = (peaks.max(-1) - peaks.min(-1)) / max(s - 1, 1)  # (L,H)
    passing = (monotonic >= MONOTONIC) & (sharp >= SHARP) & (span >= SPAN)
    order = np.argsort(-(monotonic * sharp), axis=None)
    found = tuple((int(i // n_heads), int(i % n_heads)) for i in order if passing.flat[i])
    return HeadScores(monotonic, sharp, span, found, tuple(tuple(h) for h in published))


def dtw(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic time warping through `cost` (N,M), as openai-whisper's dtw_cpu: (row indices, column indices) of
    the cheapest monotonic path from (0, 0) to (N-1, M-1)."""
    n, m = cost.shape
    total = np.full((n + 1, m + 1), np.inf, dtype=np.float64)
    trace = -np.ones((n + 1, m + 1), dtype=np.int8)
    total[0, 0] = 0
    for j in range(1, m + 1):
        for i in range(1, n + 1):
            c0, c1, c2 = total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]
            c, t = (c0, 0) if c0 < c1 and c0 < c2 else (c1, 1) if c1 < c0 and c1 < c2 else (c2, 2)
            total[i, j], trace[i, j] = cost[i - 1, j - 1] + c, t
    return backtrace(trace)


def backtrace(trace: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    i, j = trace.shape[0] - 1, trace.shape[1] - 1
    trace[0, :], trace[:, 0] = 2, 1
    path = []
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        step = trace[i, j]
        i, j = (i - 1, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i, j - 1)
    rows, cols = np.array(path[::-1]).T
    return rows, cols


def alignment_matrix(rows: np.ndarray, heads: tuple[tuple[int, int], ...]) -> np.ndarray:
    """(T,S) the chosen heads' rows, each normalised over the pieces (per frame) and median-filtered over time,
    averaged."""
    from scipy.ndimage import median_filter

    weights = np.stack([rows[layer, head] for layer, head in heads])  # (K,T,S)
    std, mean = weights.std(axis=-2, keepdims=True), weights.mean(axis=-2, keepdims=True)
    weights = (weights - mean) / np.maximum(std, 1e-10)
    weights = median_filter(weights, size=(1, 1, MEDIAN_WIDTH), mode="mirror")
    return weights.mean(axis=0)


@dataclass(frozen=True)
class Word:
    word: str
    start: float  # seconds
    end: float
    pieces: tuple[int, ...]  # its pieces' indices among the written ones


def split_words(units: list[tuple[str, tuple[int, ...]]], spaced: bool) -> list[tuple[str, tuple[int, ...]]]:
    """Units (text, piece indices: whole characters, as unicode_units makes them) grouped into words: a unit
    starting with a space starts one (every unit, for a language written without spaces); punctuation joins the
    word before it."""
    words: list[tuple[str, tuple[int, ...]]] = []
    for text, indices in units:
        bare = text.strip()
        if not bare:
            continue
        punctuation = all(c in APPENDED for c in bare)
        if words and (punctuation or (spaced and not text.startswith(" "))):
            words[-1] = (words[-1][0] + text, words[-1][1] + indices)
        else:
            words.append((text, indices))
    return words


def loud_positions(samples: np.ndarray, rate: int, n: int) -> np.ndarray:
    """(n,) True where the clip's 20 ms position is louder than QUIET of its loud level (RMS, 95th percentile)."""
    per = int(rate * POSITION_SECONDS)
    frames = np.zeros(n * per, dtype=np.float32)
    frames[: min(len(samples), n * per)] = samples[: n * per]
    rms = np.sqrt((frames.reshape(n, per) ** 2).mean(axis=1))  # (n,)
    return rms > QUIET * max(float(np.percentile(rms, 95)), 1e-9)


def trim_to_speech(start: int, end: int, loud: np.ndarray) -> tuple[int, int]:
    """A word's positions [start, end) without the silent ones at either end (dynamic time warping spreads a word
    over the pause before or after it); unchanged when all are silent."""
    inside = np.flatnonzero(loud[start:end])
    return (start, end) if not len(inside) else (start + int(inside[0]), start + int(inside[-1]) + 1)


def word_timestamps(rows: np.ndarray, heads: tuple[tuple[int, int], ...], units: list[tuple[str, tuple[int, ...]]],
                    spaced: bool, loud: np.ndarray | None = None) -> tuple[Word, ...]:
    """`rows` (L,H,T+1,S): the rows reading the prompt's last piece and each written piece (each row writes the
    next piece: the T text pieces, then the end); `units` the text pieces as whole characters (unicode_units);
    `loud` (S,): the speech's loud positions, to trim each word's silent ends (loud_positions)."""
    matrix = alignment_matrix(rows, heads)  # (T+1,S)
    text_index, time_index = dtw(-matrix)
    jumps = np.pad(np.diff(text_index), (1, 0), constant_values=1).astype(bool)
    jump_positions = time_index[jumps]  # (T+1,) where each row's path starts
    words = []
    for text, indices in split_words(units, spaced):
        start, end = int(jump_positions[indices[0]]), int(jump_positions[min(indices[-1] + 1, len(jump_positions) - 1)])
        if loud is not None:
            start, end = trim_to_speech(start, max(end, start + 1), loud)
        words.append(Word(text.strip(), round(start * POSITION_SECONDS, 2), round(end * POSITION_SECONDS, 2), indices))
    return tuple(words)
