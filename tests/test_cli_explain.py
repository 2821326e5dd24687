"""Issue 81: `explain TEXT --model M --answer WORD --wrong WORD --methods ... --json OUT` writes the issue's JSON
(the API's explanation), and bad input is one line and exit status 2 before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mha_core
from tests.conftest import cli
from tests.lm_models import TEXT


def test_explain_writes_the_apis_explanation(lm_dirs, tmp_path):
    out = tmp_path / "explain.json"
    run = cli("explain", TEXT, "--model-dir", str(lm_dirs["gpt2"]), "--answer", "animal", "--wrong", "street",
              "--methods", "attention,rollout,gradxattn,ig,occlusion", "--steps", "6", "--json", str(out))
    assert run.returncode == 0, run.stderr
    shown = json.loads(out.read_text())
    model = mha_core.load_model(lm_dirs["gpt2"])
    api = mha_core.explain(model, TEXT, "animal", "street", ["attention", "rollout", "gradxattn", "ig", "occlusion"],
                           steps=6)
    assert list(shown["methods"]) == ["attention", "rollout", "gradxattn", "ig", "occlusion"]
    assert shown["ids"] == list(api.ids) and shown["word_of_piece"] == list(api.word_of_piece)
    assert shown["target"]["answer_id"] == api.target.answer_id and shown["ig"]["steps"] == 6
    assert shown["target"]["score"] == pytest.approx(api.score, rel=1e-6)
    for name, method in api.methods.items():
        np.testing.assert_allclose(shown["methods"][name]["word_scores"], method.word_scores, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(shown["methods"][name]["comprehensiveness"],
                                   method.faithfulness.comprehensiveness, rtol=1e-4, atol=1e-6)


def test_faithfulness_of_any_word_scores_is_explains_own(lm_dirs):
    model = mha_core.load_model(lm_dirs["llama-tied"])
    api = mha_core.explain(model, TEXT, "animal", "street", ["rollout"])
    faith = mha_core.faithfulness(model, TEXT, list(api.methods["rollout"].word_scores), "animal", "street")
    assert faith == api.methods["rollout"].faithfulness
    with pytest.raises(mha_core.InputError) as err:
        mha_core.faithfulness(model, TEXT, [1.0, 2.0], "animal", "street")
    assert err.value.code == "word_scores_wrong_length"


@pytest.mark.parametrize(("args", "said"), [
    (["--answer", "cobblestones"], "pieces of"),
    (["--answer", "animal", "--steps", "0"], "1 to 300 steps"),
    (["--answer", "animal", "--steps", "301"], "1 to 300 steps"),
    (["--methods", "attention,lime"], "Unknown method 'lime'"),
])
def test_bad_input_is_one_line_and_status_2(lm_dirs, args, said):
    run = cli("explain", TEXT, "--model-dir", str(lm_dirs["gpt2"]), *args)
    assert run.returncode == 2 and said in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
