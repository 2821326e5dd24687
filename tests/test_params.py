"""Every number the parameters page shows, against numel() of real modules."""

from __future__ import annotations

import json

import pytest
import torch

from mha_core.analysis.params.counts import count_parameters, head_count, head_weight_norms, model_breakdown
from mha_core.analysis.params.shapes import (
    ShapeError,
    attention_matrix_bytes,
    count_shape,
    crossover_length,
    kv_cache_bytes_per_token,
    make_shape,
    projection_flops,
    score_flops,
    single_head_equivalent,
)
from tests.conftest import CliRun
from tests.conftest import cli as run_cli
from tests.tiny_models import CONFIGS


@pytest.mark.parametrize("kwargs", [
    {"embed_dim": 512, "num_heads": 8},
    {"embed_dim": 512, "num_heads": 8, "bias": False},
    {"embed_dim": 512, "num_heads": 8, "kdim": 256, "vdim": 128},
    {"embed_dim": 384, "num_heads": 12, "kdim": 100, "vdim": 100, "bias": False},
    {"embed_dim": 96, "num_heads": 1},
])
def test_calculator_equals_torch_multihead_attention(kwargs):
    module = torch.nn.MultiheadAttention(**kwargs)
    shape = make_shape(kwargs["embed_dim"], kwargs["num_heads"], bias=kwargs.get("bias", True),
                       kdim=kwargs.get("kdim"), vdim=kwargs.get("vdim"))
    count = count_shape(shape)
    expected = sum(p.numel() for p in module.parameters())
    assert count.total == count.torch_mha_total == expected == count_parameters(module).total


def test_the_classroom_example():
    count = count_shape(make_shape(512, 8))
    assert count.total == 1_050_624 == 4 * 512**2 + 4 * 512
    assert count.per_matrix["W_Q"] == 512 * 512 and count.per_matrix["b_O"] == 512


def test_grouped_and_multi_query_shapes_count_real_linears():
    gqa = count_shape(make_shape(512, 8, n_kv_heads=2))
    assert gqa.torch_mha_total is None  # nn.MultiheadAttention cannot express GQA
    linears = [torch.nn.Linear(512, 512), torch.nn.Linear(512, 128), torch.nn.Linear(512, 128),
               torch.nn.Linear(512, 512)]
    assert gqa.total == sum(p.numel() for m in linears for p in m.parameters())
    assert make_shape(512, 8, n_kv_heads=1).kind.startswith("multi-query")


def test_single_head_has_the_same_parameters():
    for shape in (make_shape(512, 8), make_shape(384, 12, bias=False), make_shape(768, 12, d_k=32, d_v=32)):
        assert count_shape(single_head_equivalent(shape)).total == count_shape(shape).total


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"d_model": 510, "n_heads": 8}, "not divisible"),
    ({"d_model": 512, "n_heads": 0}, "positive"),
    ({"d_model": -4, "n_heads": 2}, "positive"),
    ({"d_model": 10**9, "n_heads": 8}, "limit"),
    ({"d_model": 512, "n_heads": 8, "n_kv_heads": 3}, "evenly"),
    ({"d_model": 512, "n_heads": 8, "d_k": 0}, "d_k"),
])
def test_impossible_shapes_say_why(kwargs, message):
    with pytest.raises(ShapeError, match=message):
        make_shape(**kwargs)


def test_costs():
    s = make_shape(512, 8)
    assert projection_flops(s, 10) == 2 * 10 * 4 * 512 * 512
    assert score_flops(s, 10) == 2 * 100 * 8 * 128
    assert crossover_length(s) == 1024  # 2 * d_model for standard MHA
    assert projection_flops(s, 1024) == score_flops(s, 1024)
    assert attention_matrix_bytes(s, 100) == (8 * 100 * 100 * 4, 8 * 100 * 4)
    assert kv_cache_bytes_per_token(s, 6) == 6 * 8 * 128 * 2
    assert kv_cache_bytes_per_token(make_shape(512, 8, n_kv_heads=1), 6) == 6 * 128 * 2


def test_bundled_model_breakdown(bundled):
    b = model_breakdown(bundled)
    assert b.total == sum(p.numel() for p in bundled.model.parameters()) == 22_713_216
    per_layer_attention = 4 * 384 * 384 + 4 * 384
    assert b.attention_total == 6 * per_layer_attention and b.attention_has_biases
    assert b.group_total("layer 0") == sum(p.numel() for p in bundled.model.encoder.layer[0].parameters())
    assert {r.part for r in b.rows if r.group == "layer 3"} >= {"W_Q", "b_O", "FFN in W", "output.LayerNorm β"}


