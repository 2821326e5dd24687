"""Issue 81: each explanation method against an independent reference. Integrated Gradients = Captum's
IntegratedGradients on transformers' eager model (same baseline, same steps); gradient × attention = Chefer et al.'s
formula written out with transformers' attentions and torch.autograd; occlusion = transformers' forward on the edited
ids; comprehensiveness and sufficiency = a plain loop over transformers' forwards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.explain.explain import explain
from mha_core.analysis.explain.integrated import MAX_STEPS, baseline_embeddings, integrated_gradients
from mha_core.analysis.explain.targets import COREF, MASKED, NEXT_PIECE, target_for
from mha_core.engine.tokens import InputError, tokenize
from tests.lm_models import MASKED as MASKED_TEXT
from tests.lm_models import TEXT, reference

SENTENCE = "the animal did not cross the street because it was too tired"


def relative(ours, theirs) -> float:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    return float(np.abs(ours - theirs).max() / np.abs(theirs).max())


def reference_score(ref, target):
    """The target as a function of transformers' inputs_embeds (B,T,D) -> (B,)."""
    def score(embeds: torch.Tensor) -> torch.Tensor:
        out = ref(inputs_embeds=embeds, output_attentions=target.kind == COREF)
        if target.kind == COREF:
            rows = out.attentions[-1][:, target.probe.head][:, target.probe.pronoun]  # (B,P,T)
            return rows[..., target.probe.a].sum(-1).mean(-1) - rows[..., target.probe.b].sum(-1).mean(-1)
        logits = out.logits[:, target.position]
        if target.wrong_id is not None:
            return logits[:, target.answer_id] - logits[:, target.wrong_id]
        if target.kind == MASKED:
            return torch.softmax(logits.float(), -1)[:, target.answer_id]
        return torch.log_softmax(logits.float(), -1)[:, target.answer_id]

    return score


def captum_ig(ref, model, batch, target, steps, baseline):
    from captum.attr import IntegratedGradients

    words = ref.get_input_embeddings()(batch.input_ids).detach()
    base = baseline_embeddings(model, batch, baseline)
    attributions, delta = IntegratedGradients(reference_score(ref, target)).attribute(
        words, baselines=base, n_steps=steps, method="gausslegendre", internal_batch_size=steps,
        return_convergence_delta=True)
    return attributions[0].sum(-1).detach().numpy(), float(delta[0])


def check_ig(model, ref, text, answer=None, wrong=None, steps=20, baseline="zero"):
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id, keep_mask=True)
    target = target_for(model, batch, answer, wrong)
    ours = integrated_gradients(model, batch, target, steps, baseline)
    theirs, delta = captum_ig(ref, model, batch, target, steps, baseline)
    assert relative(ours.scores, theirs) < 1e-4
    assert ours.delta == pytest.approx(delta, abs=1e-4 * float(np.abs(theirs).sum()))
    return target


@pytest.mark.parametrize("family", ["llama-tied", "llama-separate", "gpt2", "gemma2", "gpt_neox"])
def test_integrated_gradients_equal_captums_on_a_decoder(lm_dirs, family):
    model = load_model(lm_dirs[family])
    target = check_ig(model, reference(lm_dirs[family]), TEXT, "animal", "street",
                      baseline="pad" if family == "gpt2" else "zero")
    assert target.kind == NEXT_PIECE


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert"])
def test_integrated_gradients_equal_captums_on_a_masked_lm(mlm_dirs, family):
    from transformers import AutoModelForMaskedLM

    model = load_model(mlm_dirs[family])
    ref = AutoModelForMaskedLM.from_pretrained(mlm_dirs[family], attn_implementation="eager").eval()
    text = MASKED_TEXT.replace("[MASK]", model.tokenizer.mask_token)
    assert check_ig(model, ref, text).kind == MASKED


@pytest.mark.parametrize("family", ["bert", "xlm-roberta", "qwen3", "mistral", "phi3", "gemma3_text", "bloom", "opt"])
def test_integrated_gradients_equal_captums_on_the_coreference_margin(family_dirs, family):
    from transformers import AutoModel

    model = load_model(family_dirs[family])
    ref = AutoModel.from_pretrained(family_dirs[family], attn_implementation="eager").eval()
    with pytest.MonkeyPatch.context() as patch:  # the margin even where a decoder ties its head to its embeddings
        patch.setattr("mha_core.analysis.explain.targets.lm_head", lambda _: None)
        assert check_ig(model, ref, SENTENCE).kind == COREF


@pytest.mark.slow
def test_integrated_gradients_equal_captums_on_smollm2(decoder):
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(decoder.model_dir, attn_implementation="eager").eval()
    check_ig(decoder, ref, "The animal didn't cross the street because it was too tired. The word 'it' refers to the",
             "animal", "street", steps=8, baseline="pad")


