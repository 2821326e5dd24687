"""The result of `mha_core.run`: frozen, with every field's shape.

Shapes: B texts, L layers, H heads, T tokens (padded to the longest text), D d_model, Dh head dim.
Per-layer tensors are kept as tuples of L tensors (no stacking copy on the hot path); the
stacked views below build (B,L,H,...) on request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from mha_core.engine.attention import FUSED, rebuild_probs, repeat_kv, scores_bias
from mha_core.engine.drawable import Drawable
from mha_core.engine.per_layer import LayerQueries, at_layer
from mha_core.engine.pieces import fragmented_chars, unknown_spans
from mha_core.engine.seq2seq.cross import CrossAttention
from mha_core.engine.tokens import TokenBatch, word_pieces


@dataclass(frozen=True)
class AttentionResult(Drawable, LayerQueries):
    batch: TokenBatch  # tokens, word ids, offsets, mask, pre-truncation counts
    layer_q: tuple[Tensor, ...]  # L x (B,H,T,Dh)
    layer_k: tuple[Tensor, ...]  # L x (B,G,T,Dh)  one per key/value head (G = H unless grouped-query)
    layer_context: tuple[Tensor, ...] | None  # L x (B,H,T,Dh)  each head's output before W_O; explicit path only
    layer_probs: tuple[Tensor, ...] | None  # L x (B,H,T,T)  explicit path only
    layer_lse: tuple[Tensor, ...] | None  # L x (B,H,T)  fused path only
    hidden_states: tuple[Tensor, ...]  # (L+1) x (B,T,D)  embeddings, then each layer's output; a long text's
    #                                    result (forward(keep_hidden=False)) keeps only the last: 1 x (B,T,D)
    path: str  # "explicit" or "fused": what actually ran
    backend: str  # the attention kernel that ran, e.g. "flash (CPU)"
    path_reason: str  # why this path (e.g. "auto: fused for 400 tokens > 256")
    max_length: int  # the model's maximum number of word pieces
    causal: bool = False  # decoders: query i sees keys 0..i only
    windows: tuple[int | None, ...] = ()  # per layer: keys this far back or further are not seen (None: all are)
    score_scale: float | None = None  # the scores' factor; None: 1/√Dh (Gemma: 1/√query_pre_attn_scalar)
    alibi: bool = False  # BLOOM: a linear bias per head on the keys' positions
    layer_bias: object = None  # T5: what each layer added to its scores (padding, causal, relative positions;
    #                            (B|1,H,T,T), or a PerLayer of them), used to rebuild a fused map; else rebuilt
    cross: CrossAttention | None = None  # an encoder–decoder's decoder: its cross-attention over the source

    # -- shapes and text-level facts ------------------------------------------------------------
    @property
    def tokens(self) -> tuple[tuple[str, ...], ...]:
        return self.batch.tokens

    @property
    def labels(self) -> tuple[tuple[str, ...], ...]:
        """The pieces as a reader sees them (byte-level markers decoded, spaces shown as ␣)."""
        return self.batch.labels

    @property
    def word_ids(self) -> tuple[tuple[int | None, ...], ...]:
        return self.batch.word_ids

    def unknown_piece(self, b: int = 0) -> str:
        """The piece text b's unknown characters became (the tokenizer's own, such as [UNK])."""
        unknown = self.batch.unknown[b] if self.batch.unknown else ()
        return next((t for t, u in zip(self.tokens[b], unknown, strict=False) if u), "[UNK]")

    def unknown_spans(self, b: int = 0) -> list[str]:
        """The parts of text b the model reads as its unknown piece."""
        return unknown_spans(self.batch.texts[b], self.batch.unknown[b] if self.batch.unknown else (),
                             self.batch.offsets[b])

    def fragmented_chars(self, b: int = 0) -> set[str]:
        """Text b's wide characters that the model reads as byte fragments (pieces.fragmented_chars)."""
        return fragmented_chars(self.batch.texts[b], self.batch.offsets[b][:self.lengths[b]])

    def word_pieces(self, b: int, word: str) -> tuple[int, ...]:
        """The pieces of text b that spell `word` (tokens.word_pieces: one rule for every page and lesson)."""
        return tuple(i for i in word_pieces(self.batch, b, word) if i < self.lengths[b])

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(len(t) for t in self.batch.tokens)

    def one(self, b: int, path_reason: str) -> AttentionResult:
        """Text b's result as run() gives it for that text alone: its own length, no padding, and its own storage
        (a shared store weighs each result by what it holds); `path_reason` is why that text alone takes this path.
        Not for encoder–decoders (their cross-attention and relative bias are the batch's)."""
        if self.cross is not None or self.layer_bias is not None:
            raise ValueError("one(): only a text model's result is cut text by text")
        n = self.lengths[b]
        text, pieces = slice(b, b + 1), slice(0, n)

        def cut(layers: tuple[Tensor, ...] | None, *index: slice) -> tuple[Tensor, ...] | None:
            return None if layers is None else tuple(t[index].clone() for t in layers)

        every = slice(None)  # heads
        return replace(self, batch=self.batch.one(b), layer_q=cut(self.layer_q, text, every, pieces),
                       layer_k=cut(self.layer_k, text, every, pieces),
                       layer_context=cut(self.layer_context, text, every, pieces),
                       layer_probs=cut(self.layer_probs, text, every, pieces, pieces),
                       layer_lse=cut(self.layer_lse, text, every, pieces),
                       hidden_states=cut(self.hidden_states, text, pieces), path_reason=path_reason)

    @property
    def truncated(self) -> tuple[bool, ...]:
        return tuple(n > len(t) for n, t in zip(self.batch.n_tokens, self.batch.tokens, strict=True))

    @property
    def n_tokens(self) -> tuple[int, ...]:
        """Word pieces per text before truncation."""
        return self.batch.n_tokens

    @property
    def last_hidden_state(self) -> Tensor:
        return self.hidden_states[-1]  # (B,T,D)

    def window(self, layer: int) -> int | None:
        return self.windows[layer] if self.windows else None

    # -- attention maps ---------------------------------------------------------------------------
    @cached_property
    def _key_biases(self) -> dict[int | None, Tensor | None]:
        """Per window, the bias the model added to every head's scores: padding, the causal mask for decoders, the
        window, ALiBi's bias per head."""
        mask = self.batch.attention_mask.to(self.layer_q[0].device)
        heads = self.n_heads if self.alibi else None
        return {window: scores_bias(mask, torch.float32, self.causal, window, heads)
                for window in dict.fromkeys(self.windows or (None,))}  # (B,1|H,T|1,T) or None each

    @cached_property
    def _query_mask(self) -> Tensor:
        return self.batch.attention_mask.to(self.layer_q[0].device, torch.float32)[:, :, None]  # (B,T,1)

    def _keys(self, layer: int, texts: slice) -> Tensor:
        """(b,H,T,Dh): each query head's keys (its key/value head's, repeated over the group)."""
        return repeat_kv(self.layer_k[layer][texts], self.n_heads)

    def _bias_for(self, layer: int, texts: slice, heads: slice = slice(None)) -> Tensor | None:
        own = at_layer(self.layer_bias, layer)  # T5's, with its relative positions
        bias = self._key_biases[self.window(layer)] if own is None else own.float()
        if bias is None:
            return None
        bias = bias if bias.shape[0] == 1 else bias[texts]  # a causal-only bias is shared
        return bias if bias.shape[1] == 1 else bias[:, heads]  # ALiBi: one bias per head

    def added_bias(self, layer: int, b: int = 0) -> Tensor | None:
        """(1,1|H,T,T) float32, what `layer` added to text b's scores: padding, the causal mask and window, ALiBi's
        or T5's bias per head (the model's own, as its forward built it); None where nothing."""
        return self._bias_for(layer, slice(b, b + 1))

    def head_map(self, layer: int, head: int) -> Tensor:
        """Attention probabilities of one head, (B,T,T) float32, padded rows and columns 0.

        On the fused path the map is rebuilt from the kernel's LSE for this head only."""
        return self._maps(layer, slice(head, head + 1))[:, 0]

    def layer_maps(self, layer: int) -> Tensor:
        """All heads of one layer, (B,H,T,T); on the fused path rebuilt in one batched product."""
        return self._maps(layer, slice(None))

    def _maps(self, layer: int, heads: slice, texts: slice = slice(None)) -> Tensor:
        if self.path == FUSED:
            q, k = self.layer_q[layer][texts, heads], self._keys(layer, texts)[:, heads]  # (b,h,T,Dh)
            lse = self.layer_lse[layer][texts, heads]  # (b,h,T)
            probs = rebuild_probs(q, k, lse, self._bias_for(layer, texts, heads), self.scale)  # (b,h,T,T)
        else:
            probs = self.layer_probs[layer][texts, heads].float()  # (b,h,T,T)
        if bool(self.batch.attention_mask[texts].all()):
            return probs  # no padding: nothing to zero
        return probs * self._query_mask[texts, None]  # padded query rows -> 0

    def scores_map(self, layer: int, head: int) -> Tensor:
        """Pre-softmax scaled scores q k^T / sqrt(Dh) of one head, (B,T,T); padding not masked."""
        return self._scores(layer, slice(head, head + 1))[:, 0]

    def _scores(self, layer: int, heads: slice) -> Tensor:
        q, k = self.layer_q[layer][:, heads].float(), self._keys(layer, slice(None))[:, heads].float()  # (B,h,T,Dh)
        return q @ k.mT * self.scale  # (B,h,T,T)

    def attention(self) -> Tensor:
        """Every layer and head, (B,L,H,T,T); on the fused path every map is rebuilt."""
        return torch.stack([self.layer_maps(layer) for layer in range(self.n_layers)], dim=1)

    def scores(self) -> Tensor:
        """Every head's pre-softmax scaled scores, (B,L,H,T,T); padding not masked."""
        return torch.stack([self._scores(layer, slice(None)) for layer in range(self.n_layers)], dim=1)

    def head_outputs(self) -> Tensor:
        """Each head's context vectors, (B,L,H,T,Dh) (explicit path: the fused path keeps no per-head outputs, so
        that a cached long text stays a fraction of the explicit result's size)."""
        if self.layer_context is None:
            raise ValueError("The fused path keeps no per-head outputs: run with path='explicit'.")
        return torch.stack(self.layer_context, dim=1)

    def text_maps(self, b: int) -> Tensor:
        """Text b's maps without padding, (L,H,T_b,T_b) float32; only this text's maps are built."""
        n = self.lengths[b]
        texts = slice(b, b + 1)
        out = torch.empty(self.n_layers, self.n_heads, n, n)  # (L,H,T_b,T_b) filled layer by layer (no stack copy)
        for layer in range(self.n_layers):
            out[layer] = self._maps(layer, slice(None), texts)[0, :, :n, :n]
        return out

    def text_layer_maps(self, b: int, layer: int) -> Tensor:
        """Text b's maps of one layer without padding, (H,T_b,T_b) float32."""
        n = self.lengths[b]
        return self._maps(layer, slice(None), slice(b, b + 1))[0, :, :n, :n]

    def text_attention(self, b: int) -> np.ndarray:
        """text_maps(b) as a numpy array, (L,H,T_b,T_b)."""
        return self.text_maps(b).cpu().numpy()


def json_floats(values: np.ndarray, digits: int = 6) -> list:
    """An array as nested lists of Python floats rounded to `digits` (rounded in float64: a float32 rounded to 6
    digits still prints as 0.5225399732589722)."""
    return np.asarray(values, dtype=np.float64).round(digits).tolist()
