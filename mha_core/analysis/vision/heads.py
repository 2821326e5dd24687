"""What a Vision Transformer's heads do with an image. Every rule and threshold the Images page shows lives here:
- a query's attention as a map over the patch grid ([CLS]'s by default), and attention rollout's (Abnar & Zuidema);
- positional heads: a patch's strongest key is one fixed offset from it (the patch to its left, above…) for most
  patches;
- each head's mean attention distance in pixels (Dosovitskiy et al. 2020, Figure 7): over every patch query, the
  weight-averaged distance between patch centres, its row renormalised over the patches;
- the share of attention that lands on [CLS] and registers, and the high-norm tokens (Darcet et al. 2023);
- object heads: DINO's figures keep the patches that hold 60% of [CLS]'s attention; here that mask comes from the
  last layer's heads averaged, and a head is an object head when at least OBJECT_SHARE of its [CLS] attention over
  the patches falls inside a mask that covers at most MASK_AREA of the image.

Shapes: L layers, H heads, N tokens (P prefix tokens, then R × C patches row by row), D d_model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.analysis.heads.contrib import rollout_step
from mha_core.engine.result import AttentionResult

MASK_MASS = 0.6  # the foreground keeps the patches holding this share of the mean [CLS] attention (DINO)
MASK_AREA = 0.5  # ... and a mask over more than this share of the patches separates nothing
OBJECT_SHARE = 0.6  # an object head puts at least this share of its [CLS] attention inside the mask
LOCAL_PIXELS = 0.15  # a local head's mean attention distance is under this share of the image's side
HIGH_NORM = 3.0  # a high-norm token's output norm is this many times the patches' median or more
SINK_SHARE = 0.5  # a sink head puts at least half of every row's weight, on average, on [CLS] and registers
POSITIONAL_SHARE = 0.5  # a positional head's strongest key is one fixed offset (such as the patch to the left) for
POSITIONAL_WEIGHT = 0.3  # at least this share of the patch queries, with at least this weight there on average


@dataclass(frozen=True)
class ImageHeads:
    """Every head of one image, summarised."""

    grid: tuple[int, int]  # (R, C) patches
    patch_px: int  # pixels a side of a patch
    prefix: tuple[str, ...]  # the P tokens before the patches
    cls_maps: np.ndarray  # (L,H,R,C) [CLS]'s attention over the patches
    distances: np.ndarray  # (L,H) mean attention distance, pixels
    prefix_share: np.ndarray  # (L,H) mean weight on the prefix tokens over every query
    rollout_map: np.ndarray  # (R,C) rollout's [CLS] row over the patches, after the last layer
    mask: np.ndarray  # (R,C) bool: the foreground from the last layer's mean [CLS] attention
    object_share: np.ndarray  # (L,H) the share of each head's [CLS] attention (over patches) inside the mask
    high_norm: tuple[int, ...]  # token positions whose last output norm is HIGH_NORM × the patches' median or more
    offsets: dict[tuple[int, int], tuple[int, int]]  # positional heads: (layer, head) -> (rows, columns) offset

    @property
    def side_px(self) -> int:
        return self.grid[1] * self.patch_px

    @property
    def object_heads(self) -> tuple[tuple[int, int], ...]:
        """(layer, head) pairs, most object-like first, when the mask is a real foreground (≤ MASK_AREA)."""
        if self.mask.mean() > MASK_AREA:
            return ()
        order = np.argsort(-self.object_share, axis=None)
        n_heads = self.object_share.shape[1]
        return tuple((int(i // n_heads), int(i % n_heads)) for i in order if self.object_share.flat[i] >= OBJECT_SHARE)

    @property
    def sink_heads(self) -> tuple[tuple[int, int], ...]:
        return tuple((int(la), int(h)) for la, h in zip(*np.nonzero(self.prefix_share >= SINK_SHARE), strict=True))

    @property
    def local_heads(self) -> tuple[tuple[int, int], ...]:
        return tuple((int(la), int(h)) for la, h in zip(*np.nonzero(self.distances < LOCAL_PIXELS * self.side_px),
                                                        strict=True))


def patch_rows(maps: np.ndarray, prefix: int, grid: tuple[int, int]) -> np.ndarray:
    """(..., N) rows over every token -> (..., R, C) their weight on each patch."""
    return maps[..., prefix:].reshape(*maps.shape[:-1], *grid)


def query_maps(result: AttentionResult, query: int = 0, b: int = 0) -> np.ndarray:
    """(L,H,R,C) one query's attention over the patch grid (query 0: [CLS])."""
    maps = np.stack([result.text_layer_maps(b, layer)[:, query].numpy() for layer in range(result.n_layers)])
    return patch_rows(maps, prefix_length(result, b), result.batch.grid)


def prefix_length(result: AttentionResult, b: int = 0) -> int:
    """How many tokens come before the patches ([CLS], [DIST], registers)."""
    rows, columns = result.batch.grid
    return len(result.tokens[b]) - rows * columns


