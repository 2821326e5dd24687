"""AppTest for the parameters page."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.conftest import open_app


def open_page(tab: str | None = None) -> AppTest:
    return open_app("views/parameters.py", **({"ptab": tab} if tab else {}))


def test_model_view_counts_from_modules(bundled):
    at = open_page()
    assert not at.exception
    total = sum(p.numel() for p in bundled.model.parameters())
    assert at.metric[0].value == f"{total:,}"
    attention = sum(p.numel() for layer in bundled.model.encoder.layer
                    for m in (layer.attention.self, layer.attention.output.dense) for p in m.parameters())
    assert at.metric[1].value == f"{attention:,}" and "+ biases" in at.metric[1].label  # MiniLM: biases
    table = at.dataframe[0].value
    assert int(table["parameters"].sum()) == total


def test_calculator_default_and_changed_shape():
    at = open_page("Any shape")
    assert not at.exception
    assert at.metric[0].value == "1,050,624"
    assert "matches" in at.success[0].value and "1,049,600" in at.info[0].value
    at.number_input(key="calc_kv").set_value(2).run()
    assert at.metric[0].value == f"{2 * 512 * 512 + 2 * 512 * 128 + 2 * 512 + 2 * 128:,}"
    assert "grouped-query" in at.metric[0].label


def test_impossible_shape_gives_a_clear_message():
    at = open_page("Any shape")
    at.number_input(key="calc_heads").set_value(7).run()
    assert not at.exception
    assert any("not divisible" in e.value for e in at.error)


def test_calculator_inputs_have_stated_bounds():
    from mha_core.analysis.params.shapes import MAX_DIM

    at = open_page("Any shape")
    for key in ("calc_d_model", "calc_heads", "calc_kv", "calc_dk", "calc_dv"):
        box = at.number_input(key=key)
        assert (box.min, box.max) == (1, MAX_DIM) and f"1 to {MAX_DIM:,}" in box.help, key
    for key in ("calc_d_model", "calc_heads", "calc_kv", "calc_dk", "calc_dv"):
        at.number_input(key=key).set_value(MAX_DIM)
    at.run()
    assert not at.exception and not at.error
    m = MAX_DIM  # every dimension at its bound: W_Q, W_K, W_V, W_O are m x m*m; biases m*m (x3) and m
    assert at.metric[0].value == f"{4 * m**3 + 3 * m**2 + m:,}"  # exact, above 2**53: Python ints


def test_head_norms_grid_links_to_heads_page(bundled):
    from mha_core.analysis.params.counts import head_weight_norms

    at = open_page("Head weight norms")
    assert not at.exception
    assert len(at.get("plotly_chart")) == 2
    _, ov = head_weight_norms(bundled)
    layer, head = divmod(int(ov.argmax()), ov.shape[1])
    (link,) = at.get("page_link")
    assert link.proto.page_script_hash and "heads page" in link.proto.label
    assert f"layer {layer}, head {head}" in link.proto.label
    assert f"layer={layer}" in link.proto.query_string and f"head={head}" in link.proto.query_string


def test_the_calculator_agrees_with_every_familys_modules(family_dirs, monkeypatch, tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    for name, path in family_dirs.items():
        (root / name).symlink_to(path)
    monkeypatch.setenv("MHA_MODELS_DIR", str(root))
    for name in ("bert", "gpt2", "qwen2", "all-MiniLM-L6-v2", "gemma3_text"):
        at = open_app("views/parameters.py", model=name)
        assert not at.exception and not at.warning, name
        biased = name != "gemma3_text"  # Gemma's projections have no biases: its label names none
        assert ("+ biases" in at.metric[1].label) == biased, (name, at.metric[1].label)
        assert any(s.value.startswith("Checked: the calculator's") for s in at.success), name
