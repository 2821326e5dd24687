"""AppTest for the lesson (issue 47): every step, in English and Chinese, shows its title, its words and the pages'
own live view on its model; Back and Next move one step and the address says which; each step links to its page; the
Chinese steps have no English left; a class follows its teacher, a student explores on their own and comes back."""

from __future__ import annotations

import sqlite3

import pytest

from mha_core.engine.tokens import InputError
from mha_core.i18n import catalogue
from mha_core.serving.classroom import Classroom
from mha_core.teaching.lesson import STEPS, step_at, step_number
from tests.conftest import chart_json, open_app
from tests.i18n_check import untranslated
from views._class import KEYS

PAGE = "views/lesson.py"


def labels(at) -> list[str]:
    return [b.label for b in at.button]


def drawn(at) -> int:
    """The live view's elements: charts, tables, images, metrics."""
    return sum(len(at.get(kind)) for kind in ("plotly_chart", "arrow_data_frame", "imgs", "metric"))


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_step_draws_its_view_on_its_model(language):
    words = catalogue(language).gettext
    for number, step in enumerate(STEPS, start=1):
        at = open_app(PAGE, lang=language, step=str(number))
        assert not at.exception and not at.error, (language, number, at.exception)
        assert at.title[0].value == f"{number}. {words(step.title)}"
        assert any(words(step.text).replace('"', "") in m.value.replace('"', "").replace("\\", "")
                   for m in at.markdown), (language, number)
        assert drawn(at) or step.key == "images", (language, number)  # images: the mosaic is an <img>


@pytest.mark.slow
def test_step_6_on_a_projector_folds_its_choices_and_says_its_sentences_under_both_columns():
    """Step 6 ran 144-189 px below a 1920×1080 projector in projector mode (the browser tier measures the room): there
    its words and pair are chosen in a folded panel, its heads layer by layer fold beside it, the pair's heading and
    its changed words (the sentences say them) are left out, and its sentences run under both columns. The same
    sentences, table and grid as without projector mode."""
    normal, projected = open_app(PAGE, step="6"), open_app(PAGE, step="6", view="projector")
    assert not normal.exception and not projected.exception and not normal.error and not projected.error
    panel = [e for e in projected.expander if e.label == "The pronoun, its candidates and the second sentence"]
    assert len(panel) == 1 and "Layer by layer" in [e.label for e in projected.expander]
    assert {w.label for w in panel[0].selectbox} == {"Pronoun (or any token)", "Candidate a", "Candidate b"}
    assert [w.label for w in panel[0].text_input] == ["Second sentence (differs in a few words)"]
    assert [w.label for w in panel[0].multiselect] == [w.label for w in normal.multiselect]
    assert "Minimal pair" in [h.value for h in normal.subheader] and not projected.subheader
    assert any(c.value.startswith("Changed:") for c in normal.caption)
    assert not any(c.value.startswith("Changed:") for c in projected.caption)
    said = [m.value for m in normal.markdown if "attends more to each candidate" in m.value]
    assert len(said) == 1 and "The pair changes" in said[0]
    assert said == [m.value for m in projected.markdown if "attends more to each candidate" in m.value]
    in_columns = lambda at: [m.value for c in at.columns for m in c.markdown]  # noqa: E731
    assert said[0] in in_columns(normal) and said[0] not in in_columns(projected)  # beside the grid; under both
    assert normal.dataframe[0].value.equals(projected.dataframe[0].value)
    assert len(normal.get("plotly_chart")) == len(projected.get("plotly_chart")) == 1


@pytest.mark.slow
def test_step_5_s_grid_on_a_projector_gives_a_class_s_panel_its_rows():
    """Step 5's grid kept projector mode's 440-px height whatever stood above it: a class's panel pushed the step
    46 px further down (0 px to spare in English, measured in Chromium). Its grid is fitted under its sentences and
    the panel, as the other steps' figures are."""
    from views._fit import CLASS_PANEL_REM
    from views._presenter import PROJECTOR_ROOT_PX

    at = open_app(PAGE, step="5", view="projector")
    heights = [chart_json(at, "lesson_roles")["layout"]["height"]]
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    assert not at.exception and at.title[0].value.startswith("5. ") and "class" in at.query_params
    heights.append(chart_json(at, "lesson_roles")["layout"]["height"])
    assert heights[0] - heights[1] == pytest.approx(CLASS_PANEL_REM * PROJECTOR_ROOT_PX, abs=1), heights


