"""AppTest for the Contributions page: value-weighted maps, rollout, ablation grid, on the bundled encoder."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from mha_core import run
from mha_core.analysis.heads.contrib import rollout, value_weighted
from mha_core.analysis.lm.ablation import ablate_heads, ablation_grid
from tests.conftest import ANIMAL_TIRED, chart_json, decode, download, open_app
from tests.tiny_models import make_tiny


def test_value_weighted_tab_shows_both_maps_and_the_special_shares(bundled):
    at = open_app("views/contributions.py", c_tab="Value-weighted", c_layer="2", c_head="5")
    assert not at.exception
    vw = value_weighted(bundled, run(bundled, ANIMAL_TIRED, path="explicit"), 2)
    assert np.allclose(decode(chart_json(at, "vw_weighted")["data"][0]["z"]), vw.weighted[5], atol=1e-6)
    raw = decode(chart_json(at, "vw_raw_share")["data"][0]["z"])
    weighted = decode(chart_json(at, "vw_weighted_share")["data"][0]["z"])
    assert raw.shape == weighted.shape == (6, 12) and weighted.mean() < raw.mean()  # specials move little
    assert any("Kobayashi et al. (2020)" in c.value for c in at.caption)


def test_rollout_tab_rows_are_distributions(bundled):
    at = open_app("views/contributions.py", c_tab="Rollout")
    assert not at.exception
    shown = decode(chart_json(at, "rollout_map")["data"][0]["z"])
    expected = rollout(run(bundled, ANIMAL_TIRED).text_attention(0))[-1]
    assert np.allclose(shown, expected, atol=1e-6) and np.allclose(shown.sum(-1), 1, atol=1e-5)


def test_ablation_tab_grid_top_heads_and_joint_effect(bundled):
    at = open_app("views/contributions.py", c_tab="Ablation", c_mode="mean")
    assert not at.exception
    grid = ablation_grid(bundled, ANIMAL_TIRED, "mean")
    assert np.allclose(decode(chart_json(at, "ablation_grid")["data"][0]["z"]), grid.effects, atol=1e-6)
    chosen = at.multiselect(key="c_joint").value
    assert len(chosen) == 3
    joint = float(at.metric[0].value)
    assert abs(joint - ablate_heads(bundled, ANIMAL_TIRED, chosen, "mean")) < 1e-4
    data = json.loads(download(at, "JSON: the grid"))  # the payloads: the grid's own numbers
    assert (data["mode"], data["measure"]) == ("mean", grid.measure)
    assert np.abs(np.array(data["effects"]) - grid.effects).max() <= 1e-7
    table = pd.read_csv(io.BytesIO(download(at, "CSV: the grid")), index_col="layer")
    assert table.shape == grid.effects.shape and np.abs(table.to_numpy() - grid.effects).max() <= 1e-7


def test_ablation_tab_offers_the_coreference_margin_on_an_encoder():
    at = open_app("views/contributions.py", c_tab="Ablation", c_measure="coref")
    assert not at.exception and not at.warning
    assert at.selectbox(key="c_measure").options == ["embedding", "coref"]
    assert at.selectbox(key="c_measure").value == "coref"
    assert "coreference margin" in chart_json(at, "ablation_grid")["layout"]["title"]["text"]


def test_value_norms_are_a_bar_per_token(bundled):
    at = open_app("views/contributions.py", c_tab="Value-weighted", c_layer="1", c_head="4")
    bars = chart_json(at, "vw_norms")["data"][0]
    vw = value_weighted(bundled, run(bundled, ANIMAL_TIRED, path="explicit"), 1)
    assert bars["type"] == "bar" and np.allclose(decode(bars["y"]), vw.value_norms[4], atol=1e-6)
    assert bars["x"][0] == "0 [CLS]"


def test_value_weighted_and_rollout_maps_export_as_csv():
    from mha_core.serving.export import matrix_csv

    csv = matrix_csv(np.array([[1.0, 0.0], [0.25, 0.75]]), ("[CLS]", "it"))
    table = pd.read_csv(io.StringIO(csv), index_col=0)
    assert list(table.columns) == ["0 [CLS]", "1 it"] and table.loc["1 it", "0 [CLS]"] == 0.25
    for tab, key in (("Value-weighted", "vw_csv"), ("Rollout", "rollout_csv")):
        at = open_app("views/contributions.py", c_tab=tab)
        assert any(key in b.proto.id for b in at.get("download_button")), tab


@pytest.fixture(scope="module")
def tiny_lm_dir(tmp_path_factory):
    """A folder holding one tiny random decoder with its language-model head: a target's own top heads are a
    property of the page, not of the bundled model's weights."""
    root = tmp_path_factory.mktemp("contrib_lm")
    make_tiny("llama", root / "llama", lm=True)
    return root


@pytest.mark.slow
def test_a_new_target_gives_the_joint_ablation_its_own_top_heads(tiny_lm_dir, monkeypatch):  # issue 18, finding 6
    from mha_core.analysis.heads.roles import head_label

    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_lm_dir))
    at = open_app("views/contributions.py", model="llama", c_tab="Ablation", c_measure="target",
                  c_target=" Paris, France")  # a shared link's target (typing one is the second step)
    assert not at.exception and not at.warning and at.text_input(key="c_target").value == " Paris, France"
    assert any("scored whole" in c.value and "3 piece" in c.value for c in at.caption)  # paris , france
    assert len(at.multiselect(key="c_joint").value) == 3 and len(at.metric) == 1
    first = list(at.dataframe[0].value["head"])[:3]
    at.text_input(key="c_target").input(" dog").run()
    top = list(at.dataframe[0].value["head"])
    assert not set(top[:3]) & set(first)  # on this model the new target's strongest heads are others
    chosen = at.multiselect(key="c_joint").value
    assert [head_label(*lh) for lh in chosen] == top[:3]
    assert len(at.metric) == 1 and "Joint effect of 3 heads" in at.metric[0].label


def test_shared_results_are_bounded_by_bytes():  # issue 18, finding 3: value-weighted maps filled the store
    from mha_core.serving.memory import STORES
    from views._state import server

    SMALL_MB = STORES["small"][1]

    store = server().stores["small"]
    for i in range(4):
        server().kept("small", ("test-bytes", i), lambda: np.zeros(SMALL_MB * 2**20 // 3, dtype=np.uint8))
    assert store.total_bytes <= SMALL_MB * 2**20
    store.clear()
