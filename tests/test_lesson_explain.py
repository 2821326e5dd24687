"""Issue 81, the lesson's step "Is attention the explanation?": what it says about its figure equals the numbers
recomputed here with transformers' eager model (the head whose output moves the answer most, its attention from the
last piece, input × gradient by torch.autograd, occlusion by forwards on the ids without each word, Spearman's ρ by
scipy), on tiny random models: a decoder asked about the pronoun, a noun of several pieces, a sentence without a
pronoun, and an encoder's coreference margin."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from mha_core import load_model
from mha_core.teaching.explain_step import attention_beside, explanation_claims
from tests.lm_models import reference
from tests.test_explain_gradients import head_inputs

SENTENCE = "The animal did not cross the street because it was too tired."


def said(found, *names: str) -> dict:
    """The values of the one claim whose values are exactly `names`."""
    hits = [c.kwargs() for c in explanation_claims(found) if set(names) == set(c.kwargs())]
    assert len(hits) == 1, [c.template for c in explanation_claims(found)]
    return hits[0]


def grouped(per_piece: np.ndarray, word_ids: list) -> np.ndarray:
    """(W,) a piece score summed over each word's pieces (the tokenizer's own word ids; special pieces dropped)."""
    words = sorted({w for w in word_ids if w is not None})
    return np.array([sum(v for v, w in zip(per_piece, word_ids, strict=True) if w == word) for word in words])


class Reference:
    """The decoder's logit(answer) - logit(wrong) after the last piece, its gradients and its occlusions, all by
    transformers."""

    def __init__(self, folder, tokenizer, text: str, answer: str, wrong: str):
        self.model, self.tokenizer = reference(folder), tokenizer
        encoded = tokenizer(text, return_offsets_mapping=True)
        self.ids, self.word_ids = encoded["input_ids"], encoded.word_ids()
        self.text, self.offsets = text, encoded["offset_mapping"]
        self.answer, self.wrong = tokenizer.convert_tokens_to_ids([answer, wrong])

    def score(self, ids: list[int]) -> float:
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([ids])).logits[0, -1]
        return float(logits[self.answer] - logits[self.wrong])

    def words(self) -> list[str]:
        spans = {}
        for (start, end), word in zip(self.offsets, self.word_ids, strict=True):
            if word is not None:
                spans[word] = (spans.get(word, (start, end))[0], end)
        return [self.text[start:end] for start, end in (spans[w] for w in sorted(spans))]

    def occlusion(self) -> np.ndarray:
        full = self.score(self.ids)
        words = sorted({w for w in self.word_ids if w is not None})
        return np.array([full - self.score([i for i, w in zip(self.ids, self.word_ids, strict=True) if w != word])
                         for word in words])

    def gradient_pass(self) -> tuple[tuple[int, int], np.ndarray, np.ndarray]:
        """The head of the largest |Σ ∇z ⊙ z|, its attention row from the last piece per word, and input × gradient
        per word."""
        outputs = head_inputs(self.model, "llama")
        embeds = self.model.get_input_embeddings()(torch.tensor([self.ids])).detach().requires_grad_()
        out = self.model(inputs_embeds=embeds, output_attentions=True)
        score = out.logits[0, -1, self.answer] - out.logits[0, -1, self.wrong]
        found = torch.autograd.grad(score, [embeds, *outputs])
        heads = out.attentions[0].shape[1]
        importance = torch.stack([(z * g).reshape(*z.shape[:2], heads, -1).sum((0, 1, 3))
                                  for z, g in zip(outputs, found[1:], strict=True)])  # (L,H)
        layer, head = np.unravel_index(int(importance.abs().argmax()), importance.shape)
        row = out.attentions[layer][0, head, -1].detach().double().numpy()
        gradient = (embeds[0] * found[0][0]).sum(-1).detach().double().numpy()
        return (int(layer), int(head)), grouped(row, self.word_ids), grouped(gradient, self.word_ids)


def test_the_claims_are_the_numbers_recomputed_with_transformers(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    found = attention_beside(model, SENTENCE)
    assert (found.asked.answer, found.asked.wrong) == ("animal", "street") and found.asked.text.startswith(SENTENCE)
    ref = Reference(lm_dirs["llama-tied"], model.tokenizer, found.asked.text, "animal", "street")
    head, attention, gradient = ref.gradient_pass()
    occlusion = ref.occlusion()
    assert found.words == tuple(ref.words()) and found.head == head
    assert found.score == pytest.approx(ref.score(ref.ids), rel=1e-5)
    scale = np.abs(occlusion).max()
    assert np.abs(found.scores["occlusion"] - occlusion).max() < 1e-5 * scale
    assert np.abs(found.scores["attention_head"] - attention).max() < 1e-5
    assert np.abs(found.scores["inputxgrad"] - gradient).max() < 1e-5 * np.abs(gradient).max()
    tops = {name: int(np.argmax(values)) for name, values in
            (("attention", attention), ("gradient", gradient), ("occlusion", occlusion))}
    assert said(found, "layer", "head", "attention", "gradient", "occlusion") == {
        "layer": head[0], "head": head[1], **{name: ref.words()[top] for name, top in tops.items()}}
    rho = said(found, "n", "attention", "gradient")
    assert rho["n"] == len(ref.words())
    for method, scores in (("attention", attention), ("gradient", gradient)):  # as the claim shows it: 2 decimals
        assert rho[method] == pytest.approx(round(spearmanr(scores, occlusion).statistic, 2) + 0.0, abs=1e-9)
    drops = said(found, "attention", "gradient", "occlusion")
    assert drops == pytest.approx({name: occlusion[top] for name, top in tops.items()}, abs=1e-5 * scale)
    assert said(found, "model", "answer", "wrong", "score")["score"] == pytest.approx(ref.score(ref.ids), rel=1e-5)
    if tops["attention"] != tops["occlusion"] and occlusion[tops["attention"]] > 0:  # this model: 'was', 'animal'
        assert said(found, "share")["share"] == pytest.approx(occlusion[tops["attention"]] / occlusion.max(),
                                                              rel=1e-5)


def test_a_noun_of_several_pieces_is_compared_by_its_first_piece(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    found = attention_beside(model, SENTENCE.replace("street", "cobblestones"))
    first = model.tokenizer.tokenize("cobblestones")
    assert len(first) > 1 and (found.answer, found.wrong) == ("animal", first[0])
    assert said(found, "model", "word", "piece") == {"model": model.name, "word": "cobblestones", "piece": first[0]}
    ref = Reference(lm_dirs["llama-tied"], model.tokenizer, found.asked.text, "animal", first[0])
    assert found.score == pytest.approx(ref.score(ref.ids), rel=1e-5)


def test_without_a_pronoun_the_model_s_own_next_piece_is_explained(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    text = "The animal crossed the wide street."
    found = attention_beside(model, text)
    ids = model.tokenizer(text)["input_ids"]
    with torch.no_grad():
        logits = reference(lm_dirs["llama-tied"])(input_ids=torch.tensor([ids])).logits[0, -1]
    own = int(logits.argmax())
    assert found.asked.text == text and found.answer == model.tokenizer.decode([own]).strip()
    assert said(found, "model", "answer", "score")["score"] == pytest.approx(
        float(torch.log_softmax(logits, -1)[own]), rel=1e-5)
    assert any("no pronoun" in c.template for c in explanation_claims(found))


def test_an_encoder_explains_its_coreference_margin(tiny):
    from transformers import AutoModel

    found = attention_beside(tiny, SENTENCE)
    encoded = tiny.tokenizer(SENTENCE)
    tokens = tiny.tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    it, animal, street = (tokens.index(word) for word in ("it", "animal", "street"))
    with torch.no_grad():
        last = AutoModel.from_pretrained(tiny.model_dir, attn_implementation="eager")(
            input_ids=torch.tensor([encoded["input_ids"]]), output_attentions=True).attentions[-1][0]  # (H,T,T)
    margins = last[:, it, animal] - last[:, it, street]
    head = int(margins.abs().argmax())
    values = said(found, "pronoun", "a", "b", "head", "score")
    assert values == {"pronoun": "it", "a": "animal", "b": "street", "head": head, "score": pytest.approx(
        float(margins[head]), rel=1e-5)}
    assert "it" not in found.words and "animal" not in found.words and "street" not in found.words
    assert set(found.words) == {"The", "did", "not", "cross", "the", "because", "was", "too", "tired", "."}
    assert said(found, "pronoun", "a", "b") == {"pronoun": "it", "a": "animal", "b": "street"}
