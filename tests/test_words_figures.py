"""Pure view transforms (words.py) and figure builders (charts.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import run
from mha_core.analysis.heads.display import attention_view
from mha_core.engine.words import drop_and_renormalise, merge_pieces, word_units
from mha_core.figures import charts, colours
from mha_core.figures.spec import array_of


def random_maps(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    raw = np.random.default_rng(seed).random(shape).astype(np.float32)
    return raw / raw.sum(axis=-1, keepdims=True)


def test_tiles_sit_where_their_labels_say():
    n_layers, n_heads, n = 3, 4, 5
    maps = np.zeros((n_layers, n_heads, n, n), dtype=np.float32)
    for layer in range(n_layers):
        for head in range(n_heads):
            maps[layer, head] = layer * 10 + head
    canvas = charts.tile_overview(maps)
    fig = charts.overview_figure(maps)
    xt, yt = fig["layout"]["xaxis"], fig["layout"]["yaxis"]
    for layer in range(n_layers):
        for head in range(n_heads):
            r, c = charts.tile_origin(layer, head, n)
            assert np.all(canvas[r:r + n, c:c + n] == layer * 10 + head)
            # the tick labelled L{layer} / H{head} points into that tile
            assert r <= yt["tickvals"][layer] <= r + n - 1 and yt["ticktext"][layer] == f"L{layer}"
            assert c <= xt["tickvals"][head] <= c + n - 1 and xt["ticktext"][head] == f"H{head}"
    assert np.isnan(canvas[n, 0])  # the gap row between layers
    shown = charts.level_weights(array_of(fig["data"][0]["z"]))  # the figure's colour levels, as weights
    assert np.array_equal(np.isnan(shown), np.isnan(canvas))
    assert np.nanmax(np.abs(shown - np.clip(canvas, 0, 1))) <= 0.5 / (charts.LEVELS - 1) + 1e-9
    assert len(fig["data"]) == 2  # one tiled heatmap + one marker trace for clicks, however many heads
    spots = charts.TILE_SPOTS**2  # click targets per tile
    assert list(fig["data"][1]["customdata"][(n_heads + 1) * spots]) == [1, 1]
    assert fig["layout"]["title"]["text"] and xt["title"]["text"] == "head" and yt["title"]["text"] == "layer"


def test_the_overview_s_colour_levels_are_its_weights_within_half_a_level():
    """The overview sends uint8 colour levels (a quarter of float32's bytes): each is its weight to 1/508, a gap is
    level 0 and transparent, and the colour scale puts level 1 and level 255 on the scale's two ends."""
    from plotly.colors import get_colorscale

    maps = random_maps((3, 4, 7, 7), seed=3)
    heatmap = charts.overview_figure(maps)["data"][0]
    levels = array_of(heatmap["z"])
    canvas = charts.tile_overview(maps)
    assert levels.dtype == np.uint8 and levels.shape == canvas.shape
    shown = charts.level_weights(levels)
    assert np.array_equal(np.isnan(shown), np.isnan(canvas)) and (levels[np.isnan(canvas)] == 0).all()
    assert 0 < np.nanmax(np.abs(shown - canvas)) <= 0.5 / (charts.LEVELS - 1) + 1e-7
    scale, blues = heatmap["colorscale"], get_colorscale(colours.WEIGHTS)
    assert (heatmap["zmin"], heatmap["zmax"]) == (0, charts.LEVELS) and scale[0][1] == "rgba(0,0,0,0)"
    assert scale[2] == [1 / charts.LEVELS, blues[0][1]] and scale[-1] == [1.0, blues[-1][1]]
    ticks = heatmap["colorbar"]
    assert [charts.level_weights(np.array(v)) for v in ticks["tickvals"]] == [0, 0.25, 0.5, 0.75, 1]


def test_overview_pools_long_inputs():
    maps = random_maps((2, 3, 100, 100))
    canvas = charts.tile_overview(maps, bins=20)
    assert canvas.shape == (2 * 21 - 1, 3 * 21 - 1)
    pooled = charts.pool_map(maps[1, 2], 20)
    assert pooled.shape == (20, 20)
    assert np.isclose(pooled[0, 0], maps[1, 2, :5, :5].sum(axis=1).mean())  # keys summed, queries averaged
    assert np.allclose(pooled.sum(axis=-1), 1.0, atol=1e-5)


def test_head_figure_puts_row_zero_on_top_and_escapes_labels():
    labels = ["[CLS]", "<b>bold</b>", "it", "it", "[SEP]"]
    fig = charts.head_figure(random_maps((5, 5)), labels, "t")
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"
    trace = fig["data"][0]
    assert trace["y"][0].startswith("0 ") and len(set(trace["x"])) == 5  # repeated "it" stay distinct
    assert "<b>" not in "".join(trace["x"]) and "&lt;b&gt;" in trace["x"][1]


def test_hidden_specials_renormalise_rows():
    maps = random_maps((2, 3, 6, 6))
    kept = drop_and_renormalise(maps, [1, 2, 3, 4])
    assert kept.shape == (2, 3, 4, 4)
    assert np.allclose(kept.sum(-1), 1.0, atol=1e-6)
    assert np.allclose(kept[0, 0, 0], maps[0, 0, 1, 1:5] / maps[0, 0, 1, 1:5].sum())


def test_merging_pieces_sums_to_and_averages_from():
    maps = random_maps((4, 4))
    merged = merge_pieces(maps, [(0,), (1, 2), (3,)])
    assert np.isclose(merged[0, 1], maps[0, 1] + maps[0, 2])
    assert np.isclose(merged[1, 0], (maps[1, 0] + maps[2, 0]) / 2)
    assert np.isclose(merged[1, 1], (maps[1, 1] + maps[1, 2] + maps[2, 1] + maps[2, 2]) / 2)
    assert np.allclose(merged.sum(-1), 1.0, atol=1e-6)


def test_word_units_group_pieces(bundled):
    result = run(bundled, "Unbelievably, the tokenizer works.")
    b = result.batch
    units = word_units(b.texts[0], b.tokens[0], b.word_ids[0], b.offsets[0])
    assert units.labels == ("[CLS]", "Unbelievably", ",", "the", "tokenizer", "works", ".", "[SEP]")
    assert units.special == (True, False, False, False, False, False, False, True)
    assert [i for g in units.groups for i in g] == list(range(len(b.tokens[0])))  # every piece once, in order
    assert len(units.groups[1]) > 1 and len(units.groups[3]) == 1  # "Unbelievably" in pieces, "the" whole


@pytest.mark.parametrize(("hide", "merge"), [(False, False), (True, False), (False, True), (True, True)])
def test_attention_view_rows_sum_to_one(bundled, hide, merge):
    view = attention_view(run(bundled, "Unbelievably, the tokenizer works."), 0, hide, merge)
    assert view.maps.shape[:2] == (6, 12) and view.maps.shape[-1] == len(view.labels)
    assert np.allclose(view.maps.sum(-1), 1.0, atol=1e-5)
    assert ("[CLS]" in view.labels) != hide


def test_typed_special_tokens_are_plain_text(bundled):
    result = run(bundled, "a [SEP] b [CLS]")
    assert result.tokens[0].count("[SEP]") == 1 and result.tokens[0].count("[CLS]") == 1
    assert "sep" in result.tokens[0]


def test_line_view_traces_per_head():
    fig = charts.line_view_figure(random_maps((12, 6, 6)), list("abcdef"), heads=[0, 3], min_weight=0.0)
    names = {t["name"] for t in fig["data"] if t["mode"] == "lines"}
    assert names == {"head 0", "head 3"}


def test_average_heads_and_top_keys(bundled):
    from mha_core.analysis.heads.display import score_map, top_keys

    result = run(bundled, "The animal didn't cross the street because it was too tired.")
    full = attention_view(result)
    mean = attention_view(result, average_heads=True)
    assert mean.maps.shape == (6, 1, 16, 16)
    assert np.allclose(mean.maps[:, 0], full.maps.mean(axis=1), atol=1e-6)
    rows = top_keys(full, query=10, k=2)
    assert len(rows) == 72 and rows[0][:2] == (0, 0)
    layer, head, keys = rows[3 * 12 + 1]
    assert keys[0][1] == pytest.approx(float(full.maps[3, 1, 10].max())) and keys[0][1] >= keys[1][1]
    z = score_map(result, 0, 3, 1, hide_special=True)
    assert z.shape == (14, 14)
    assert np.allclose(z, result.scores_map(3, 1)[0, 1:15, 1:15].numpy())


CHINESE = "动物没有过马路，因为它太累了。"


def test_text_the_encoder_cannot_read_is_named_and_never_hidden(bundled):  # issue 19: [UNK]
    from mha_core import run
    from mha_core.analysis.heads.display import attention_view, unknown_note

    result = run(bundled, CHINESE)
    note = unknown_note(result, 0)
    assert note is not None and "cannot read 11 of the text's 15 characters" in note and "动" in note
    merged = attention_view(result, 0, False, True).labels
    assert merged.count("[UNK]") == 11 and "有" in merged  # the merged view shows what the model saw
    assert unknown_note(run(bundled, "The cat sat."), 0) is None


def test_byte_level_pieces_read_as_characters(decoder):  # issue 19: byte fragments
    from mha_core import run
    from mha_core.analysis.heads.display import attention_view, unknown_note

    result = run(decoder, CHINESE)
    labels = result.labels[0]
    assert "动¹/₂" in labels and "动²/₂" in labels and not any("⟨" in label for label in labels)
    merged = attention_view(result, 0, False, True).labels
    # jieba's words (issue 23), never clause-long "words": the fragments of 动 and 物 join into 动物
    assert merged[1:] == ("动物", "没有", "过", "马路", "，", "因为", "它", "太", "累", "了", "。")
    assert unknown_note(result, 0) is None


def test_byte_fallback_pieces_spell_their_character():
    from mha_core.engine.pieces import character_parts, piece_bytes

    raw = [piece_bytes(t) for t in ("<0xE5>", "<0x8A>", "<0xA8>")]  # 动 = e5 8a a8 as SentencePiece bytes
    assert character_parts(raw) == ["动¹/₃", "动²/₃", "动³/₃"]
    assert character_parts([b" \xe5", b"\x8a\xa8a"]) == ["␣动¹/₂", "动²/₂a"]


def test_the_page_warns_about_unreadable_text(bundled):  # issue 19 (a): every page goes through checked_run
    from tests.conftest import open_app

    at = open_app(text=CHINESE)
    assert not at.exception
    assert any("cannot read 11 of the text" in w.value for w in at.warning)


def test_every_chart_names_its_axes_and_rows():  # issue 19: titles, axis labels, legends
    from mha_core.figures.corpus import distance_heatmap, layer_symbol_legend

    heads = tuple((layer, head) for layer in range(30) for head in range(9))  # the decoder's 270 heads
    layout = distance_heatmap(np.zeros((270, 270)), heads)["layout"]
    assert layout["xaxis"]["title"]["text"] and layout["yaxis"]["title"]["text"]
    assert layout["yaxis"]["ticktext"][:2] == ["L0", "L1"] and len(layout["yaxis"]["ticktext"]) == 30
    legend = layer_symbol_legend(30)
    assert legend[0]["name"].startswith("layer 0, ") and all(t["legendgrouptitle"]["text"] == "symbol = layer"
                                                             for t in legend)
    spec = charts.matrix_spec(np.zeros((16, 4)), [f"t{i}" for i in range(16)], "Q")
    assert spec["layout"]["yaxis"]["dtick"] == 1 and spec["layout"]["height"] >= 16 * charts.ROW_PX


def test_a_projector_sees_many_layers_across():  # issue 77: Gemma's 18 × 4 heads were a thin strip
    n_layers, n_heads, n = 18, 4, 5
    maps = np.broadcast_to((np.arange(n_layers)[:, None] * 10 + np.arange(n_heads))[:, :, None, None],
                           (n_layers, n_heads, n, n)).astype(np.float32) / 1000
    fig = charts.layers_across_figure(maps, selected=(9, 2))
    shown = charts.level_weights(array_of(fig["data"][0]["z"]))
    assert shown.shape[1] > 4 * shown.shape[0]  # wide: 18 tiles across, 4 down
    xt, yt, spots = fig["layout"]["xaxis"], fig["layout"]["yaxis"], charts.TILE_SPOTS**2
    for layer in range(n_layers):
        for head in range(n_heads):
            r, c = charts.tile_origin(head, layer, n)  # the head's row, the layer's column
            assert np.allclose(shown[r:r + n, c:c + n], maps[layer, head, 0, 0], atol=1 / charts.LEVELS)
            assert xt["ticktext"][layer] == f"L{layer}" and c <= xt["tickvals"][layer] <= c + n - 1
            assert yt["ticktext"][head] == f"H{head}" and r <= yt["tickvals"][head] <= r + n - 1
    markers = fig["data"][1]
    for x, y, (layer, head) in zip(array_of(markers["x"]), array_of(markers["y"]), markers["customdata"], strict=True):
        r, c = charts.tile_origin(head, layer, n)  # a click on a tile opens the tile's head
        assert r <= y <= r + n - 1 and c <= x <= c + n - 1
    (outline,) = fig["layout"]["shapes"]
    assert outline["x0"] < charts.tile_origin(2, 9, n)[1] < outline["x1"]  # the chosen head: layer 9's column
    assert xt["title"]["text"] == "layer" and yt["title"]["text"] == "head"
    assert charts.click_targets(n_heads, n_layers, n)[2][spots] == [0, 1]  # the shared targets left as they were


def test_a_phone_sees_one_layer_three_heads_to_a_row():  # issue 19: the overview on a narrow screen
    spec = charts.layer_tiles_figure(random_maps((9, 6, 6)), layer=4, selected_head=7)
    markers = spec["data"][1]
    assert sorted(markers["customdata"]) == [[4, h] for h in range(9) for _ in range(charts.TILE_SPOTS**2)]
    assert spec["layout"]["yaxis"]["ticktext"] == ["H0–2", "H3–5", "H6–8"]
    gemma_like = charts.layer_tiles_figure(random_maps((4, 6, 6)), layer=4, selected_head=0)  # 4 heads: 3 + 1
    assert gemma_like["layout"]["yaxis"]["ticktext"] == ["H0–2", "H3"]  # a row of one head was "H3–3"
    narrow = charts.for_narrow_screen(charts.layer_head_grid(random_maps((2, 3)), "t"))
    assert all("texttemplate" not in trace for trace in narrow["data"])  # no numbers in narrow cells


def test_figure_dicts_carry_arrays_as_typed_arrays_that_read_back_exactly():  # issue 20: one kind of figure
    from mha_core.figures.spec import array_of, finished

    z = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    spec = finished({"data": [{"type": "heatmap", "z": z, "x": np.arange(4), "text": np.array(["a", "b"])}],
                     "layout": {}})
    trace = spec["data"][0]
    assert trace["z"]["dtype"] == "f4" and trace["z"]["shape"] == "3, 4" and trace["x"]["dtype"] == "i4"
    assert np.array_equal(array_of(trace["z"]), z) and np.array_equal(array_of(trace["x"]), np.arange(4))
    assert list(trace["text"]) == ["a", "b"]  # strings stay as they are
    head = charts.head_figure(z[:3, :3], ["a", "b", "c"], "t")
    assert np.array_equal(array_of(head["data"][0]["z"]), z[:3, :3])
