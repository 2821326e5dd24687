"""The computations the Encoder–decoder page asks for, each by name (as serving.computed): an encoder–decoder's
three kinds of maps for a source and target, Whisper's transcript of a clip, and a typed sentence spoken.
Stores (serving.memory.STORES): "results" forwards and transcripts, "small" spoken audio."""

from __future__ import annotations

import hashlib

from mha_core.analysis.seq2seq_decode import decode
from mha_core.analysis.transcribe import Transcript, transcribe
from mha_core.analysis.word_alignment import WordAlignment, word_alignment
from mha_core.engine.audio import Clip, read_audio, speak
from mha_core.engine.bundled import WHISPER_NAME
from mha_core.engine.model import LoadedModel
from mha_core.engine.seq2seq import (
    KIND_NAMES,
    KINDS,
    Seq2SeqResult,
    encode,
    forward_seq2seq,
    target_batch,
    target_ids,
)
from mha_core.engine.tokens import tokenize
from mha_core.serving.computed import of
from mha_core.serving.server import Server
from mha_core.teaching.cross_steps import CrossSteps, cross_steps

OWN_NEW = 64  # pieces of the model's own output, at most
__all__ = ["KINDS", "KIND_NAMES", "WHISPER_NAME", "alignment_of", "clip_of", "digest", "heard_steps_of", "seq2seq_of",
           "spoken_of", "text_steps_of", "transcript_of"]


def seq2seq_of(server: Server, model: LoadedModel, source: str, target: str | None, path: str = "auto"
               ) -> Seq2SeqResult:
    """Every map of `source` and `target` (None: the model's own greedy output), once per server."""
    def compute() -> Seq2SeqResult:
        batch = tokenize(model.tokenizer, source, model.max_length)
        encoded = encode(model, batch, path)
        ids = list(decode(model, batch, OWN_NEW, encoded=encoded).ids) if target is None else target_ids(model, target)
        return forward_seq2seq(model, batch, target_batch(model, [ids]), path, encoded)

    return server.in_slot("results", ("seq2seq", of(model), source, target, path), compute)


def alignment_of(server: Server, model: LoadedModel, source: str, target: str | None, layer: int,
                 head: int | None) -> WordAlignment:
    key = ("alignment", of(model), source, target, layer, head)
    return server.kept("small", key, lambda: word_alignment(seq2seq_of(server, model, source, target), layer, head))


def digest(audio: bytes) -> str:
    return hashlib.sha256(audio).hexdigest()


def clip_of(server: Server, audio: bytes) -> Clip:
    """The clip of an upload or recording, read once per server (bad audio raises InputError: one sentence)."""
    return server.kept("small", ("clip", digest(audio)), lambda: read_audio(audio))


def transcript_of(server: Server, model: LoadedModel, audio: bytes, language: str | None) -> Transcript:
    """What Whisper hears in `audio`, with every map and the words' times, once per server and clip."""
    clip = clip_of(server, audio)
    return server.in_slot("results", ("transcript", of(model), digest(audio), language),
                          lambda: transcribe(model, clip, language=language))


def spoken_of(server: Server, text: str, language: str) -> bytes:
    """`text` spoken by espeak-ng, once per server."""
    return server.kept("small", ("spoken", text, language), lambda: speak(text, language))


def text_steps_of(server: Server, model: LoadedModel, source: str, target: str | None, layer: int, head: int
                  ) -> CrossSteps:
    """One cross-attention head of a text encoder–decoder, step by step."""
    key = ("cross steps", of(model), source, target, layer, head)
    return server.kept("small", key, lambda: cross_steps(model, seq2seq_of(server, model, source, target), layer,
                                                         head))


def heard_steps_of(server: Server, model: LoadedModel, audio: bytes, language: str | None, layer: int, head: int
                   ) -> CrossSteps:
    """One of Whisper's cross-attention heads over a clip, step by step."""
    key = ("heard steps", of(model), digest(audio), language, layer, head)
    return server.kept("small", key, lambda: cross_steps(model, transcript_of(server, model, audio, language).result,
                                                         layer, head))
