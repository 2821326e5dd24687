"""What the model predicts, and which parts of it write that prediction (issue 21).

- Predictions: the next-token distribution at a position, through the language-model head.
- Logit lens (nostalgebraist 2020): the residual stream after every layer through the final norm and the
  unembedding, as if the model stopped there.
- Direct logit attribution (Elhage et al. 2021): each head's, each MLP's and the embeddings' direct share of
  logit(answer) - logit(wrong) at a position, with the final norm's scale frozen at its value on the full
  residual stream (as TransformerLens does), so that the shares add up to the logit difference.

Shapes: L layers, H heads, T pieces, D d_model, Dh head dim, V vocabulary, K top tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.coref.sentence import Word, with_probe
from mha_core.analysis.lm.choices import TOP_K
from mha_core.analysis.lm.head import answer_slot, check_lm_head, chosen_position, lm_head, read_at, token_id
from mha_core.engine.attention import EXPLICIT
from mha_core.engine.budget import planned_bytes
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import final_norm, last_output, layer_outputs, prepare
from mha_core.engine.hooks import Reader, hooks_of, is_point
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import json_floats
from mha_core.engine.tokens import InputError, TokenBatch, readable_pieces, tokenize_ending, without_spaces
from mha_core.i18n import tr
from mha_core.messages import N_


@dataclass(frozen=True)
class Stream:
    """One text's residual stream, layer by layer (explicit path)."""

    batch: TokenBatch
    tokens: tuple[str, ...]  # T readable pieces
    inputs: tuple[Tensor, ...]  # L+1 x (T,D): layer l's input; the last is the last layer's output (before the norm)
    contexts: tuple[Tensor, ...]  # L x (H,T,Dh): each head's output before W_O
    attn_out: tuple[Tensor, ...]  # L x (T,D): what attention adds to the stream (W_O, b_O; Gemma: its post-norm)
    last_maps: Tensor  # (H,T,T) the last layer's attention maps

    @property
    def left_out(self) -> int:
        """Pieces of a text over the model's limit left out before the ones read (tokens.tokenize_ending)."""
        return self.batch.left_out[0] if self.batch.left_out else 0

    def mlp_out(self, layer: int) -> Tensor:
        """(T,D) what layer's MLP adds to the stream (pre-norm layers: output = input + attention + MLP)."""
        return self.inputs[layer + 1] - self.inputs[layer] - self.attn_out[layer]


@torch.inference_mode()
def residual_stream(model: LoadedModel, text: str) -> Stream:
    head = lm_head(model)
    batch = tokenize_ending(model.tokenizer, text, model.max_length, model.bos_id, bool(head and head.masked))
    x, bias, rope = prepare(model, batch)  # (1,T,D)
    contexts: list[Tensor] = []  # read at blocks.{l}.attn.hook_z
    inputs, attn_out = [x[0]], []  # read at blocks.{l}.hook_resid_post and blocks.{l}.hook_attn_out
    hooks = hooks_of([(is_point("attn.hook_z"), Reader(lambda z, _: contexts.append(z[0].transpose(0, 1)))),
                      (is_point("hook_attn_out"), Reader(lambda out, _: attn_out.append(out[0]))),
                      (is_point("hook_resid_post"), Reader(lambda out, _: inputs.append(out[0])))])
    attn = last_output(layer_outputs(model, x, bias, rope, EXPLICIT, hooks=hooks))[1]
    return Stream(batch, tuple(readable_pieces(model.tokenizer, batch.input_ids[0].tolist(), batch.tokens[0])),
                  tuple(inputs), tuple(contexts), tuple(attn_out), attn.probs[0])


