"""Issue 44: what a click costs the server. A run reads the model list once (a page asked for it about a dozen times,
each a few file checks), and asks for its model without a spinner once the model is kept (a spinner is two messages
and a timer thread a run)."""

from __future__ import annotations

from mha_core.engine.loading.bundled import ENCODER_NAME
from tests.conftest import open_app
from tests.event_loop import run_async


def test_a_run_reads_the_model_list_once(monkeypatch):
    import views._state as state

    calls = []
    real = state.available_models
    monkeypatch.setattr(state, "available_models", lambda: calls.append(1) or real())
    at = open_app()
    assert not at.exception and len(calls) == 1
    at.text_area(key="text").set_value("The cat sat on the mat because it was warm.").run()
    assert not at.exception and len(calls) == 2  # one more run, one more reading (a new folder shows next run)


def test_a_run_reads_its_model_once_and_keeps_nothing_after(monkeypatch):
    """A Heads run asked for its model four times, each a lookup in the models' cache: now once per run and page.
    An idle session then holds nothing of its run (its model among them)."""
    import views._state as state
    from views._visit import RUN_MEMO

    calls = []
    real = state.chosen_or_first_model
    monkeypatch.setattr(state, "chosen_or_first_model", lambda: calls.append(1) or real())
    at = open_app()
    assert not at.exception and len(calls) == 1 and at.session_state[RUN_MEMO] == {}
    at.text_area(key="text").set_value("The river floods the village because it rains.").run()
    assert not at.exception and len(calls) == 2 and at.session_state[RUN_MEMO] == {}


def test_the_spinner_is_shown_only_for_a_model_that_is_not_kept():
    """views/_state.load_listed_model shows a spinner where MODELS.holds says no: exactly the folders the models'
    cache keeps, least recently used out first."""
    from mha_core.serving.caches import Models

    loads = []
    models = Models(2, load=lambda folder: loads.append(folder) or folder)
    assert not models.holds("a") and models.get("a") == "a" and models.holds("a")
    models.get("b"), models.get("a")  # a is now the most recent: b goes first
    models.get("c")
    assert not models.holds("b") and models.holds("a") and models.holds("c")
    assert loads == ["a", "b", "c"]  # each loaded once while kept


def test_a_server_keeps_as_many_models_as_it_is_told(monkeypatch):
    """$MHA_MODELS_KEPT: a server with the memory keeps every model it lists loaded; its memory plan counts them."""
    from mha_core.serving.memory import DEFAULT_MODELS_KEPT, MODELS_KEPT_ENV, memory_plan, models_kept

    for raw, kept in (("", DEFAULT_MODELS_KEPT), ("5", 5), ("0", 1), ("many", DEFAULT_MODELS_KEPT)):
        monkeypatch.setenv(MODELS_KEPT_ENV, raw)
        assert models_kept() == kept, raw
    gb = 2**30
    plan = memory_plan([3 * gb, 1 * gb, 2 * gb], heavy_slots=1, kept=2)
    assert plan.models == 5 * gb and "2 kept loaded" in plan.said()
    assert memory_plan([3 * gb, 1 * gb, 2 * gb], heavy_slots=1, kept=5).models == 6 * gb


def test_the_navigation_s_pages_are_made_once_per_language(monkeypatch):
    """Making a page resolves and checks its file: thirteen per run were about 4 % of a click. The server makes them
    once per language; each run navigates copies, in its visitor's language."""
    import streamlit as st

    from views._visit import PAGES, page_templates

    made = []
    real = st.Page.__init__
    monkeypatch.setattr(st.Page, "__init__", lambda self, *a, **kw: made.append(kw["title"]) or real(self, *a, **kw))
    page_templates.clear()
    at = open_app()
    assert not at.exception and at.title[0].value == "Attention heads" and len(made) == len(PAGES)
    at.text_area(key="text").set_value("The cat sat on the mat because it was warm.").run()
    assert not at.exception and len(made) == len(PAGES)  # a new run makes none
    chinese = open_app(lang="zh", model=ENCODER_NAME)  # not the Chinese default, Gemma 3: the fast tier loads no 1 GB
    assert not chinese.exception and chinese.title[0].value == "注意力头"
    assert len(made) == 2 * len(PAGES) and "注意力头" in made  # the Chinese titles, made once
    open_app(lang="zh", model=ENCODER_NAME).switch_page("views/parameters.py").run()
    assert len(made) == 2 * len(PAGES)


def test_each_run_navigates_its_own_copies_of_the_pages(monkeypatch):
    """st.navigation marks the page it returns as the run's to call, and running it unmarks it: two sessions sharing
    one page object could unmark each other's (the second would be refused). Each run gets copies."""
    from types import SimpleNamespace

    import views._visit as visit

    server_s = (SimpleNamespace(title="Heads", _can_be_called=False),)
    monkeypatch.setattr(visit, "page_templates", lambda language: server_s)
    first, second = visit.navigation_pages(), visit.navigation_pages()
    first[0]._can_be_called = True  # what st.navigation does to the page it returns
    assert first[0].title == second[0].title == "Heads"
    assert second[0]._can_be_called is False and server_s[0]._can_be_called is False


def test_the_floor_app_draws_what_it_is_told(tmp_path):
    """bench_classroom --floor weighs Streamlit drawing the Heads page's elements with nothing computed: the stub
    draws exactly the inventory the client counted (charts left out: they are the page's own work)."""
    from benchmarks.floor import clicks
    from benchmarks.serving import app_server

    told = {"block:column": 6, "block:flex_container": 3, "block:tab": 5, "block:tab_container": 1, "checkbox": 5,
            "file_uploader": 1, "heading": 2, "html": 1, "markdown": 5, "plotly_chart": 2, "selectbox": 5,
            "text_area": 2, "text_input": 1, "alert": 1}
    elements = ",".join(f"{kind}={n}" for kind, n in told.items())
    with app_server("benchmarks/floor_app.py", env={"FLOOR_ELEMENTS": elements}) as stub:
        (drawn,) = run_async(clicks(stub.url, ["A sentence typed into the box."]))
    assert not drawn.exceptions and "Sentence" in drawn.text_values  # the box the benchmark types into, first
    assert dict(drawn.elements) == {kind: n for kind, n in told.items() if kind != "plotly_chart"}