@pytest.mark.slow
def test_step_6_draws_gemma_s_pair_grid_with_its_layers_across():
    """Gemma 3's 18 layers × 4 heads in the lesson's short pair grid were thin stripes: its layers lie across."""
    at = open_app(PAGE, lang="zh", step="6")
    assert not at.exception
    grid = chart_json(at, "delta_grid")["data"][0]
    assert grid["x"] == [f"L{layer}" for layer in range(18)] and grid["y"] == [f"H{head}" for head in range(4)]


@pytest.mark.slow
def test_step_9_on_a_projector_draws_the_links_beside_its_sentences():
    """Step 9's alignment matrix, beside the links under two sentences and two notes, was 40 px high on a projector
    (a teacher's walk of the Chinese lesson): there the links stand beside the sentences, as tall as the screen
    allows, and the matrix and the notes that read it are left to its page."""
    import json

    normal, projected = open_app(PAGE, lang="zh", step="9"), open_app(PAGE, lang="zh", step="9", view="projector")
    assert not normal.exception and not projected.exception
    titles = lambda at: [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]  # noqa
    assert len(titles(normal)) == 2 and titles(projected) == titles(normal)[:1]  # the links, alone
    said = [m.value for m in normal.markdown if "→" in m.value]
    assert said and said == [m.value for c in projected.columns for m in c.markdown if "→" in m.value]
    assert len(normal.caption) > len(projected.caption)  # the matrix's notes


@pytest.mark.slow
def test_step_8_on_a_projector_folds_its_pickers_under_the_player():
    """Step 8's spectrogram and cross-attention got about 100 px on a projector under a row of pickers (a teacher's
    walk of the Chinese lesson): there the decoder layer and head are chosen in a folded panel under the player,
    and the chart is given their row (the browser measures the room: 45 px to spare with a class, in Chinese)."""
    import json

    from views._fit import LEAST_CHART_PX

    normal, projected = open_app(PAGE, lang="zh", step="8"), open_app(PAGE, lang="zh", step="8", view="projector")
    assert not normal.exception and not projected.exception
    pickers = {"解码器层", "头"}
    folded = lambda at: [e for e in at.expander if e.label == "解码器层与头"]  # noqa: E731
    assert pickers <= {w.label for w in normal.selectbox} and not folded(normal)
    (panel,) = folded(projected)
    assert {w.label for w in panel.selectbox} == pickers
    height = lambda at: json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["height"]  # noqa: E731
    assert height(projected) > LEAST_CHART_PX  # the pickers' row given to it (it was at the floor)


@pytest.mark.slow
def test_the_image_step_s_mosaic_is_scaled_once_and_sent_as_made(monkeypatch):
    """Issue 84: the image step's mosaic, fitted under the step's text on a projector, was handed to st.image wider
    than its width: Streamlit decoded, scaled and encoded it again at every draw, 250 ms of each follower's rerun
    (py-spy). Now it is scaled once per server: a second draw hands st.image a picture of the width it asks for, sent
    as it is, and encodes nothing."""
    from PIL import Image
    from streamlit.elements.lib import image_utils

    from mha_core.figures.vision import png_size
    from mha_core.serving.computed import vision as computed_vision

    sent, encoded = [], []
    ensure, save = image_utils._ensure_image_size_and_format, Image.Image.save  # noqa: SLF001

    def watched(data: bytes, layout: object, image_format: str) -> bytes:
        sent.append((data, layout.width, ensure(data, layout, image_format)))
        return sent[-1][2]

    monkeypatch.setattr(image_utils, "_ensure_image_size_and_format", watched)
    rooms, mosaic_of = [], computed_vision.mosaic_of  # the height the step leaves the mosaic
    monkeypatch.setattr(computed_vision, "mosaic_of", lambda *a, tallest=None, **k: rooms.append(tallest) or mosaic_of(
        *a, tallest=tallest, **k))
    monkeypatch.setattr(Image.Image, "save", lambda picture, *a, **k: encoded.append(picture.size) or save(picture, *a,
                                                                                                          **k))
    first = open_app(PAGE, step=str(step_number("images")))  # makes the mosaic and scales it (unless kept already)
    assert not first.exception and len(sent) == 1
    sent.clear(), encoded.clear()
    again = open_app(PAGE, step=str(step_number("images")))
    assert not again.exception and len(sent) == 1
    data, width, drawn = sent[0]
    assert drawn is data, "st.image encoded the mosaic again"
    assert width == png_size(data)[0] and not encoded
    assert rooms and None not in rooms and png_size(data)[1] <= rooms[-1], (png_size(data), rooms)  # and it fits