@dataclass(frozen=True)
class Prediction(Drawable):
    tokens: tuple[str, ...]  # T pieces of the text
    position: int  # the piece whose next piece is predicted
    top_ids: tuple[int, ...]  # K
    top_pieces: tuple[str, ...]  # K
    top_probs: tuple[float, ...]  # K
    logits: np.ndarray  # (V,) at the position
    masked: bool = False  # the pieces fill in the position (a masked-LM head) rather than follow it
    left_out: int = 0  # pieces of a text over the model's limit left out before the ones read (none at the end)

    @property
    def title(self) -> str:
        preposition, _, several = read_at(self.masked)
        return tr("{preposition} '{piece}' (position {position}): the {count} most likely {several}",
                  preposition=preposition[:1].upper() + preposition[1:], piece=self.tokens[self.position],
                  position=self.position, count=len(self.top_ids), several=several)

    def rank_of(self, token: int) -> tuple[int, float]:
        """(rank from 1, probability) of any token at the position."""
        probs = torch.from_numpy(self.logits).softmax(-1)
        return int((probs > probs[token]).sum()) + 1, float(probs[token])

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "tokens": list(self.tokens), "position": self.position, "left_out": self.left_out,
                "top": [{"token": p, "id": i, "prob": round(q, 6)}
                        for p, i, q in zip(self.top_pieces, self.top_ids, self.top_probs, strict=True)]}


def pieces_of(model: LoadedModel, ids: Sequence[int]) -> tuple[str, ...]:
    ids = [int(i) for i in ids]
    return readable_pieces(model.tokenizer, ids, model.tokenizer.convert_ids_to_tokens(ids))


@torch.inference_mode()
def predict(model: LoadedModel, text: str, position: int | None = None, k: int = TOP_K) -> Prediction:
    """The k most likely next pieces after `position` (default: the last piece)."""
    head = check_lm_head(model)
    stream = residual_stream(model, text)
    position = chosen_position(model, stream.batch, position)
    logits = head(final_norm(model, stream.inputs[-1][position]))  # (V,)
    probs = logits.softmax(-1)
    top = probs.topk(min(k, probs.shape[-1]))
    ids = top.indices.tolist()
    return Prediction(stream.tokens, position, tuple(ids), pieces_of(model, ids), tuple(top.values.tolist()),
                      logits.float().numpy(), head.masked, stream.left_out)


@dataclass(frozen=True)
class LogitLens(Drawable):
    tokens: tuple[str, ...]  # T
    top_ids: np.ndarray  # (L,T) each layer's most likely next piece at each position
    top_probs: np.ndarray  # (L,T)
    final_probs: np.ndarray  # (L,T) probability of the last layer's answer at that position
    top_pieces: tuple[tuple[str, ...], ...]  # L x T
    masked: bool = False  # a masked-LM head: each cell fills in its own position
    left_out: int = 0  # as Prediction.left_out

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "tokens": list(self.tokens), "left_out": self.left_out,
                "top_id": self.top_ids.tolist(),
                "top_prob": json_floats(self.top_probs), "final_prob": json_floats(self.final_probs)}


LENS_BLOCK_ELEMENTS = 2**25  # logits computed at once at most (128 MB in float32): layers in blocks, never (L,T,V)
LOGIT_COPIES = 4  # a block's logits, their exp inside logsumexp, the soft-cap's and the max's temporaries


