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

    def counting(*args: object, **kwargs: object) -> object:
        made[name] += 1
        return original(*args, **kwargs)

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


def step_part(at) -> list:
    """The elements of the part of a follower's page that the watcher reruns at each move (the block that holds the
    step's title), blocks and what they hold: each one a message sent to every follower."""
    part = next(node for node in at.main.children.values() if hasattr(node, "children") and node.get("title"))
    nodes, found = list(part.children.values()), []
    while nodes:
        found.append(nodes.pop(0))
        nodes[:0] = list(getattr(found[-1], "children", {}).values())
    return found


SENT_PER_STEP = {"four_steps": 8, "heads": 5, "cost": 9}  # title, words, view (its charts in one grid), claims, link


@pytest.mark.slow
def test_a_follower_s_step_is_few_elements_and_its_selectable_overview_is_sent_from_the_kept_json(room, monkeypatch):
    """Each element of a follower's rerun costs the server about 0.2 ms per follower (Streamlit's own work per
    message): the step's heading and its sentence are one element, the output line and the claims one; the Heads step's
    overview, a chart the student may click (a widget), is sent from the JSON made for the first follower, never
    serialised again (plotly.io.to_json: 46 KB a follower)."""
    import plotly.io

    made = Counter()
    counted(monkeypatch, plotly.io, "to_json", made)
    for step, most in SENT_PER_STEP.items():
        code, _ = room.start("The animal didn't cross the street because it was too tired.", "en",
                             "all-MiniLM-L6-v2", step=step_number(step))
        first = open_app(PAGE, **{"class": code})
        assert not first.exception and len(step_part(first)) <= most, (step, [e.type for e in step_part(first)])
    made.clear()
    follower = open_app(PAGE, **{"class": code})  # the last step's (cost) already made: no figure serialised again
    assert not follower.exception and made["to_json"] == 0
    code, _ = room.start("The nurse thanked the driver because she was early.", "en", "all-MiniLM-L6-v2",
                         step=step_number("heads"))
    first, made_by_first = open_app(PAGE, **{"class": code}), made.copy()
    others = [open_app(PAGE, **{"class": code}) for _ in range(2)]
    assert all(not at.exception and shown(at) == shown(first) for at in others)
    assert others[0].get("plotly_chart")[0].proto.selection_mode  # still a chart the student clicks
    assert made == made_by_first  # the overview's JSON made for the first only
