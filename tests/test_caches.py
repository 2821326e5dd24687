"""Issue 80: every cache a server process holds is listed by mha_core.serving.caches.held() with its bytes. The
reference is independent of the registry: every tensor the process holds, found through the garbage collector (each
storage once), before and after. A tensor kept anywhere held() does not list (a head read into a cache of its own, a
prompt start kept unregistered) shows as growth the listing lacks.

The margin: the tensors a process makes besides its caches while a model loads or a start is kept (transformers'
rotary tables rebuilt on the first forward, a tokenizer's id tensors) are small against a model; a model's listed
bytes may differ from the process's growth by 2 % of the model and 1 MB, and held() itself costs no tensor."""

from __future__ import annotations

import functools
import gc
from pathlib import Path

import pytest
import torch

from mha_core.analysis.lm.head import lm_head
from mha_core.engine.cache import start_of
from mha_core.engine.held import Held, kept, registered, tensor_bytes, value_bytes
from mha_core.engine.loading.model import load_model
from mha_core.serving.caches import MODELS_NAME, TOKENIZERS_NAME, Models, held
from mha_core.serving.server import Server

MARGIN, SLACK = 0.02, 2**20  # of the model's bytes, and bytes besides (see the module's docstring)


def process_tensor_bytes() -> int:
    """Every tensor alive in the process (each storage once), as the garbage collector finds them."""
    gc.collect()
    return tensor_bytes(o for o in gc.get_objects() if issubclass(type(o), torch.Tensor))


def listed(models: Models, name: str) -> Held:
    return next(cache for cache in held(None, models) if cache.name == name)


@functools.cache
def quiet() -> Server:
    """A server nobody asks: the listing's stores are its (other tests' servers may be collected meanwhile)."""
    return Server()


def measured_bytes(models: Models) -> int:
    """held()'s measured bytes (tensors, arrays; a tokenizer's are a stated estimate, no tensor)."""
    return sum(cache.bytes for cache in held(quiet(), models) if cache.measured)


def assert_grew_alike(process_growth: int, listed_growth: int, scale: int) -> None:
    assert abs(process_growth - listed_growth) <= MARGIN * scale + SLACK, (process_growth, listed_growth)


def loaded_and_measured(models: Models, folders: list[Path]) -> tuple[int, int]:
    """Load each folder through `models` (with its LM head read, as a prediction would): the process's tensor growth
    and the listing's."""
    before, listed_before = process_tensor_bytes(), measured_bytes(models)
    for folder in folders:
        model = models.get(str(folder))
        assert not isinstance(model, Exception), model
        lm_head(model)
    return process_tensor_bytes() - before, measured_bytes(models) - listed_before


def test_tiny_models_held_are_what_the_process_holds(lm_dirs, mlm_dirs):
    """A decoder with its own unembedding (read at load, checked, held by the model), tied ones, masked-LM heads."""
    models = Models(8, load=load_model)
    folders = [lm_dirs["llama-separate"], lm_dirs["gpt_neox"], lm_dirs["llama-tied"], *mlm_dirs.values()]
    grown, listed_grown = loaded_and_measured(models, folders)
    assert listed(models, MODELS_NAME).entries == listed(models, TOKENIZERS_NAME).entries == len(folders)
    assert listed(models, TOKENIZERS_NAME).bytes > 0 and not listed(models, TOKENIZERS_NAME).measured
    assert grown > 4 * len(folders) * 2**20  # each holds a 30,528 x 32 float32 embedding at least
    assert_grew_alike(grown, listed_grown, grown)


def test_an_untied_head_is_the_model_s_own_and_counted_in_it(lm_dirs):
    models = Models(2, load=load_model)
    model = models.get(str(lm_dirs["llama-separate"]))
    head = lm_head(model)
    assert head is not None and head.w_u.data_ptr() != model.embeddings.word.data_ptr()
    assert dict(model.head_tensors)["lm_head.weight"] is head.w_u  # no copy kept elsewhere
    with_head = listed(models, MODELS_NAME).bytes
    assert with_head >= tensor_bytes(model.model.parameters()) + head.w_u.numel() * head.w_u.element_size()


def test_a_prompt_start_is_listed_with_its_keys_and_values(lm_dirs):
    models = Models(2, load=load_model)
    model = models.get(str(lm_dirs["llama-tied"]))
    starts = lambda: next(cache for cache in registered() if cache.name == "prompt starts")  # noqa: E731
    before, listed_before = process_tensor_bytes(), starts().bytes
    _, cache = start_of(model, "the animal did not cross the street because it was too tired . " * 2)
    keys_values = sum(t.numel() * t.element_size() for pair in cache for t in pair)
    assert keys_values > 0 and starts().bytes - listed_before >= keys_values
    assert_grew_alike(process_tensor_bytes() - before, starts().bytes - listed_before, keys_values)


def test_a_server_s_stores_and_every_registered_cache_are_listed():
    server = Server()
    server.kept("small", ("a", 1), lambda: torch.zeros(1000))
    caches = {cache.name: cache for cache in held(server, Models(1))}
    assert caches["store: small"].entries == 1 and caches["store: small"].bytes == 4000
    every = {cache.name for cache in held(None, Models(1))}  # every live Server's stores, this one's among them
    assert any(name.startswith("store: small") for name in every)
    for name in ("prompt starts", "tagged sentences", "spaCy pipeline", "opened indexes", "click targets",
                 "jieba segmentations", "sentence focus", "index hashes"):
        assert name in caches, name


def test_a_kept_function_lists_its_values_bytes_and_drops_the_least_recent():
    @kept("test: squares", 2)
    def squares(n: int) -> torch.Tensor:
        return torch.ones(n)

    mine = lambda: next(cache for cache in registered() if cache.name == "test: squares")  # noqa: E731
    squares(10), squares(20), squares(10), squares(30)  # 20 is the least recently used
    assert squares.cache_info().currsize == 2 and squares.cache_info().hits == 1
    tensors = 4 * (10 + 30)  # float32 values of the two kept
    assert mine().entries == 2 and tensors <= mine().bytes <= tensors + value_bytes([None, None])


@pytest.mark.slow
def test_each_bundled_model_held_is_what_the_process_holds():
    """The five bundled models loaded through a models' cache of their own (the pages' may hold them already):
    the listing grows by what the process's tensors grow, within the margin, model by model."""
    from mha_core.engine.loading.dirs import bundled_dirs

    models = Models(8, load=load_model)
    for name, folder in bundled_dirs().items():
        grown, listed_grown = loaded_and_measured(models, [folder])
        assert grown > 50 * 2**20, name  # the smallest, MiniLM and DINOv2, hold about 90 MB
        assert_grew_alike(grown, listed_grown, grown)


@pytest.mark.parametrize("damage, code", [("nan", "weights_not_finite"), ("narrow", "weights_size_mismatch")])
def test_a_separate_head_is_checked_as_the_other_weights_are(lm_dirs, tmp_path, damage, code):
    """Before: lm/head.py read lm_head.weight straight from the files on first use, unchecked; a NaN in it made every
    prediction NaN."""
    import shutil

    from safetensors.torch import load_file, save_file

    from mha_core.engine.loading.folder import ModelLoadError

    folder = shutil.copytree(lm_dirs["llama-separate"], tmp_path / "damaged")
    weights = load_file(folder / "model.safetensors")
    head = weights["lm_head.weight"]
    weights["lm_head.weight"] = head.clone().index_fill_(0, torch.tensor([5]), float("nan")) if damage == "nan" else (
        head[:, :-1].contiguous())
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError) as raised:
        load_model(folder)
    assert raised.value.code == code
