"""A visitor of the app under Streamlit's AppTest: what a person does (switch page by the navigation, switch tab,
change model or language, type a sentence, pick an example, a token or a pronoun, tick merge, reload from the
address) and what they would notice is wrong after each step (issue 32). tests/test_visit_machine.py drives it with
Hypothesis's rule-based state machine."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Widget

from mha_core import i18n
from mha_core.teaching.examples import focus
from mha_core.teaching.lessons import load_lessons
from tests.conftest import ROOT

TITLES = {  # page: its title as written (the catalogue gives the Chinese)
    "views/heads.py": "Attention heads",
    "views/roles.py": "Head roles",
    "views/coreference.py": "Coreference inspector",
    "views/contributions.py": "What heads contribute",
    "views/predictions.py": "What the model predicts",
    "views/corpus.py": "Heads across a corpus",
    "views/parameters.py": "Parameters and compute",
    "views/walkthrough.py": "Multi-head attention, step by step",
    "views/seq2seq.py": "Encoder–decoder: cross-attention",
    "views/images.py": "Images: attention over patches",
    "views/explanations.py": "Explanations: is attention the explanation?",
}
PAGES = tuple(TITLES)
TOKEN_PICKERS = ("query", "key", "pronoun", "wt_query")  # the choices that name a piece or word of the sentence
PRONOUN_PICKERS = ("query", "pronoun", "wt_query")  # start from the sentence's pronoun unless picked by hand
ANSWER_BOXES = ("p_piece", "a_answer", "a_wrong", "pt_answer", "pt_wrong",  # pieces the Predictions page scores
                "explain_answer", "explain_wrong")  # and the Explanations page's target
KEPT_OUT = {"text_file", "example"}  # an uploader, and a picker that only fills the sentence box
PROBE_WORD = re.compile(r"'([^']+)'|“([^”]+)”|\"([^\"]+)\"")


def title_in(page: str, language: str) -> str:
    return i18n.catalogue(language).gettext(TITLES[page])


def words_of(text: str) -> list[str]:
    """A sentence's words for comparing a minimal pair: spaced text by its spaces (punctuation apart), else one
    unit per character."""
    if " " in text.strip():
        return re.findall(r"\w+|[^\w\s]", text)
    return [c for c in text if not c.isspace()]


def differs_by_one_word(first: str, second: str) -> bool:
    a, b = words_of(first), words_of(second)
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1


@dataclass
class Visitor:
    """One browser tab on the app: the AppTest, the tabs it has clicked (a browser sends each open tab's state with
    every rerun; AppTest does not, so the visitor does), and what the person chose, to compare with what is drawn."""

    at: AppTest
    page: str
    language: str
    model: str
    text: str | None = None  # typed or picked by the visitor (None: the page's default)
    tabs: dict[str, str] = field(default_factory=dict)  # tab container id -> the label clicked
    steps: list[str] = field(default_factory=list)
    checked: int = 0  # how many steps had happened when the visitor last looked
    picked: set[str] = field(default_factory=set)  # token pickers set by hand since the sentence or model changed

    @classmethod
    def open(cls, page: str, language: str, model: str, **query: str) -> Visitor:
        """A first visit from a shared link: page, language and model in the address."""
        at = open_link(page, {"lang": language, "model": model, **query})
        return cls(at, page, language, model, query.get("text"), steps=[f"open {page} {query}"])

    # -- what the visitor does ------------------------------------------------------------------------------------
    def run(self, note: str, changed: str | None = None) -> None:
        """Rerun after the visitor's action; `changed` is the key of the widget (or tabs) the visitor changed."""
        self.steps.append(note)
        states = self.widget_states()
        self.write_bound_value(changed)
        for node in self.at._tree:  # a browser sends every shown tab bar's open tab: the clicked one, else its own
            if getattr(node, "type", None) == "tab_container":
                key = node.proto.tab_container.query_param_key or node.proto.id.rsplit("-", 1)[-1]
                label = self.tabs.get(node.proto.id) or self.at.session_state[key]
                states.widgets.append(WidgetState(id=node.proto.id, string_value=label))
        self.at._run(WidgetStates(widgets=states.widgets))

    def widget_states(self) -> WidgetStates:
        """What the browser sends back. AppTest formats a choice's value again to send it (a browser sends the label
        it showed): in the language the page was drawn in, as the pages' format_func=tr did."""
        drawn, before = {t.value for t in self.at.title}, i18n.current()
        languages = sorted(i18n.LANGUAGES, key=lambda lang: title_in(self.page, lang) not in drawn)
        try:
            for language in languages:
                i18n.use(language)
                try:
                    return self.at._tree.get_widget_states()
                except ValueError:  # a label of the other language
                    continue
            raise AssertionError("the page's choices are in neither language")
        finally:
            i18n.use(before)

    def write_bound_value(self, changed: str | None) -> None:
        """When a visitor changes a widget bound to the address (bind="query-params"), the browser writes its value
        into the address (dropping it at the widget's default) before the rerun; AppTest does not, so the visitor
        does."""
        params = self.at.query_params
        for node in self.at._tree:
            proto = getattr(node, "proto", None)
            if getattr(node, "type", None) == "tab_container":
                tabs = node.proto.tab_container
                if tabs.query_param_key == changed and node.proto.id in self.tabs:
                    label = self.tabs[node.proto.id]
                    value, default = label, tabs.default_tab_label
                else:
                    continue
            elif isinstance(node, Widget) and getattr(proto, "query_param_key", "") == changed and changed:
                value, default = bound_value(node)
            else:
                continue
            if value is None or value == default:
                params.pop(changed, None)
            else:
                params[changed] = value

    def switch_page(self, page: str) -> None:
        self.page = page
        self.tabs.clear()  # a page's tabs are gone with it
        self.at.switch_page(page)
        self.run(f"switch page {page}")

    def tab_labels(self) -> list[tuple[str, str]]:
        """(container id, label) of every tab shown."""
        found = []
        for node in self.at._tree:
            if getattr(node, "type", None) == "tab_container":
                found += [(node.proto.id, child.label) for child in node.children.values()]
        return found

    def switch_tab(self, choice: int) -> bool:
        labels = self.tab_labels()
        if not labels:
            return False
        tab_id, label = labels[choice % len(labels)]
        self.tabs[tab_id] = label
        key = next(node.proto.tab_container.query_param_key for node in self.at._tree
                   if getattr(node, "type", None) == "tab_container" and node.proto.id == tab_id)
        self.run(f"click tab {label}", key)
        return True

    def choose(self, key: str, value: object, note: str) -> bool:
        boxes = [w for w in self.at.selectbox if w.key == key]
        if not boxes or boxes[0].disabled:
            return False
        boxes[0].set_value(value)
        self.run(note, key)
        return True

    def change_model(self, name: str) -> bool:
        if not self.choose("model", name, f"model {name}"):
            return False
        self.model, self.picked = name, set()
        return True

    def change_language(self, language: str) -> bool:
        if not self.choose("lang", language, f"language {language}"):
            return False
        self.language = language
        return True

    def type_sentence(self, text: str) -> bool:
        boxes = [w for w in self.at.text_area if w.key == "text"]
        if not boxes:
            return False
        if text != boxes[0].value:  # the same sentence again: choices made for it stay
            self.picked = set()
        boxes[0].input(text)
        self.text = text
        self.run(f"type {text!r}", "text")
        return True

    def pick_example(self, choice: int) -> bool:
        boxes = [w for w in self.at.selectbox if w.key == "example"]
        if not boxes or not boxes[0].options:
            return False
        text = boxes[0].options[choice % len(boxes[0].options)]
        if text != self.sentence():
            self.picked = set()
        boxes[0].set_value(text)
        self.text = text
        self.run(f"example {text!r}")
        return True

    def pick_token(self, which: int, choice: int) -> bool:
        pickers = [w for w in self.at.selectbox if w.key in TOKEN_PICKERS and not w.disabled and w.options]
        if not pickers:
            return False
        picker = pickers[which % len(pickers)]
        index = choice % len(picker.options)  # every token picker's values are positions 0 … n-1
        picker.set_value(index)
        self.picked.add(picker.key)
        self.run(f"pick {picker.key} {picker.options[index]!r}", picker.key)
        return True

    def tick_merge(self) -> bool:
        boxes = [w for w in self.at.checkbox if w.key == "merge_words"]
        if not boxes:
            return False
        boxes[0].set_value(not boxes[0].value)
        self.picked = set()  # the pieces became words, or back: the tokens are others
        self.run(f"merge {not boxes[0].value}", "merge_words")
        return True

    def open_tab(self, page: str, label: str) -> None:
        """Go to `page` by the navigation (unless there) and click its tab `label` (written in English)."""
        if self.page != page:
            self.switch_page(page)
        shown = i18n.catalogue(self.language).gettext(label)
        self.switch_tab(next(i for i, (_, tab) in enumerate(self.tab_labels()) if tab == shown))

    def answer_lesson(self, choice: int) -> list[str] | None:
        """A student doing a lesson that asks which head links two words: open the Walkthrough's lessons, load the
        lesson's sentence, read the answers the Heads page states (One token's "Strongest: layer …, head …", and the
        first head an example's caption names), come back and give each. What the lesson says to each, or None when
        no such lesson is asked here."""
        self.open_tab("views/walkthrough.py", "Lessons")
        asked = [lesson for lesson in load_lessons(language=self.language) if lesson.check["kind"] == "attention_to"
                 and any(b.key == f"check_{lesson.id}" for b in self.at.button)]
        if not asked:
            return None
        lesson = asked[choice % len(asked)]
        self.at.button(key=f"load_{lesson.id}").click()
        self.run(f"load lesson {lesson.id}")
        self.text = lesson.sentence
        self.open_tab("views/heads.py", "One token")
        stated = [m.value for m in self.at.markdown if re.search(r"\*\*\d\.\d\d\*\*", m.value)][:1]
        stated += [c.value for c in self.at.caption if re.search(r"\bL\d+ H\d+", c.value)][:1]  # an example's own
        if not stated:
            return [f"the One token view shows no strongest head ({self.problems(reopen=False)})"]
        heads = [re.findall(r"\d+", stated[0])[:2], *(re.findall(r"\bL(\d+) H(\d+)", text)[0] for text in stated[1:])]
        self.open_tab("views/walkthrough.py", "Lessons")
        said = []
        for layer, head in heads:
            self.at.text_input(key=f"answer_{lesson.id}").input(f"L{layer} H{head}")
            self.at.button(key=f"check_{lesson.id}").click()
            self.run(f"answer L{layer} H{head} (as the Heads page states it)")
            said.append(f"L{layer} H{head}: " + " ".join(a.value for kind in ("success", "warning")
                                                          for a in self.at.get(kind)))
        return said

    def reload(self) -> None:
        """The browser's reload: a new session from the address as it stands."""
        self.at = open_link(self.page, dict(self.at.query_params))
        self.tabs.clear()
        self.steps.append(f"reload {dict(self.at.query_params)}")

    # -- what the visitor notices -----------------------------------------------------------------------------------
    def problems(self, reopen: bool = True) -> list[str]:
        at, found = self.at, []
        if at.exception:
            return unignored([f"exception: {at.exception[0].value[:300]}"])
        titles = [t.value for t in at.title]
        if title_in(self.page, self.language) not in titles:
            found.append(f"language: titles {titles}, expected {self.language}")
        if at.query_params.get("lang") != self.language:
            found.append(f"language: the address says lang={at.query_params.get('lang')}, expected {self.language}")
        models = [w.value for w in at.selectbox if w.key == "model"]
        if models != [self.model]:
            found.append(f"model: the sidebar shows {models}, expected {self.model}")
        if at.query_params.get("model") != self.model:
            found.append(f"model: the address says model={at.query_params.get('model')}, expected {self.model}")
        sentence = self.sentence()
        if sentence is not None and self.text is not None and sentence != self.text:
            found.append(f"sentence: the box shows {sentence!r}, the visitor gave {self.text!r}")
        found = unignored(found + self.derived_problems(sentence))
        if reopen and not found:
            found = unignored(self.reopened_problems())
        return found

    def sentence(self) -> str | None:
        boxes = [w.value for w in self.at.text_area if w.key == "text"]
        return boxes[0] if boxes else None

    def derived_problems(self, sentence: str | None) -> list[str]:
        """Every derived choice fits the current sentence: the probe asks about a word of it, the scored answers are
        its words, the minimal pair differs from it by one word."""
        if sentence is None:
            return []
        found = []
        boxes = {w.key: w.value for w in [*self.at.text_input, *self.at.text_area] if w.key}
        for key in ("p_probe",):
            if boxes.get(key):
                asked = [next(g for g in m.groups() if g) for m in PROBE_WORD.finditer(boxes[key])]
                if asked and asked[0] not in sentence:
                    found.append(f"probe: {boxes[key]!r} asks about {asked[0]!r}, not in {sentence!r}")
        for key in ANSWER_BOXES:
            piece = (boxes.get(key) or "").strip()
            if piece and piece not in sentence:
                found.append(f"answer: {key}={piece!r} is not in {sentence!r}")
        pair = boxes.get("pair")
        if pair and not differs_by_one_word(sentence, pair):
            found.append(f"pair: {pair!r} does not differ from {sentence!r} by one word")
        pronoun = focus(sentence).pronoun
        for picker in self.at.selectbox:
            shown = picker.options[picker.index] if picker.key in PRONOUN_PICKERS and picker.index is not None else ""
            unreadable = "[UNK]" in shown or "/" in shown  # the model's piece for it: unknown, or a byte fragment
            if shown and pronoun and picker.key not in self.picked and pronoun not in shown and not unreadable:
                found.append(f"token: {picker.key} shows {shown!r}, not the sentence's pronoun {pronoun!r}")
        return found

    def selections(self, at: AppTest) -> dict[str, object]:
        """Every choice a visitor sees made (widgets with keys), by key."""
        chosen = {}
        for kind in ("selectbox", "radio", "checkbox", "toggle", "text_area", "text_input", "number_input",
                     "multiselect", "slider", "select_slider"):
            for widget in at.get(kind):
                if widget.key and widget.key not in KEPT_OUT:
                    chosen[widget.key] = widget.value
        chosen["tabs"] = sorted(label for _, label in self.tab_labels_of(at))
        return chosen

    @staticmethod
    def tab_labels_of(at: AppTest) -> list[tuple[str, str]]:
        return [(node.proto.id, child.label) for node in at._tree if getattr(node, "type", None) == "tab_container"
                for child in node.children.values()]

    def reopened_problems(self) -> list[str]:
        """The address, opened in a fresh session, draws the same titles and selections."""
        fresh = open_link(self.page, dict(self.at.query_params))
        if fresh.exception:
            return [f"reopened {dict(self.at.query_params)}: exception {fresh.exception[0].value[:300]}"]
        found = []
        if [t.value for t in fresh.title] != [t.value for t in self.at.title]:
            found.append(f"reopened: titles {[t.value for t in fresh.title]} != {[t.value for t in self.at.title]}")
        mine, theirs = self.selections(self.at), self.selections(fresh)
        address = dict(self.at.query_params)
        found += [f"reopened {key}: {mine.get(key)!r} here, {theirs.get(key)!r} reopened from {address}"
                  for key in sorted(mine.keys() | theirs.keys()) if mine.get(key) != theirs.get(key)]
        return found


def bound_value(widget: Widget) -> tuple[str | None, str | None]:
    """(the value a browser writes to the address for a bound widget, the one it leaves out), as URL text."""
    proto = widget.proto
    if widget.type in ("selectbox", "radio"):
        index = widget.index
        default = proto.default if proto.HasField("default") else None
        value = None if index is None else widget.options[index]
        return value, (None if default is None else widget.options[default])
    if widget.type in ("checkbox", "toggle"):
        return str(bool(widget.value)).lower(), str(bool(proto.default)).lower()
    if widget.type in ("text_area", "text_input", "number_input"):
        value = widget.value
        return (None if value is None else str(value)), (str(proto.default) if proto.HasField("default") else None)
    return None, None


def unignored(problems: list[str]) -> list[str]:
    """Problems of the kinds MHA_VISIT_IGNORE does not name (comma-separated prefixes: to count the steps to each
    kind on a version that has several)."""
    ignored = tuple(filter(None, os.environ.get("MHA_VISIT_IGNORE", "").split(",")))
    return [problem for problem in problems if not (ignored and problem.startswith(ignored))]


def open_link(page: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update(query)
    at.switch_page(page)
    return at.run()
