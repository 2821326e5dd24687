"""TransformerLens-style hooks (engine/hooks.py, engine/hooked.py) on every family's tiny model, both paths:
run_with_cache's hook_pattern equals transformers' eager attentions, and zero-ablating a head through hook_z equals
transformers with that head's slice zeroed where it enters the output projection (a forward pre-hook on W_O)."""

from __future__ import annotations

import pytest
import torch

from mha_core import act_name, hook_names, load_model, run_with_cache, run_with_hooks
from mha_core.engine.seq2seq.forward import source_targets
from mha_core.engine.vision.weights import vision_module
from tests.test_seq2seq import source_of
from tests.tiny_models import CONFIGS, SEQ2SEQ_CONFIGS, VISION_CONFIGS, make_tiny, make_tiny_seq2seq, make_tiny_vision
from tests.tolerance import assert_close_to_scale

TEXTS = ["The animal didn't cross the street because it was too tired.", "A short one."]
TARGETS = ["Das Tier ging nicht über die Straße.", "Kurz."]
PATHS = ["explicit", "fused"]


def output_projection(hf_model, w_o):
    """transformers' module that multiplies the heads' outputs by W_O: the linear whose weight is ours (GPT-2's
    Conv1D stores it transposed)."""
    for module in hf_model.modules():
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            continue
        if weight.shape == w_o.shape and torch.equal(weight, w_o) or (
                weight.shape == w_o.T.shape and torch.equal(weight.T, w_o)):
            return module
    raise AssertionError("no module holds this W_O")


def zeroing(head, head_dim):
    """A pre-hook zeroing one head's slice of the output projection's input (B,T,H*Dh)."""

    def hook(_, args):
        x = args[0].clone()
        x[..., head * head_dim:(head + 1) * head_dim] = 0
        return (x, *args[1:])

    return hook


def zero_head(head):
    def hook(z, _):
        z[:, :, head] = 0

    return hook


def with_pre_hooks(hooks, run):
    handles = [module.register_forward_pre_hook(fn) for module, fn in hooks]
    try:
        with torch.inference_mode():
            return run()
    finally:
        for handle in handles:
            handle.remove()


def real_pairs(rows, cols):
    """(B,1,T,S) a real query row and a real key column (padding in neither)."""
    return rows[:, None, :, None] & cols[:, None, None, :]


@pytest.fixture(scope="module", params=list(CONFIGS))
def text_model(request, tmp_path_factory):
    return request.param, load_model(make_tiny(request.param, tmp_path_factory.mktemp(request.param)))


@pytest.mark.parametrize("path", PATHS)
def test_text_families_pattern_and_zero_ablation_equal_transformers(text_model, path):
    name, model = text_model
    result, cache = run_with_cache(model, TEXTS, path=path)
    batch, mask = result.batch, result.batch.attention_mask.bool()

    def reference():
        return model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True,
                           output_hidden_states=True)

    ref = with_pre_hooks([], reference)
    for layer in range(model.n_layers):
        pattern = cache["pattern", layer]
        assert pattern.shape == (2, model.n_heads, mask.shape[1], mask.shape[1])
        assert_close_to_scale(pattern, ref.attentions[layer], 2e-5, real_pairs(mask, mask), (name, layer, path))
    layer, head = model.n_layers - 1, 1
    ablated = run_with_hooks(model, TEXTS, [(act_name("z", layer), zero_head(head))], path=path)
    projection = output_projection(model.model, model.layers[layer].attention.w_o)
    theirs = with_pre_hooks([(projection, zeroing(head, model.arch.head_dim))], reference)
    moved = (ablated.last_hidden_state - result.last_hidden_state).abs()[mask].max().item()
    assert moved > 1e-3, name  # the head mattered
    assert_close_to_scale(ablated.hidden_states[-2], theirs.hidden_states[-2], 1e-5, mask[..., None], name)
    assert_close_to_scale(ablated.last_hidden_state, theirs.last_hidden_state, 1e-5, mask[..., None], name)


def test_the_points_have_transformerlens_shapes(text_model):
    name, model = text_model
    result, cache = run_with_cache(model, TEXTS[:1])
    t, arch = len(result.tokens[0]), model.arch
    shapes = {"hook_resid_pre": (1, t, arch.d_model), "attn.hook_q": (1, t, arch.n_heads, arch.head_dim),
              "attn.hook_k": (1, t, arch.n_kv_heads, arch.head_dim), "attn.hook_v": (1, t, arch.n_kv_heads,
                                                                                    arch.head_dim),
              "attn.hook_pattern": (1, arch.n_heads, t, t), "attn.hook_z": (1, t, arch.n_heads, arch.head_dim),
              "hook_attn_out": (1, t, arch.d_model), "hook_mlp_out": (1, t, arch.d_model),
              "hook_resid_post": (1, t, arch.d_model)}
    for layer in range(model.n_layers):
        for point, shape in shapes.items():
            assert tuple(cache[f"blocks.{layer}.{point}"].shape) == shape, (name, point)
        assert torch.equal(cache[f"blocks.{layer}.hook_resid_post"], result.hidden_states[layer + 1]) or (
            layer == model.n_layers - 1)
    assert torch.equal(cache["ln_final.hook_normalized"], result.last_hidden_state)
    assert list(cache) == list(hook_names(model)), name  # the names a hook is checked against: every point, in order


