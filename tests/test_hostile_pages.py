"""Issue 10 on the pages (AppTest): the model list, long boxes, uploads over the cap, markup in user text,
the token view's export and a failed image render. Each test names the table row it covers."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mha_core.engine.loading.bundled import ENCODER_NAME
from tests.conftest import SHARED_DATA, corpus_uploader, download, open_app, transformers_attentions
from tests.tiny_models import CONFIGS

# The bundled encoder beside a tiny model of every family (gemma3_text among them: a page that assumed MiniLM's 6 x 12
# names a layer or head a 2-layer model lacks). The bundled decoders' pages are run by test_i18n (every page and tab
# on Gemma) and walked by test_visit_machine.
BUNDLED = (ENCODER_NAME,)

PAGES = ["views/heads.py", "views/roles.py", "views/coreference.py", "views/parameters.py", "views/walkthrough.py",
         "views/contributions.py", "views/corpus.py", "views/predictions.py", "views/explanations.py"]


@pytest.fixture
def listed(monkeypatch, tmp_path, tiny_dir, bad_model_dirs, family_dirs) -> Path:
    """MHA_MODELS_DIR with the tiny 2-layer BERT, a tiny model of every family, and every bad folder."""
    root = tmp_path / "models"
    root.mkdir()
    (root / "tiny").symlink_to(tiny_dir)
    for name, path in {**bad_model_dirs, **family_dirs}.items():
        (root / name).symlink_to(path)
    monkeypatch.setenv("MHA_MODELS_DIR", str(root))
    return root


def texts_of(at: AppTest) -> list[str]:
    return [e.value for kind in ("markdown", "caption", "error", "warning", "info", "success", "subheader")
            for e in at.get(kind)]


INDEX_PATTERNS = {"layer": (r"\bL(\d+)\b", r"\b[Ll]ayer (\d+)\b"), "head": (r"\bH(\d+)\b", r"\b[Hh]ead (\d+)\b")}


def layers_and_heads_named(at: AppTest) -> dict[str, set[int]]:
    """Every layer and head index the page names: in its texts, its charts' labels and its choices."""
    import re

    names = at.selectbox(key="model").options  # model names (all-MiniLM-L6-v2) are not layers
    specs = [re.sub(r'"bdata":\s*"[^"]*"', "", c.proto.spec) for c in at.get("plotly_chart")]  # not base64 "L7"
    shown = texts_of(at) + specs
    shown += [str(option) for box in at.selectbox if box.key != "model" for option in box.options]
    shown = [re.sub("|".join(re.escape(name) for name in names), "", text) for text in shown]
    named = {kind: {int(n) for text in shown for pattern in patterns for n in re.findall(pattern, text)}
             for kind, patterns in INDEX_PATTERNS.items()}
    for box in at.selectbox:  # a layer or head picker's plain numbers
        kind = next((kind for kind in named if kind in (box.key or "")), None)
        if kind:
            named[kind] |= {int(option) for option in box.options if str(option).isdigit()}
    return named


def assert_drawn_for(at: AppTest, n_layers: int, n_heads: int, where: str) -> None:
    """The page ran, drew something (or said why not), and every layer and head it names exists in this model: a
    page that assumed another model's shape (a literal layer 3 or 12 heads) names one that does not."""
    assert not at.exception, (where, at.exception)
    assert not at.error, (where, [e.value for e in at.error])
    drawn = at.get("plotly_chart") or at.dataframe or at.get("arrow_data_frame") or at.metric
    assert drawn or at.info, where
    named = layers_and_heads_named(at)
    assert max(named["layer"], default=0) < n_layers and max(named["head"], default=0) < n_heads, (where, named)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_a_two_layer_model(listed, page):  # row: a valid 2-layer BERT, Walkthrough page
    at = open_app(page, model="tiny")
    assert any("2 layers × 4 heads" in c.value for c in at.caption)
    assert_drawn_for(at, 2, 4, page)


