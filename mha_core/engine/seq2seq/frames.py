"""Whisper's source: a log-mel spectrogram as a batch whose "pieces" are the encoder's positions.

Shapes: B clips, C mel bins, F spectrogram frames (10 ms each), S = F/2 encoder positions (20 ms each: the second
convolution has stride 2). Each position is labelled by the time it starts at, so every map over the source reads
in seconds.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from mha_core.engine.tokens import TokenBatch, pad_mask

FRAME_SECONDS = 0.01  # one spectrogram frame (Whisper: hop 160 at 16 kHz)
POSITION_SECONDS = 2 * FRAME_SECONDS  # one encoder position


def clip_positions(seconds: float, positions: int) -> int:
    """The encoder positions a clip of `seconds` covers (its last one partly), of the window's `positions`: the rest
    is the silence Whisper pads its window with."""
    return min(math.ceil(seconds / POSITION_SECONDS), positions)


def position_label(position: int) -> str:
    """An encoder position as the time it starts at: "1.24 s"."""
    return f"{position * POSITION_SECONDS:.2f} s"


def frames_batch(features: Tensor) -> TokenBatch:
    """(B,C,F) log-mel features as the encoder's batch: S = F/2 positions, all real (Whisper pads the audio
    itself, to its 30-second window, with silence)."""
    b, _, frames = features.shape
    n = frames // 2
    labels = tuple(position_label(i) for i in range(n))
    return TokenBatch(
        texts=("",) * b,
        input_ids=torch.zeros(b, n, dtype=torch.long),
        attention_mask=pad_mask([n] * b),
        tokens=(labels,) * b,
        labels=(labels,) * b,
        word_ids=(tuple(range(n)),) * b,
        offsets=(((0, 0),) * n,) * b,
        n_tokens=(n,) * b,
        features=features,
    )