@pytest.mark.slow
def test_back_and_next_move_one_step_and_the_address_says_which():
    at = open_app(PAGE)
    back, forward = (b for b in at.button if b.label in ("Back", "Next"))
    assert back.disabled and not forward.disabled
    at = forward.click().run()
    assert at.title[0].value.startswith("2. ") and at.query_params.get("step") in ("2", ["2"])
    at = next(b for b in at.button if b.label == "Next").click().run()
    assert at.title[0].value.startswith("3. ")
    at = next(b for b in at.button if b.label == "Back").click().run()
    assert at.title[0].value.startswith("2. ")
    last = open_app(PAGE, step=str(len(STEPS)))
    assert next(b for b in last.button if b.label == "Next").disabled


def test_steps_are_counted_from_one_and_a_wrong_one_is_one_sentence():
    assert step_at(1) is STEPS[0] and step_at(len(STEPS)) is STEPS[-1]
    with pytest.raises(InputError, match=f"steps 1 to {len(STEPS)}, not {len(STEPS) + 1}"):
        step_at(len(STEPS) + 1)
    assert [s.key for s in STEPS] == ["why", "four_steps", "heads", "parameters", "roles", "coreference",
                                      "explanation", "cross", "translation", "images", "cost"]  # the seeds' order
    assert len(STEPS) == 11 and step_number("explanation") == step_number("coreference") + 1  # after it → animal


@pytest.mark.slow
def test_the_chinese_steps_have_no_english_left():
    from mha_core.serving.menu import available_models

    names = [choice.name for choice in available_models()]
    for number in (1, 3, 4, step_number("explanation"), step_number("cost")):
        at = open_app(PAGE, lang="zh", step=str(number))
        typed = [box.value for box in at.text_area] + [box.value for box in at.text_input]
        left = untranslated(at, [*names, *typed, "[CLS]", "[SEP]", "Bahdanau", "Whisper", "KV", "A", "S", "P"])
        assert not left, (number, list(left.items())[:4])


@pytest.mark.slow
def test_a_class_follows_its_teacher_and_only_the_teacher_s_key_moves_it(class_store, monkeypatch):
    import views._class as class_view

    registered = []  # what each run registers with the watcher (AppTest has no server: recorded here)
    monkeypatch.setattr(class_view, "register", lambda code, shown, counted=True: registered.append((code, shown)))
    at = open_app(PAGE)
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    code = at.query_params["class"][0] if isinstance(at.query_params["class"], list) else at.query_params["class"]
    key = at.session_state[KEYS][code]
    assert "teach" not in at.query_params  # the address a projector shows holds no key (issue 77.10)
    at = next(b for b in at.button if b.label == "Next").click().run()
    student = open_app(PAGE, **{"class": code})
    assert student.title[0].value.startswith("2. ") and "Follow the teacher (step 2)" not in labels(student)
    assert any(f"class {code}" in c.value for c in student.caption)
    student = next(b for b in student.button if b.label == "Next").click().run()  # the student's own step
    assert student.title[0].value.startswith("3. ") and "Follow the teacher (step 2)" in labels(student)
    assert open_app(PAGE, **{"class": code}).title[0].value.startswith("2. ")  # it moved nobody else
    student = next(b for b in student.button if b.label == "Follow the teacher (step 2)").click().run()
    assert student.title[0].value.startswith("2. ") and "Follow the teacher (step 2)" not in labels(student)
    at = next(b for b in at.button if b.label == "Next").click().run()
    assert student.run().title[0].value.startswith("3. ")  # the student's next run shows the teacher's step
    wrong = key[:-1] + ("y" if key.endswith("x") else "x")  # a key ending in "x" had been "wrong" as itself (1 run
    intruder = open_app(PAGE, **{"class": code, "teach": wrong, "step": "9"})  # in 64: the teacher moved to step 9)
    assert intruder.title[0].value.startswith("3. ")  # a wrong key is a student: it moves nothing
    assert "teach" not in intruder.query_params and "End it for every student" not in labels(intruder)
    assert student.run().title[0].value.startswith("3. ")
    ended = next(b for b in at.button if b.label == "End it for every student").click().run()
    assert ended.title[0].value.startswith("3. ") and "class" not in ended.query_params  # not even an empty one
    assert "teach" not in ended.query_params
    registered.clear()
    gone = student.run()
    assert not gone.error and any("has ended" in i.value for i in gone.info)  # a class ends: no error
    assert registered == [(code, None)]  # its registration asks the next page (every phone hears the end at once)
    assert [b.label for b in gone.button] == ["Continue on my own"]
    alone = gone.button[0].click().run()
    assert alone.title[0].value.startswith("3. ") and "class" not in alone.query_params


