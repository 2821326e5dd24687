"""Sentence pairs (segments A and B, as BERT reads them): how much of each head's attention crosses from one text to
the other, the measure Clark et al. and BertViz read cross-sentence heads by.

Shapes: L layers, H heads, T word pieces of the pair (specials included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.engine.drawable import Drawable
from mha_core.engine.result import AttentionResult, json_floats
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

CROSS_MIN = 0.4  # a head whose queries put this much of their weight on the other text, on average both ways


@dataclass(frozen=True)
class PairShares(Drawable):
    a_to_b: np.ndarray  # (L,H) mean over A's pieces (as queries) of the weight on B's pieces
    b_to_a: np.ndarray  # (L,H) mean over B's pieces of the weight on A's pieces
    to_specials: np.ndarray  # (L,H) mean over every real piece of the weight on the special pieces ([CLS], [SEP])
    pieces: tuple[int, int]  # A's and B's pieces

    @property
    def crossing(self) -> np.ndarray:
        """(L,H) the share crossing to the other text, averaged over both directions."""
        return (self.a_to_b + self.b_to_a) / 2

    def head_labels(self) -> dict[tuple[int, int], str]:
        """The cross-sentence heads (crossing ≥ CROSS_MIN), for the Roles page's grid (analysis.roles.role_labels)."""
        layers, heads = np.nonzero(self.crossing >= CROSS_MIN)
        return {(int(layer), int(head)): "cross-sentence" for layer, head in zip(layers, heads, strict=True)}

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "pieces": list(self.pieces), "a_to_b": json_floats(self.a_to_b),
                "b_to_a": json_floats(self.b_to_a), "to_specials": json_floats(self.to_specials)}


def pair_shares(result: AttentionResult, b: int = 0) -> PairShares:
    """Each head's share of attention that crosses between the texts of pair b (run(model, first, pairs=[second]))."""
    segments = result.batch.segments[b] if result.batch.segments else ()
    a = [i for i, s in enumerate(segments) if s == 0]
    b_pieces = [i for i, s in enumerate(segments) if s == 1]
    if not a or not b_pieces:
        raise InputError("not_a_pair", N_("This result is not a sentence pair: run it with a second text (pairs=)."))
    special = [i for i, s in enumerate(segments) if s is None]
    n = result.lengths[b]
    maps = np.stack([result.text_layer_maps(b, layer)[:, :n, :n].numpy() for layer in range(result.n_layers)])
    return PairShares(a_to_b=maps[:, :, a][..., b_pieces].sum(-1).mean(-1),  # (L,H)
                      b_to_a=maps[:, :, b_pieces][..., a].sum(-1).mean(-1),
                      to_specials=maps[:, :, a + b_pieces][..., special].sum(-1).mean(-1),
                      pieces=(len(a), len(b_pieces)))
