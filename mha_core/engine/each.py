"""Single texts asked for at the same moment, read in one padded forward: each text's result as run() gives it for
that text alone (its own length and storage, its own path and reason), up to float rounding (a matrix product of
more rows sums in another order: ~1e-7). Several short texts cost a core less together than one by one (a
22M-parameter encoder on 8 classroom sentences: ~12 ms of CPU a text against ~16 ms alone).

Shapes: B texts, T pieces of the longest.
"""

from __future__ import annotations

from collections.abc import Sequence

from mha_core.engine.attention import FUSED
from mha_core.engine.budget import budget_bytes, forward_bytes
from mha_core.engine.forward import forward, model_path, run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError, tokenize


def shares_a_forward(model: LoadedModel) -> bool:
    """A model whose texts can share a forward: a text model without a per-batch bias (T5's relative positions)
    or a source (encoder–decoders)."""
    arch = model.arch
    return not (model.encoder_decoder or arch.audio or arch.image or arch.relative_bias)


def run_each(model: LoadedModel, texts: Sequence[str], path: str) -> list[AttentionResult | InputError]:
    """run(model, [text], path) for each text, in one forward where the texts can share one (shares_a_forward,
    every text alone would take the path the batch takes, and the batch with each text's copy of its part fits the
    memory budget); one by one otherwise. A text run() refuses gets its own InputError in its place, worded as for
    that text alone."""
    together = read_together(model, texts, path) if len(texts) > 1 and shares_a_forward(model) else None
    return together or [alone_or_refused(model, text, path) for text in texts]


def read_together(model: LoadedModel, texts: Sequence[str], path: str) -> list[AttentionResult] | None:
    """Each text's result from one padded forward; None where they cannot share it."""
    try:
        batch = tokenize(model.tokenizer, list(texts), model.max_length, bos=model.bos_id)
    except InputError:
        return None  # one of them is refused: each is read (or refused) alone
    chosen, _ = model_path(model, path, batch.input_ids.shape[1])
    alone = [model_path(model, path, len(tokens)) for tokens in batch.tokens]  # (path, reason) of each text alone
    if any(own != chosen for own, _ in alone):
        return None
    if 2 * forward_bytes(model, *batch.input_ids.shape, keeps_maps=chosen != FUSED) > budget_bytes():
        return None  # the batch's result and each text's own copy of its part live together while it is cut
    result = forward(model, batch, path)
    return [result.one(b, reason) for b, (_, reason) in enumerate(alone)]


def alone_or_refused(model: LoadedModel, text: str, path: str) -> AttentionResult | InputError:
    try:
        return run(model, [text], path=path)
    except InputError as err:
        return err