def patch_distances(grid: tuple[int, int], patch_px: int) -> np.ndarray:
    """(R·C, R·C) pixel distance between patch centres."""
    rows, columns = np.divmod(np.arange(grid[0] * grid[1]), grid[1])
    centres = np.stack([rows, columns], -1) * patch_px  # (RC,2)
    return np.sqrt(((centres[:, None] - centres[None]) ** 2).sum(-1))


def mean_distance(layer_maps: np.ndarray, prefix: int, distances: np.ndarray) -> np.ndarray:
    """(H,N,N) one layer's maps -> (H,) each head's mean attention distance over the patch queries, each row's weight
    on the patches renormalised to 1."""
    patches = layer_maps[:, prefix:, prefix:]  # (H,RC,RC)
    weights = patches / np.maximum(patches.sum(-1, keepdims=True), 1e-12)
    return (weights * distances).sum(-1).mean(-1)


def fixed_offset(head_maps: np.ndarray, prefix: int, grid: tuple[int, int]) -> tuple[int, int] | None:
    """(N,N) one head's map -> the (rows, columns) offset its patch queries' strongest keys share, when at least
    POSITIONAL_SHARE of them do and their mean weight there is at least POSITIONAL_WEIGHT; else None."""
    patches = head_maps[prefix:, prefix:]  # (RC,RC)
    strongest = patches.argmax(-1)  # (RC,)
    rows, columns = np.divmod(np.arange(len(strongest)), grid[1])
    offsets = np.stack([strongest // grid[1] - rows, strongest % grid[1] - columns], -1)  # (RC,2)
    kinds, counts = np.unique(offsets, axis=0, return_counts=True)
    best = int(counts.argmax())
    chosen = (offsets == kinds[best]).all(-1)
    weight = patches[np.arange(len(strongest)), strongest][chosen].mean()
    if counts[best] < POSITIONAL_SHARE * len(strongest) or weight < POSITIONAL_WEIGHT:
        return None
    return int(kinds[best][0]), int(kinds[best][1])


def foreground(cls_mean: np.ndarray, mass: float = MASK_MASS) -> np.ndarray:
    """(R,C) bool: the fewest patches that hold `mass` of the (R,C) attention, largest first."""
    flat = cls_mean.ravel() / cls_mean.sum()
    order = np.argsort(-flat)
    kept = np.cumsum(flat[order]) - flat[order] < mass  # the patch that crosses the mass is kept
    mask = np.zeros(flat.shape, dtype=bool)
    mask[order[kept]] = True
    return mask.reshape(cls_mean.shape)


def high_norm_tokens(result: AttentionResult, prefix: int, b: int = 0) -> tuple[int, ...]:
    """Tokens whose last layer output's norm is HIGH_NORM times the patches' median or more (Darcet et al.'s
    artefacts: patches the model repurposes as scratch space)."""
    norms = result.hidden_states[-1][b, : result.lengths[b]].norm(dim=-1).numpy()  # (N,)
    median = float(np.median(norms[prefix:]))
    return tuple(int(i) for i in np.nonzero(norms >= HIGH_NORM * median)[0])


def image_heads(result: AttentionResult, patch_px: int, b: int = 0) -> ImageHeads:
    """Every head of image b summarised, one layer's maps at a time (at 518 px one layer's maps are 45 MB, all twelve
    half a gigabyte): [CLS]'s rows, distances, prefix shares, offsets and the rollout so far are kept, not the maps."""
    grid, prefix = result.batch.grid, prefix_length(result, b)
    distances = patch_distances(grid, patch_px)
    cls_rows, mean_distances, prefix_shares, offsets = [], [], [], {}
    flow = np.eye(result.lengths[b])  # (N,N) the rollout up to the layer read
    for layer in range(result.n_layers):
        maps = result.text_layer_maps(b, layer).numpy()  # (H,N,N)
        cls_rows.append(maps[:, 0])
        mean_distances.append(mean_distance(maps, prefix, distances))
        prefix_shares.append(maps[:, :, :prefix].sum(-1).mean(-1))
        flow = rollout_step(maps.mean(0), flow)
        offsets.update({(layer, head): offset for head in range(maps.shape[0])
                        for offset in [fixed_offset(maps[head], prefix, grid)] if offset is not None})
    cls_maps = patch_rows(np.stack(cls_rows), prefix, grid)  # (L,H,R,C)
    mask = foreground(cls_maps[-1].mean(0))
    shares = cls_maps.reshape(*cls_maps.shape[:2], -1)
    shares = (shares * mask.ravel()).sum(-1) / np.maximum(shares.sum(-1), 1e-12)  # (L,H)
    return ImageHeads(
        grid=grid, patch_px=patch_px, prefix=tuple(result.tokens[b][:prefix]), cls_maps=cls_maps,
        distances=np.stack(mean_distances), prefix_share=np.stack(prefix_shares),
        rollout_map=patch_rows(flow[0], prefix, grid), mask=mask, object_share=shares,
        high_norm=high_norm_tokens(result, prefix, b), offsets=offsets)
