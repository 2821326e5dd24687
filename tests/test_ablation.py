"""Head ablation: the batched grid, the joint ablation, and what ablating means, on tiny models."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.lm.ablation import ablate_heads, ablation_grid, final_states
from mha_core.engine.forward import forward
from mha_core.engine.tokens import InputError, tokenize

TEXT = "The animal didn't cross the street because it was tired, said the capital of France"


def test_ablating_nothing_reproduces_the_model(tiny):
    batch = tokenize(tiny.tokenizer, TEXT, tiny.max_length)
    nothing = [torch.zeros(1, tiny.n_heads, dtype=torch.bool) for _ in tiny.layers]
    for mode in ("zero", "mean"):
        states = final_states(tiny, batch, nothing, mode)
        assert torch.equal(states, forward(tiny, batch, path="explicit").hidden_states[-1])


@pytest.mark.parametrize(("family", "measure"), [("bert", "embedding"), ("gpt2", "loss"), ("llama", "target"),
                                                ("distilbert", "coref")])
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_the_batched_grid_equals_ablating_each_head_alone(family_dirs, family, measure, mode):
    model = load_model(family_dirs[family])
    if measure != "embedding":  # the tiny decoders' embeddings serve as their language-model head
        model = replace(model, config=replace_config(model.config))
    target = "france" if measure == "target" else None
    grid = ablation_grid(model, TEXT, mode, measure, target=target)
    assert grid.effects.shape == (model.n_layers, model.n_heads)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            alone = ablate_heads(model, TEXT, [(layer, head)], mode, measure, target=target)
            assert abs(grid.effects[layer, head] - alone) <= 1e-5, (layer, head)
    assert np.abs(grid.effects).max() > 0


def replace_config(config: object) -> object:
    config.tie_word_embeddings = True
    return config


def test_mean_ablation_equals_transformers_with_the_head_s_slice_replaced_by_its_mean(tiny, tiny_dir):
    """Issue 49: an independent reference for the mean mode: transformers' BERT with a forward pre-hook on the
    output projection replacing the head's slice by its mean over the positions."""
    from transformers import AutoModel

    layer, head, dh = 1, 2, tiny.head_dim
    batch = tokenize(tiny.tokenizer, TEXT, tiny.max_length)
    removed = [torch.zeros(1, tiny.n_heads, dtype=torch.bool) for _ in tiny.layers]
    removed[layer][0, head] = True
    ours = final_states(tiny, batch, removed, "mean")[0]

    def to_mean(_, args):
        x = args[0].clone()
        x[..., head * dh:(head + 1) * dh] = x[..., head * dh:(head + 1) * dh].mean(dim=1, keepdim=True)
        return (x, *args[1:])

    hf = AutoModel.from_pretrained(tiny_dir, attn_implementation="eager", local_files_only=True)
    handle = hf.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(to_mean)
    try:
        with torch.no_grad():
            theirs = hf(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state[0]
    finally:
        handle.remove()
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(ours, final_states(tiny, batch, removed, "zero")[0], atol=1e-3)  # not zeroing


def test_zero_ablation_equals_zeroing_the_heads_slice_of_w_o(tiny):
    layer, head = 1, 2
    dh = tiny.head_dim
    w = tiny.layers[layer].attention
    w_o = w.w_o.clone()
    w_o[:, head * dh:(head + 1) * dh] = 0
    layers = list(tiny.layers)
    layers[layer] = replace(tiny.layers[layer], attention=replace(w, w_o=w_o))
    edited = replace(tiny, layers=tuple(layers))
    batch = tokenize(tiny.tokenizer, TEXT, tiny.max_length)
    removed = [torch.zeros(1, tiny.n_heads, dtype=torch.bool) for _ in tiny.layers]
    removed[layer][0, head] = True
    ablated = final_states(tiny, batch, removed, "zero")
    assert (ablated - forward(edited, batch, path="explicit").hidden_states[-1]).abs().max().item() <= 1e-5
    assert ablation_grid(tiny, TEXT).effects[layer, head] == pytest.approx(
        ablate_heads(tiny, TEXT, [(layer, head)]), abs=1e-6)


def test_bad_choices_are_one_sentence(tiny):
    with pytest.raises(InputError, match="choose zero or mean"):
        ablation_grid(tiny, TEXT, mode="half")
    with pytest.raises(InputError, match="no language-model head"):
        ablation_grid(tiny, TEXT, measure="loss")
    with pytest.raises(InputError, match="needs a target token"):
        ablation_grid(tiny, TEXT, measure="target")


@pytest.mark.slow
def test_cli_ablate_writes_the_grid_and_refuses_bad_input(tmp_path):
    import json

    from tests.conftest import CliRun
    from tests.conftest import cli as run_cli

    def cli(*args: str) -> CliRun:
        return run_cli("ablate", *args)

    out = tmp_path / "ablate.json"
    proc = cli("The animal didn't cross the street because it was too tired.", "--mode", "mean", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert (data["measure"], data["mode"]) == ("embedding", "mean")
    effects = np.array(data["effects"])
    assert effects.shape == (6, 12) and effects.min() >= 0 and effects.max() > 0  # cosine distances
    for args, message in ((("hi", "--measure", "loss"), "no language-model head"),
                          (("hi", "--measure", "target"), "needs a target token"),
                          (("",), "empty")):
        proc = cli(*args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


def test_the_coref_measure_reads_the_inspectors_margin_in_the_best_last_layer_head(bundled):
    from mha_core import run
    from mha_core.analysis.coref.sentence import antecedent_scores, sentence_words
    from tests.conftest import ANIMAL_TIRED

    grid = ablation_grid(bundled, ANIMAL_TIRED, measure="coref")
    words = sentence_words(ANIMAL_TIRED)
    margins = antecedent_scores(run(bundled, ANIMAL_TIRED), 0, words, 8, [1, 6]).margin(0, 1)[-1]  # (H,)
    best = int(np.abs(margins).argmax())
    assert grid.original == pytest.approx(float(margins[best]), abs=1e-5)  # 'it' -> animal minus street
    assert grid.effects.shape == (6, 12) and np.abs(grid.effects[:-1]).max() > 0
    assert np.abs(grid.effects[-1]).max() == 0.0  # a last-layer head's output comes after the maps it is read from


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_the_offered_measures_are_exactly_those_that_run(family_dirs, family):  # issue 20, section 2
    from mha_core import load_model
    from mha_core.analysis.lm.ablation import ablation_grid
    from mha_core.analysis.lm.measures import MEASURES, default_measure, measures_for
    from mha_core.engine.tokens import InputError

    model = load_model(family_dirs[family])
    text = "The animal didn't cross the street because it was too tired."
    offered = measures_for(model)
    assert default_measure(model) in offered
    for measure in MEASURES:
        target = " tired" if measure == "target" else None
        if measure in offered:
            grid = ablation_grid(model, text, "zero", measure, target)
            assert grid.effects.shape == (model.n_layers, model.n_heads)
        else:
            with pytest.raises(InputError, match="no language-model head"):
                ablation_grid(model, text, "zero", measure, target)
    assert ("loss" in offered) == (family == "gpt2")  # the tiny llama's head is not tied to its embeddings


@pytest.mark.parametrize("family", ["gemma2", "gpt2", "bert"])
@pytest.mark.parametrize("free_bytes", [4_000, 400_000, 2**30])
def test_the_sliced_cross_entropy_equals_torch_s_on_the_whole_vocabulary(family_dirs, mlm_dirs, family, free_bytes):
    """The loss measure's vocabulary in slices (rows × vocabulary pieces within free_bytes, the log-sum-exp carried
    over them) equals torch's cross-entropy over the whole logits: Gemma 2's soft-cap, GPT-2's tied head, a
    masked-LM head's transform and bias."""
    import torch.nn.functional as F

    from mha_core.analysis.lm.head import check_lm_head

    model = load_model(mlm_dirs["bert"] if family == "bert" else family_dirs[family])
    head = check_lm_head(model)
    generator = torch.Generator().manual_seed(0)
    states = torch.randn(150, model.d_model, generator=generator) * 3  # with a small budget: 3 blocks of rows
    targets = torch.randint(0, head.w_u.shape[0], (150,), generator=generator)
    expected = F.cross_entropy(head(states).float(), targets, reduction="none")
    torch.testing.assert_close(head.cross_entropy(states, targets, free_bytes), expected, atol=2e-5, rtol=1e-5)
