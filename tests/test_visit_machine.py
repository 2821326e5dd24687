"""Issue 32: the app walked as visitors walk it. A rule-based state machine (Hypothesis) over AppTest switches pages
by the navigation, clicks tabs, changes the model and the language, types sentences, picks examples, tokens and
pronouns, ticks merge and reloads from the address; after every step it checks (tests/visitor.py) that nothing
raised, the language and the model are the chosen ones (on the page and in the address), every derived choice fits
the current sentence, and the address opened in a fresh session draws the same titles and selections.

Seeded: a failure names its steps and comes back on every run. MHA_VISIT_STEPS and MHA_VISIT_RUNS
make a longer walk (shrinking is on when MHA_VISIT_SHRINK=1: minutes, but the shortest walk that fails)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mha_core import i18n
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME, GEMMA_NAME
from tests.conftest import ANIMAL_TIRED
from tests.tiny_models import make_tiny_seq2seq
from tests.visitor import PAGES, TOKEN_PICKERS, Visitor

SENTENCES = (
    ANIMAL_TIRED,
    "Mary gave the book to John because she had already read it.",
    "The dog chased the cat because it was hungry.",
    "The keys to the cabinet are on the table.",
    "动物没有过马路，因为它太累了。",
    "玛丽把书给了约翰，因为她已经读过了。",
)
LANGUAGES = ("en", "zh")


def visitor_machine(models: tuple[str, ...], walk_seed: int) -> type[RuleBasedStateMachine]:
    """A state machine whose visitor chooses among `models` (the first visit's link names one, so a language switch
    never loads a model outside them); its walks are drawn from `walk_seed` (MHA_VISIT_SEED adds to it)."""

    class Visit(RuleBasedStateMachine):
        visitor: Visitor

        @initialize(page=st.sampled_from(PAGES), tab=st.integers(0, 5), language=st.sampled_from(LANGUAGES),
                    model=st.sampled_from(models))
        def first_visit(self, page: str, tab: int, language: str, model: str) -> None:
            """A shared link to a page, in a language, on a model; then one of the page's tabs."""
            self.visitor = Visitor.open(page, language, model)
            self.visitor.switch_tab(tab)

        @rule(page=st.sampled_from(PAGES))
        def switch_page(self, page: str) -> None:
            self.visitor.switch_page(page)

        @precondition(lambda self: bool(self.visitor.tab_labels()))
        @rule(choice=st.integers(0, 5))
        def switch_tab(self, choice: int) -> None:
            self.visitor.switch_tab(choice)

        @rule(model=st.sampled_from(models))
        def change_model(self, model: str) -> None:
            self.visitor.change_model(model)

        @rule(language=st.sampled_from(LANGUAGES))
        def change_language(self, language: str) -> None:
            self.visitor.change_language(language)

        @precondition(lambda self: any(w.key == "text" for w in self.visitor.at.text_area))
        @rule(text=st.sampled_from(SENTENCES))
        def type_sentence(self, text: str) -> None:
            self.visitor.type_sentence(text)

        @precondition(lambda self: any(w.key == "example" for w in self.visitor.at.selectbox))
        @rule(choice=st.integers(0, 9))
        def pick_example(self, choice: int) -> None:
            self.visitor.pick_example(choice)

        @precondition(lambda self: any(w.key in TOKEN_PICKERS for w in self.visitor.at.selectbox))
        @rule(which=st.integers(0, 3), choice=st.integers(0, 30))
        def pick_token(self, which: int, choice: int) -> None:
            self.visitor.pick_token(which, choice)

        @precondition(lambda self: any(w.key == "merge_words" for w in self.visitor.at.checkbox))
        @rule()
        def tick_merge(self) -> None:
            self.visitor.tick_merge()

        @rule(choice=st.integers(0, 3))
        def answer_lesson(self, choice: int) -> None:
            said = self.visitor.answer_lesson(choice)
            right = i18n.catalogue(self.visitor.language).gettext("Right.")
            assert said is None or all(right in each for each in said), "\n".join(
                ["after: " + " → ".join(self.visitor.steps), f"lesson: the page's own answers were judged {said!r}"])

        @rule()
        def reload(self) -> None:
            self.visitor.reload()

        @rule()
        def glance(self) -> None:
            """Nothing done. Hypothesis first tries the simplest walk (its first rule, every step): this one, which
            costs nothing, so each run's second walk is the first drawn at random."""

        def teardown(self) -> None:
            log = os.environ.get("MHA_VISIT_LOG")
            if log and hasattr(self, "visitor"):
                with open(log, "a", encoding="utf-8") as out:
                    out.write(" → ".join(self.visitor.steps) + "\n")

        @invariant()
        def looks_right(self) -> None:
            if self.visitor.checked == len(self.visitor.steps):
                return  # nothing happened since the last look
            self.visitor.checked = len(self.visitor.steps)
            problems = self.visitor.problems()
            assert not problems, "\n".join(["after: " + " → ".join(self.visitor.steps), *problems])

    return seed(walk_seed + int(os.environ.get("MHA_VISIT_SEED", "0")))(Visit)


def walk(machine: type[RuleBasedStateMachine], runs: int, steps: int) -> None:
    """`runs` random walks of `steps` steps (after Hypothesis's simplest walk, which only glances)."""
    shrink = os.environ.get("MHA_VISIT_SHRINK") == "1"
    run_state_machine_as_test(machine, settings=settings(
        max_examples=1 + int(os.environ.get("MHA_VISIT_RUNS", runs)),
        stateful_step_count=int(os.environ.get("MHA_VISIT_STEPS", steps)),
        database=None, deadline=None, report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, *((Phase.shrink,) if shrink else ()))))


@pytest.fixture
def small_models(monkeypatch, tmp_path: Path, lm_dirs: dict[str, Path], tiny_dir: Path) -> tuple[str, ...]:
    """MiniLM and three tiny models in the server's list: a decoder with a language-model head, a BERT and a T5 (an
    encoder–decoder: its encoder on the pages that read one stack)."""
    root = tmp_path / "models"
    root.mkdir()
    (root / "tiny-llama").symlink_to(lm_dirs["llama-tied"])
    (root / "tiny-bert").symlink_to(tiny_dir)
    make_tiny_seq2seq("t5", root / "tiny-t5")
    monkeypatch.setenv("MHA_MODELS_DIR", str(root))
    return ENCODER_NAME, "tiny-llama", "tiny-bert", "tiny-t5"


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
@pytest.mark.parametrize("part", range(3))
def test_visitors_never_see_a_crash_a_lost_choice_or_a_stale_one(small_models, part):
    """Nine seeded walks of 12 steps (108 steps per run: many short walks, since Hypothesis enables a random
    subset of the rules in each walk; every bug the issue named showed within 4 steps), in three parts spread over
    the test processes."""
    walk(visitor_machine(small_models, walk_seed=part), runs=3, steps=12)


@pytest.mark.slow
def test_visitors_on_every_bundled_model():
    walk(visitor_machine((ENCODER_NAME, DECODER_NAME, GEMMA_NAME), walk_seed=100), runs=1, steps=10)