def way_back(at) -> list[tuple[str, str]]:
    """The page's links back to a class's lesson: (label, the page's address) each."""
    return [(link.proto.label, link.proto.page) for link in at.get("page_link") if "class" in link.proto.label
            or "课堂" in link.proto.label]


@pytest.mark.slow
def test_a_student_on_another_page_has_the_way_back_to_the_class_above_it(class_store):
    """"Explore this on its page" (or the sidebar) took a student off the lesson with no word of the class, and a
    phone's sidebar, where the lesson is listed, is folded: every other page now starts with the way back, in the
    student's language, its address keeping the class (a reload keeps the way back); the lesson itself, a visitor of
    no class, a code of no class and a class that has ended show none."""
    at = open_app(PAGE)
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    code = at.query_params["class"][0] if isinstance(at.query_params["class"], list) else at.query_params["class"]
    student = open_app(PAGE, **{"class": code})
    assert not way_back(student)  # the lesson itself
    for page in ("views/heads.py", "views/translation.py"):
        student.switch_page(page).run()
        assert not student.exception and way_back(student) == [(f"Back to class {code}", "lesson")], page
    reloaded = open_app("views/roles.py", **dict(student.query_params.items()))  # the page's own address, anew
    assert way_back(reloaded) == [(f"Back to class {code}", "lesson")]
    student.switch_page(PAGE).run()
    assert any(f"You follow class {code}" in c.value for c in student.caption)  # back in the class
    typed = open_app(PAGE, **{"class": f" {code.lower()} "})  # as a student types it from the projector
    assert typed.query_params["class"] == code and any(f"You follow class {code}" in c.value for c in typed.caption)
    chinese = open_app(PAGE, lang="zh", **{"class": code})
    assert way_back(chinese.switch_page("views/heads.py").run()) == [(f"回到课堂 {code}", "lesson")]
    unknown = "ABCDEF" if code != "ABCDEF" else "ABCDEG"
    for given in ("x", unknown, unknown.lower() + " "):  # not a code; a code of no class
        stray = open_app("views/heads.py", **{"class": given})
        assert not way_back(stray) and "class" not in stray.query_params, given
    assert not way_back(open_app("views/heads.py"))
    assert "class" not in open_app(PAGE, **{"class": " "}).query_params  # an empty code: the address drops it
    student.switch_page("views/heads.py").run()
    next(b for b in at.button if b.label == "End it for every student").click().run()
    assert not way_back(student.run()) and "class" not in student.query_params  # ended while the student was away


@pytest.mark.slow
def test_a_student_s_next_goes_from_the_class_s_step_even_before_the_watcher_hears_it(class_store):
    """The flake of a loaded run: the teacher's Next, then a student's Next before this process's watcher had heard
    the move (its tick): the student's own step was the old step + 1, the step the class was already on."""
    from views._class import watcher

    at = open_app(PAGE)
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    code = at.query_params["class"][0] if isinstance(at.query_params["class"], list) else at.query_params["class"]
    student = open_app(PAGE, **{"class": code})
    assert student.title[0].value.startswith("1. ")
    at = next(b for b in at.button if b.label == "Next").click().run()  # the class is on step 2
    with watcher().lock:
        watcher().heard[code] = (1, watcher().heard.get(code, (1, ""))[1])  # the watcher a tick behind
    student = next(b for b in student.button if b.label == "Next").click().run()
    assert student.title[0].value.startswith("3. ")  # one step from where the class is at the click