@pytest.fixture(scope="module", params=list(SEQ2SEQ_CONFIGS))
def seq2seq(request, tmp_path_factory):
    return request.param, load_model(make_tiny_seq2seq(request.param, tmp_path_factory.mktemp(request.param)))


@pytest.mark.parametrize("path", PATHS)
def test_encoder_decoders_name_their_stacks_and_equal_transformers(seq2seq, path):
    name, model = seq2seq
    source = source_of(name, model)
    result, cache = run_with_cache(model, source, target=TARGETS, path=path)
    target = source_targets(model, source, TARGETS)
    inputs = {"input_features": source.features} if source.features is not None else {
        "input_ids": source.input_ids, "attention_mask": source.attention_mask}

    def reference():
        return model.model(**inputs, decoder_input_ids=target.input_ids, decoder_attention_mask=target.attention_mask,
                           output_attentions=True, output_hidden_states=True)

    ref = with_pre_hooks([], reference)
    assert list(cache) == list(hook_names(model)), name
    s, t = source.attention_mask.bool(), target.attention_mask.bool()
    for layer in range(model.n_layers):
        assert_close_to_scale(cache["pattern", layer, "encoder"], ref.encoder_attentions[layer], 1e-5,
                              real_pairs(s, s), (name, layer, path))
    for layer in range(model.decoder.n_layers):
        assert_close_to_scale(cache["pattern", layer, "decoder"], ref.decoder_attentions[layer], 1e-5,
                              real_pairs(t, t), (name, layer, path))
        cross = cache[f"decoder.blocks.{layer}.cross_attn.hook_pattern"]
        assert_close_to_scale(cross, ref.cross_attentions[layer], 1e-5, real_pairs(t, s), (name, layer, path))
    fwd = [(act_name("z", 0, "encoder"), zero_head(1)), ("decoder.blocks.1.cross_attn.hook_z", zero_head(2))]
    ablated = run_with_hooks(model, source, fwd, target=TARGETS, path=path)
    theirs = with_pre_hooks([
        (output_projection(model.model, model.layers[0].attention.w_o), zeroing(1, model.arch.head_dim)),
        (output_projection(model.model, model.decoder.layers[1].cross_attention.w_o),
         zeroing(2, model.decoder.arch.head_dim)),
    ], reference)
    assert (ablated.decoder.last_hidden_state - result.decoder.last_hidden_state).abs()[t].max() > 1e-3
    assert_close_to_scale(ablated.encoder.last_hidden_state, theirs.encoder_last_hidden_state, 1e-5, s[..., None],
                          name)
    assert_close_to_scale(ablated.decoder.last_hidden_state, theirs.decoder_hidden_states[-1], 1e-5, t[..., None],
                          name)


@pytest.fixture(scope="module", params=list(VISION_CONFIGS))
def vision(request, tmp_path_factory):
    family = request.param
    return family, load_model(make_tiny_vision(family, tmp_path_factory.mktemp("vision") / family))


@pytest.mark.parametrize("path", PATHS)
def test_image_models_name_their_stack_and_equal_transformers(vision, path):
    name, model = vision
    torch.manual_seed(1)
    pixels = torch.randn(2, 3, 32, 32)
    result, cache = run_with_cache(model, pixels, path=path)
    stack = vision_module(model.model)

    def reference():
        return stack(pixel_values=pixels, output_attentions=True, output_hidden_states=True)

    ref = with_pre_hooks([], reference)
    assert list(cache) == list(hook_names(model)), name
    for layer in range(model.n_layers):
        assert_close_to_scale(cache["pattern", layer, "vision"], ref.attentions[layer], 1e-5, what=(name, layer))
    ablated = run_with_hooks(model, pixels, [(act_name("z", 0, "vision"), zero_head(3))], path=path)
    theirs = with_pre_hooks([(output_projection(stack, model.layers[0].attention.w_o),
                              zeroing(3, model.arch.head_dim))], reference)
    assert (ablated.last_hidden_state - result.last_hidden_state).abs().max() > 1e-3
    assert_close_to_scale(ablated.last_hidden_state, theirs.last_hidden_state, 1e-5, what=name)


def test_a_replaced_pattern_is_what_the_heads_read_on_both_paths(text_model):
    """hook_pattern's replacement feeds the heads' outputs: on the fused path the map is rebuilt from the log-sum-exp
    for the hook, and the outputs recomputed from what it returns."""
    name, model = text_model

    def first_key_only(pattern, _):  # (B,H,T,S): head 0 reads only the first piece
        pattern[:, 0] = 0
        pattern[:, 0, :, 0] = 1

    edited = {path: run_with_cache(model, TEXTS[:1], path=path, fwd_hooks=[(act_name("pattern", 0), first_key_only)])
              for path in PATHS}
    plain = run_with_cache(model, TEXTS[:1], path="explicit")[0]
    z = {path: cache["z", 0][0, :, 0] for path, (_, cache) in edited.items()}  # (T,Dh) head 0's output
    v = edited["explicit"][1]["v", 0][0, 0, 0]  # (Dh,) the first piece's value in key/value head 0 (head 0's)
    assert_close_to_scale(z["explicit"], v[None].expand_as(z["explicit"]), 1e-5, what=name)  # the first's value
    assert_close_to_scale(z["fused"], z["explicit"], 1e-5, what=name)
    for path, (result, _) in edited.items():
        assert (result.last_hidden_state - plain.last_hidden_state).abs().max() > 1e-4, (name, path)
