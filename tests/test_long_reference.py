"""Issue 24 on the bundled decoder at 8,192 pieces: rows rebuilt from q, k and the log-sum-exp equal transformers'
eager weights for that layer (the reference computed up to that layer only, its weights caught by a forward hook on
the layer's self_attn). The memory of the whole 8,192-piece forward (3 GB, and within its estimate) is a target:
benchmarks/bench_long.py measures it (line (e)); tests/test_memory_bounds.py bounds a long output's growth."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from mha_core.analysis.long.text import map_block, run_long
from tests.conftest import long_text

LAYER = 1  # of 30: the reference runs layers 0 and 1 eagerly (each with (9, 8192, 8192) maps), then stops


class Caught(Exception):
    """Stops the reference's forward once the chosen layer's weights are caught."""


def eager_rows(reference: torch.nn.Module, ids: torch.Tensor, layer: int, rows: list[slice]) -> list[torch.Tensor]:
    """(H,R,T) transformers' eager weights of `layer` for each slice of query rows, in one pass that stops there."""
    caught = {}

    def hook(_module, _args, output):
        caught["rows"] = [output[1][0, :, chosen].clone() for chosen in rows]
        raise Caught

    handle = reference.layers[layer].self_attn.register_forward_hook(hook)
    try:
        with torch.inference_mode():
            reference(input_ids=ids)
    except Caught:
        pass
    finally:
        handle.remove()
    return caught["rows"]


@pytest.mark.slow
def test_rows_at_8192_pieces_equal_transformers_eager_weights(decoder):
    """Our side runs the decoder's first LAYER + 1 layers only (the same weights: a layer's maps depend on no later
    layer), as the reference stops there too."""
    first_layers = replace(decoder, layers=decoder.layers[: LAYER + 1])
    result = run_long(first_layers, long_text(9000))
    n = result.lengths[0]
    assert n == 8192 and result.path == "fused"
    reference = decoder.model.__class__.from_pretrained(decoder.model_dir, attn_implementation="eager",
                                                        local_files_only=True, use_safetensors=True).eval()
    ids = result.batch.input_ids[:, :n]
    chosen = [slice(0, 32), slice(n - 32, n)]
    for rows, expected in zip(chosen, eager_rows(reference, ids, LAYER, chosen), strict=True):  # (H,32,T) each
        got = map_block(result, 0, LAYER, slice(None), range(rows.start, rows.stop), range(n))
        error = (got - expected.float()).abs().max().item()
        assert error <= 1e-5, (rows, error)


@pytest.mark.slow
def test_the_needle_probe_equals_its_definition_on_the_full_maps(decoder):
    """At about 1,000 pieces the explicit path keeps every map: each head's strongest key read off those maps, and
    the model's own next-piece choices, give the same scores; SmolLM2 copies the whole code."""
    from mha_core import run
    from mha_core.analysis.long.roles import CODE, needle_probe

    probe = needle_probe(decoder, 1000, 0.3)
    assert probe.success == 1.0 and "".join(probe.code) == CODE and probe.n_pieces <= 1024
    full = run(decoder, probe.text, path="explicit")  # every map kept
    assert full.lengths[0] == probe.n_pieces
    queries = [a - 1 for a in probe.answer]
    for layer in range(decoder.n_layers):
        strongest = full.layer_probs[layer][0][:, queries].argmax(-1)  # (H,A)
        expected = (strongest == torch.tensor(probe.needle)).float().mean(-1).numpy()
        np.testing.assert_allclose(probe.scores[layer], expected, atol=1e-9)