def test_decoder_breakdown_counts_gqa_projections_and_tied_embeddings_once(decoder):
    b = model_breakdown(decoder)
    gqa = count_shape(make_shape(576, 9, 64, 64, n_kv_heads=3, bias=False))
    for layer in (0, 29):
        rows = {r.part: r.count for r in b.rows if r.group == f"layer {layer}" and r.kind == "attention"}
        assert rows == {"W_Q": 576 * 576, "W_K": 576 * 192, "W_V": 576 * 192, "W_O": 576 * 576}
        assert sum(rows.values()) == gqa.total  # the calculator's GQA row agrees with the real modules
    assert b.attention_total == 30 * gqa.total and not b.attention_has_biases  # its label says no biases
    embeddings = [r for r in b.rows if r.group == "embeddings"]
    assert [(r.part, r.count) for r in embeddings] == [("word embeddings", 49152 * 576)]  # lm_head is tied
    assert b.total == 134_515_008 and [r.group for r in b.rows][-1] == "final norm"


def test_head_slices_reassemble_the_full_matrices(bundled):
    for layer in (0, 5):
        hw, a = bundled.head_weights(layer), bundled.layers[layer].attention
        assert torch.equal(torch.cat(list(hw.w_q.transpose(1, 2)), dim=0), a.w_q)  # rows per head
        assert torch.equal(torch.cat(list(hw.w_k.transpose(1, 2)), dim=0), a.w_k)
        assert torch.equal(torch.cat(list(hw.w_v.transpose(1, 2)), dim=0), a.w_v)
        assert torch.equal(torch.cat(list(hw.w_o.transpose(1, 2)), dim=1), a.w_o)  # columns per head
        assert torch.equal(hw.b_q.reshape(-1), a.b_q)
    h = head_count(bundled)
    assert (h.q, h.k, h.v, h.o) == (384 * 32 + 32,) * 3 + (32 * 384,)
    assert 12 * (h.q + h.k + h.v + h.o) + 384 == 4 * 384 * 384 + 4 * 384


def test_head_weight_norms(bundled):
    qk, ov = head_weight_norms(bundled)
    assert qk.shape == ov.shape == (6, 12)
    hw = bundled.head_weights(2)
    assert torch.isclose(qk[2, 7], torch.linalg.matrix_norm(hw.w_q[7] @ hw.w_k[7].T))
    assert torch.isclose(ov[2, 7], torch.linalg.matrix_norm(hw.w_v[7] @ hw.w_o[7]))


def cli(*args: str) -> CliRun:
    return run_cli("params", *args)


@pytest.mark.slow
def test_cli_params_for_the_model():
    proc = cli("--json", "-")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["total"] == 22_713_216 and data["attention_total"] == 6 * (4 * 384 * 384 + 4 * 384)
    assert data["per_head"] == {"q": 12320, "k": 12320, "v": 12320, "o": 12288, "kv_shared_by": 1}
    assert len(data["layers"]) == 6 and data["layers"][0]["params"]["W_Q"] == 147456


@pytest.mark.slow
def test_cli_params_calculator():
    data = json.loads(cli("--d-model", "512", "--heads", "8", "--json", "-").stdout)
    assert data["total"] == data["torch_multihead_attention_total"] == 1_050_624
    data = json.loads(cli("--d-model", "512", "--heads", "8", "--kv-heads", "2", "--no-bias").stdout)
    assert data["total"] == 2 * 512 * 512 + 2 * 512 * 128 and data["kind"].startswith("grouped")
    proc = cli("--d-model", "510", "--heads", "8")
    assert proc.returncode == 2 and "not divisible" in proc.stderr and "Traceback" not in proc.stderr


def test_kv_cache_figure_compares_mha_gqa_mqa():
    from mha_core.figures.params import kv_cache_figure, kv_variants
    from mha_core.figures.spec import array_of

    shape = make_shape(512, 8)
    assert [v.n_kv_heads for v in kv_variants(shape).values()] == [8, 4, 1]
    fig = kv_cache_figure(shape, n_layers=6, n_max=1000)
    mha, gqa, mqa = (array_of(trace["y"])[-1] for trace in fig["data"])
    assert mha == 1000 * kv_cache_bytes_per_token(shape, 6) and mha == 2 * gqa == 8 * mqa


def test_decoder_head_slices_count_only_what_the_modules_hold(decoder):  # issue 19, item 6
    from mha_core.analysis.params.counts import head_slices
    from mha_core.figures.params import layer_stack_figure

    q, k, v, o = head_slices(decoder)
    assert (q.count, q.bias, q.slices, q.slice_shape) == (576 * 64, 0, 9, (64, 576))  # no bias in SmolLM2
    assert (k.slices, k.serves, v.slices, o.slices) == (3, 3, 3, 9)
    layer0 = sum(r.count for r in model_breakdown(decoder).rows if r.group == "layer 0" and r.kind == "attention")
    assert sum(s.count * s.slices for s in (q, k, v, o)) == layer0  # the slices tile the modules exactly
    assert head_count(decoder).kv_shared_by == 3
    assert "rows h·64 … h·64+63" in q.owner and "g·64" in k.owner
    names = [trace["name"] for trace in layer_stack_figure(model_breakdown(decoder))["data"]]
    assert "W_Q, W_K, W_V fused (GPT-2)" not in names and "W_Q + b_Q" in names


