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


GAP_HEADER = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL"


def gap_file(tmp_path):
    rows = [("john met mary because she was kind .", "she", "mary", "john", False),
            ("the man saw the boy and he ran .", "he", "man", "boy", True)]
    lines = [GAP_HEADER]
    for k, (text, pronoun, a, b, a_coref) in enumerate(rows):
        lines.append("\t".join([f"t-{k}", text, pronoun, str(text.index(f" {pronoun} ") + 1), a, str(text.index(a)),
                                str(a_coref).upper(), b, str(text.index(b)), str(not a_coref).upper(), "-"]))
    path = tmp_path / "gap.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_dataset_table_averages_explain_over_the_texts(lm_dirs, tmp_path):
    from mha_core.analysis.explain.dataset import CORPUS, dataset_items, sampled
    out = tmp_path / "table.json"
    methods = ["attention", "inputxgrad", "occlusion"]
    run = cli("explain", "--dataset", "corpus", "--limit", "2", "--methods", ",".join(methods), "--model-dir",
              str(lm_dirs["gpt2"]), "--json", str(out))
    assert run.returncode == 0, run.stderr
    table = json.loads(out.read_text())
    model = mha_core.load_model(lm_dirs["gpt2"])
    each = [mha_core.explain(model, text, methods=methods) for text, _, _ in sampled(dataset_items(
        model, CORPUS, None), 0)[:2]]
    assert table["explained"] == 2 and table["skipped"] == 0
    assert list(table["methods"]) == methods
    for name in methods:
        mean = np.mean([e.methods[name].faithfulness.aopc_comprehensiveness for e in each])
        assert table["methods"][name]["aopc_comprehensiveness"] == pytest.approx(mean, rel=1e-4, abs=1e-6)
    ranking = [value for _, value in table["ranking"]]
    assert ranking == sorted(ranking, reverse=True) and table["most_faithful"] == table["ranking"][0][0]
    gap = cli("explain", "--dataset", "gap", "--gap-file", str(gap_file(tmp_path)), "--methods", "attention",
              "--model-dir", str(lm_dirs["gpt2"]), "--json", str(out))
    assert gap.returncode == 0, gap.stderr
    table = json.loads(out.read_text())
    assert table["explained"] + table["skipped"] == 2 and table["explained"] >= 1
    first = mha_core.explain(model, "john met mary because she was kind . The word 'she' refers to", "mary", "john",
                             ["attention"])
    assert first.target.answer_id != first.target.wrong_id


def test_explain_an_image_writes_the_apis_patch_scores(tmp_path):
    from tests.test_vision import picture
    from tests.tiny_models import make_tiny_vision

    folder = make_tiny_vision("dinov2", tmp_path / "dinov2", initializer_range=0.2)
    photo = picture(tmp_path / "p.png")
    out = tmp_path / "image.json"
    run = cli("explain", str(photo), "--model-dir", str(folder), "--methods", "attention,occlusion", "--block", "2",
              "--json", str(out))
    assert run.returncode == 0, run.stderr
    shown = json.loads(out.read_text())
    api = mha_core.explain(mha_core.load_model(folder), str(photo), methods=["attention", "occlusion"], block=2)
    assert shown["grid"] == [4, 4] and shown["occlusion_block"] == 2 and shown["target"]["kind"] == "cls_cosine"
    for name, method in api.methods.items():
        np.testing.assert_allclose(shown["methods"][name]["scores"], method.scores, rtol=1e-4, atol=1e-9)
    bad = cli("explain", str(photo), "--model-dir", str(folder), "--answer", "cat", "--json", str(out))
    assert bad.returncode == 2 and "cls_cosine" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
