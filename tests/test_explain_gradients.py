"""Issue 81, gradients through the one layer loop: the target's gradient with respect to the input embeddings, every
head's attention weights and every head's output equal autograd through transformers' eager model."""

from __future__ import annotations

import pytest
import torch

from mha_core import load_model
from mha_core.engine.budget import BudgetError
from mha_core.engine.gradients import gradients, largest_fitting
from mha_core.engine.tokens import tokenize
from tests.lm_models import TEXT, reference

ANSWER, WRONG = 2184, 2395  # two vocabulary rows: the score is logit(answer) - logit(wrong) after the last piece


def relative(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours.double() - theirs.double()).abs().max() / theirs.double().abs().max())


def logit_margin(model):
    from mha_core.analysis.lm.head import lm_head

    head = lm_head(model)

    def score(final: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
        logits = head(final[:, -1], torch.tensor([ANSWER, WRONG]))
        return logits[:, 0] - logits[:, 1]

    return score


def head_inputs(ref, family: str) -> list[torch.Tensor]:
    """Each layer's W_O input (B,T,H*Dh), kept with its gradient, by a hook on transformers' output projection."""
    kept = []
    blocks = ref.transformer.h if family == "gpt2" else ref.model.layers
    for block in blocks:
        proj = block.attn.c_proj if family == "gpt2" else block.self_attn.o_proj
        proj.register_forward_pre_hook(lambda _, args: kept.append(args[0]) or None)
    return kept


@pytest.mark.parametrize("family", ["llama-tied", "gpt2", "gemma2"])
def test_gradients_equal_autograd_through_transformers_eager_model(lm_dirs, family):
    model = load_model(lm_dirs[family])
    batch = tokenize(model.tokenizer, TEXT, model.max_length, bos=model.bos_id)
    ours = gradients(model, batch, logit_margin(model))
    ref = reference(lm_dirs[family])
    outputs = head_inputs(ref, family)
    words = ref.get_input_embeddings()(batch.input_ids).detach().requires_grad_()
    out = ref(inputs_embeds=words, output_attentions=True)
    score = out.logits[0, -1, ANSWER] - out.logits[0, -1, WRONG]
    found = torch.autograd.grad(score, [words, *out.attentions, *outputs])
    n = model.n_layers
    assert float(ours.score[0]) == pytest.approx(float(score.detach()), rel=1e-5)
    assert relative(ours.words_grad, found[0]) < 1e-5
    for layer in range(n):
        assert relative(ours.probs[layer], out.attentions[layer]) < 1e-5
        assert relative(ours.probs_grad[layer], found[1 + layer]) < 1e-5
        b, h, t, dh = ours.z_grad[layer].shape
        theirs = found[1 + n + layer].view(b, t, h, dh).transpose(1, 2)  # (B,H,T,Dh)
        assert relative(ours.z_grad[layer], theirs) < 1e-5
        assert relative(ours.z[layer], outputs[layer].detach().view(b, t, h, dh).transpose(1, 2)) < 1e-5


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert"])
def test_an_encoders_gradients_equal_autograd_through_transformers(family_dirs, family):
    from transformers import AutoModel

    model = load_model(family_dirs[family])
    batch = tokenize(model.tokenizer, "the animal did not cross the street because it was tired", model.max_length)
    direction = torch.randn(model.d_model, generator=torch.Generator().manual_seed(0))
    ours = gradients(model, batch, lambda final, maps: final[:, 3] @ direction + maps[:, 1, 3, 5])
    ref = AutoModel.from_pretrained(family_dirs[family], attn_implementation="eager").eval()
    words = ref.get_input_embeddings()(batch.input_ids).detach().requires_grad_()
    out = ref(inputs_embeds=words, output_attentions=True)
    score = out.last_hidden_state[0, 3] @ direction + out.attentions[-1][0, 1, 3, 5]
    found = torch.autograd.grad(score, [words, *out.attentions])
    assert relative(ours.words_grad, found[0]) < 1e-5
    for layer in range(model.n_layers):
        assert relative(ours.probs_grad[layer], found[1 + layer]) < 1e-5


def test_a_text_over_the_budget_is_refused_before_any_work_with_the_longest_that_fits(lm_dirs, monkeypatch):
    model = load_model(lm_dirs["gpt2"])
    monkeypatch.setenv("MHA_COMPUTE_MB", "64")
    longest = largest_fitting(model, 1)
    assert 0 < longest <= model.max_length
    monkeypatch.setattr("mha_core.engine.gradients.GRADIENT_COST", 10**6)
    batch = tokenize(model.tokenizer, TEXT, model.max_length, bos=model.bos_id)
    with pytest.raises(BudgetError, match="at most 0 pieces"):
        gradients(model, batch, logit_margin(model))
