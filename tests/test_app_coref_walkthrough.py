"""AppTest for the coreference inspector and the classroom walkthrough."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import run
from mha_core.analysis.coref.sentence import antecedent_scores, human_flips, sentence_words
from tests.conftest import ANIMAL_TIRED, ANIMAL_WIDE, chart_json, decode, open_app


def margins_computed_separately(model) -> tuple[np.ndarray, np.ndarray]:
    out = []
    for text in (ANIMAL_TIRED, ANIMAL_WIDE):
        words = sentence_words(text)
        out.append(antecedent_scores(run(model, text), 0, words, 8, [1, 6]).margin(0, 1))
    return out[0], out[1]


def test_margin_change_grid_is_the_difference_of_separate_runs(bundled):
    at = open_app("views/coreference.py")
    assert not at.exception and not at.warning
    m1, m2 = margins_computed_separately(bundled)
    shown = decode(chart_json(at, "delta_grid")["data"][0]["z"])
    assert np.allclose(shown, m2 - m1, atol=1e-6)
    assert np.allclose(decode(chart_json(at, "margin_1")["data"][0]["z"]), m1, atol=1e-6)
    shapes = chart_json(at, "delta_grid")["layout"]["shapes"]
    outlined = {(round(s["y0"] + 0.45), round(s["x0"] + 0.45)) for s in shapes}
    assert outlined == set(zip(*np.nonzero(human_flips(m1, m2)), strict=True)) and outlined  # the flips, cell by cell
    words = sentence_words(ANIMAL_TIRED)
    verdicts = antecedent_scores(run(bundled, ANIMAL_TIRED), 0, words, 8, [1, 6]).layer_verdicts()
    expected = [f"In {count} of 12 heads of layer {layer} 'it' attends most to '{('animal', 'street')[cand]}'."
                for layer, cand, count in verdicts]
    shown = [m.value for m in at.markdown if m.value.startswith("In ")]
    assert shown == expected


@pytest.mark.parametrize("which", ["encoder", "decoder"])
@pytest.mark.long
def test_the_headline_counts_what_the_table_shows(bundled, decoder, which):  # issue 19, item 4
    model = bundled if which == "encoder" else decoder
    at = open_app("views/coreference.py", model=model.name)
    assert not at.exception
    table = at.dataframe[0].value
    headline = next(m.value for m in at.markdown if m.value.startswith("**Of the")).replace("\\", "")
    leader, count = table["prefers"].value_counts().index[0], table["prefers"].value_counts().iloc[0]
    assert f"{len(table)} heads with the clearest preference (the table), {count} prefer '{leader}'" in headline
    m1 = decode(chart_json(at, "margin_1")["data"][0]["z"])
    ends = [(chart_json(at, key)["data"][0]["zmin"], chart_json(at, key)["data"][0]["zmax"])
            for key in ("margin_1", "margin_2")]
    assert ends[0] == ends[1] and ends[0][1] >= np.abs(m1).max() - 1e-9  # one colour range for the pair


def test_a_decoder_pair_is_explained_and_probed(decoder):  # issue 19, item 3
    at = open_app("views/coreference.py", model=decoder.name)
    assert not at.exception
    assert any("comes before every changed word" in i.value for i in at.info)
    probed = decode(chart_json(at, "delta_grid")["data"][0]["z"])
    assert np.abs(probed).max() > 1e-4  # the probe's last word sees the change
    at.toggle(key="pair_probe").set_value(False).run()
    assert np.abs(decode(chart_json(at, "delta_grid")["data"][0]["z"])).max() < 1e-6  # blind, as the page says


@pytest.mark.slow
@pytest.mark.long
def test_gap_first_head_shifts_towards_street_without_flipping(bundled):
    at = open_app("views/coreference.py")
    at.toggle(key="gap_local").set_value(True).run()  # score the shared GAP validation split
    assert not at.exception
    (gap,) = at.session_state["gap_results"].values()
    layer, head, accuracy = gap.ranking()[0]
    assert accuracy > gap.nearest
    m1 = decode(chart_json(at, "margin_1")["data"][0]["z"])
    m2 = decode(chart_json(at, "margin_2")["data"][0]["z"])
    assert m2[layer, head] < m1[layer, head]  # 'animal' gains less over 'street' when 'it' is wide
    assert m1[layer, head] > 0  # and in the 'tired' sentence it prefers 'animal'
    table = at.dataframe[0].value
    assert table["GAP coreference head"].notna().any()


def test_pronoun_without_candidates_gets_a_message():
    at = open_app("views/coreference.py", text="It was raining over the quiet hills.")
    assert not at.exception
    assert any("No candidate is chosen for 'It'" in i.value for i in at.info)


def test_bad_pairs_get_messages():
    at = open_app("views/coreference.py")
    for second, message in (("", "empty"), ("The animal didn't cross the busy street because it was too wide.",
                                            "differ in length"),
                            ("A dog never walked along that road since he felt very sleepy.", "differ in 12")):
        at.text_input(key="pair").input(second).run()
        assert not at.exception
        assert any(message in w.value for w in at.warning), second


def test_walkthrough_four_steps_and_parity():
    at = open_app("views/walkthrough.py")
    assert not at.exception
    headers = [h.value for h in at.header]
    assert headers[:4] == ["1. Linear projections", "2. Scaled dot-product attention (head 1)",
                           "3. Concatenate the heads", "4. Output projection W_O"]
    assert "Max |ours − model|" in at.success[0].value
    assert len(at.code) == 4 and "split_heads" in at.code[0].value and "softmax" in at.code[1].value
    title = chart_json(at, "scaled_row")["layout"]["title"]["text"]
    at.slider(key="wt_scale").set_value(1.0).run()
    sharper = chart_json(at, "scaled_row")["layout"]["title"]["text"]
    assert title != sharper and "scale 1.000" in sharper


def test_lessons_check_answers_live():
    at = open_app("views/walkthrough.py", wt_tab="Lessons")
    assert not at.exception
    at.text_input(key="answer_eight-heads").input("1,050,624").run()
    at.button(key="check_eight-heads").click().run()
    assert any(s.value == "Right." for s in at.success)
    at.text_input(key="answer_scaling").input("flatter").run()
    at.button(key="check_scaling").click().run()
    assert any(w.value == "Not this time." for w in at.warning)


def test_the_seeds_miscount_is_marked_wrong_with_its_reason():
    """Issue 42, item 11: 1,049,600 (the seeds' 4·512² + 2·512) was marked wrong without a word of why."""
    from mha_core.analysis.params.shapes import count_shape, make_shape

    d = 512
    miscount, right = 4 * d * d + 2 * d, count_shape(make_shape(d, 8)).total  # two biases, against all four
    at = open_app("views/walkthrough.py", wt_tab="Lessons")
    at.text_input(key="answer_eight-heads").input(f"{miscount:,}").run()
    at.button(key="check_eight-heads").click().run()
    why = next(w.value for w in at.warning).replace("\\", "")
    assert f"{miscount:,}" in why and "two of the four bias vectors" in why and f"{right:,}" in why


def test_lesson_sentence_goes_to_the_sentence_box():
    at = open_app("views/walkthrough.py", wt_tab="Lessons")
    at.button(key="load_previous-word").click().run()
    assert at.text_area(key="text").value == "The quick brown fox jumps over the lazy dog."


def test_walkthrough_times_the_paths_only_when_asked():
    at = open_app("views/walkthrough.py")
    assert not at.exception and len(at.metric) == 0  # a new sentence costs no timing runs
    at.toggle(key="wt_timing").set_value(True).run()
    assert not at.exception
    assert [m.label for m in at.metric][0] == "Explicit path" and len(at.metric) == 3
    assert all(float(m.value.split()[0]) > 0 for m in at.metric)


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_one_rule_finds_a_words_pieces_for_every_tokenizer(family_dirs, name):  # issue 19, item 1
    from mha_core import load_model

    result = run(load_model(family_dirs[name]), "Unbelievably, the animal was tired because it slept.")
    it = result.word_pieces(0, "it")
    assert len(it) == 1 and result.labels[0][it[0]].strip("␣ ").lower() == "it"
    long_word = result.word_pieces(0, "unbelievably")
    assert "".join(result.labels[0][i] for i in long_word).replace("##", "").strip("␣ ").lower() == "unbelievably"
    assert result.word_pieces(0, "bel") == () and result.word_pieces(0, "zebra") == ()


def test_decoder_walkthrough_picks_it_and_follows_a_model_change(decoder):  # issue 19, items 1 and 2
    at = open_app("views/walkthrough.py", model=decoder.name)
    assert not at.exception
    query = at.selectbox(key="wt_query")
    assert query.format_func(query.value).endswith("␣it")
    assert not any("Ġ" in option for option in query.options) and any("␣" in o for o in query.options)
    assert abs(at.slider(key="wt_scale").value - round(decoder.head_dim ** -0.5, 3)) < 1e-9
    at.selectbox(key="model").set_value("all-MiniLM-L6-v2").run()
    assert not at.exception
    query = at.selectbox(key="wt_query")
    assert query.format_func(query.value).endswith(": it")  # recomputed for the new tokenization
    assert abs(at.slider(key="wt_scale").value - round(32 ** -0.5, 3)) < 1e-9  # MiniLM's d_k = 32


def test_lessons_never_show_their_answer_and_skip_what_does_not_apply(bundled, decoder):  # issue 19, item 5
    import re

    from mha_core.teaching.lessons import load_lessons, not_applicable, reveal

    for lesson in load_lessons():
        shown = set(re.findall(r"L\d+ H\d+", lesson.question))
        if not_applicable(bundled, lesson) is None:
            assert not shown & set(reveal(bundled, lesson).accepted), lesson.id
    cls_sink = next(lesson for lesson in load_lessons() if lesson.id == "cls-sink")
    assert not_applicable(bundled, cls_sink) is None and "no [CLS]" in not_applicable(decoder, cls_sink)
    at = open_app("views/walkthrough.py", wt_tab="Lessons", model=decoder.name)
    assert not at.exception
    keys = {t.key for t in at.text_input}
    assert "answer_cls-sink" not in keys and "answer_it-animal" in keys
    assert any("not asked on SmolLM2" in c.value for c in at.caption)
