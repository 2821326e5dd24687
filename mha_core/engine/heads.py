"""A (layer, head) a person names, checked against the heads a model has: the one check every floor uses (the CLI's
--heads, patching one head, the corpus search by heads, the query-key view)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mha_core.engine.tokens import InputError
from mha_core.messages import N_

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel


def checked_head(name: str, n_layers: int, n_heads: int, layer: int, head: int) -> tuple[int, int]:
    """(layer, head) when the model `name` of n_layers × n_heads has it, else an InputError saying which it has."""
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise InputError("no_such_head", N_("{name} has layers 0 to {last_layer} and heads 0 to {last_head} (0-based): "
                                            "there is no layer {layer}, head {head}."),
                         name=name, last_layer=n_layers - 1, last_head=n_heads - 1, layer=layer, head=head)
    return layer, head


def model_head(model: LoadedModel, layer: int, head: int) -> tuple[int, int]:
    """checked_head against a loaded model's own layers and heads."""
    return checked_head(model.name, model.n_layers, model.n_heads, layer, head)
