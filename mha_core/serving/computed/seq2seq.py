"""The computations the Encoder–decoder page asks for, each by name (as serving.computed): an encoder–decoder's
three kinds of maps for a source and target, Whisper's transcript of a clip, and a typed sentence spoken; and what
the pages that read one sentence ask of an encoder–decoder (the sentence as its source, Whisper hearing it spoken:
heard_of; its cross-attention heads scored; what it writes, step by step).
Stores (serving.memory.STORES): "results" forwards and transcripts, "small" spoken audio."""

from __future__ import annotations

from mha_core.analysis.heads.roles import HeadRoles, head_roles
from mha_core.analysis.long.text import HeadSummaries, head_summaries
from mha_core.analysis.seq2seq.alignment import HeadScores, score_heads
from mha_core.analysis.seq2seq.decode import Decoded, decode
from mha_core.analysis.seq2seq.transcribe import Transcript, transcribe
from mha_core.analysis.seq2seq.word_alignment import WordAlignment, word_alignment
from mha_core.engine.loading.bundled import WHISPER_NAME
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.seq2seq.audio import Clip, read_audio, span, speak, wav_bytes
from mha_core.engine.seq2seq.forward import (
    KIND_NAMES,
    KINDS,
    Seq2SeqResult,
    encode,
    forward_seq2seq,
    target_batch,
    text_targets,
)
from mha_core.engine.tokens import tokenize, without_spaces
from mha_core.messages import N_
from mha_core.serving.computed.text import digest, of
from mha_core.serving.server import Server, Wait
from mha_core.teaching.seq2seq_steps import CrossSteps, cross_steps

OWN_NEW = 64  # pieces of the model's own output, at most
__all__ = ["KINDS", "KIND_NAMES", "WHISPER_NAME", "clip_of", "cross_alignment_of", "cross_scores_of", "decoded_of",
           "digest", "frame_summaries_of", "heard_of", "heard_steps_of", "read_steps_of", "seq2seq_of", "spoken_of",
           "text_steps_of", "transcript_of", "word_audio_of", "decoder_roles_of", "spoken_frame_summaries_of"]


def seq2seq_of(server: Server, model: LoadedModel, source: str, target: str | None, path: str = "auto"
               ) -> Seq2SeqResult:
    """Every map of `source` and `target` (None: the model's own greedy output), once per server."""
    def compute() -> Seq2SeqResult:
        batch = tokenize(model.tokenizer, source, model.max_length)
        encoded = encode(model, batch, path)
        targets = (target_batch(model, [list(decode(model, batch, OWN_NEW, encoded=encoded).ids)]) if target is None
                   else text_targets(model, [target]))
        return forward_seq2seq(model, batch, targets, path, encoded)

    return server.in_slot("results", ("seq2seq", of(model), source, target, path), compute)


def cross_alignment_of(server: Server, model: LoadedModel, source: str, target: str | None, layer: int,
                       head: int | None) -> WordAlignment:
    """The target's words aligned to the source's by one decoder head's cross-attention (None: the layer's mean)."""
    key = ("alignment", of(model), source, target, layer, head)
    return server.kept("small", key, lambda: word_alignment(seq2seq_of(server, model, source, target), layer, head))


def clip_of(server: Server, audio: bytes) -> Clip:
    """The clip of an upload or recording, read once per server (bad audio raises InputError: one sentence)."""
    return server.kept("small", ("clip", digest(audio)), lambda: read_audio(audio))


def word_audio_of(server: Server, audio: bytes, start: float, end: float) -> bytes:
    """A word's own samples, from `start` to `end` seconds of the clip Whisper heard, as a short WAV (a player's
    start and end times round to whole seconds: 1.34–1.62 s would play 1–3 s)."""
    return server.kept("small", ("word audio", digest(audio), start, end),
                       lambda: wav_bytes(span(clip_of(server, audio), start, end)))


def transcript_of(server: Server, model: LoadedModel, audio: bytes, language: str | None,
                  task: str = "transcribe") -> Transcript:
    """What Whisper hears in `audio` (task "translate": what it writes of it in English), with every map and the
    words' times, once per server, clip and task."""
    clip = clip_of(server, audio)
    return server.in_slot("results", ("transcript", of(model), digest(audio), language, task),
                          lambda: transcribe(model, clip, language=language, task=task))


