"""Issue 43, part 7: every public function of mha_core checks its arguments — a wrong type is the project's InputError
with one sentence naming the function and the argument, never a TypeError, AttributeError or ZeroDivisionError from
deep inside — and takes a str wherever it takes a Path."""

from __future__ import annotations

import inspect

import pytest

import mha_core
from mha_core.engine.tokens import InputError

FUNCTIONS = [name for name in mha_core.__all__ if inspect.isfunction(getattr(mha_core, name))]


class Odd:
    """A value of no type any public function takes."""


def test_every_public_function_is_listed():
    assert len(FUNCTIONS) >= 45 and {"run", "load_model", "search_text", "read_audio"} <= set(FUNCTIONS)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_wrong_type_is_one_sentence_naming_the_function_and_argument(name):
    """Each function called with a value of no accepted type for every parameter: the first checked parameter is
    named (a function with no parameters: an extra argument is refused the same way)."""
    function = getattr(mha_core, name)
    parameters = list(inspect.signature(function).parameters)
    with pytest.raises(InputError) as caught:
        function(*[Odd()] * max(len(parameters), 1))
    said = str(caught.value)
    assert said.startswith(f"{name}()") and "\n" not in said
    assert not parameters or any(f"takes {p} as" in said for p in parameters), said


def test_the_issue_cases_are_one_sentence(bundled, tmp_path):
    cases = {
        "run(m, None)": (lambda: mha_core.run(bundled, None), "run() takes texts as"),
        "run('name', …)": (lambda: mha_core.run("all-MiniLM-L6-v2", "x"), "run() takes model as LoadedModel, not str"),
        "load_model(123)": (lambda: mha_core.load_model(123), "load_model() takes model_dir as"),
        "load_model(None)": (lambda: mha_core.load_model(None), "leave it out for the default"),
        "transcribe(None, None)": (lambda: mha_core.transcribe(None, None), "transcribe() takes model as"),
        "build_index(m, None)": (lambda: mha_core.build_index(bundled, None, [1], tmp_path / "i"),
                                 "build_index() takes corpus as"),
        "prepare_images(text model)": (lambda: mha_core.prepare_images(bundled, []), "reads text, not images"),
        "search_text(token='a')": (lambda: mha_core.search_text(tmp_path, bundled, "a", "a", 1),
                                   "search_text() takes token as int, not str"),
        "search_text(top=True)": (lambda: mha_core.search_text(tmp_path, bundled, "a", 1, 1, top=True),
                                  "takes top as int, not bool"),
        "read_audio(missing str)": (lambda: mha_core.read_audio(str(tmp_path / "none.wav")), "cannot be read"),
        "read_image(missing str)": (lambda: mha_core.read_image(str(tmp_path / "none.png")), "cannot be read"),
        "OpenIndex(5)": (lambda: mha_core.OpenIndex(5), "opened from its folder"),
    }
    for case, (call, said) in cases.items():
        with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")) as caught:
            call()
        assert "\n" not in str(caught.value), case


def test_top_zero_is_one_sentence(tiny, tmp_path):
    from mha_core.analysis.index.build import build_index, text_corpus

    (tmp_path / "lines.txt").write_text("The cat sat.\nIt was tired.\n", encoding="utf-8")
    build_index(tiny, text_corpus(tmp_path / "lines.txt"), [1], tmp_path / "index")
    with pytest.raises(InputError, match="at least 1 match; 0 were asked for"):
        mha_core.search_text(str(tmp_path / "index"), tiny, "The cat.", 1, 1, top=0)
    assert len(mha_core.search_text(tmp_path / "index", tiny, "The cat.", 1, 1, top=2).matches) == 2


def test_str_paths_are_taken_where_paths_are(tmp_path):
    from tests.test_corpus_index import EWT

    assert mha_core.conllu_corpus(str(EWT), 2)[0] == EWT.name  # annotated Path: a str was .name-less before
    (tmp_path / "lines.txt").write_text("One.\nTwo.\n", encoding="utf-8")
    assert len(mha_core.text_corpus(str(tmp_path / "lines.txt"))[1]) == 2
