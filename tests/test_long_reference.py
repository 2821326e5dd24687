"""Issue 24 on the bundled decoder at 8,192 pieces: rows rebuilt from q, k and the log-sum-exp equal transformers'
eager weights for that layer. The reference is transformers' own model run up to that layer only: each layer's output
by its SDPA kernel, and the checked layer's chosen rows by its eager_attention_forward (its q, k and causal mask, those
rows only), caught there. The memory of the whole 8,192-piece forward (3 GB, and within its estimate) is a target:
benchmarks/bench_long.py measures it (line (e)); tests/test_memory_bounds.py bounds a long output's growth."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from mha_core.analysis.long.text import map_block, run_long
from tests.conftest import long_text

LAYER = 1  # of 30: the reference runs layers 0 and 1, then stops
ROWS_KERNEL = "mha_test_eager_rows"  # an attention implementation registered with transformers for this test


class Caught(Exception):
    """Stops the reference's forward once the chosen layer's rows are caught."""


def eager_rows(reference_dir: str, model_class: type, ids: torch.Tensor, layer: int, rows: list[slice]
               ) -> list[torch.Tensor]:
    """(H,R,T) transformers' eager weights of `layer` for each slice of query rows, in one pass that stops there.
    Only those rows are computed: the whole layer's eager maps at 8,192 pieces (9 x 8,192 x 8,192 floats, 2.4 GB
    each, several at once) cost the test most of its time, the kernel zeroing the pages they first touch."""
    caught = {}

    def attention(module, query, key, value, attention_mask, **kwargs):  # (B,H,T,Dh) q; (B,G,T,Dh) k, v
        if module.layer_idx != layer:
            return sdpa_attention_forward(module, query, key, value, None, **kwargs)  # causal, no maps kept
        eager = sys.modules[type(module).__module__].eager_attention_forward  # the model's own
        caught["rows"] = [eager(module, query[:, :, chosen], key, value, attention_mask[:, :, chosen], **kwargs)[1][0]
                          for chosen in rows]
        raise Caught

    AttentionInterface.register(ROWS_KERNEL, attention)
    AttentionMaskInterface.register(ROWS_KERNEL, eager_mask)  # the additive (1,1,T,T) mask eager reads
    reference = model_class.from_pretrained(reference_dir, attn_implementation=ROWS_KERNEL, local_files_only=True,
                                            use_safetensors=True).eval()
    try:
        with torch.inference_mode():
            reference(input_ids=ids)
    except Caught:
        pass
    return caught["rows"]


@pytest.mark.slow
def test_rows_at_8192_pieces_equal_transformers_eager_weights(decoder):
    """Our side runs the decoder's first LAYER + 1 layers only (the same weights: a layer's maps depend on no later
    layer), as the reference stops there too."""
    first_layers = replace(decoder, layers=decoder.layers[: LAYER + 1])
    result = run_long(first_layers, long_text(9000))
    n = result.lengths[0]
    assert n == 8192 and result.path == "fused"
    ids = result.batch.input_ids[:, :n]
    chosen = [slice(0, 32), slice(n - 32, n)]
    expected_rows = eager_rows(decoder.model_dir, decoder.model.__class__, ids, LAYER, chosen)
    for rows, expected in zip(chosen, expected_rows, strict=True):  # (H,32,T) each
        assert expected.shape == (decoder.n_heads, 32, n)
        got = map_block(result, 0, LAYER, slice(None), range(rows.start, rows.stop), range(n))
        error = (got - expected.float()).abs().max().item()
        assert error <= 1e-5, (rows, error)


@pytest.mark.slow
@pytest.mark.long
def test_the_needle_probe_equals_its_definition_on_the_full_maps(decoder):
    """At about 1,000 pieces the explicit path makes every whole map: each head's strongest key read off those maps,
    and the model's own next-piece choices, give the same scores; SmolLM2 copies the whole code. (Each layer's map
    is read as the layer makes it: kept for all 30 layers, they held 1 GB.)"""
    from mha_core.analysis.long.roles import CODE, needle_probe
    from mha_core.engine.forward import EXPLICIT, layer_outputs, prepare
    from mha_core.engine.tokens import tokenize

    probe = needle_probe(decoder, 1000, 0.3)
    assert probe.success == 1.0 and "".join(probe.code) == CODE and probe.n_pieces <= 1024
    batch = tokenize(decoder.tokenizer, probe.text, decoder.max_length, bos=decoder.bos_id)  # as run() reads it
    assert batch.input_ids.shape[1] == probe.n_pieces
    queries = [a - 1 for a in probe.answer]
    with torch.inference_mode():
        x, bias, rope = prepare(decoder, batch)
        for layer, (_, attn) in enumerate(layer_outputs(decoder, x, bias, rope, EXPLICIT)):
            strongest = attn.probs[0][:, queries].argmax(-1)  # (H,A) of the layer's whole (H,T,T) map
            expected = (strongest == torch.tensor(probe.needle)).float().mean(-1).numpy()
            np.testing.assert_allclose(probe.scores[layer], expected, atol=1e-9)