@pytest.mark.slow  # 50 page runs: in make test, not in the fast tier
@pytest.mark.parametrize("model", [*sorted(CONFIGS), *(BUNDLED)])
def test_every_page_runs_on_every_family_and_every_bundled_model(listed, model):
    from mha_core.serving.menu import available_models
    from views._state import load_listed_model

    (path,) = [choice.path for choice in available_models() if choice.name == model]
    loaded = load_listed_model(str(path))
    for page in PAGES:
        at = open_app(page, model=model)
        assert at.selectbox(key="model").value == model
        assert_drawn_for(at, loaded.n_layers, loaded.n_heads, f"{model} {page}")


@pytest.mark.parametrize("name", ["config-list", "garbage-weights", "sizes-mismatch", "no-tokenizer"])
def test_a_bad_listed_folder_says_why_once_and_the_default_stays(listed, name):
    at = open_app(model=name)
    assert not at.exception
    from views._state import literal

    assert len(at.error) == 1 and at.error[0].value.startswith(literal(name))  # the name shown as typed, no markup
    assert any("6 layers × 12 heads" in c.value for c in at.caption)


def test_visitors_cannot_probe_server_paths():  # rows: path spellings, /root/.ssh vs /root/.nossh
    shown = []
    for probe in ("/root/.ssh", "/root/.nossh", "/proc/self/root/usr", "../../model"):
        at = open_app(model=probe)
        assert not at.exception and not at.error
        assert at.selectbox(key="model").value == "all-MiniLM-L6-v2"
        assert not any("/" in t for t in texts_of(at) if "model" in t.lower())
        shown.append(texts_of(at))
    assert all(s == shown[0] for s in shown)  # no answer depends on what exists on the server
    assert [w.key for w in at.text_input] == ["segment_b"]  # no free-text model box (a second sentence only)


def test_a_huge_second_sentence_is_a_message_and_nothing_runs(monkeypatch):  # row: 1.1 M characters
    import mha_core.analysis.coref.sentence as inspector

    at = open_app("views/coreference.py")
    parsed = []
    monkeypatch.setattr(inspector, "sentence_words", lambda text: parsed.append(text) or [])
    at.text_input(key="pair").input("word " * 220_000).run()
    assert not at.exception
    assert any("The second sentence has 1,100,000 characters" in e.value for e in at.error)
    assert not parsed  # spaCy never saw it


def upload_roles(name: str, data: str) -> AppTest:
    at = open_app("views/roles.py", source="Uploaded CoNLL-U")
    corpus_uploader(at, 0).set_value((name, data.encode(), "text/plain")).run()
    return at


def test_a_conllu_of_only_overlong_sentences_is_a_message():  # row: every sentence > 512 pieces
    words = [f"{i}\tsupercalifragilistic{i}\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
             for i in range(1, 300)]
    at = upload_roles("long.conllu", "\n".join(words) + "\n\n" + "\n".join(words) + "\n")
    assert not at.exception
    assert any("None of the 2 sentences fits the model's 512 word pieces" in w.value for w in at.warning)


def test_a_cyclic_conllu_names_the_line():  # row: HEAD beyond the sentence, or cyclic heads
    at = upload_roles("cycle.conllu", "1\ta\t_\t_\t_\t_\t2\tdep\t_\t_\n2\tb\t_\t_\t_\t_\t1\tdep\t_\t_\n"
                                      "3\tc\t_\t_\t_\t_\t0\troot\t_\t_\n")
    assert not at.exception
    assert any("line 1" in e.value and "cycle" in e.value for e in at.error)


def test_uploads_are_capped_and_say_so(monkeypatch):  # rows: a 17 MB CoNLL-U, a 50 MB GAP file
    import tomllib

    import views._uploads as uploads

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    ewt = SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu"
    per_sentence = ewt.stat().st_size / 2001
    assert per_sentence * uploads.UPLOAD_MAX_SENTENCES < config["server"]["maxUploadSize"] * 2**20
    monkeypatch.setattr(uploads, "UPLOAD_MAX_SENTENCES", 12)
    sentences = ewt.read_text(encoding="utf-8").split("\n\n")[:30]
    at = upload_roles("big.conllu", "\n\n".join(sentences) + "\n")
    assert not at.exception
    assert any("12 sentence(s) analysed" in c.value for c in at.caption)
    assert any("Only the first 12 sentences are read; the rest of the file is skipped" in c.value for c in at.caption)
    lines = (SHARED_DATA / "gap" / "gap-validation.tsv").read_text(encoding="utf-8").splitlines()
    gap = lines[:1] + lines[200:240]  # rows no other test uploads (analyses are shared per file content)
    corpus_uploader(at, 1).set_value(("big.tsv", "\n".join(gap).encode(), "text/plain")).run()
    assert not at.exception
    (result,) = at.session_state["gap_results"].values()
    assert 0 < result.examples <= 12