def chefer_relevance(attentions, grads, position):
    """Chefer et al. (2021), written out: R = I; per layer Ā = mean over heads of (∇A ⊙ A)⁺; R <- R + Ā R."""
    t = attentions[0].shape[-1]
    relevance = torch.eye(t, dtype=torch.float64)
    for a, g in zip(attentions, grads, strict=True):
        cam = (g[0] * a[0]).double()
        cam = torch.where(cam > 0, cam, torch.zeros_like(cam)).sum(0) / cam.shape[0]
        relevance = relevance + torch.mm(cam, relevance)
    return relevance[position].numpy()


@pytest.mark.parametrize("family", ["llama-tied", "gemma2"])
def test_gradient_times_attention_is_chefers_formula_on_transformers_attentions(lm_dirs, family):
    model = load_model(lm_dirs[family])
    found = explain(model, TEXT, "animal", "street", methods=["gradxattn"], measure=False)
    ref = reference(lm_dirs[family])
    ids = torch.tensor([found.ids])
    out = ref(input_ids=ids, output_attentions=True)
    target = found.target
    score = out.logits[0, -1, target.answer_id] - out.logits[0, -1, target.wrong_id]
    grads = torch.autograd.grad(score, out.attentions)
    expected = chefer_relevance([a.detach() for a in out.attentions], grads, len(found.ids) - 1)
    assert relative(found.methods["gradxattn"].scores, expected) < 1e-5
    words = found.methods["gradxattn"].word_scores
    assert words.sum() == pytest.approx(expected.sum(), rel=1e-6)


def reference_logit_margin(ref, target, ids):
    logits = ref(input_ids=torch.tensor([ids])).logits[0, -1]
    return float(logits[target.answer_id] - logits[target.wrong_id])


def without(ids, word_of_piece, words):
    return [i for i, w in zip(ids, word_of_piece, strict=True) if w not in words]


def test_occlusion_is_transformers_forward_on_the_text_without_each_word(lm_dirs):
    model = load_model(lm_dirs["gpt2"])
    found = explain(model, TEXT, "animal", "street", methods=["occlusion"], measure=False)
    ref = reference(lm_dirs["gpt2"])
    with torch.no_grad():
        full = reference_logit_margin(ref, found.target, found.ids)
        expected = [full - reference_logit_margin(ref, found.target, without(found.ids, found.word_of_piece, {w}))
                    for w in found.removable]
    assert found.score == pytest.approx(full, rel=1e-5)
    assert relative(found.methods["occlusion"].word_scores[list(found.removable)], expected) < 1e-5
    special = [w for w in range(len(found.words)) if w not in found.removable]
    assert special and not found.methods["occlusion"].word_scores[special].any()


