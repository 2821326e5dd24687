"""An encoder–decoder's own output, one piece at a time (translation, transcription): the encoder runs once; each
decoder layer's cross-attention keys and values are projected once from its output, and each step runs only the
new piece through the decoder, its self-attention reading the earlier pieces from the key/value cache
(engine/cache.py, the decoders' own), chosen by the decoders' sampling loop (generate.sampled). `fwd_hooks` run
in every forward: the encoder's points ("encoder.blocks.{l}…", where the source is encoded here) and the decoder's
at each step ("decoder.blocks.{l}…", cross_attn's keys and values once, where they are projected).

Shapes: L decoder layers, H heads, P pieces so far, S source positions, D d_model, Dh head dim, V vocabulary.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.analysis.lm.generate import GivesUp, Sampling, Step, check_settings, sampled
from mha_core.engine.attention import keys_values
from mha_core.engine.cache import prefill, step
from mha_core.engine.forward import Memory
from mha_core.engine.hooked import checked_hooks
from mha_core.engine.hooks import NO_HOOKS, HookFn, Hooks, NameFilter
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.seq2seq.forward import Encoded, check_encoder_decoder, decoder_prefix, encode, target_batch
from mha_core.engine.tokens import TokenBatch, tokenize
from mha_core.messages import N_

MAX_NEW = 224  # Whisper writes at most half its 448 positions per window
COMPRESSION_RATIO = 2.4  # openai-whisper's compression_ratio_threshold
REPEATS = N_("repeats itself")  # why a decode that gives up on a loop stopped (Decoded.stopped)


def compression_ratio(text: str) -> float:
    """The text's bytes over their zlib-compressed bytes: openai-whisper's sign of a decode caught in a loop (a
    sentence of ordinary words stays near 1; one phrase written over and over climbs past COMPRESSION_RATIO)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


@dataclass(frozen=True)
class Decoded:
    ids: tuple[int, ...]  # the decoder's input pieces: its prefix (start piece first), then the generated ones
    steps: tuple[Step, ...]  # one per generated piece (the last may be the end piece)
    text: str  # the generated pieces as text, specials left out
    stopped: str  # "end of text", "length", "model's limit" or REPEATS

    def as_json(self, model_name: str) -> dict:
        """As generate's: what was written, the decoder's input pieces, and each step's choice and probability."""
        return {"model": model_name, "text": self.text, "target_ids": list(self.ids), "stopped": self.stopped,
                "generated": [{"token": s.piece, "id": s.id, "prob": round(s.prob, 6)} for s in self.steps]}


def output_logits(model: LoadedModel, states: Tensor) -> Tensor:
    """(…,D) the decoder's final-normed states -> (…,V) logits: its output layer (T5 with tied embeddings scales
    the states by 1/√d_model first; BART and Marian add their final_logits_bias)."""
    full = model.model
    if getattr(model.config, "scale_decoder_outputs", False):
        states = states * model.decoder.d_model**-0.5
    logits = F.linear(states, full.get_output_embeddings().weight)
    bias = getattr(full, "final_logits_bias", None)
    return logits if bias is None else logits + bias[0]


def cross_keys_values(model: LoadedModel, memory: Memory, hooks: Hooks = NO_HOOKS) -> list[tuple[Tensor, Tensor]]:
    """Per decoder layer, its cross-attention's keys and values (B,H,S,Dh) of the encoder's output, projected once
    (through the decoder's cross_attn.hook_k and hook_v: `hooks` are the decoder's)."""
    kept = []
    for layer, w in enumerate(model.decoder.layers):
        point = hooks.block(layer).at("cross_attn")
        k, v = keys_values(w.cross_attention, memory.states)
        kept.append((point("hook_k", k, heads_first=True), point("hook_v", v, heads_first=True)))
    return kept


def suppressed(model: LoadedModel, first: bool) -> list[int]:
    """Pieces the model's configuration never lets it write (Whisper: suppress_tokens; begin_suppress_tokens at
    the first generated piece)."""
    ids = list(getattr(model.config, "suppress_tokens", None) or [])
    ids += list(getattr(model.config, "begin_suppress_tokens", None) or []) if first else []
    return [i for i in ids if i < model.decoder.embeddings.word.shape[0]]  # a config may name pieces past its own


def repeating(model: LoadedModel) -> GivesUp:
    """REPEATS once the text the steps write compresses above COMPRESSION_RATIO (sampled's gives_up)."""

    def gives_up(steps: Sequence[Step]) -> str | None:
        text = model.tokenizer.decode([s.id for s in steps], skip_special_tokens=True)
        return REPEATS if compression_ratio(text.strip()) > COMPRESSION_RATIO else None

    return gives_up


@torch.inference_mode()
def decode(model: LoadedModel, source: TokenBatch | str, new: int = 32, temperature: float = 0.0,
           top_k: int | None = None, seed: int = 0, prefix: list[int] | None = None,
           encoded: Encoded | None = None, stop_repeating: bool = False,
           fwd_hooks: Sequence[tuple[NameFilter, HookFn]] = ()) -> Decoded:
    """The model's output for `source` (a text, or the first text of a batch: Whisper's frames_batch): greedy at
    temperature 0, else sampled (the same seed, the same output); stops at the end piece, after `new` pieces, or at
    the decoder's limit. `prefix`: the decoder's first pieces (default: decoder_prefix, Whisper's task prompt or
    the start piece). `encoded`: the source already encoded (engine.seq2seq.encode), reused. `stop_repeating`: stop
    at the first piece where the text so far compresses above COMPRESSION_RATIO (stopped: REPEATS), the pieces up to
    there those of a decode that runs on: a loop written out to the limit says nothing more and costs a step a
    piece. `fwd_hooks`: (name or name filter, fn(tensor, hook)) pairs, as run_with_hooks takes them."""
    check_encoder_decoder(model)
    source = tokenize(model.tokenizer, source, model.max_length) if isinstance(source, str) else source
    check_settings(new, temperature, top_k, seed, max_new=MAX_NEW)
    hooks = checked_hooks(model, fwd_hooks)
    _, memory = encoded if encoded is not None else encode(model, source, hooks=hooks.at("encoder"))
    first = Memory(memory.states[:1], None if memory.bias is None else memory.bias[:1])  # the first text's
    decoder_hooks = hooks.at("decoder")
    memory = Memory(None, first.bias, cross_keys_values(model, first, decoder_hooks))
    ids = list(prefix or decoder_prefix(model))
    last, cache = prefill(model.decoder, target_batch(model, [ids]), memory, decoder_hooks)
    caches = [cache]

    def next_logits(state: Tensor, first_step: bool) -> Tensor:  # (1,D) final state -> (V,), less what it may not write
        logits = output_logits(model, state)[0].float()
        logits[suppressed(model, first_step)] = float("-inf")
        return logits

    def advance(grown: list[int]) -> Tensor:
        state, caches[0] = step(model.decoder, grown[-1], len(grown), caches[0], memory, decoder_hooks)
        return next_logits(state, False)

    steps, stopped = sampled(model, ids, next_logits(last, True), advance, Sampling(new, temperature, top_k, seed),
                             {model.config.eos_token_id}, model.decoder.max_length,
                             repeating(model) if stop_repeating else None)
    text = model.tokenizer.decode([s.id for s in steps], skip_special_tokens=True)
    return Decoded(tuple(ids), tuple(steps), text.strip(), stopped)
