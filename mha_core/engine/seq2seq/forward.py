"""An encoder–decoder recomputed from its weights: the encoder over the source (text, or Whisper's audio frames),
then the decoder over the target pieces, each decoder layer cross-attending to the encoder's output.

Shapes: B texts, S source positions, T target pieces (the decoder's input: its start piece first), D d_model,
L_e / L_d encoder / decoder layers, H heads, Dh head dim.
Three kinds of maps come out, each on the explicit or the fused path: the encoder's self-attention (S×S), the
decoder's causal self-attention (T×T) and the cross-attention (T×S).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from mha_core.engine.attention import AUTO, padding_bias
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import Memory, forward
from mha_core.engine.hooks import NO_HOOKS, Hooks
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.pieces import readable_pieces
from mha_core.engine.result import AttentionResult
from mha_core.engine.seq2seq.cross import CrossAttention
from mha_core.engine.tokens import InputError, TextsLike, TokenBatch, ids_batch, tokenize
from mha_core.messages import N_

KINDS = ("encoder", "decoder", "cross")  # the three kinds of attention of an encoder–decoder
KIND_NAMES = {"encoder": N_("encoder self-attention"), "decoder": N_("decoder self-attention"),
              "cross": N_("cross-attention")}


@dataclass(frozen=True)
class Seq2SeqResult(Drawable):
    encoder: AttentionResult  # the source's self-attention: L_e x (B,H,S,S)
    decoder: AttentionResult  # the target's causal self-attention: L_d x (B,H,T,T); .cross: the cross-attention

    @property
    def cross(self) -> CrossAttention:
        """Each target piece over the source: L_d x (B,H,T,S)."""
        return self.decoder.cross

    @property
    def source_tokens(self) -> tuple[tuple[str, ...], ...]:
        return self.encoder.tokens

    @property
    def target_tokens(self) -> tuple[tuple[str, ...], ...]:
        return self.decoder.tokens

    def target_ids(self, b: int = 0) -> list[int]:
        """Text b's decoder input pieces, its start piece first."""
        return self.decoder.batch.input_ids[b, : self.decoder.lengths[b]].tolist()

    def text_maps(self, kind: str, b: int = 0) -> Tensor:
        """Text b's maps of one kind without padding: encoder (L_e,H,S_b,S_b), decoder (L_d,H,T_b,T_b) or cross
        (L_d,H,T_b,S_b)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        return self.cross.text_maps(b) if kind == "cross" else getattr(self, kind).text_maps(b)


def check_encoder_decoder(model: LoadedModel) -> None:
    if not model.encoder_decoder:
        raise InputError("needs_an_encoder_decoder", N_("{model} has no decoder that reads a source: a target text "
                                                        "needs an encoder–decoder (T5, BART, Marian, Whisper)."),
                         model=model.name)


def languages(model: LoadedModel) -> dict[str, int]:
    """A multilingual Whisper's language codes and their pieces ("en" -> <|en|>'s id); empty for other models."""
    table = getattr(getattr(model.model, "generation_config", None), "lang_to_id", None) or {}
    return {token.strip("<|>"): int(i) for token, i in table.items()}


TASKS = ("transcribe", "translate")  # Whisper's: write what is said, or its English translation


def decoder_prefix(model: LoadedModel, language: str | None = "en", task: str = "transcribe") -> list[int]:
    """The pieces every target starts with: Whisper's task prompt (start of transcript, the language where it is
    multilingual, the task: transcribe or translate into English, no timestamps), else the config's decoder start
    piece."""
    start = int(model.config.decoder_start_token_id)
    generation = getattr(model.model, "generation_config", None)
    tasks = getattr(generation, "task_to_id", None)
    if not model.decoder.arch.task_prompt or not tasks:
        return [start]
    language_ids = languages(model)
    if language is not None and language not in language_ids:
        raise InputError("unknown_language", N_("{model} knows no language {language!r}."), model=model.name,
                         language=str(language)[:20])
    chosen = [language_ids[language]] if language is not None else []
    if task not in TASKS:
        raise InputError("unknown_task", N_("Whisper's task is transcribe or translate, not {task!r}."),
                         task=str(task)[:20])
    return [start, *chosen, int(tasks[task]), int(generation.no_timestamps_token_id)]


def target_pieces(model: LoadedModel, text: str, language: str | None = "en") -> tuple[list[int], int]:
    """A target text as the decoder's input pieces: its prefix (start piece first), then the text's pieces (a
    Whisper transcript's with the space it starts with), cut to the decoder's window; and how many there were
    before the cut."""
    text = " " + text.strip() if model.decoder.arch.task_prompt else text
    pieces = decoder_prefix(model, language) + list(model.tokenizer(text_target=text,
                                                                     add_special_tokens=False)["input_ids"])
    return pieces[: model.decoder.max_length], len(pieces)


def target_ids(model: LoadedModel, text: str, language: str | None = "en") -> list[int]:
    """target_pieces' pieces, cut to the decoder's window."""
    return target_pieces(model, text, language)[0]


def target_batch(model: LoadedModel, sequences: Sequence[Sequence[int]], whole: Sequence[int] | None = None
                 ) -> TokenBatch:
    """Decoder input pieces (each its start piece first) as a padded batch; specials marked as no word; `whole`:
    each target's pieces before it was cut to the window (the result's `truncated` then says so)."""
    specials = set(model.tokenizer.all_special_ids)
    batch = ids_batch(model.tokenizer, sequences, [[i in specials for i in ids] for ids in sequences])
    labels = tuple(readable_pieces(model.tokenizer, list(ids), tokens) for ids, tokens in zip(sequences, batch.tokens,
                                                                                             strict=True))
    return replace(batch, labels=labels, n_tokens=tuple(whole) if whole is not None else batch.n_tokens)


def text_targets(model: LoadedModel, texts: Sequence[str], language: str | None = "en") -> TokenBatch:
    """Target texts as the decoder's batch, each cut to its window; the batch's n_tokens keep each one's pieces
    before the cut, so that the result's `truncated` says where a target was cut."""
    cut = [target_pieces(model, text, language) for text in texts]
    return target_batch(model, [ids for ids, _ in cut], [whole for _, whole in cut])


