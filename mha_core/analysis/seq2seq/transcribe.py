"""Whisper hears a clip: its language (the most likely language piece after the start of transcript, unless given),
its transcript (greedy, with the caches), every map of the clip and transcript, the alignment heads found from
those maps, and each word's start and end.

Shapes: L decoder layers, H heads, P prompt pieces, T written pieces, S encoder positions (20 ms each).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import torch

from mha_core.analysis.seq2seq.alignment import (
    HeadScores,
    Word,
    loud_positions,
    score_heads,
    word_timestamps,
)
from mha_core.analysis.seq2seq.decode import (
    COMPRESSION_RATIO,
    REPEATS,
    Decoded,
    compression_ratio,
    decode,
    output_logits,
)
from mha_core.engine.cache import prefill
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import Memory
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.seq2seq.audio import RATE, Clip, model_log_mel
from mha_core.engine.seq2seq.forward import (
    Seq2SeqResult,
    decoder_prefix,
    encode,
    forward_seq2seq,
    languages,
    target_batch,
)
from mha_core.engine.seq2seq.frames import clip_positions, frames_batch
from mha_core.engine.tokens import InputError
from mha_core.engine.words import simplified
from mha_core.messages import N_

UNSPACED = ("zh", "ja", "th", "lo", "my", "yue")  # written without spaces: every character a word
SIMPLIFIED = ("zh",)  # shown in Simplified characters (Cantonese, yue, keeps Traditional ones)
MAX_WRITTEN = 224


@dataclass(frozen=True)
class Transcript(Drawable):
    text: str  # Chinese in Simplified characters (text_as_written: as the decoder wrote it)
    language: str
    decoded: Decoded  # the decoder's input pieces (prompt, text, end) and each step's choice
    prompt_length: int  # P: the prompt's pieces (start of transcript, language, task, no timestamps)
    result: Seq2SeqResult  # every map of the clip (encoder), the transcript (decoder) and between them (cross)
    heads: HeadScores  # every cross-attention head scored; the alignment heads found, and the published ones
    words: tuple[Word, ...]  # empty without timestamps (Chinese words in Simplified characters, as `text`)
    seconds: float  # the clip's length (speech; the window after it is silence)
    text_as_written: str = ""  # the decoder's own characters (differs from `text` where it wrote Traditional ones)
    task: str = "transcribe"  # or "translate": `text` is then the English translation of what is said

    @property
    def compression_ratio(self) -> float:
        """The text's bytes over their zlib-compressed bytes: openai-whisper's sign of a decode caught in a loop."""
        return compression_ratio(self.text)

    @property
    def repeats_itself(self) -> bool:
        """The decoder looped (openai-whisper retries such a decode above COMPRESSION_RATIO; here it is said, and
        the decode stopped where its text first compressed that far: decoded.stopped is REPEATS)."""
        return self.stopped_repeating or self.compression_ratio > COMPRESSION_RATIO

    @property
    def stopped_repeating(self) -> bool:
        """The decode stopped where its text first compressed above COMPRESSION_RATIO, not at its end or limit."""
        return self.decoded.stopped == REPEATS

    @property
    def speech_positions(self) -> int:
        """The encoder positions that hold the clip (the rest of the 30-second window is padding silence)."""
        return clip_positions(self.seconds, self.result.encoder.lengths[0])

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "text": self.text, "text_as_written": self.text_as_written,
                "language": self.language, "task": self.task, "stopped": self.decoded.stopped,
                "compression_ratio": round(self.compression_ratio, 3),
                "words": [{"word": w.word, "start": w.start, "end": w.end} for w in self.words],
                "alignment_heads": [list(h) for h in self.heads.found],
                "published_alignment_heads": [list(h) for h in self.heads.published]}


def published_heads(model: LoadedModel) -> tuple[tuple[int, int], ...]:
    """The alignment heads the model's package lists (alignment_heads.json, or its generation config)."""
    listed = model.model_dir / "alignment_heads.json"
    heads = json.loads(listed.read_text(encoding="utf-8")) if listed.is_file() else getattr(
        getattr(model.model, "generation_config", None), "alignment_heads", None) or []
    return tuple((int(layer), int(head)) for layer, head in heads)


