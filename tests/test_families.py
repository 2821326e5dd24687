"""Every supported family, as a tiny random model built from its transformers config: our recompute (explicit
and fused) equals transformers' eager attention in every layer and head, with padding in the batch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from mha_core import load_model, run
from mha_core.engine.arch import SUPPORTED_MODEL_TYPES
from tests.tiny_models import CONFIGS, SEQ2SEQ_CONFIGS, VISION_CONFIGS, make_tiny
from tests.tolerance import assert_close_to_scale

TEXTS = ["The animal didn't cross the street because it was too tired.", "A short one."]


@pytest.fixture(scope="module", params=list(CONFIGS))
def family(request, tmp_path_factory):
    model = load_model(make_tiny(request.param, tmp_path_factory.mktemp(request.param)))
    batch = run(model, TEXTS, path="explicit").batch
    with torch.inference_mode():
        ref = model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
    return request.param, model, ref


def test_the_table_covers_every_supported_family():
    vision = set(VISION_CONFIGS) - {"dinov2_swiglu"}  # DINOv2 with SwiGLU: a variant of a family (tests/test_vision.py)
    assert set(CONFIGS) | set(SEQ2SEQ_CONFIGS) | vision == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_maps_and_hidden_states_equal_transformers_eager(family, path):
    name, model, ref = family
    result = run(model, TEXTS, path=path)
    mask = result.batch.attention_mask.bool()  # (B,T)
    rows = mask[:, None, :, None] & mask[:, None, None, :]  # (B,1,T,T) real query and key
    assert len(ref.attentions) == result.n_layers
    for layer in range(result.n_layers):
        ours, theirs = result.layer_maps(layer), ref.attentions[layer].float()  # (B,H,T,T)
        assert ours.shape == theirs.shape and ours.shape[1] == model.n_heads  # per query head
        assert_close_to_scale(ours, theirs, 2e-5, rows, f"{name} layer {layer} ({path})")
    assert_close_to_scale(result.last_hidden_state, ref.last_hidden_state, 1e-4, mask[..., None], name)


def test_decoders_are_causal_and_grouped_where_the_config_says(family):
    name, model, _ = family
    result = run(model, TEXTS[0])
    maps = result.layer_maps(0)[0]  # (H,T,T)
    upper = torch.triu(torch.ones_like(maps[0], dtype=torch.bool), diagonal=1)
    if model.causal:
        assert maps[:, upper].abs().max().item() == 0.0  # nothing looks ahead
    else:
        assert maps[:, upper].min().item() > 0.0
    assert model.n_kv_heads == {"llama": 2, "qwen2": 1, "mistral": 2, "qwen3": 2, "phi3": 2, "gemma2": 2,
                                "gemma3_text": 1}.get(name, model.n_heads)
    if name == "mistral":  # sliding window of 6: a query sees at most 6 keys
        assert (maps > 0).sum(-1).max().item() == 6


def test_one_unpadded_text_on_the_fused_path_uses_the_kernels_causal_mode(family):
    name, model, _ = family
    fused, explicit = run(model, TEXTS[0], path="fused"), run(model, TEXTS[0], path="explicit")
    masked = model.arch.sliding_window is not None or model.arch.alibi  # a bias the kernel's causal mode cannot add
    if not model.arch.fused_exact:  # Gemma 2 caps its scores: the explicit path runs, and says why
        assert fused.path == "explicit" and "caps its attention scores" in fused.path_reason
    else:
        assert fused.backend.endswith(", causal") == (model.causal and not masked), fused.backend
    assert_close_to_scale(fused.attention(), explicit.attention(), 2e-5, what=name)


@pytest.mark.parametrize("family, overrides", [("opt", {"do_layer_norm_before": False}),
                                               ("gpt_neox", {"use_parallel_residual": False})])
def test_the_other_placement_of_a_family_equals_transformers_too(tmp_path, family, overrides):
    model = load_model(make_tiny(family, tmp_path, **overrides))
    assert model.arch.pre_norm == overrides.get("do_layer_norm_before", True)
    assert not model.arch.parallel
    batch = run(model, TEXTS, path="explicit").batch
    with torch.inference_mode():
        ref = model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
    for path in ("explicit", "fused"):
        result = run(model, TEXTS, path=path)
        mask = result.batch.attention_mask.bool()
        assert_close_to_scale(result.last_hidden_state, ref.last_hidden_state, 1e-5, mask[..., None], path)
        for layer in range(result.n_layers):
            rows = mask[:, None, :, None] & mask[:, None, None, :]
            assert_close_to_scale(result.layer_maps(layer), ref.attentions[layer], 1e-5, rows, (family, layer))


def test_an_opt_that_projects_its_embeddings_is_refused_in_one_sentence(tmp_path):
    from mha_core import ModelLoadError

    with pytest.raises(ModelLoadError, match="word_embed_proj_dim.*supported are the encoders"):
        load_model(make_tiny("opt", tmp_path, word_embed_proj_dim=16))


ARCH_OWNERS = ("mha_core/engine/arch.py", "mha_core/engine/loading/bundled")  # arch, and the bundled-model loaders


def family_rules(tree: ast.AST) -> list[int]:
    """Lines of `tree` that branch on a family's name: a comparison with one (== "whisper", in ("bert", …)) or a
    table keyed by them."""
    def names(node: ast.AST) -> bool:
        items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return any(isinstance(item, ast.Constant) and item.value in SUPPORTED_MODEL_TYPES for item in items)

    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and any(names(side) for side in [node.left, *node.comparators])
            or isinstance(node, ast.Dict) and any(key is not None and names(key) for key in node.keys)]


def test_no_family_rule_outside_arch():
    root = Path(__file__).resolve().parents[1]
    found = {str(path.relative_to(root)): lines for path in sorted([*root.glob("mha_core/**/*.py"),
                                                                    *root.glob("views/**/*.py")])
             if not str(path.relative_to(root)).startswith(ARCH_OWNERS)
             and (lines := family_rules(ast.parse(path.read_text())))}
    assert not found, f"branches on a family's name outside engine/arch.py: {found}"
    assert family_rules(ast.parse('model.arch.family == "whisper"\nx = {"bert": 1}')) == [1, 2]  # the probe sees them
