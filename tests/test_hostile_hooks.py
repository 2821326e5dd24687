"""Issue 78, fault 9 (the hooks part): run_with_hooks and run_with_cache say what is wrong in one sentence
(InputError) before or where it goes wrong, never a TypeError, IndexError or RuntimeError from deep inside, and never
silently: inputs the model does not read, a hook's return unlike what it was given (shape, dtype, device, type), NaN
or infinity a hook puts in, hook names the model has no point of, a target for a model without a decoder. A user's
own exception from a hook passes through unchanged, as in TransformerLens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import InputError, hook_names, load_model, run_with_cache, run_with_hooks
from tests.tiny_models import make_tiny

TEXT = "The animal didn't cross the street."
PATHS = ["explicit", "fused"]
POINTS = ["blocks.0.attn.hook_q", "blocks.0.attn.hook_pattern", "blocks.1.attn.hook_z", "blocks.0.hook_resid_post"]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return load_model(make_tiny("llama", tmp_path_factory.mktemp("llama")))


def returning(make):
    return lambda tensor, _: make(tensor)


def in_place_inf(tensor, _):
    tensor[..., 0] = float("inf")


BAD_RETURNS = {  # case -> (hook, what the error says came back)
    "shape": (returning(lambda t: t[..., :1]), "returned a tensor of shape"),
    "dtype": (returning(lambda t: t.double()), "torch.float64 on cpu"),
    "meta": (returning(lambda t: t.to("meta")), "torch.float32 on meta"),
    "str": (returning(lambda _: "zero"), "returned a value of type str"),
    "ndarray": (returning(lambda t: np.zeros(tuple(t.shape), np.float32)), "returned a value of type ndarray"),
}
NOT_FINITE = {  # case -> hook putting NaN or infinity in (returned, or in place)
    "nan returned": returning(lambda t: t * float("nan")),
    "inf returned": returning(lambda t: t.clone().fill_(float("-inf"))),
    "inf in place": in_place_inf,
}


@pytest.mark.parametrize("verb", ["hooks", "cache"])
@pytest.mark.parametrize("inputs", [None, 7, [3, 4]])
def test_inputs_the_model_does_not_read_are_one_sentence(llama, verb, inputs):
    call = {"hooks": lambda: run_with_hooks(llama, inputs), "cache": lambda: run_with_cache(llama, inputs)}[verb]
    with pytest.raises(InputError, match=rf"^run_with_{verb}\(\) takes inputs as str or Sequence\[str\]") as caught:
        call()
    assert caught.value.code == "api_argument_type"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("case", sorted(BAD_RETURNS))
def test_a_return_unlike_the_tensor_given_names_the_point_and_both(llama, case, point, path):
    hook, came_back = BAD_RETURNS[case]
    with pytest.raises(InputError) as caught:
        run_with_cache(llama, TEXT, names_filter=point, path=path, fwd_hooks=[(point, hook)])
    _, cache = run_with_cache(llama, TEXT, names_filter=point, path=path)
    given = cache[point]
    said = str(caught.value)
    assert caught.value.code == "hook_returned_unlike" and f"The hook at {point} returned" in said
    assert came_back in said and f"a tensor of shape {tuple(given.shape)}, torch.float32 on cpu" in said, said


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("case", sorted(NOT_FINITE))
def test_nan_or_infinity_a_hook_puts_in_is_refused(llama, case, point):
    with pytest.raises(InputError, match=rf"^The hook at {point} put \d+ NaN or infinite values") as caught:
        run_with_hooks(llama, [TEXT, "A short one."], [(point, NOT_FINITE[case])])
    assert caught.value.code == "hook_returned_not_finite"


@pytest.mark.parametrize(("name", "nearest"), [("blocks.99.attn.hook_zz", "blocks.1.attn.hook_z"),
                                               ("hook_Z", "blocks.1.attn.hook_z"),
                                               ("blocks.2.attn.hook_z", "blocks.1.attn.hook_z"),
                                               ("blocks.0.attn.hook_pat", "blocks.0.attn.hook_pattern"),
                                               ("vision.blocks.0.hook_resid_pre", "blocks.0.hook_resid_pre")])
@pytest.mark.parametrize("given_as", ["fwd_hooks", "names_filter", "names list"])
def test_a_hook_name_the_model_has_not_is_refused_with_the_nearest(llama, name, nearest, given_as):
    calls = {"fwd_hooks": lambda: run_with_hooks(llama, TEXT, [(name, lambda t, _: None)]),
             "names_filter": lambda: run_with_cache(llama, TEXT, names_filter=name),
             "names list": lambda: run_with_cache(llama, TEXT, names_filter=["blocks.0.attn.hook_z", name])}
    with pytest.raises(InputError) as caught:
        calls[given_as]()
    said = str(caught.value)
    assert caught.value.code == "hook_point_unknown" and f"no hook point {name!r}" in said
    assert nearest in said.split("nearest: ")[1].split(")")[0], said
    assert "blocks.<0 to 1>.<hook_resid_pre, attn.hook_q" in said and "\n" not in said


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_target_for_a_model_without_a_decoder_is_refused(llama, tiny, family):
    model = {"bert": tiny, "llama": llama}[family]
    for call in (lambda: run_with_hooks(model, TEXT, target="Das Tier"),
                 lambda: run_with_cache(model, TEXT, target=["Das Tier"])):
        with pytest.raises(InputError, match="has no decoder that reads a source: a target text needs") as caught:
            call()
        assert caught.value.code == "needs_an_encoder_decoder"


def test_the_users_own_exception_passes_through_unchanged(llama):
    class Mine(Exception):
        pass

    raised = Mine("my hook gave up")

    def hook(tensor, _):
        raise raised

    for call in (lambda: run_with_hooks(llama, TEXT, [("blocks.0.attn.hook_z", hook)]),
                 lambda: run_with_cache(llama, TEXT, fwd_hooks=[(lambda n: n.endswith("hook_pattern"), hook)])):
        with pytest.raises(Mine) as caught:
            call()
        assert caught.value is raised


def test_good_hooks_and_every_listed_name_still_run(llama):
    """The checks refuse only what is wrong: a replacement like the tensor given, an edit in place, and a cache of
    every name hook_names lists."""
    names = hook_names(llama)
    ablated = run_with_hooks(llama, TEXT, [("blocks.1.attn.hook_z", returning(torch.zeros_like)),
                                           ("blocks.0.attn.hook_pattern", returning(lambda p: p.flip(-1)))])
    _, cache = run_with_cache(llama, TEXT, names_filter=list(names))
    assert list(cache) == list(run_with_cache(llama, TEXT)[1]) == list(names)  # every point a run passes, in order
    assert ablated.last_hidden_state.isfinite().all()
