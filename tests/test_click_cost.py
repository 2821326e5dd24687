"""Issue 44: what a click costs the server. A run reads the model list once (a page asked for it about a dozen times,
each a few file checks), and asks for its model without a spinner once the model is kept (a spinner is two messages
and a timer thread a run)."""

from __future__ import annotations

from tests.conftest import open_app


def test_a_run_reads_the_model_list_once(monkeypatch):
    import views._state as state

    calls = []
    real = state.available_models
    monkeypatch.setattr(state, "available_models", lambda: calls.append(1) or real())
    at = open_app()
    assert not at.exception and len(calls) == 1
    at.text_area(key="text").set_value("The cat sat on the mat because it was warm.").run()
    assert not at.exception and len(calls) == 2  # one more run, one more reading (a new folder shows next run)


def test_the_spinner_is_shown_only_for_a_model_that_is_not_kept():
    from views._state import RecentModels

    recent = RecentModels(2)
    assert not recent.seen("a") and recent.seen("a")
    assert not recent.seen("b") and recent.seen("a")  # a is now the most recent: b goes first
    assert not recent.seen("c") and not recent.seen("b") and recent.seen("c")  # b was evicted, as the cache does