def test_user_markup_in_names_and_errors_stays_literal():  # row: markdown from user text
    at = upload_roles("**bold** www.x.example.conllu", "# x\n1\tonly two\n")
    (error,) = at.error
    assert "\\*\\*bold\\*\\*" in error.value and "www." not in error.value  # escaped, address broken
    at = open_app("views/coreference.py", text="Visit www.example.org because it has ~~news~~ for [x](javascript:1).")
    assert not at.exception
    for line in texts_of(at):
        assert "www.example.org" not in line and "~~news~~" not in line and "](javascript" not in line


def test_invisible_and_line_turning_characters_are_shown_as_their_code():
    """A typed U+202E turned the rest of the page's line round, and "c<U+200B>at" showed as "cat" (issue 81's
    hostile notes): views/_text.literal, which every line showing user text goes through, and a chart's labels
    (figures.charts.safe_label) show them as their code; the joiners scripts need stay."""
    from views._text import literal

    assert literal("a\u202eb c\u200bat \u2067d") == "a⟨U\\+202E⟩b c⟨U\\+200B⟩at ⟨U\\+2067⟩d"
    assert literal("👨\u200d👩") == "👨\u200d👩"
    from mha_core.figures.charts import indexed_labels

    labels = indexed_labels(["猫", "\u202e", "<b>\u200b"])  # a chart's axis
    assert labels == ["0 猫", "1 ⟨U+202E⟩", "2 &lt;b&gt;⟨U+200B⟩"]


def test_the_token_view_exports_the_chosen_pair():  # row: the token view's CSV/JSON export
    """The two downloads' payloads: the weight from 'was' to 'didn' in every head, against transformers' eager
    BertModel."""
    import csv
    import io
    import json

    import numpy as np

    at = open_app(view="One token", query="11: was", key="3: didn")
    assert not at.exception
    assert (at.selectbox(key="query").value, at.selectbox(key="key").value) == (11, 3)
    theirs = transformers_attentions(at.text_area(key="text").value)[0][:, :, 11, 3]  # (L,H)
    rows = list(csv.DictReader(io.StringIO(download(at, "CSV: this pair in every head").decode())))
    assert {(r["query"], r["key"]) for r in rows} == {("was", "didn")} and len(rows) == theirs.size
    weights = np.zeros_like(theirs)
    for r in rows:
        weights[int(r["layer"]), int(r["head"])] = float(r["weight"])
    assert np.abs(weights - theirs).max() <= 1e-5
    data = json.loads(download(at, "JSON: this pair in every head"))
    assert (data["query"], data["key"]) == ("was", "didn")
    assert np.abs(np.array(data["weights"]) - theirs).max() <= 1e-5


def test_a_failed_image_render_is_a_message(monkeypatch):
    import mha_core.serving.export as export

    def broken(*args: object, **kwargs: object) -> bytes:
        raise RuntimeError("Chromium crashed")

    monkeypatch.setattr(export, "figure_image", broken)
    at = open_app(view="Export")
    at.button(key="export_render").click().run()
    assert not at.exception
    assert any("could not be rendered" in e.value for e in at.error)


@pytest.mark.parametrize("value", ["inf", "-inf", "1e309", "nan", "9" * 100_000, "-5", "99999"])
def test_url_numbers_are_parsed_and_checked_before_a_widget_reads_them(value):  # issue 18, finding 5; issue 32
    """A number in an address that is no number, or one the choice cannot take, gives way to the default (none
    chosen), with no error."""
    at = open_app("views/corpus.py", g_view="Query–key view of one head", g_sentence=value)
    assert not at.exception, at.exception
    assert not at.error
    assert at.number_input(key="g_sentence").value is None
    assert "g_sentence" not in at.query_params
    at = open_app("views/corpus.py", g_view="Query–key view of one head", g_sentence="7")
    assert at.number_input(key="g_sentence").value == 7 and at.query_params["g_sentence"] == "7"