def lens_block_elements() -> int:
    """Logits made at once: LENS_BLOCK_ELEMENTS, fewer where the memory budget is smaller."""
    return max(1, min(LENS_BLOCK_ELEMENTS, planned_bytes() // (4 * LOGIT_COPIES)))


@torch.inference_mode()
def logit_lens(model: LoadedModel, text: str) -> LogitLens:
    """Every layer's output through the final norm and the unembedding, in blocks of layers and positions of at most
    lens_block_elements() logits (a vocabulary of 262,144 makes one layer of 1,024 positions a GB); each cell keeps
    its top piece, that piece's probability and the final answer's, from the logits and their log-sum-exp."""
    head = check_lm_head(model)
    stream = residual_stream(model, text)
    states = final_norm(model, torch.stack(stream.inputs[1:]))  # (L,T,D)
    n_layers, n = states.shape[:2]
    block = lens_block_elements()
    positions = max(1, min(n, block // head.w_u.shape[0]))  # per block, with `layers` layers
    layers = max(1, block // (positions * head.w_u.shape[0]))
    top, lse = torch.empty(n_layers, n), torch.empty(n_layers, n)
    ids, picked = torch.empty(n_layers, n, dtype=torch.long), torch.empty(n_layers, n)
    answer = torch.empty(n, dtype=torch.long)  # the last layer's top piece: every layer is read at it
    for stop in range(n_layers, 0, -layers):  # the last layer first
        for start in range(0, n, positions):
            rows, cols = slice(max(0, stop - layers), stop), slice(start, start + positions)
            logits = head(states[rows, cols]).float()  # (b,t,V)
            best = logits.max(-1)
            if stop == n_layers:
                answer[cols] = best.indices[-1]
            top[rows, cols], ids[rows, cols], lse[rows, cols] = best.values, best.indices, logits.logsumexp(-1)
            picked[rows, cols] = logits.gather(-1, answer[cols][None, :, None].expand(len(logits), -1, 1))[..., 0]
            del logits, best
    pieces = tuple(pieces_of(model, row.tolist()) for row in ids)
    return LogitLens(stream.tokens, ids.numpy(), (top - lse).exp().numpy(), (picked - lse).exp().numpy(), pieces,
                     head.masked, stream.left_out)


@dataclass(frozen=True)
class LayerEffect:
    """What one layer does to the prediction at a position: the stream entering it, after its attention (pre-norm
    layers: input + attention's output) and leaving it, each read through the final norm and the head."""

    layer: int
    position: int
    piece: str  # the piece at the position
    answer: str  # the model's final top piece at the position
    stages: tuple[str, ...]  # S names
    top: tuple[tuple[tuple[str, float], ...], ...]  # S x K (piece, probability)
    answer_probs: tuple[float, ...]  # S: the final answer's probability at each stage


STAGES = (N_("entering the layer"), N_("after its attention"), N_("leaving the layer (after its MLP)"))


@torch.inference_mode()
def layer_effect(model: LoadedModel, text: str, layer: int, position: int | None = None, k: int = 5) -> LayerEffect:
    head = check_lm_head(model)
    stream = residual_stream(model, text)
    p = chosen_position(model, stream.batch, position)
    x, out = stream.inputs[layer][p], stream.inputs[layer + 1][p]  # (D,) each
    pre_norm = model.embeddings.final_norm is not None  # a post-norm layer's stream after attention is not x + attn
    states, names = ([x, x + stream.attn_out[layer][p], out], STAGES) if pre_norm else ([x, out], STAGES[::2])
    probs = head(final_norm(model, torch.stack(states))).float().softmax(-1)  # (S,V)
    answer = int(head(final_norm(model, stream.inputs[-1][p])).argmax())
    tops = probs.topk(k)
    top = tuple(tuple(zip(pieces_of(model, ids.tolist()), values.tolist(), strict=True))
                for ids, values in zip(tops.indices, tops.values, strict=True))
    return LayerEffect(layer, p, stream.tokens[p], pieces_of(model, [answer])[0], names, top,
                       tuple(probs[:, answer].tolist()))


@dataclass(frozen=True)
class Attribution(Drawable):
    position: int
    answer: str
    wrong: str | None
    heads: np.ndarray  # (L,H) each head's direct share of the logit difference
    mlps: np.ndarray  # (L,)
    embeddings: float
    biases: float  # every layer's attention output bias, plus the final norm's bias
    logit_diff: float  # logit(answer) - logit(wrong) (or logit(answer)) as the model computes it
    left_out: int = 0  # as Prediction.left_out

    @property
    def total(self) -> float:
        return float(self.heads.sum() + self.mlps.sum() + self.embeddings + self.biases)

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "position": self.position, "heads": json_floats(self.heads),
                "mlps": json_floats(self.mlps), "rest": round(self.embeddings + self.biases, 6),
                "embeddings": round(self.embeddings, 6), "biases": round(self.biases, 6),
                "logit_diff": round(self.logit_diff, 6), "left_out": self.left_out}


def frozen_norm_readout(model: LoadedModel, x_final: Tensor, direction: Tensor) -> tuple[Tensor, float]:
    """(D,) the vector a component c (D,) is read by, c · r, under the final norm frozen at its value on the whole
    stream x_final (D,); and the norm's own bias term. LayerNorm centres c too (linear), RMSNorm only scales."""
    norm = model.embeddings.final_norm
    x = x_final.float()
    centred = x if norm.rms else x - x.mean()
    scale = torch.rsqrt(centred.pow(2).mean() + norm.eps)
    readout = scale * norm.gain.float() * direction.float()  # (D,)
    if not norm.rms:
        readout = readout - readout.mean()  # c · r for the centred c, (c - mean c) · r' = c · (r' - mean r')
    return readout, float(norm.bias.float() @ direction.float()) if norm.bias is not None else 0.0


def head_shares(model: LoadedModel, stream: Stream, layer: int, p: int, readout: Tensor) -> tuple[Tensor, float]:
    """(H,) each head's direct share at position p, and the output bias's: ctx_h W_O^h · readout, through Gemma's
    post-attention norm frozen at its scale on the whole attention output (so that the shares add up)."""
    hw = model.head_weights(layer)
    per_head = torch.einsum("hd,hdD->hD", stream.contexts[layer][:, p].float(), hw.w_o.float())  # (H,D)
    bias = hw.b_o.float()  # (D,)
    post = model.layers[layer].post_attn_norm
    if post is not None:  # RMSNorm of the heads' sum: a frozen scale times the gain, the same for every head
        whole = per_head.sum(0) + bias
        gain = post.gain.float() * torch.rsqrt(whole.pow(2).mean() + post.eps)  # (D,)
        per_head, bias = per_head * gain, bias * gain
    return per_head @ readout, float(bias @ readout)


@torch.inference_mode()
def attribute(model: LoadedModel, text: str, answer: str, wrong: str | None = None,
              position: int | None = None) -> Attribution:
    """Direct logit attribution at `position` (default: the last piece) of a pre-norm model with an LM head."""
    head = check_lm_head(model)
    if model.embeddings.final_norm is None:
        raise InputError("attribution_after_norm", N_("{name} normalises after every layer: no component "
                                                                "writes to the logits directly."), name=model.name)
    answer_id = token_id(model, answer)
    wrong_id = None if wrong is None else token_id(model, wrong)
    stream = residual_stream(model, text)
    p = chosen_position(model, stream.batch, position)
    direction = head.w_u[answer_id] - (head.w_u[wrong_id] if wrong_id is not None else 0)  # (D,)
    readout, norm_bias = frozen_norm_readout(model, stream.inputs[-1][p], direction)
    shares = [head_shares(model, stream, layer, p, readout) for layer in range(model.n_layers)]
    heads = torch.stack([per_head for per_head, _ in shares])  # (L,H)
    mlps = torch.stack([stream.mlp_out(layer)[p].float() @ readout for layer in range(model.n_layers)])  # (L,)
    biases = sum(bias for _, bias in shares)
    logit = head.uncapped(final_norm(model, stream.inputs[-1][p]))  # Gemma 2's final soft-cap is not linear
    diff = float(logit[answer_id] - (logit[wrong_id] if wrong_id is not None else 0))
    return Attribution(
        p,
        answer,
        wrong,
        heads.numpy(),
        mlps.numpy(),
        float(stream.inputs[0][p].float() @ readout),
        biases + norm_bias,
        diff,
        stream.left_out,
    )


@dataclass(frozen=True)
class ProbeAnswer:
    probe: str  # the sentence continued with the question about the pronoun
    candidates: tuple[tuple[str, str, float, int], ...]  # (word, its first piece, probability, rank)


@torch.inference_mode()
def probe_answers(model: LoadedModel, text: str, pronoun: Word, candidates: Sequence[Word]) -> ProbeAnswer:
    """Ask the model which word the pronoun refers to ("… The word 'it' refers to the", a masked-LM head's mask
    after it): each candidate's probability there (a word of several pieces by its first piece, with its leading
    space)."""
    probe = asked(model, text, pronoun)
    pred = predict(model, probe, k=1)
    rows = []
    for word in candidates:
        first = first_piece_id(model, word.text)
        rank, prob = pred.rank_of(first)
        rows.append((word.text, pieces_of(model, [first])[0], prob, rank))
    return ProbeAnswer(probe, tuple(rows))


def asked(model: LoadedModel, text: str, pronoun: Word) -> str:
    """The sentence continued with the question about the pronoun, ending where this model's head answers."""
    return with_probe(text, pronoun) + answer_slot(model)


def first_piece_id(model: LoadedModel, word: str) -> int:
    """The first piece of `word` as it follows a space: how the model would start writing it."""
    spaced = word if without_spaces(word) else " " + word  # Chinese follows without a space
    return int(model.tokenizer(spaced, add_special_tokens=False)["input_ids"][0])


def first_piece(model: LoadedModel, word: str) -> str:
    """That piece as text, which token_id reads back (' animal' for SmolLM2, 'animal' for a word-piece vocabulary)."""
    return model.tokenizer.decode([first_piece_id(model, word)])
