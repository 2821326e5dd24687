"""Issue 21 §1: encoders saved with their masked-LM heads fill in a typed mask, as transformers' own masked LMs
do."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.lm.patching import RESIDUAL, patch_grid
from mha_core.analysis.lm.predict import logit_lens, predict
from mha_core.engine.tokens import InputError
from tests.lm_models import MASKED, MLMS, TEXT


@pytest.mark.parametrize("name", list(MLMS))
def test_masked_lm_logits_equal_transformers_masked_lm(mlm_dirs, name):
    from transformers import AutoModelForMaskedLM

    model = load_model(mlm_dirs[name])
    ours = predict(model, MASKED)
    ids = model.tokenizer(MASKED, return_tensors="pt")["input_ids"]
    assert ours.masked and ours.position == int((ids[0] == model.tokenizer.mask_token_id).nonzero()[0, 0])
    ref = AutoModelForMaskedLM.from_pretrained(mlm_dirs[name], attn_implementation="eager", local_files_only=True)
    with torch.no_grad():
        theirs = ref.eval()(ids).logits[0, ours.position]
    spread = float(theirs.max() - theirs.min())
    assert np.abs(ours.logits - theirs.numpy()).max() <= 1e-4 * spread
    assert ours.top_ids[0] == int(theirs.argmax()) and ours.title.startswith("At '[MASK]'")
    lens = logit_lens(model, MASKED)
    assert lens.masked and lens.top_ids[-1, ours.position] == ours.top_ids[0]


def test_a_masked_lm_needs_its_mask_and_continues_nothing(mlm_dirs):
    from mha_core.analysis.lm.generate import generate
    from mha_core.analysis.lm.measures import measures_for

    model = load_model(mlm_dirs["bert"])
    with pytest.raises(InputError, match=r"type \[MASK\] where"):
        predict(model, TEXT)
    assert predict(model, TEXT, position=3).position == 3
    with pytest.raises(InputError, match=r"special piece \[SEP\]"):
        predict(model, MASKED + " [SEP] and more")
    with pytest.raises(InputError, match="does not predict the next piece"):
        generate(model, MASKED, new=2)
    assert "loss" not in measures_for(model)
    clean, corrupted = MASKED, MASKED.replace("tired", "wide")
    grid = patch_grid(model, clean, corrupted, "animal", "street", what=RESIDUAL)
    changed = grid.tokens.index("wide")
    assert grid.effects[0, changed] == pytest.approx(grid.clean, abs=1e-4) and abs(grid.clean - grid.corrupted) > 1e-3
    assert np.allclose(np.delete(grid.effects[0], changed), grid.corrupted, atol=1e-4)


def test_the_predictions_page_fills_the_mask_of_a_masked_lm(mlm_dirs, monkeypatch):
    from mha_core.engine.loading.model import MODEL_DIR_ENV
    from tests.conftest import chart_json, decode, open_app

    monkeypatch.setenv(MODEL_DIR_ENV, str(mlm_dirs["roberta"]))
    at = open_app("views/predictions.py")
    assert not at.exception and [t.label for t in at.tabs] == ["Fill the mask", "Logit lens", "Patching"]
    text = at.text_area(key="text").value + at.text_input(key="p_probe_mask").value
    assert "[MASK]" in text
    expected = predict(load_model(mlm_dirs["roberta"]), text)
    assert np.allclose(decode(chart_json(at, "p_top")["data"][0]["y"]), expected.top_probs, atol=1e-6)


def test_the_coreference_page_asks_a_masked_lm_at_its_mask(mlm_dirs, monkeypatch):
    from mha_core.analysis.coref.sentence import sentence_words
    from mha_core.analysis.lm.predict import probe_answers
    from mha_core.engine.loading.model import MODEL_DIR_ENV
    from tests.conftest import ANIMAL_TIRED, chart_json, open_app

    monkeypatch.setenv(MODEL_DIR_ENV, str(mlm_dirs["bert"]))
    words = sentence_words(ANIMAL_TIRED)
    answer = probe_answers(load_model(mlm_dirs["bert"]), ANIMAL_TIRED, words[8], [words[1], words[6]])
    assert answer.probe.endswith("refers to the [MASK].")
    at = open_app("views/coreference.py")
    assert not at.exception and not at.error
    (shown,) = [df.value for df in at.dataframe if "probability" in df.value.columns]
    assert np.allclose(shown["probability"], [round(c[2], 4) for c in answer.candidates])
    assert chart_json(at, "c_patch_grid")["data"]  # the pair patched by the answer at the mask