@pytest.mark.slow
def test_the_teacher_s_link_reopens_as_teacher_and_leaves_the_address():
    at = open_app(PAGE)
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    code = at.query_params["class"][0] if isinstance(at.query_params["class"], list) else at.query_params["class"]
    links = [c.value for c in at.code if "teach=" in c.value]
    assert len(links) == 1 and f"class={code}" in links[0]  # the teacher's own link, in its folded popover
    students = [c.value for c in at.code if "teach=" not in c.value and f"class={code}" in c.value]
    assert links[0].startswith(students[0] + "&teach=")  # the students' link and the key
    query = dict(part.split("=", 1) for part in links[0].split("?", 1)[1].split("&"))
    tablet = open_app(PAGE, **query)  # the teacher's link opened on another screen: a teacher's page
    assert "End it for every student" in labels(tablet) and "teach" not in tablet.query_params
    tablet = next(b for b in tablet.button if b.label == "Next").click().run()
    assert open_app(PAGE, **{"class": code}).title[0].value.startswith("2. ")  # it moved the class


@pytest.mark.slow
def test_the_teacher_counts_one_student_and_two_students_in_both_languages(class_store):
    at = open_app(PAGE)
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    code = at.query_params["class"][0] if isinstance(at.query_params["class"], list) else at.query_params["class"]
    counts = {"en": [], "zh": []}
    for language, phones in (("en", ["phone-1"]), ("zh", ["phone-1", "phone-2"])):
        Classroom().seen(code, *phones)
        at.query_params["lang"] = language
        counts[language] = [c.value for c in at.run().caption if "follow" in c.value or "跟随" in c.value]
    assert counts["en"] == ["1 student follows."], counts
    assert counts["zh"] == [catalogue("zh").gettext("{n} students follow.").format(n=2)], counts


@pytest.mark.slow
def test_a_student_switches_their_own_language_and_stays_in_the_class():
    teacher = open_app(PAGE)
    teacher = next(b for b in teacher.button if b.label == "Start a class").click().run()
    code = teacher.query_params["class"]
    code = code[0] if isinstance(code, list) else code
    phone = deprecations_logged(lambda: open_app(PAGE, **{"class": code, "lang": "en"}))  # the students' link
    (switch,) = phone.button_group
    phone = switch.set_value("zh").run()
    zh = catalogue("zh").gettext
    assert phone.title[0].value == f"1. {zh(STEPS[0].title)}"  # the class's step, in Chinese
    assert phone.query_params["lang"] in ("zh", ["zh"]) and phone.query_params["class"] in (code, [code])
    assert "End it for every student" not in labels(phone) and any(code in c.value for c in phone.caption)


@pytest.mark.slow
def test_the_students_link_is_the_network_s_and_a_loopback_only_server_is_said(monkeypatch):
    from streamlit import config, net_util

    monkeypatch.setattr(net_util, "get_internal_ip", lambda: "192.0.2.7")  # this machine on its network
    listening = config.get_option("server.address")
    config.set_option("server.address", "127.0.0.1")  # as `streamlit run --server.address 127.0.0.1` sets it
    try:
        loopback_only_server(monkeypatch)
    finally:
        config.set_option("server.address", listening)


def loopback_only_server(monkeypatch) -> None:
    from streamlit import config

    at = open_app(PAGE)
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    code = at.query_params["class"]
    code = code[0] if isinstance(code, list) else code
    port = config.get_option("server.port")
    assert f"http://192.0.2.7:{port}/lesson?class={code}&lang=en" in [c.value for c in at.code]
    assert [w.value for w in at.warning] == [
        "This server listens only on this computer (127.0.0.1), so no phone can open the link: restart it listening "
        "on the network (`make serve`, whose `BIND` is `0.0.0.0`, or `streamlit run app.py --server.address "
        "0.0.0.0`)."]
    monkeypatch.setenv("MHA_PUBLIC_URL", "https://attention.school.example/")  # a school's proxy: its address
    at.run()
    assert f"https://attention.school.example/lesson?class={code}&lang=en" in [c.value for c in at.code]
    assert not at.warning


def deprecations_logged(run: object) -> object:
    """run(), checking that Streamlit warned of no deprecation meanwhile (st.components.v1.html did, on every class
    page's run)."""
    from streamlit import deprecation_util

    warned: list[str] = []
    shown = deprecation_util.show_deprecation_warning
    deprecation_util.show_deprecation_warning = lambda message, *args, **kwargs: warned.append(message)
    try:
        result = run()
    finally:
        deprecation_util.show_deprecation_warning = shown
    assert not warned, warned
    return result


@pytest.fixture
def room(tmp_path, monkeypatch):
    """The pages' class store, in a file of the test's own."""
    import views._class as class_view
    from mha_core.serving.classroom import Classroom

    store = Classroom(tmp_path / "classes.sqlite", busy_s=0.1)
    monkeypatch.setattr(class_view, "classroom", lambda: store)
    return store


