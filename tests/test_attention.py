"""Unit tests of the attention math, on nn.MultiheadAttention and a tiny random BERT."""

from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from mha_core import run
from mha_core.engine.attention import (
    aligned_bias,
    apply_rope,
    from_torch_mha,
    merge_heads,
    multi_head_attention,
    padding_bias,
    rebuild_probs,
    split_heads,
    split_heads_in,
    split_heads_out,
)
from tests.tolerance import assert_close_to_scale


@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_matches_torch_multihead_attention(path):
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(512, 8, batch_first=True).eval()
    x = torch.randn(2, 7, 512)
    key_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    with torch.no_grad():
        ref_out, ref_weights = mha(x, x, x, key_padding_mask=key_mask == 0, average_attn_weights=False)  # (B,H,T,T)
        ours = multi_head_attention(x, from_torch_mha(mha), padding_bias(key_mask, x.dtype), path)
    assert_close_to_scale(ours.output, ref_out, 1e-5)
    probs = ours.probs if path == "explicit" else rebuild_probs(
        ours.q, ours.k, ours.lse, padding_bias(key_mask, x.dtype), 512 ** -0.5 * 8 ** 0.5
    )
    assert_close_to_scale(probs, ref_weights, 1e-5)  # head by head: errors cannot cancel in a mean


def test_rope_equals_transformers_rotation():
    torch.manual_seed(3)
    q, k = torch.randn(2, 7, 5, 8).transpose(1, 2), torch.randn(2, 7, 8)[:, None]  # (B,H,T,Dh), (B,1,T,Dh)
    angles = torch.randn(2, 7, 4)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)  # (B,T,Dh)
    ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)
    assert_close_to_scale(apply_rope(q, cos, sin), ref_q, 1e-6)
    assert_close_to_scale(apply_rope(k, cos, sin), ref_k, 1e-6)
    assert not torch.allclose(apply_rope(q, cos, sin), q)  # it does rotate


def test_split_and_merge_heads_round_trip():
    x = torch.randn(3, 5, 24)
    heads = split_heads(x, 4)
    assert heads.shape == (3, 4, 5, 6)
    assert torch.equal(heads[:, 2], x[..., 12:18])
    assert torch.equal(merge_heads(heads), x)


def test_per_head_weights_tile_the_full_projections():
    torch.manual_seed(2)
    w_in, w_out, x = torch.randn(24, 24), torch.randn(24, 24), torch.randn(5, 24)
    per_in, per_out = split_heads_in(w_in, 4), split_heads_out(w_out, 4)  # (H,D,Dh), (H,Dh,D)
    assert per_in.shape == (4, 24, 6) and per_out.shape == (4, 6, 24)
    full_q = x @ w_in.T  # (T,D)
    for h in range(4):
        assert_close_to_scale(x @ per_in[h], full_q[:, h * 6:(h + 1) * 6], 1e-5)
    ctx = torch.randn(4, 5, 6)  # (H,T,Dh)
    summed = sum(ctx[h] @ per_out[h] for h in range(4))
    concat = merge_heads(ctx[None])[0] @ w_out.T
    assert_close_to_scale(summed, concat, 1e-5)


def test_rows_sum_to_one_and_padded_keys_get_zero(tiny):
    result = run(tiny, ["a short one", "a much longer sentence with several more words in it"], path="explicit")
    maps = result.attention()  # (B,L,H,T,T)
    n = result.lengths[0]
    assert_close_to_scale(maps[0, :, :, :n].sum(-1), torch.ones_like(maps[0, :, :, :n, 0]), 1e-5)
    assert maps[0, :, :, :, n:].abs().max().item() == 0.0
    assert maps[0, :, :, n:, :].abs().max().item() == 0.0
    assert (maps >= 0).all()


def test_tiny_model_explicit_matches_its_eager_reference(tiny):
    texts = ["hello there", "the cat sat on the mat because it was warm"]
    result = run(tiny, texts, path="explicit")
    with torch.inference_mode():
        ref = tiny.model(input_ids=result.batch.input_ids, attention_mask=result.batch.attention_mask,
                         output_attentions=True)
    mask = result.batch.attention_mask[:, None, :, None].float()  # padded query rows are 0 in ours
    for layer in range(tiny.n_layers):
        assert_close_to_scale(result.layer_maps(layer), ref.attentions[layer] * mask, 1e-5, what=layer)
    real = result.batch.attention_mask[..., None].bool()
    assert_close_to_scale(result.last_hidden_state, ref.last_hidden_state, 1e-4, real)


def test_fused_path_on_tiny_model_rebuilds_each_head(tiny):
    text = "one two three four five six"
    explicit, fused = run(tiny, text, path="explicit"), run(tiny, text, path="fused")
    for layer in range(tiny.n_layers):
        for head in range(tiny.n_heads):
            assert_close_to_scale(fused.head_map(layer, head), explicit.head_map(layer, head), 1e-5)


def test_auto_path_picks_by_length(tiny, bundled):
    assert run(tiny, "short text", path="auto").path == "explicit"
    from tests.conftest import long_text

    long = run(bundled, long_text(300), path="auto")
    assert long.path == "fused" and "auto" in long.path_reason


def test_head_outputs_are_the_heads_context(tiny):
    result = run(tiny, "a b c d", path="explicit")
    layer, head = 1, 2
    probs = result.layer_probs[layer][:, head]  # (B,T,T)
    # v is not stored; check context = probs @ v via W_V from the real layer input
    x = result.hidden_states[layer]
    w = tiny.head_weights(layer)
    v = x @ w.w_v[head] + w.b_v[head]  # (B,T,Dh)
    assert_close_to_scale(result.head_outputs()[:, layer, head], probs @ v, 1e-5)


def test_bfloat16_weights_run_both_paths(tiny_dir):
    from mha_core import load_model

    low = load_model(tiny_dir, dtype=torch.bfloat16)
    text = "the cat sat on the mat because it was warm"
    reference = run(load_model(tiny_dir), text, path="explicit")
    for path in ("explicit", "fused"):
        result = run(low, text, path=path)
        assert result.hidden_states[-1].dtype == torch.bfloat16
        maps = result.attention()
        assert maps.dtype == torch.float32
        assert_close_to_scale(maps.sum(-1), torch.ones_like(maps[..., 0]), 2e-2)
        assert_close_to_scale(maps, reference.attention(), 5e-2)


def test_the_fused_path_keeps_no_quadratic_maps_or_per_head_outputs(tiny):
    fused = run(tiny, "a b c d", path="fused")
    assert fused.layer_probs is None and fused.layer_context is None
    with pytest.raises(ValueError, match="path='explicit'"):
        fused.head_outputs()


@pytest.mark.parametrize("keys", [14, 15, 16, 30])
def test_a_cuda_bias_is_broadcast_into_rows_aligned_to_16_elements(keys):
    """CUDA's efficient kernel refuses a bias whose strides are not multiples of 16 bytes: seen on an H200 with a
    padded batch of decoder texts (14 pieces). The bias is the same values in aligned rows."""
    causal_and_padding = torch.randn(2, 1, keys, keys)  # (B,1,T,S)
    full = aligned_bias(causal_and_padding, (2, 3, keys, keys))  # (B,H,T,S)
    assert full.shape == (2, 3, keys, keys) and torch.equal(full, causal_and_padding.expand(2, 3, keys, keys))
    assert all(stride % 16 == 0 for stride in full.stride()[:-1]) and full.stride(-1) == 1
    padded = keys + (-keys) % 16  # the heads stay a view: memory for one copy of the rows, not one per head
    assert full.untyped_storage().nbytes() == 2 * keys * padded * full.element_size()