def frame_summaries_of(server: Server, model: LoadedModel, audio: bytes, language: str | None, wait: Wait
                       ) -> HeadSummaries:
    """Every one of Whisper's encoder heads summarised over its window's positions (1,500: the long-text machinery,
    a band of rows at a time from q, k and the log-sum-exp), through the heavy-work queue with progress."""
    def compute(progress: object) -> HeadSummaries:
        return head_summaries(transcript_of(server, model, audio, language).result.encoder, progress=progress)

    return server.queued("long", ("frame summaries", of(model), digest(audio), language),
                         N_("Summarising every encoder head over the frames"), compute, wait)


def spoken_of(server: Server, text: str, language: str) -> bytes:
    """`text` spoken by espeak-ng, once per server."""
    return server.kept("small", ("spoken", text, language), lambda: speak(text, language))


def text_steps_of(server: Server, model: LoadedModel, source: str, target: str | None, layer: int, head: int
                  ) -> CrossSteps:
    """One cross-attention head of a text encoder–decoder, step by step."""
    key = ("cross steps", of(model), source, target, layer, head)
    return server.kept("small", key, lambda: cross_steps(model, seq2seq_of(server, model, source, target), layer,
                                                         head))


def heard_steps_of(server: Server, model: LoadedModel, audio: bytes, language: str | None, layer: int, head: int,
                   task: str = "transcribe") -> CrossSteps:
    """One of Whisper's cross-attention heads over a clip, step by step."""
    key = ("heard steps", of(model), digest(audio), language, layer, head, task)
    return server.kept("small", key, lambda: cross_steps(
        model, transcript_of(server, model, audio, language, task).result, layer, head))


# An encoder–decoder on a page that reads one sentence: the sentence is its source (Whisper hears it spoken)


def spoken_language(text: str) -> str:
    """The espeak-ng voice, and the language Whisper is told it hears, for a typed sentence: Mandarin for text
    written without spaces (Chinese), else English."""
    return "zh" if without_spaces(text) else "en"


def heard_of(server: Server, model: LoadedModel, text: str) -> Transcript:
    """Whisper hearing `text` spoken by espeak-ng, once per server."""
    language = spoken_language(text)
    return transcript_of(server, model, spoken_of(server, text, language), language)


def decoder_roles_of(server: Server, model: LoadedModel, text: str) -> HeadRoles:
    """The roles of the decoder's self-attention heads over what it writes for `text` (Whisper: what it hears of
    `text` spoken): previous-piece heads, heads resting on the start piece, and the other patterns."""
    def compute() -> HeadRoles:
        result = heard_of(server, model, text).result if model.arch.audio else seq2seq_of(server, model, text, None)
        return head_roles(result.decoder)

    return server.kept("small", ("decoder roles", of(model), text), compute)


def spoken_frame_summaries_of(server: Server, model: LoadedModel, text: str, wait: Wait) -> HeadSummaries:
    """Every encoder head summarised over the frames of `text` spoken (the Roles page's encoder view)."""
    language = spoken_language(text)
    return frame_summaries_of(server, model, spoken_of(server, text, language), language, wait)


def cross_scores_of(server: Server, model: LoadedModel, text: str) -> HeadScores:
    """Every cross-attention head scored as an alignment head (analysis.alignment.score_heads) on `text`: Whisper's
    over the speech's frames, a text model's over the source's pieces."""
    if model.arch.audio:
        return heard_of(server, model, text).heads
    return server.kept("small", ("cross scores", of(model), text),
                       lambda: score_heads(seq2seq_of(server, model, text, None).text_maps("cross").numpy()))


def decoded_of(server: Server, model: LoadedModel, text: str, new: int, temperature: float, top_k: int | None,
               seed: int) -> Decoded:
    """What an encoder–decoder writes for `text`, piece by piece with each step's alternatives (Whisper: what it
    writes on hearing it, greedy, as transcribed)."""
    if model.arch.audio:
        return heard_of(server, model, text).decoded
    key = ("decoded", of(model), text, new, temperature, top_k, seed)
    return server.in_slot("small", key, lambda: decode(model, text, new, temperature, top_k, seed))


def read_steps_of(server: Server, model: LoadedModel, text: str, layer: int, head: int) -> CrossSteps:
    """One cross-attention head step by step on `text`: a text model's source, or the sentence Whisper hears."""
    if model.arch.audio:
        language = spoken_language(text)
        return heard_steps_of(server, model, spoken_of(server, text, language), language, layer, head)
    return text_steps_of(server, model, text, None, layer, head)
