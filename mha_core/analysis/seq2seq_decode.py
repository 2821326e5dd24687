"""An encoder–decoder's own output, one piece at a time (translation, transcription): the encoder runs once; each
decoder layer's cross-attention keys and values are projected once from its output, and each step runs only the
new piece through the decoder, its self-attention reading the earlier pieces from the key/value cache.

Shapes: L decoder layers, H heads, P pieces so far, S source positions, D d_model, Dh head dim, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.analysis.generate import Step, check_settings, choose, step_of
from mha_core.engine.attention import EXPLICIT, keys_values
from mha_core.engine.forward import Memory, embed, final_norm, layer_biases, layer_outputs, position_ids, prepare
from mha_core.engine.model import LoadedModel
from mha_core.engine.seq2seq import Encoded, check_encoder_decoder, decoder_prefix, encode, target_batch
from mha_core.engine.tokens import TokenBatch, tokenize
from mha_core.i18n import N_

MAX_NEW = 224  # Whisper writes at most half its 448 positions per window
Cache = list[tuple[Tensor, Tensor]]  # L x (keys (1,H,P,Dh), values (1,H,P,Dh))


@dataclass(frozen=True)
class Decoded:
    ids: tuple[int, ...]  # the decoder's input pieces: its prefix (start piece first), then the generated ones
    steps: tuple[Step, ...]  # one per generated piece (the last may be the end piece)
    text: str  # the generated pieces as text, specials left out
    stopped: str  # "end of text", "length" or "model's limit"

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


def cross_keys_values(model: LoadedModel, memory: Memory) -> list[tuple[Tensor, Tensor]]:
    """Per decoder layer, its cross-attention's keys and values (B,H,S,Dh) of the encoder's output, projected once."""
    return [keys_values(w.cross_attention, memory.states) for w in model.decoder.layers]


def first_pass(model: LoadedModel, prefix: list[int], memory: Memory) -> tuple[Tensor, Cache]:
    """The prefix through the decoder: the last piece's output (1,D) and each layer's self-attention cache."""
    decoder = model.decoder
    x, bias, _ = prepare(decoder, target_batch(model, [prefix]))
    cache, out = [], x
    for out, attn in layer_outputs(decoder, x, bias, None, EXPLICIT, memory=memory):  # noqa: B007 -- the last's
        cache.append((attn.k, attn.v))
    return out[:, -1], cache


def cached_step(model: LoadedModel, token: int, length: int, cache: Cache, memory: Memory) -> tuple[Tensor, Cache]:
    """One new piece at position `length - 1` through the decoder, the earlier ones read from `cache`."""
    decoder = model.decoder
    mask = torch.ones(1, length, dtype=torch.long, device=model.device)
    positions = position_ids(mask, decoder.arch)[:, -1:]  # (1,1)
    x = embed(decoder.embeddings, torch.tensor([[token]], device=model.device), positions)  # (1,1,D)
    bias = layer_biases(decoder, mask, x.dtype, past=length - 1) if decoder.arch.relative_bias else None
    new_cache, out = [], x
    for out, attn in layer_outputs(decoder, x, bias, None, EXPLICIT, past=cache, memory=memory):  # noqa: B007
        new_cache.append((attn.k, attn.v))
    return out[:, -1], new_cache


def suppressed(model: LoadedModel, first: bool) -> list[int]:
    """Pieces the model's configuration never lets it write (Whisper: suppress_tokens; begin_suppress_tokens at
    the first generated piece)."""
    ids = list(getattr(model.config, "suppress_tokens", None) or [])
    ids += list(getattr(model.config, "begin_suppress_tokens", None) or []) if first else []
    return [i for i in ids if i < model.decoder.embeddings.word.shape[0]]  # a config may name pieces past its own


@torch.inference_mode()
def decode(model: LoadedModel, source: TokenBatch | str, new: int = 32, temperature: float = 0.0,
           top_k: int | None = None, seed: int = 0, prefix: list[int] | None = None,
           encoded: Encoded | None = None) -> Decoded:
    """The model's output for `source` (a text, or the first text of a batch: Whisper's frames_batch): greedy at
    temperature 0, else sampled (the same seed, the same output); stops at the end piece, after `new` pieces, or at
    the decoder's limit. `prefix`: the decoder's first pieces (default: decoder_prefix, Whisper's task prompt or
    the start piece). `encoded`: the source already encoded (engine.seq2seq.encode), reused."""
    check_encoder_decoder(model)
    source = tokenize(model.tokenizer, source, model.max_length) if isinstance(source, str) else source
    check_settings(new, temperature, top_k, seed, max_new=MAX_NEW)
    _, memory = encoded if encoded is not None else encode(model, source)
    first = Memory(memory.states[:1], None if memory.bias is None else memory.bias[:1])  # the first text's
    memory = Memory(None, first.bias, cross_keys_values(model, first))
    ids = list(prefix or decoder_prefix(model))
    generator, steps, stopped = torch.Generator().manual_seed(seed), [], N_("length")
    last, cache = first_pass(model, ids, memory)
    end = model.config.eos_token_id
    for step in range(new):
        logits = output_logits(model, final_norm(model.decoder, last))[0].float()  # (V,)
        logits[suppressed(model, step == 0)] = float("-inf")
        token = choose(logits, temperature, top_k, generator)
        steps.append(step_of(model, logits, token))
        ids.append(token)
        if token == end:
            stopped = N_("end of text")
            break
        if len(ids) >= model.decoder.max_length:
            stopped = N_("model's limit")
            break
        last, cache = cached_step(model, token, len(ids), cache, memory)
    text = model.tokenizer.decode([s.id for s in steps], skip_special_tokens=True)
    return Decoded(tuple(ids), tuple(steps), text.strip(), stopped)
