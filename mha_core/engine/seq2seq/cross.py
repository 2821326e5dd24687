"""Cross-attention's maps: each target piece's query (from the decoder's states) over the source's positions (keys
and values from the encoder's output), the map that aligns a translation's words or a transcript with its audio.

Shapes: B texts, L decoder layers, H heads, T target pieces (padded), S source positions (padded), Dh head dim.
On the fused path the kernel keeps each row's log-sum-exp and every map is rebuilt exactly from it, as for
self-attention (attention.rebuild_probs).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mha_core.engine.attention import FUSED, padding_bias, rebuild_probs
from mha_core.engine.per_layer import LayerQueries


@dataclass(frozen=True)
class CrossAttention(LayerQueries):
    layer_q: tuple[Tensor, ...]  # L x (B,H,T,Dh)  the decoder's queries
    layer_k: tuple[Tensor, ...]  # L x (B,H,S,Dh)  keys from the encoder's output
    layer_probs: tuple[Tensor, ...] | None  # L x (B,H,T,S)  explicit path only
    layer_lse: tuple[Tensor, ...] | None  # L x (B,H,T)  fused path only
    source_mask: Tensor  # (B,S) 1 real source position, 0 padding
    target_mask: Tensor  # (B,T) 1 real target piece, 0 padding
    path: str
    score_scale: float | None = None  # None: 1/√Dh (T5: 1)

    def source_length(self, b: int) -> int:
        return int(self.source_mask[b].sum())

    def target_length(self, b: int) -> int:
        return int(self.target_mask[b].sum())

    def _maps(self, layer: int, heads: slice, texts: slice = slice(None)) -> Tensor:
        if self.path == FUSED:
            q, k = self.layer_q[layer][texts, heads], self.layer_k[layer][texts, heads]  # (b,h,T,Dh), (b,h,S,Dh)
            mask = self.source_mask[texts].to(q.device)
            bias = None if bool(mask.all()) else padding_bias(mask, torch.float32)  # (b,1,1,S)
            probs = rebuild_probs(q, k, self.layer_lse[layer][texts, heads], bias, self.scale)  # (b,h,T,S)
        else:
            probs = self.layer_probs[layer][texts, heads].float()  # (b,h,T,S)
        rows = self.target_mask[texts].to(probs.device, torch.float32)  # (b,T)
        return probs * rows[:, None, :, None]  # padded target rows -> 0

    def layer_maps(self, layer: int) -> Tensor:
        """All heads of one layer, (B,H,T,S) float32; padded rows and columns 0."""
        return self._maps(layer, slice(None))

    def head_map(self, layer: int, head: int) -> Tensor:
        """One head, (B,T,S)."""
        return self._maps(layer, slice(head, head + 1))[:, 0]

    def attention(self) -> Tensor:
        """Every layer and head, (B,L,H,T,S)."""
        return torch.stack([self.layer_maps(layer) for layer in range(self.n_layers)], dim=1)

    def text_maps(self, b: int) -> Tensor:
        """Text b's maps without padding, (L,H,T_b,S_b)."""
        t, s = self.target_length(b), self.source_length(b)
        return torch.stack([self._maps(layer, slice(None), slice(b, b + 1))[0, :, :t, :s]
                            for layer in range(self.n_layers)])


def cross_of(kept: list, source_mask: Tensor, target_mask: Tensor, path: str, scale: float | None
             ) -> CrossAttention:
    """From each decoder layer's cross-attention output (AttentionOutput), what the maps need: q, k, and the
    probabilities (explicit) or the log-sum-exp (fused)."""
    fused = path == FUSED
    return CrossAttention(
        layer_q=tuple(a.q for a in kept), layer_k=tuple(a.k for a in kept),
        layer_probs=None if fused else tuple(a.probs for a in kept),
        layer_lse=tuple(a.lse for a in kept) if fused else None,
        source_mask=source_mask, target_mask=target_mask, path=path, score_scale=scale,
    )