def test_comprehensiveness_and_sufficiency_are_a_plain_loop(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    found = explain(model, TEXT, "animal", "street", methods=["inputxgrad", "occlusion"], curves="full")
    ref = reference(lm_dirs["llama-tied"])
    method = found.methods["inputxgrad"]
    order = sorted(found.removable, key=lambda w: -method.word_scores[w])
    n = len(found.removable)
    with torch.no_grad():
        full = reference_logit_margin(ref, found.target, found.ids)
        deletion = [reference_logit_margin(ref, found.target, without(found.ids, found.word_of_piece, set(order[:k])))
                    for k in range(n + 1)]
        insertion = [reference_logit_margin(ref, found.target, without(
            found.ids, found.word_of_piece, set(found.removable) - set(order[:k]))) for k in range(n + 1)]
    faith = method.faithfulness
    assert faith.ks == (1, 2, 3, 5) and faith.curve_ks == tuple(range(n + 1))
    assert relative(faith.comprehensiveness, [full - deletion[k] for k in faith.ks]) < 1e-5
    assert relative(faith.sufficiency, [full - insertion[k] for k in faith.ks]) < 1e-5
    assert faith.aopc_comprehensiveness == pytest.approx(np.mean([full - deletion[k] for k in faith.ks]), rel=1e-5)
    assert deletion[0] == pytest.approx(full, rel=1e-5)
    assert relative(faith.deletion, deletion) < 1e-5 and relative(faith.insertion, insertion) < 1e-5
    short = explain(model, TEXT, "animal", "street", methods=["inputxgrad"]).methods["inputxgrad"].faithfulness
    assert short.curve_ks == (0, 1, 2, 3, 5, n)
    assert relative(short.deletion, [deletion[k] for k in short.curve_ks]) < 1e-5
    assert relative(short.insertion, [insertion[k] for k in short.curve_ks]) < 1e-5
    assert relative(short.comprehensiveness, faith.comprehensiveness) < 1e-5


def test_the_explanation_json_has_the_issues_shape(lm_dirs):
    model = load_model(lm_dirs["gpt2"])
    found = explain(model, TEXT, "animal", "street", methods=["attention", "rollout", "inputxgrad"], steps=4)
    shown = found.as_json()
    assert set(shown) >= {"model", "ids", "pieces", "words", "word_of_piece", "target", "methods", "ig"}
    assert set(shown["target"]) >= {"answer", "wrong", "answer_id", "wrong_id", "score"}
    n = len(shown["ids"])
    for name, method in shown["methods"].items():
        assert len(method["scores"]) == n and len(method["word_scores"]) == len(shown["words"]), name
        assert set(method) >= {"comprehensiveness", "sufficiency", "seconds"}
    attention = found.methods["attention"]
    assert attention.scores.sum() == pytest.approx(1.0, rel=1e-5)  # one row of a map
    assert shown["correlations"]["attention"]["attention"] == pytest.approx(1.0)


def test_bad_input_is_refused_in_one_sentence(lm_dirs, family_dirs):
    model = load_model(lm_dirs["gpt2"])
    with pytest.raises(InputError, match="pieces of") as err:
        explain(model, TEXT, "cobblestones", "street", methods=["attention"])
    assert err.value.code == "answer_not_one_piece" and "|" in str(err.value)
    with pytest.raises(InputError) as err:  # a typed answer quoted with what cannot be seen as its code (issue 81)
        explain(model, TEXT, "cob\u202ebles\u200b", "street", methods=["attention"])
    assert "'cob⟨U+202E⟩bles⟨U+200B⟩'" in str(err.value) and "'cob⟨U+202E⟩bles⟨U+200B⟩'" in err.value.worded()
    with pytest.raises(InputError) as err:  # a pasted page: quoted to 60 characters, its line ends as their code
        explain(model, TEXT, "ab\x00cd\n" * 1000, "street", methods=["attention"])
    assert "ab⟨U+0000⟩cd⟨U+000A⟩" in str(err.value) and "…'" in str(err.value) and len(str(err.value)) < 400
    for steps in (0, MAX_STEPS + 1):
        with pytest.raises(InputError) as err:
            explain(model, TEXT, "animal", "street", methods=["ig"], steps=steps)
        assert err.value.code == "ig_steps_out_of_range"
    with pytest.raises(InputError) as err:
        explain(model, TEXT, methods=["lime"])
    assert err.value.code == "unknown_method"
    encoder = load_model(family_dirs["bert"])
    with pytest.raises(InputError, match="coref_margin") as err:
        explain(encoder, SENTENCE, "animal", methods=["attention"])
    assert err.value.code == "no_head_for_target"


def test_the_baselines_keep_the_special_pieces_and_replace_every_other(lm_dirs):
    model = load_model(lm_dirs["gpt2"])
    batch = tokenize(model.tokenizer, TEXT, model.max_length, bos=model.bos_id)
    words = model.embeddings.word[batch.input_ids[0]]
    special = torch.tensor([w is None for w in batch.word_ids[0]])
    assert special.any() and not special.all()
    zero = baseline_embeddings(model, batch, "zero")[0]
    pad = baseline_embeddings(model, batch, "pad")[0]
    assert torch.equal(zero[special], words[special]) and torch.equal(pad[special], words[special])
    assert not zero[~special].any()
    assert torch.equal(pad[~special], model.embeddings.word[model.tokenizer.pad_token_id].expand_as(pad[~special]))


def test_words_are_cut_at_spaces_where_the_tokenizer_numbers_the_text_as_one_word(lm_dirs):
    from dataclasses import replace

    from mha_core.analysis.explain.explain import units_of
    from mha_core.engine.tokens import spaced_words

    model = load_model(lm_dirs["gpt2"])
    batch = tokenize(model.tokenizer, TEXT, model.max_length, bos=model.bos_id)
    gemma_s = tuple(None if w is None else 0 for w in batch.word_ids[0])  # Gemma 3's: one word, as tokenize cuts it
    one = replace(batch, word_ids=(spaced_words(batch.texts[0], gemma_s, batch.offsets[0]),))
    assert units_of(one).groups == units_of(batch).groups and len(units_of(batch).groups) > 10
    assert units_of(one).labels == units_of(batch).labels


def test_progress_rises_to_the_end_through_every_stage(lm_dirs):
    model = load_model(lm_dirs["gpt2"])
    seen = []
    explain(model, TEXT, "animal", "street", methods=["attention", "ig", "occlusion"], steps=4,
            progress=lambda done, planned: seen.append((done, planned)))
    fractions = [done / planned for done, planned in seen]
    assert len(seen) >= 4 and fractions == sorted(fractions) and seen[-1][0] == seen[-1][1]