@pytest.fixture
def either_room(class_store):
    """The pages' class store: a SQLite file of the test's own, then a real Redis (tests/class_stores.py)."""
    from mha_core.serving.classroom import Classroom

    return Classroom(class_store)


def shown_texts(at) -> list[str]:
    return [e.value for kind in ("markdown", "caption", "error", "warning", "title") for e in at.get(kind)]


@pytest.mark.slow
def test_a_class_page_says_when_the_store_fails_and_follows_again_once_it_is_back(room, tmp_path):
    """Issue 78.2: a damaged store showed raw sqlite3.DatabaseError on every class page. Each page (a student's, the
    teacher's) says in one sentence, in its language, that class mode is unavailable and why; once the file is back
    the same pages show the class."""
    import os

    from views._text import literal

    code, secret = room.start("The animal was tired.", "en", step=step_number("cost"))
    path = tmp_path / "classes.sqlite"
    with sqlite3.connect(tmp_path / "backup.sqlite") as copy, sqlite3.connect(path) as live:
        live.backup(copy)
    (tmp_path / "garbage").write_bytes(b"not a database " * 4096)
    os.replace(tmp_path / "garbage", path)
    pages = {(lang, teacher): open_app(PAGE, lang=lang, **{"class": code}, **({"teach": secret} if teacher else {}))
             for lang in ("en", "zh") for teacher in (False, True)}
    for (lang, _), at in pages.items():
        words = catalogue(lang).gettext
        said = words("Class mode is unavailable just now: {reason}; pages follow again once it is back.").format(
            reason=words("its store is damaged"))
        assert not at.exception and [w.value for w in at.warning] == [literal(said)], at.warning
    os.replace(tmp_path / "backup.sqlite", path)
    for at in pages.values():
        assert at.run().title[0].value.startswith(f"{step_number('cost')}. ") and not at.warning


@pytest.mark.slow
def test_what_the_address_and_the_class_give_is_shown_as_text(room):
    """Issue 78.4 / 78.11: `?class=CODE[CLICK TO SIGN IN](HTTPS://…)` showed a live link in "You follow class …" (the
    page read the code's 6 characters and showed the whole value); a sentence's 4-space indent showed as a code
    block. The code shown is the canonical one, the rest refused as text; the sentence is one line of text."""
    code, _ = room.start("The animal didn't cross.\n\n    It was [tired](https://evil.example).", "en",
                         step=step_number("cost"))
    student = open_app(PAGE, **{"class": code})
    sentence = next(m.value for m in student.markdown if m.value.startswith("**Sentence:**"))
    assert "\n" not in sentence and "](" not in sentence and "tired\\]\\(https" in sentence
    assert any(f"You follow class {code}:" in c.value for c in student.caption)
    for given in (f"{code}[CLICK TO SIGN IN](HTTPS://EVIL.EXAMPLE/LOGIN)", f"{code}![x](https://evil.example/a.png)",
                  f"{code}**BOLD**", f"{code}-1"):
        at = open_app(PAGE, **{"class": given})
        texts = shown_texts(at)
        assert not at.exception and any("is not a class code" in t for t in texts), texts
        assert not any("](" in t or "**BOLD" in t for t in texts), texts


@pytest.mark.slow
def test_two_teacher_tabs_show_one_step_and_a_stale_tab_moves_nothing(either_room):
    """Issues 77.3 / 78.10: tab B's Next took the class 3 -> 4; tab A, still showing 3, pressed Back and the class went
    to 2; a tab merely rerunning put the class back on its own step. Now a teacher's tab follows the class: A's Back
    from a step the class has left is refused in one sentence and A shows the class's step."""
    tab_a = open_app(PAGE, step="3")
    tab_a = next(b for b in tab_a.button if b.label == "Start a class").click().run()
    params = {k: v[0] if isinstance(v, list) else v for k, v in tab_a.query_params.items()}
    code = params["class"]
    key = tab_a.session_state[KEYS][code]  # the teacher's key: in the session, never in the address
    tab_b = open_app(PAGE, **{"class": code, "teach": key, "step": "7"})  # an old address: the class's step shows
    assert tab_b.title[0].value.startswith("3. ") and either_room.state(code).step == 3
    tab_b = next(b for b in tab_b.button if b.label == "Next").click().run()
    assert tab_b.title[0].value.startswith("4. ") and either_room.state(code).step == 4
    tab_a = next(b for b in tab_a.button if b.label == "Back").click().run()  # tab A still showed 3
    assert either_room.state(code).step == 4 and tab_a.title[0].value.startswith("4. ")
    assert any(f"Class {code} moved to step 4 meanwhile" in w.value.replace("\\", "") for w in tab_a.warning)
    assert tab_a.run().title[0].value.startswith("4. ") and either_room.state(code).step == 4  # a rerun moves nothing
    tab_a = next(b for b in tab_a.button if b.label == "Back").click().run()  # from the class's step: it moves
    assert either_room.state(code).step == 3 and tab_b.run().title[0].value.startswith("3. ")


