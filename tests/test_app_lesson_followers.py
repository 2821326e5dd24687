"""Issue 84: a follower costs little. What every follower of a class's step shows (the figures' JSON, the step's
paragraph about its figure) is made once per process for the step; each other follower is sent it as it is."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from mha_core.serving import sent
from mha_core.teaching import claims
from mha_core.teaching.lesson import step_number
from tests.conftest import open_app

PAGE = "views/lesson.py"


@pytest.fixture
def room(tmp_path, monkeypatch):
    """The pages' class store, in a file of the test's own."""
    import views._class as class_view
    from mha_core.serving.classroom import Classroom

    store = Classroom(tmp_path / "classes.sqlite", busy_s=0.1)
    monkeypatch.setattr(class_view, "classroom", lambda: store)
    return store


def shown(at) -> tuple:
    """What a follower's page shows of the step: its title, its paragraphs and its charts' JSON."""
    return (at.title[0].value, tuple(m.value for m in at.markdown),
            tuple(c.proto.spec for c in at.get("plotly_chart")))


def counted(monkeypatch, owner: object, name: str, made: Counter) -> None:
    """owner.name, counting its calls in made[name]."""
    original = getattr(owner, name)

    def counting(*args: object) -> object:
        made[name] += 1
        return original(*args)

    monkeypatch.setattr(owner, name, counting)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["why", "four_steps"])
def test_five_followers_of_a_step_are_sent_what_the_first_one_made(room, step, monkeypatch):
    made, said = Counter(), f"{step}_claims"
    counted(monkeypatch, sent.SentFigure, "of", made)  # a figure's JSON made
    counted(monkeypatch, claims, said, made)  # the step's claims about its figure (a page's run imports them anew)
    text = f"The nurse thanked the driver because she was early, said visitor {uuid.uuid4().hex[:6]}."  # new here
    code, _ = room.start(text, "en", "all-MiniLM-L6-v2", step=step_number(step))
    first = open_app(PAGE, **{"class": code})
    assert not first.exception and first.title[0].value.startswith(f"{step_number(step)}. ")
    by_the_first = made.copy()
    assert by_the_first["of"] >= 1 and by_the_first[said] == 1  # the sentence's: new to this process
    followers = [open_app(PAGE, **{"class": code}) for _ in range(4)]
    assert all(not at.exception and shown(at) == shown(first) for at in followers)
    assert first.get("plotly_chart") and len(shown(first)[1]) >= 2  # charts, the step's words and its paragraph
    assert made == by_the_first  # nothing made again for the four others