def test_encoder_legend_names_only_its_own_pieces(bundled):  # issue 19, item 6
    from mha_core.figures.params import layer_stack_figure

    names = [trace["name"] for trace in layer_stack_figure(model_breakdown(bundled))["data"]]
    assert "W_Q, W_K, W_V fused (GPT-2)" not in names and "LayerNorms" in names


def test_the_tutorial_miscount_is_computed_for_any_standard_shape():  # issue 20, section 2: no 512/8 literal
    from mha_core.analysis.params.shapes import count_shape, make_shape, two_bias_miscount

    for d_model, heads in ((512, 8), (768, 12), (64, 4)):
        shape = make_shape(d_model, heads)
        wrong = two_bias_miscount(shape)
        assert count_shape(shape).total - wrong == 2 * d_model  # exactly two bias vectors short
    assert two_bias_miscount(make_shape(512, 8)) == 1_049_600
    assert two_bias_miscount(make_shape(512, 8, bias=False)) is None
    assert two_bias_miscount(make_shape(512, 8, n_kv_heads=2)) is None


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_every_familys_attention_is_counted_as_attention(family_dirs, family):
    from mha_core import load_model
    from mha_core.analysis.params.counts import calculator_check

    model = load_model(family_dirs[family])
    breakdown = model_breakdown(model)
    check = calculator_check(model, breakdown)
    assert check.agrees and check.counted > 0, family  # W_Q, W_K, W_V, W_O found, fused or apart
    misread = [r.name for r in breakdown.rows if r.kind == "feed-forward" and "att" in r.name]
    assert not misread, misread  # no attention module counted as the MLP


def test_head_weight_norms_of_grouped_query_heads(family_dirs):
    """GQA (the tiny llama: 4 query heads share 2 key/value heads): query head h reads key/value head h // 2, as
    the attention does; SmolLM2's 9 query and 3 key/value heads once raised here, MQA broadcast silently."""
    from mha_core import load_model

    model = load_model(family_dirs["llama"])
    group = model.n_heads // model.n_kv_heads
    assert 1 < group < model.n_heads
    qk, ov = head_weight_norms(model)
    hw = model.head_weights(1)
    for head in range(model.n_heads):
        assert torch.isclose(qk[1, head], torch.linalg.matrix_norm(hw.w_q[head] @ hw.w_k[head // group].T))
        assert torch.isclose(ov[1, head], torch.linalg.matrix_norm(hw.w_v[head // group] @ hw.w_o[head]))


WIDE_HEADS = ("llama", "mistral", "qwen3", "gemma2", "gemma3_text")  # the families whose config sets head_dim apart


@pytest.mark.parametrize("family", WIDE_HEADS)
def test_the_model_s_cost_numbers_use_its_head_dim_not_d_model_over_h(family, tmp_path):
    """Issue 77.4: lesson step 10 gave Gemma 3 270M 14,976 B per piece for its one key/value head (d_v taken as
    640 / 4 = 160): the shape is read from the modules (here head_dim 16 on d_model 32 with 4 heads, not 8), every
    KV-cache line counts L x g x (d_k + d_v) x 2 bytes, and the model's own layout is the line named as its own."""
    from mha_core import load_model
    from mha_core.analysis.params.counts import attention_shape, calculator_check
    from mha_core.figures.params import kv_cache_figure
    from mha_core.figures.spec import array_of
    from tests.tiny_models import make_tiny

    model = load_model(make_tiny(family, tmp_path / family, head_dim=16))
    config = model.model.config
    assert config.head_dim == 16 != config.hidden_size // config.num_attention_heads
    shape = attention_shape(model)
    assert (shape.d_k, shape.d_v, shape.n_kv_heads) == (16, 16, config.num_key_value_heads)
    assert calculator_check(model, model_breakdown(model)).agrees
    fig = kv_cache_figure(shape, model.n_layers, 1000, owner="tiny")
    per_piece = {trace["name"]: array_of(trace["y"])[-1] / 1000 for trace in fig["data"]}
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    expected = {g: layers * g * (16 + 16) * 2 for g in range(1, heads + 1) if heads % g == 0}
    assert set(per_piece.values()) <= set(expected.values()) and expected[heads] in per_piece.values()
    own = [name for name in per_piece if "(tiny's own)" in name]
    assert len(own) == 1 and per_piece[own[0]] == expected[config.num_key_value_heads]