Encoded = tuple[AttentionResult, Memory]  # the encoder's result, and its output as the decoder reads it


def encode(model: LoadedModel, source: TokenBatch, path: str = AUTO, hooks: Hooks = NO_HOOKS) -> Encoded:
    """The encoder over the source; its output (after its final norm) as what the decoder cross-attends to.
    `hooks`: the encoder's hook points (hooks.py, "encoder.blocks.{l}…")."""
    encoded = forward(model, source, path, hooks=hooks)
    mask = source.attention_mask.to(model.device)
    bias = None if bool(mask.all()) else padding_bias(mask, encoded.last_hidden_state.dtype)  # (B,1,1,S)
    return encoded, Memory(encoded.last_hidden_state, bias)


@torch.inference_mode()
def forward_seq2seq(model: LoadedModel, source: TokenBatch, target: TokenBatch, path: str = AUTO,
                    encoded: Encoded | None = None, hooks: Hooks = NO_HOOKS) -> Seq2SeqResult:
    """Encoder and decoder on tokenized batches (row b of `target` is text b's decoder input); `encoded`: the
    source already encoded (encode(model, source, path)), reused rather than run again. `hooks` (hooks.py): the
    encoder's points are "encoder.blocks.{l}…", the decoder's "decoder.blocks.{l}…" (cross_attn among them)."""
    check_encoder_decoder(model)
    result, memory = encoded if encoded is not None else encode(model, source, path, hooks.at("encoder"))
    decoded = forward(model.decoder, target, path, memory=memory, source_mask=source.attention_mask,
                      hooks=hooks.at("decoder"))
    return Seq2SeqResult(result, decoded)


def run_seq2seq(model: LoadedModel, sources: TextsLike, targets: Sequence[str], path: str = AUTO) -> Seq2SeqResult:
    """Every map of an encoder–decoder for source texts and their targets (teacher forcing: the decoder reads
    each target after its start piece). Without a target, analysis/seq2seq/decode.py gives the model's own."""
    check_encoder_decoder(model)
    source = tokenize(model.tokenizer, sources, model.max_length)
    return forward_seq2seq(model, source, source_targets(model, source, targets), path)


def source_targets(model: LoadedModel, source: TokenBatch, targets: Sequence[str]) -> TokenBatch:
    """The decoder's batch of one target per source text (text_targets), or a sentence saying they do not pair."""
    if len(targets) != len(source.texts):
        raise InputError("one_target_per_source", N_("Give one target per source text ({n} sources, {m} targets)."),
                         n=len(source.texts), m=len(targets))
    return text_targets(model, targets)