@pytest.mark.slow
def test_start_a_class_past_the_server_s_classes_is_refused_in_one_sentence(either_room, monkeypatch):
    """Issue 78.5: nothing bounded the classes (10,000 starts kept)."""
    from mha_core.serving import classroom

    monkeypatch.setattr(classroom, "MAX_CLASSES", 1)
    either_room.start("Another teacher's class.", "en")
    at = open_app(PAGE, step=str(step_number("cost")))
    at = next(b for b in at.button if b.label == "Start a class").click().run()
    assert not at.query_params.get("class") and not at.exception
    assert [w.value.replace("\\", "") for w in at.warning] == ["This server holds 1 classes, its most: start yours "
                                                               "when one has ended."]


@pytest.mark.slow
def test_a_teacher_s_move_on_a_locked_store_is_said_and_the_class_stays(room, tmp_path):
    """Issue 78.2: a store another program locks (writes refused, reads go on): the teacher's Next says so in one
    sentence and the tab stays on the class's step (no rerun loop: it shows what the class shows); unlocked, Next
    moves the class."""
    code, secret = room.start("The animal was tired.", "en", step=3)
    teacher = open_app(PAGE, **{"class": code, "teach": secret})
    locker = sqlite3.connect(tmp_path / "classes.sqlite", isolation_level=None)
    locker.execute("begin exclusive")
    teacher = next(b for b in teacher.button if b.label == "Next").click().run()
    assert [w.value.replace("\\", "") for w in teacher.warning] == [
        "Class mode is unavailable just now: its store is locked by another program; pages follow again once it is "
        "back."]
    assert teacher.title[0].value.startswith("3. ") and room.state(code).step == 3
    locker.close()
    teacher = next(b for b in teacher.button if b.label == "Next").click().run()
    assert teacher.title[0].value.startswith("4. ") and room.state(code).step == 4 and not teacher.warning


@pytest.mark.slow
def test_step_6_asks_a_chinese_sentence_in_chinese_and_shows_that_probe(gemma):  # issue 77: the caption was English
    from mha_core.analysis.coref.sentence import PROBE, PROBE_ZH

    at = open_app(PAGE, lang="zh", step="6", model=gemma.name)
    assert not at.exception and not at.error
    said = " ".join(c.value for c in at.caption)
    asked_zh, asked_en = PROBE_ZH.split("{")[0], PROBE.split("{")[0].strip()  # 句中的“ / The word '
    assert said.count(asked_zh) == 2 and asked_en not in said, said  # the probe named, and the sentence it ends


@pytest.mark.slow
def test_the_translation_step_in_english_shows_gemma_s_traditional_translation_in_simplified_characters():
    """Issue 77 (a new user's trial): Gemma writes the English sentence in Traditional characters (牠…因為牠…) and
    the translation step (then step 8) showed no Simplified line, as the Translation page does (its helper, reused)."""
    from mha_core.engine.loading.bundled import GEMMA_NAME
    from mha_core.serving.computed import translation as computed_translation
    from tests.conftest import bundled_model
    from views._state import server

    number = step_number("translation")
    at = open_app(PAGE, lang="en", step=str(number))
    assert not at.exception and not at.error
    text = at.text_area[0].value if at.text_area else at.text_input[0].value
    # asked of the process's server: the step's own translation when it asked for exactly this, else computed here
    result = computed_translation.translation_of(server(), bundled_model(GEMMA_NAME), text, "en", "zh")
    assert result.simplified_translation != result.translation  # the case the issue saw: 牠 → 它, 為 → 为
    shown = [c.value for c in at.caption if "Simplified characters" in c.value]
    assert shown and result.simplified_translation in shown[0].replace("\\", ""), shown