def detect_language(model: LoadedModel, memory: Memory) -> str:
    """The language whose piece is most likely right after the start of transcript."""
    codes = languages(model)
    if not codes:
        return "en"
    last, _ = prefill(model.decoder, target_batch(model, [[int(model.config.decoder_start_token_id)]]), memory)
    logits = output_logits(model, last)[0]  # (V,)
    ids = torch.tensor(list(codes.values()))
    return list(codes)[int(logits[ids].argmax())]


def timing_heads(heads: HeadScores, model: LoadedModel) -> tuple[tuple[int, int], ...]:
    """The heads word times are read from: the published alignment heads where the model has them (as
    openai-whisper reads them: one clip's found heads can be few), else those found, else the last layer's."""
    last = model.decoder.n_layers - 1
    return heads.published or heads.found or tuple((last, h) for h in range(model.decoder.n_heads))


def unicode_units(tokenizer: object, ids: list[int]) -> list[tuple[str, tuple[int, ...]]]:
    """The written pieces as whole characters: a piece holding part of a character's bytes joins the next ones
    until the text decodes (openai-whisper's split_tokens_on_unicode)."""
    units, pending = [], []
    for i in range(len(ids)):
        pending.append(i)
        text = tokenizer.decode([ids[j] for j in pending])
        if "\ufffd" not in text or i == len(ids) - 1:
            units.append((text, tuple(pending)))
            pending = []
    return units


@torch.inference_mode()
def transcribe(model: LoadedModel, clip: Clip, language: str | None = None, timestamps: bool = True,
               path: str = "auto", task: str = "transcribe") -> Transcript:
    """Transcribe `clip` (its language detected unless given), with every map and, with `timestamps`, each word's
    times from the alignment heads found in those maps. `task="translate"`: Whisper writes what is said in English
    (its own translation), and the cross-attention aligns the English words with the speech."""
    if not model.arch.audio:
        raise InputError("transcribe_needs_whisper", N_("{model} does not hear audio: choose a Whisper model."),
                         model=model.name)
    source = frames_batch(model_log_mel(model, clip))
    encoded = encode(model, source, path)  # once: the language, the transcript and the maps all read it
    if language is None:
        language = detect_language(model, encoded[1])
    prompt = decoder_prefix(model, language, task)
    decoded = decode(model, source, new=MAX_WRITTEN, prefix=prompt, encoded=encoded, stop_repeating=True)
    result = forward_seq2seq(model, source, target_batch(model, [list(decoded.ids)]), path, encoded)
    written = list(decoded.ids[len(prompt):])
    written = written[:-1] if written and written[-1] == model.config.eos_token_id else written
    n = clip_positions(clip.seconds, result.encoder.lengths[0])
    rows = result.text_maps("cross", 0).numpy()[:, :, len(prompt) - 1: len(prompt) + len(written), :n]
    heads = score_heads(rows, published_heads(model))
    words, written_in = (), "en" if task == "translate" else language
    if timestamps and written:
        chosen = timing_heads(heads, model)
        units = unicode_units(model.tokenizer, written)
        loud = loud_positions(clip.samples, RATE, rows.shape[-1])
        words = word_timestamps(rows, chosen, units, written_in not in UNSPACED, loud)
    if written_in in SIMPLIFIED:
        words = tuple(replace(w, word=simplified(w.word)) for w in words)
    text = simplified(decoded.text) if written_in in SIMPLIFIED else decoded.text
    return Transcript(text, language, decoded, len(prompt), result, heads, words, clip.seconds, decoded.text, task)


def speech_rows(transcript: Transcript) -> np.ndarray:
    """(L,H,T+1,S_speech) the cross-attention rows that write the transcript, over the speech's positions."""
    p = transcript.prompt_length
    return transcript.result.text_maps("cross", 0).numpy()[:, :, p - 1:, : transcript.speech_positions]
