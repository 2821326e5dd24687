"""Issue 23: the interface in English and Chinese. The catalogue, the language choice, errors worded by the page,
Chinese words and examples; every page and tab in Chinese without an untranslated string (AppTest)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mha_core import i18n
from mha_core.analysis.coref.sentence import PROBE
from mha_core.analysis.efficiency.cost import PEAK_CHILD
from mha_core.analysis.long.roles import NEEDLE, QUESTION
from mha_core.analysis.translation.prompt import EXAMPLE_PAIRS
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME, GEMMA_NAME
from mha_core.engine.tokens import InputError
from mha_core.engine.words import word_units
from mha_core.teaching.examples import SPOKEN
from tests.conftest import ROOT, open_app
from tests.i18n_check import PAGES_AND_TABS, assert_all_chinese, english_left, uploader_texts

PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@pytest.fixture
def chinese():
    i18n.use("zh")
    yield
    i18n.use("en")


def marked_messages() -> set[str]:
    """Every string literal given to tr() or N_() in the app and in mha_core (nested calls too, which pybabel's
    extraction skips: a literal it would miss fails here)."""
    import ast

    found = set()
    for path in [*ROOT.joinpath("mha_core").rglob("*.py"), *ROOT.joinpath("views").glob("*.py"), ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tr", "N_")
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found.add(node.args[0].value)
    return found


def test_every_marked_string_has_a_chinese_translation_with_the_same_placeholders():
    messages = marked_messages()
    assert len(messages) > 600  # the pages, the errors, the charts, the lessons' reveals
    missing = sorted(m for m in messages if not i18n.has_translation(m, "zh"))
    assert not missing, missing[:10]
    for message in messages:
        translated = i18n.catalogue("zh").gettext(message)
        assert sorted(PLACEHOLDER.findall(message)) == sorted(PLACEHOLDER.findall(translated)), message


def test_tr_follows_the_context_language_and_the_cli_stays_english(chinese):
    assert i18n.tr("Layer") == "层"
    assert i18n.tr("Layer {layer}: every head (tap a tile to open it)", layer=3).startswith("第 3 层")
    assert i18n.tr(7) == "7"  # a widget's format_func over numbers
    i18n.use("en")
    assert i18n.tr("Layer") == "Layer"
    i18n.use("xx")  # an unknown code means English
    assert i18n.current() == "en"


@pytest.mark.parametrize(("locale", "language"), [("zh-CN", "zh"), ("zh_TW", "zh"), ("zh-Hant-HK", "zh"),
                                                  ("en-GB", "en"), (None, "en"), ("", "en"), ("fr", "en")])
def test_the_browser_locale_picks_the_language(locale, language):
    assert i18n.language_of(locale) == language


def test_an_error_carries_a_code_and_values_and_the_page_words_it(chinese, tiny):
    import mha_core

    with pytest.raises(InputError) as caught:
        mha_core.run(tiny, "   ")
    err = caught.value
    assert err.code == "text_empty" and str(err) == "The text is empty."  # the CLI's English
    assert i18n.worded(err) == "文本是空的。"
    with pytest.raises(InputError) as caught:
        mha_core.run(tiny, ["a", " "])
    assert caught.value.values == {"number": 2} and i18n.worded(caught.value) == "文本 2 是空的。"


def test_a_kept_reason_is_english_in_json_and_chinese_on_the_page(chinese, tiny):
    import mha_core

    result = mha_core.run(tiny, "The cat sat.", path="auto")
    assert result.path_reason == "auto: explicit for 6 tokens <= 256"  # a str: JSON and the CLI read it as it is
    assert i18n.worded(result.path_reason) == "自动：6 个标记 <= 256，用显式路径"


def test_chinese_pieces_merge_into_jiebas_words_never_into_clauses():
    text = "动物没有过马路，因为它太累了。"
    # Pieces as a byte-level tokenizer cuts them: one character each, and one piece spanning 因为它.
    spans = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 11), (11, 12), (12, 13), (13, 14),
             (14, 15)]
    tokens = [text[a:b] for a, b in spans]
    units = word_units(text, tokens, [0] * len(tokens), spans)
    assert units.labels == ("动物", "没有", "过", "马路", "，", "因为它", "太", "累", "了", "。")


def test_chinese_words_pronouns_and_the_probe():
    from mha_core.analysis.coref.sentence import candidates_before, default_pronoun, sentence_words, with_probe

    words = sentence_words("玛丽把书给了约翰，因为她已经读过了。")
    pronoun = default_pronoun(words)
    assert words[pronoun].text == "她"
    assert [words[i].text for i in candidates_before(words, pronoun)] == ["玛丽", "书", "约翰"]
    assert with_probe("玛丽把书给了约翰，因为她已经读过了。", words[pronoun]).endswith("句中的“她”是指")


def test_chinese_examples_are_offered_only_where_they_were_measured():
    from mha_core.teaching.examples import EXAMPLES, examples_for

    on_gemma = examples_for("zh", GEMMA_NAME)
    assert on_gemma and all(e.language == "zh" for e in on_gemma)
    assert all(e.language == "en" for e in examples_for("zh", ENCODER_NAME))  # MiniLM reads Chinese as [UNK]
    for example in (e for e in EXAMPLES if e.language == "zh"):
        assert set(example.shows) <= set(example.offered_on) and example.claims, example.text
        assert example.pair is None or example.pair in {e.text for e in EXAMPLES}


@pytest.mark.slow
def test_the_chinese_examples_show_what_they_say_on_gemma(gemma):
    """Each Chinese example's claims, recomputed: its heads are among the three that give the antecedent the most
    weight, the model answers the antecedent over the other noun, and a pair has the same number of pieces."""
    import mha_core
    from mha_core.analysis.coref.sentence import antecedent_scores, default_pronoun, sentence_words
    from mha_core.analysis.lm.predict import probe_answers
    from mha_core.teaching.examples import EXAMPLES, example_of

    for example in (e for e in EXAMPLES if e.language == "zh" and GEMMA_NAME in e.claims):
        claim = example.claims[GEMMA_NAME]
        words = sentence_words(example.text)
        pronoun = default_pronoun(words)
        assert words[pronoun].text == example.pronoun
        nouns = [next(w for w in words if w.text == t) for t in (claim["answer"], claim["over"])]
        answers = {word: prob for word, _, prob, _ in probe_answers(gemma, example.text, words[pronoun],
                                                                    nouns).candidates}
        assert answers[claim["answer"]] > answers[claim["over"]], (example.text, answers)
        if "heads" in claim:
            scores = antecedent_scores(mha_core.run(gemma, example.text, path="explicit"), 0, words, pronoun,
                                       [next(w.index for w in words if w.text == example.antecedent)])
            top = {(int(layer), int(head)) for layer, head in zip(*np.unravel_index(
                np.argsort(-scores.scores[0].ravel())[:3], scores.scores[0].shape), strict=True)}
            assert {tuple(h) for h in claim["heads"]} <= top, (example.text, top)
        if example.pair:
            partner = example_of(example.pair)
            assert mha_core.run(gemma, example.text).lengths == mha_core.run(gemma, partner.text).lengths


def test_the_checker_flags_english_and_spares_names_numbers_and_user_text():
    assert english_left("第 3 层，头 1：注意力权重", []) == ""
    assert english_left("QK-norm 之后的 softmax(QKᵀ/√d_k)，W_O 与 d_model", []) == ""
    assert english_left("Layer 3, head 1: attention weights", []) == "Layer head attention weights"
    assert english_left("“animal”的权重", ["animal"]) == ""
    assert english_left("句子：The cat sat", ["The cat sat"]) == ""
    assert english_left("句子：The cat sat", []) != ""


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_chinese_mode_opens_on_gemma_with_a_chinese_sentence_and_keeps_lang_in_the_url():
    at = open_app(lang="zh")
    assert not at.exception
    assert at.selectbox(key="model").value == GEMMA_NAME
    assert at.selectbox(key="lang").value == "zh"
    assert re.search(r"[\u4e00-\u9fff]", at.text_area(key="text").value)
    assert at.title[0].value == "注意力头"
    at.selectbox(key="lang").set_value("en").run()
    assert at.title[0].value == "Attention heads" and at.query_params.get("lang") in (None, "en", ["en"])


def test_an_english_link_opens_in_english_and_keeps_the_sentence():
    at = open_app(lang="en", text="The cat sat on the mat.")
    assert at.title[0].value == "Attention heads"
    assert at.text_area(key="text").value == "The cat sat on the mat."
    assert at.selectbox(key="model").value == ENCODER_NAME


def test_the_parameters_page_walks_the_seeds_example_in_chinese():
    # the tab reads no model: MiniLM chosen, not the Chinese default (Gemma 3, 1 GB, is for make test-slow)
    at = open_app("views/parameters.py", lang="zh", model=ENCODER_NAME, ptab=i18n.catalogue("zh").gettext("Any shape"))
    assert not at.exception
    walk = next(m.value for m in at.markdown if "W_Q" in m.value and "1,050,624" in m.value)
    assert "512 × 512 = 262,144" in walk and "个权重" in walk and "合计" in walk
    assert any("1,050,624" in m.value for m in at.metric)


def opened_corpus(runs: list) -> str:
    """The corpus Across a corpus opened on: the Chinese treebank for the Chinese interface on a model that reads
    Chinese as words (Gemma), else the bundled English corpus (as the search's index)."""
    return runs[0].radio(key="g_source").value


@pytest.mark.parametrize("page", list(PAGES_AND_TABS))
def test_every_page_in_chinese_on_minilm_has_no_english_left(page):
    runs = assert_all_chinese(page, ENCODER_NAME)
    if page == "views/corpus.py":
        assert opened_corpus(runs) == "Bundled corpus"  # MiniLM reads Chinese as [UNK]


# Every page and tab on Gemma (it reads Chinese); on SmolLM2 (it does not: English examples and byte fragments in a
# Chinese page) the pages whose text depends on that.
GEMMA_ONLY = ("views/contributions.py", "views/corpus.py", "views/roles.py", "views/parameters.py")
# Checked by the tests whose English (or other) runs compute what these show, in the same test (the process's server
# computes it once for both; here it was computed anew whenever pytest-xdist dealt the two to different processes):
# the Explanations page on both decoders (tests/test_app_explanations.py) and Predictions on SmolLM2
# (tests/test_predict.py).
CHECKED_BESIDE = {("views/explanations.py", GEMMA_NAME), ("views/explanations.py", DECODER_NAME),
                  ("views/predictions.py", DECODER_NAME)}
DECODER_PAGES = [(page, model) for model in (GEMMA_NAME, DECODER_NAME) for page in PAGES_AND_TABS
                 if (page, model) not in CHECKED_BESIDE and (model == GEMMA_NAME or page not in GEMMA_ONLY)]


@pytest.mark.slow  # 2 models x 8 pages x their tabs: in make test, not in the fast tier
@pytest.mark.parametrize(("page", "model"), DECODER_PAGES)
@pytest.mark.long
def test_every_page_and_tab_in_chinese_on_the_decoders_has_no_english_left(page, model):
    runs = assert_all_chinese(page, model)
    if page == "views/corpus.py":
        assert opened_corpus(runs) == "Chinese treebank"


def test_byte_fragments_of_chinese_characters_get_a_warning():
    from mha_core.engine.pieces import fragmented_chars

    text = "动物。"
    split = [(0, 1), (0, 1), (1, 2), (1, 2), (2, 3)]  # SmolLM2: 动¹/₂ 动²/₂ 物¹/₂ 物²/₂ 。
    assert fragmented_chars(text, split) == {"动", "物"}
    assert not fragmented_chars(text, [(0, 2), (2, 3)])  # Gemma: 动物 。
    assert not fragmented_chars("The cat", [(0, 3), (0, 3), (4, 7)])  # spaced text: never


def test_the_fragments_note_names_the_count_and_a_model_that_reads_chinese(decoder):
    from mha_core import run
    from mha_core.analysis.heads.display import fragments_note

    note = fragments_note(run(decoder, "动物。"), 0, "gemma-3-270m")
    assert note is not None and "2 of the text's 3" in note and "gemma-3-270m" in note


@pytest.mark.slow  # the Chinese default is Gemma 3 (1 GB): in make test, not in the fast tier
def test_switching_to_chinese_moves_an_untouched_model_and_sentence_to_the_chinese_defaults():
    at = open_app(lang="en")
    assert at.selectbox(key="model").value == ENCODER_NAME
    at.selectbox(key="lang").set_value("zh").run()
    assert not at.exception
    assert at.selectbox(key="model").value == GEMMA_NAME
    assert re.search(r"[\u4e00-\u9fff]", at.text_area(key="text").value)
    assert at.title[0].value == "注意力头"


def test_a_chosen_model_and_a_typed_sentence_stay_when_the_language_changes(tiny_dir, tmp_path, monkeypatch):
    (tmp_path / "tiny-bert").symlink_to(tiny_dir)  # a model of the server's folder: not a default in either language
    monkeypatch.setenv("MHA_MODELS_DIR", str(tmp_path))
    at = open_app(lang="en", model="tiny-bert", text="The cat sat on the mat.")
    at.selectbox(key="lang").set_value("zh").run()
    assert not at.exception and at.selectbox(key="model").value == "tiny-bert"
    assert any("d_model 32 " in c.value for c in at.sidebar.caption)  # the page reads it (the tiny BERT's shape)
    assert at.text_area(key="text").value == "The cat sat on the mat."


def test_the_chinese_lessons_are_asked_and_checked_in_chinese():
    at = open_app("views/walkthrough.py", lang="zh", model=ENCODER_NAME, wt_tab=i18n.catalogue("zh").gettext("Lessons"))
    assert not at.exception
    assert any("“她”是谁？" in e.label for e in at.expander)
    at.text_input(key="answer_eight-heads").input("1,050,624").run()
    at.button(key="check_eight-heads").click().run()
    assert any(s.value == "答对了。" for s in at.success)
    at.text_input(key="answer_scaling").input("更平坦").run()  # the model's answer, in Chinese, is 更尖锐
    at.button(key="check_scaling").click().run()
    assert any(w.value == "这次不对。" for w in at.warning)


@pytest.mark.slow
def test_every_chinese_lesson_has_an_answer_on_gemma(gemma, chinese):
    from mha_core.teaching.lessons import load_lessons, not_applicable, reveal

    lessons = load_lessons(language="zh")
    assert len(lessons) == len(load_lessons())  # each English lesson has its Chinese one
    for lesson in lessons:
        assert not_applicable(gemma, lesson) is None, lesson.id
        answer = reveal(gemma, lesson)
        assert answer.accepted and re.search(r"[\u4e00-\u9fff]", answer.explanation), lesson.id


def test_the_roles_page_does_not_parse_chinese_with_an_english_parser():
    at = open_app("views/roles.py", lang="zh", model=ENCODER_NAME, text="动物没有过马路，因为它太累了。")
    assert not at.exception
    assert not [d for d in at.dataframe if d.key == "relations"]
    assert any("spaCy" in i.value and "中文" in i.value for i in at.info)


def test_a_budget_error_is_worded_whole_in_chinese(tiny, monkeypatch, chinese):
    """Its "what" and "advice" are Worded too: no English fragment inside the Chinese sentence."""
    import mha_core
    from mha_core.engine.budget import BudgetError
    from tests.conftest import long_text

    monkeypatch.setattr("mha_core.engine.budget.budget_bytes", lambda: 2**16)  # 64 KB: any text is over
    with pytest.raises(BudgetError) as caught:
        mha_core.run(tiny, [long_text(20)] * 64, path="explicit")
    err = caught.value
    assert str(err).startswith("Recomputing 64 text(s)") and "use a shorter text or the fused path" in str(err)
    said = i18n.worded(err)
    assert said.startswith("在 explicit 路径上重算 64 段") and "请用更短的文本或融合路径" in said
    assert english_left(said, []) == "", said


def test_an_upload_cap_note_is_one_whole_sentence_in_chinese(chinese, monkeypatch):
    """Issue 34: the pages took the progress bar's " (…)" note apart with .strip(" ()").capitalize(), which left the
    Chinese full-width brackets in place."""
    import views._uploads as uploads
    from views._state import progress_note

    monkeypatch.setattr(uploads, "UPLOAD_MAX_SENTENCES", 12)
    note = uploads.cap_note(30)
    assert note.startswith("只") and note.endswith("。") and not set("()（）") & set(note), note
    assert uploads.cap_note(12) == "" and progress_note(note).endswith(note)


def test_the_uploaders_own_button_and_limit_are_chinese_on_a_chinese_page():
    """Issue 77.8: Streamlit draws "Upload" and "20MB per file • TXT" in English on every page with a sentence box;
    the Chinese page puts its own texts after them (CSS on the uploader's key). The checker reads them: without
    that CSS, it reports the English."""
    at = open_app("views/heads.py", lang="zh", model=ENCODER_NAME)
    assert uploader_texts(at) == ["上传", "每个文件不超过 20MB • TXT"]
    assert all(english_left(text, []) == "" for text in uploader_texts(at))
    english = open_app("views/heads.py", model=ENCODER_NAME)
    assert uploader_texts(english) == ["Upload", "20MB per file • TXT"]
    assert english_left(uploader_texts(english)[1], []) == "per file"


def test_a_model_that_cannot_read_chinese_is_told_in_chinese_with_the_sentence_s_characters(chinese):
    """Issue 77.8: SmolLM2's refusal said "读不懂Chinese" and named 喝 and 天, the prompt example's characters."""
    from types import SimpleNamespace

    import transformers

    from mha_core.analysis.translation.translate import check_reads
    from mha_core.engine.loading.model import bundled_dirs

    name = "SmolLM2-135M-Instruct"  # its tokenizer is all check_reads reads: the fast tier loads no such model
    smol = SimpleNamespace(name=name, tokenizer=transformers.AutoTokenizer.from_pretrained(bundled_dirs()[name]))
    with pytest.raises(InputError) as refused:
        check_reads(smol, "那只动物没有过马路。", "zh")
    said = refused.value.worded()
    assert "读不懂中文" in said and english_left(said, [smol.name]) == "", said
    named = said.split("它把 ")[1].split(" 读成")[0].split()
    assert named and all(c in "那只动物没有过马路。" for c in named), named
    assert named == sorted(named, key="那只动物没有过马路。".find)
    with pytest.raises(InputError) as writing:  # no sentence (the target language): the example's characters
        check_reads(smol, "", "zh")
    assert all(c in EXAMPLE_PAIRS[0]["zh"] for c in writing.value.worded().split("它把 ")[1].split(" 读成")[0].split())


# Issue 34: every string of mha_core a person reads is marked for the catalogue. What may stay unmarked, and why:
UNMARKED_FILES = {
    "mha_core/cli/": "the command line speaks English (its help, its one-line errors)",
    "mha_core/engine/loading/bundled.py": "the server owner's installation and conversion messages, and a converted "
                                          "model's README (English, as the CLI)",
    "mha_core/engine/loading/bundled_whisper.py": "the converted Whisper's NOTICE file (English, as its licence)",
    "mha_core/engine/loading/bundled_vision.py": "the converted DINOv2's NOTICE file (English, as its licence)",
    "mha_core/serving/memory.py": "the memory plan printed in the server's log when it starts",
    "mha_core/serving/classes/on_sqlite.py": "SQL statements (its sentences to a person are marked: N_)",
    "mha_core/serving/classes/on_redis.py": "Lua scripts Redis runs (its sentences to a person are marked: N_)",
}
UNMARKED_TEXTS = {
    PROBE: "text the model reads (the probe continues an English sentence)",
    NEEDLE: "text the model reads (the needle)",
    QUESTION: "text the model reads (the needle's question)",
    "The cat sat on the mat.": "text the model reads (checking a loaded model)",
    SPOKEN["en"]: "text espeak-ng speaks for Whisper to hear (the Chinese interface speaks SPOKEN['zh'])",
    "explicit (matmul + softmax)": "a backend's name in results and JSON (teaching.walkthrough.backend_words words it)",
    "query \\ key": "a CSV file's corner header",
    "<from the address>": "an internal context marker, never shown",
    PEAK_CHILD: "Python code a child process runs (the kernels' peak memory)",
    "Stéfan van der Walt": "a photographer's name (teaching.photos: the sample photos' credits)",
    **{pair["en"]: "text the model reads (the translation prompt's example pairs)" for pair in EXAMPLE_PAIRS},
}


def unmarked_strings() -> list[str]:
    """String literals of three words or more in mha_core that no tr(), N_(), Worded, Explained or error call holds
    and that are not docstrings."""
    import ast

    root = ROOT
    found = []
    for path in sorted((root / "mha_core").rglob("*.py")):
        name = str(path.relative_to(root))
        if any(name.startswith(unmarked) for unmarked in UNMARKED_FILES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or len(node.value.split()) < 3:
                continue
            if not re.search(r"[A-Za-z]{3}", node.value) or isinstance(parents.get(node), ast.Expr):
                continue
            if node.value in UNMARKED_TEXTS or held_by_a_marker(node, parents):
                continue
            found.append(f"{name}:{node.lineno}: {node.value[:60]!r}")
    return found


def held_by_a_marker(node: object, parents: dict) -> bool:
    import ast

    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if called in ("N_", "tr", "Worded", "Explained") or called.endswith("Error"):
                return True
    return False


def test_every_string_a_person_reads_in_mha_core_is_marked():
    """Before: the model menu's "(cannot be used)", the image export's reasons, a corpus's "Left out: …" note, the
    shape calculator's field names and the parameter table's owners stayed English on a Chinese page."""
    assert not unmarked_strings()


def test_n_is_imported_from_mha_core_messages_only():
    """Issue 80: N_ came from mha_core.messages in 36 files and from mha_core.i18n in 78; messages is the one place
    every floor may import (the engine may not import i18n)."""
    import ast

    sources = [ROOT / "app.py", *ROOT.joinpath("mha_core").rglob("*.py"), *ROOT.joinpath("views").rglob("*.py"),
               *ROOT.joinpath("tests").glob("*.py"), *ROOT.joinpath("benchmarks").glob("*.py")]
    elsewhere = [f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}" for path in sources
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ImportFrom) and node.module != "mha_core.messages"
                 and any(alias.name == "N_" for alias in node.names)]
    assert not elsewhere, elsewhere
    assert not hasattr(i18n, "N_")
