"""The lesson (issue 47): the seed topics in order, one step a screen, each with the pages' own live view on the
class's sentence (their parts in views/parts/, which the pages draw too); "Back" / "Next", a step list, `?step=N`, and
a link to explore each step on its page. The steps' words are mha_core.teaching.lesson's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from mha_core import LoadedModel, i18n
from mha_core.analysis.coref.sentence import InspectorError
from mha_core.analysis.explain.choices import METHOD_NAMES
from mha_core.analysis.heads.display import words_by_default
from mha_core.analysis.heads.roles import role_labels
from mha_core.analysis.params.shapes import make_shape
from mha_core.figures import charts
from mha_core.figures import explain as explain_figures
from mha_core.figures import translation as translation_figures
from mha_core.figures.roles import role_grid_figure
from mha_core.i18n import tr, worded
from mha_core.serving.classroom import ClassState
from mha_core.serving.computed import explain as computed_explain
from mha_core.serving.computed import seq2seq as computed_seq2seq
from mha_core.serving.computed import text as computed
from mha_core.serving.computed import translation as computed_translation
from mha_core.serving.pages import BY_NAME
from mha_core.teaching.claims import (
    coreference_claims,
    cost_claims,
    cross_claims,
    four_steps_claims,
    head_habits,
    heads_claims,
    parameters_claims,
    roles_claims,
    scores_row,
    translation_claims,
    why_claims,
)
from mha_core.teaching.examples import PRONOUNS, TRANSLATED, written_language
from mha_core.teaching.explain_step import ATTENTION, explanation_claims
from mha_core.teaching.lesson import CLASS_MODEL, STEPS, LessonStep
from mha_core.teaching.step_shapes import step_shapes
from views import _fit as fit
from views._class import (
    class_code,
    class_part,
    class_state,
    class_step,
    end_button,
    follow,
    follow_caption,
    is_teaching,
    language_switch,
    reload_after_restart,
    say_refused,
    start_class,
    teacher_follows,
    teacher_panel,
)
from views._images import chosen_image
from views._inputs import model_card, sentence_box
from views._presenter import presenter, projector_on
from views._said import paragraph, say, say_once, worded_once
from views._state import (
    answered,
    cap_chart_heights,
    chart,
    checked_run,
    current_model,
    load_listed_model,
    model_choices,
    narrow_screen,
    queued,
    server,
)
from views._text import literal, one_line
from views._visit import choose, chosen, forget, page_link, stop, widget
from views.parts import coreference, heads, images, parameters, seq2seq, translation, walkthrough

OWN_STEP = "own_step"  # the step a student of a class went to on their own (none: the teacher's)
GO_TO = "_lesson_go_to"  # a following student's step list
LESSON_ROWS = 5  # the heads a step's table lists: a projector shows the step without scrolling
PROJECTOR_CHART_PX = 440  # a step's charts fit under its title on a 1080-pixel projector
PAIR_CHART_PX = 280  # the minimal pair's grid, under its inputs
PLAYER_SIDE_REM = 7.0  # step 8 on a projector: the player and its folded pickers under it
PAIR_CAPTION = replace(fit.CAPTION, share=3 / 5)  # the pair grid's caption, in its column


def class_view(model: LoadedModel, text: str) -> tuple:
    """The class's sentence on the class's model, as the Heads page shows it: result, view, and step 1's figure
    (the clearest head's row from the pronoun)."""
    result = checked_run(text)
    view = computed.view_of(server(), model, text, "auto", True, words_by_default(text))  # as the Heads page
    computed.focus_of(server(), text)  # the words tagged once per server
    return result, view, computed.lesson_row_of(server(), model, text)


def why_view(model: LoadedModel, text: str) -> None:
    _, view, row = class_view(model, text)
    chart(("lesson why", str(model.model_dir), text, row.layer, row.head, row.query), lambda: charts.token_bar_figure(
        list(row.labels), row.weights, tr("Layer {layer}, head {head}: where '{word}' looks", layer=row.layer,
                                          head=row.head, word=row.labels[row.query])), key="lesson_why")
    say_once(("why", str(model.model_dir), text), lambda: why_claims(row, model.tokenizer.unk_token))


def four_steps_view(model: LoadedModel, text: str) -> None:
    result, view, row = class_view(model, text)
    query = view.pieces[row.query][0] if view.pieces else 0
    w = computed.walkthrough_of(server(), model, text, row.layer, row.head)
    shapes = step_shapes(model, row.layer, len(result.labels[0]))
    special = [word is None for word in result.word_ids[0]]
    key = ("four_steps", str(model.model_dir), text)
    claims = lambda: four_steps_claims(scores_row(w, view, row, query, special))  # noqa: E731 (worded once)
    fit.fit_charts([*walkthrough.brief_texts(w, shapes, query), (worded_once(key, claims), fit.BODY)])
    output = walkthrough.step_attention(w, model, shapes, query,
                                        ("lesson", str(model.model_dir), text, row.layer, row.head), brief=True)
    say_once(key, claims, lead=output)


def heads_view(model: LoadedModel, text: str) -> None:
    result, view, row = class_view(model, text)
    layer = row.layer
    if narrow_screen():  # a phone's overview shows one layer: the class picks which
        layer = widget(st.select_slider, "lesson_layer", row.layer, tr("Layer"), context=(str(model.model_dir), text),
                       options=list(range(view.maps.shape[0])))
    hidden = sum(word is None for word in result.word_ids[0])  # the special pieces the Heads page's view leaves out
    key = ("heads", str(model.model_dir), text)
    claims = lambda: heads_claims(head_habits(view.maps), (row.layer, row.head), hidden)  # noqa: E731 (worded once)
    fit.fit_charts([(worded_once(key, claims), fit.BODY)])  # the overview over its sentence on a projector
    heads.show_overview(view.maps, (layer, row.head), ("lesson heads", str(model.model_dir), text), across=True)
    say_once(key, claims)


def parameters_view(model: LoadedModel, text: str) -> None:
    parameters.show_single_vs_multi(make_shape(512, 8))
    breakdown = computed.breakdown_of(server(), model)
    left, right = st.columns(2)
    left.metric(tr("{name}: parameters", name=model.name), f"{breakdown.total:,}")
    right.metric(parameters.attention_label(breakdown), f"{breakdown.attention_total:,}")
    say_once(("parameters", str(model.model_dir)),
             lambda: parameters_claims(model.name, breakdown.total, breakdown.attention_total))


def roles_view(model: LoadedModel, text: str) -> None:
    roles = computed.head_roles_of(server(), model, text)
    causal = model.arch.causal
    labels = role_labels(roles, causal)
    key, claims = ("roles", str(model.model_dir), text), lambda: roles_claims(labels)
    fit.fit_charts([(worded_once(key, claims), fit.BODY)])  # the grid over its sentences
    chart(("lesson roles", str(model.model_dir), text), lambda: role_grid_figure(labels, roles, causal),
          key="lesson_roles")
    say_once(key, claims)


def coreference_view(model: LoadedModel, text: str) -> None:
    """Step 6: the heads ranked beside the minimal pair's grid. In projector mode the words and the pair are chosen
    in a folded panel, beside the heads layer by layer (folded too), and the step's sentences run under both columns,
    so that the step fits the screen."""
    result = checked_run(text)
    words = coreference.words_of(text)
    context = (str(model.model_dir), text)
    folded = layers = None
    if projector_on():
        choices, layers = st.columns([3, 2])
        folded = choices.expander(tr("The pronoun, its candidates and the second sentence"))
    with folded or st.container():
        pronoun, candidates = coreference.pick_words(words, context)
    try:
        scores = coreference.scores_of(text, words, pronoun, candidates, result)
    except InspectorError as err:
        st.info(literal(worded(err)))
        return
    claims = lambda drawn: coreference_claims(scores, LESSON_ROWS, drawn)  # noqa: E731
    fitted = None
    if folded is None:
        pair_rows = 3 * fit.LABELLED_ROW_REM + fit.FOLDED_NOTE_REM + fit.CAPTION_ROW_REM  # inputs, grid's caption
        fit.fit_charts([(tr("Minimal pair"), fit.HEADING)], pair_rows, PAIR_CHART_PX)
    else:  # the row of folded panels, the grid's caption in its column; the sentences under both columns
        fitted = lambda drawn: fit.fit_charts([  # noqa: E731
            (coreference.outlined_caption(drawn.comparison, drawn.name_a, drawn.name_b), PAIR_CAPTION),
            (paragraph(claims(drawn)), fit.BODY)], fit.FOLDED_ROW_REM, PAIR_CHART_PX)
    ranked, pair = st.columns([2, 3])
    with ranked:
        coreference.show_heads(scores, None, listed=LESSON_ROWS, headline=False, layers=layers)
    with pair:
        drawn = coreference.show_pair(text, words, pronoun, candidates, context, detail=False, inputs=folded,
                                      fit=fitted)
    with ranked if folded is None else st.container():  # beside the pair's grid, or under both on a projector
        say(claims(drawn))


def explanation_view(model: LoadedModel, text: str) -> None:
    found = queued(computed_explain.lesson_explanation_of, model, text)
    if found is None:
        return
    if found.asked.text != text:
        st.caption(tr("The model reads: {text}", text=literal(found.asked.text)))
    layer, head = found.head
    said = paragraph(explanation_claims(found))
    fit.fit_charts([(said, fit.BODY)])  # the scores over its sentence on a projector
    narrow = narrow_screen()  # a phone: a row per word, the methods across
    names = [tr("Attention, L{layer} H{head}", layer=layer, head=head),
             *(tr(METHOD_NAMES[name]) for name in found.scores if name != ATTENTION)]
    chart(("lesson explanation", str(model.model_dir), text), lambda: explain_figures.word_scores_figure(
        np.stack(list(found.scores.values())), names, found.words, tr("Each method's word scores (scaled to its "
                                                                      "largest)"), words_down=narrow),
          key="lesson_explanation")
    if said:
        st.markdown(said)


def cross_view(model: LoadedModel, text: str) -> None:
    language = written_language(text)
    audio = answered(computed_seq2seq.spoken_of, text, language)
    heard = None if audio is None else answered(computed_seq2seq.transcript_of, model, audio, language)
    if heard is None:
        return
    narrow = narrow_screen()  # a phone: the chart under the player, its pickers and the words under it
    player, words = (st.container(), None) if narrow else st.columns(2, vertical_alignment="center")
    player.audio(audio)
    # a projector: the pickers folded under the player, beside the sentences (their row was the chart's room)
    folded = player.expander(tr("Decoder layer and head")) if projector_on() and not narrow else None
    figure = st.container()
    said = paragraph(cross_claims(model.name, text, heard.text))
    said_rem = fit.text_px(said, fit.HALF_BODY, fit.root_px()) / fit.root_px() if said else 0.0
    beside = max(0.0, PLAYER_SIDE_REM - said_rem)  # the row is the taller of the player's side and the sentences
    fit.fit_charts([(said, fit.HALF_BODY), (seq2seq.cross_note(), fit.CAPTION)],
                   beside if folded else fit.LABELLED_ROW_REM)
    with words or st.container():
        if said:
            st.markdown(said)
    with figure:
        seq2seq.cross_tab(model, heard, audio, (str(model.model_dir), computed_seq2seq.digest(audio), language,
                                                "transcribe"), pickers_below=narrow, pickers_in=folded)


def translation_view(model: LoadedModel, text: str) -> None:
    source = written_language(text)
    target = "en" if source == "zh" else "zh"
    result = answered(computed_translation.translation_of, model, text, source, target)
    if result is None:
        return
    pair = tr("**{source}** → **{text}**", source=literal(text), text=literal(result.translation))
    claims = paragraph(translation_claims(result.source_words, result.target_words, result.links, PRONOUNS[target],
                                          PRONOUNS[source]))
    narrow, projected = narrow_screen(), projector_on()
    if projected and not narrow:  # the links beside the sentences, the screen's height under the page
        fit.fit_charts([])
        said, drawn = st.columns([2, 3])
    else:
        notes = [(note, fit.CAPTION) for note in (translation.simplified_text(result),
                                                  *translation.alignment_notes(result)) if note]
        fit.fit_charts([(pair, fit.BODY), (claims, fit.BODY), *notes])
        said = drawn = st.container()
    with said:
        st.markdown(pair)
        translation.simplified_note(result)
        if claims:
            st.markdown(claims)
    if narrow or projected:  # the links alone: on a phone the matrix's rotated labels crowd its title;
        with drawn:  # on a projector, beside the links in what room a step leaves, it was 40 px high (its page has it)
            chart(("lesson t_links", str(model.model_dir), text), lambda: translation_figures.links_figure(result),
                  width="stretch")
        return
    translation.alignment_views(model, result, ("lesson", str(model.model_dir), text), beside=True, pronouns=False)


def images_view(model: LoadedModel, text: str) -> None:
    if narrow_screen():  # a phone: every head's picture first, its choices under it
        picture, controls = st.container(), st.container()
    else:
        controls, picture = st.columns([1, 3])
    with controls:
        data, side, summary = chosen_image(model)
    tallest = None if narrow_screen() else fit.room_left([], fit.CAPTION_ROW_REM)  # under it: its caption
    images.every_head_tab(model, data, side, summary, wide=True, where=(controls, picture), tallest=tallest)


def cost_view(model: LoadedModel, text: str) -> None:
    key, claims = ("cost", str(model.model_dir)), lambda: cost_claims(model.name, model.arch.windows, model.causal)
    fit.fit_charts([(worded_once(key, claims), fit.BODY)], fit.LABELLED_ROW_REM)  # the slider's row, the sentence
    parameters.show_model_costs(model, one_row=True)
    say_once(key, claims)


STEP_VIEWS = {"why": why_view, "four_steps": four_steps_view, "heads": heads_view, "parameters": parameters_view,
              "roles": roles_view, "coreference": coreference_view, "explanation": explanation_view,
              "cross": cross_view, "translation": translation_view, "images": images_view, "cost": cost_view}


def step_model(step: LessonStep) -> LoadedModel:
    """The class's model, or the bundled model the step reads (loaded now, with a spinner, if it is not yet)."""
    if step.model is CLASS_MODEL:
        return current_model()
    choices = model_choices()
    if step.model not in choices:
        st.info(tr("This step reads {name}, which this server does not list.", name=step.model))
        stop()
    with st.spinner(tr("Loading {name}…", name=step.model)):
        loaded = load_listed_model(str(choices[step.model].path))
    if not isinstance(loaded, LoadedModel):
        st.error(literal(worded(loaded)))
        stop()
    return loaded


def step_controls(number: int, name: str = "step") -> object:
    """Back, the step list and Next, setting the choice `name` (a student's own steps have a name of their own);
    returns the row's last place (the teacher's class button)."""
    back, listed, forward, last = st.container(key=fit.CONTROLS).columns([1, 4, 1, 1.4], vertical_alignment="center")
    back.button(tr("Back"), on_click=choose, args=(name, number - 1), disabled=number == 1, key="lesson_back",
                width="stretch")
    forward.button(tr("Next"), on_click=choose, args=(name, number + 1), disabled=number == len(STEPS),
                   key="lesson_next", width="stretch", type="primary")
    with listed:
        widget(st.selectbox, name, number, tr("Step"), options=list(range(1, len(STEPS) + 1)),
               label_visibility="collapsed", format_func=lambda n: f"{n}. {tr(STEPS[n - 1].title)}")
    return last


def show_step(number: int, text: str, rows_rem: float = 0.0) -> None:
    """Step `number` on `text`, its charts fitted under its title and sentence and `rows_rem` of the page's rows
    (a class's panel) on a projector's screen."""
    step = STEPS[number - 1]
    title = f"{number}. {tr(step.title)}"
    st.title(title)
    st.markdown(f"#### {tr(step.text)}")
    fit.fit_page([(title, fit.TITLE), (tr(step.text), fit.LEAD)], rows_rem, PROJECTOR_CHART_PX)
    model = step_model(step)
    STEP_VIEWS[step.key](model, text)
    query = {} if step.model is CLASS_MODEL else {"model": step.model}
    page_link(BY_NAME[step.page].path, label=tr("Explore this on its page"), icon=":material/open_in_new:",
              query_params=query)


def student_page(code: str, state: ClassState) -> None:
    """A student of class `code`: the teacher's step and sentence (and model), followed as the teacher moves; the
    student's own Back / Next / step leaves the class's step to explore (moving nobody else) until "Follow the
    teacher" brings the page back to it. What does not change when the teacher moves the step (the model, the
    sentence, the class's line, Back / Next) is drawn by the page's whole run only: the part the watcher reruns for
    every follower at each move draws the step alone (issue 84)."""
    choose("text", state.text)
    if state.model in model_choices():
        choose("model", state.model)
    model_card()
    language_switch()
    st.markdown(tr("**Sentence:** {text}", text=one_line(state.text)))
    own = own_step()
    if own is None:
        follow_caption(state.code)
        follower_controls(state.code)
        student_step(state, PROJECTOR_CHART_PX, own)  # what the watcher reruns alone when the teacher moves the step
        return
    student_step(state, PROJECTOR_CHART_PX, own)  # where the teacher is: rerun alone when the teacher moves
    choose("step", own)  # where the page goes on alone when the class ends
    step_controls(own, OWN_STEP)
    show_step(own, state.text)


def own_step() -> int | None:
    """The step a student of a class went to on their own (None: the teacher's)."""
    return chosen(OWN_STEP, None, options=list(range(1, len(STEPS) + 1)))


def go_from_class(code: str, by: int) -> None:
    """A following student's Back / Next (a callback): one step from where the class is at the click."""
    step = class_step(code)
    if step is not None:  # else the page's run says why (a store that fails, a class that ended)
        choose(OWN_STEP, min(max(step + by, 1), len(STEPS)))


def go_to_step() -> None:
    """A following student's step list (a callback): the step picked."""
    if st.session_state.get(GO_TO) is not None:
        choose(OWN_STEP, int(st.session_state[GO_TO]))


def follower_controls(code: str) -> None:
    """A following student's Back, step list and Next, as step_controls lays them out: drawn by the page's whole run
    (the teacher's moves do not draw them again), each goes from the class's step at the click."""
    st.session_state[GO_TO] = None  # the list names no step: the page's title says which the class is on
    back, listed, forward, _ = st.container(key=fit.CONTROLS).columns([1, 4, 1, 1.4], vertical_alignment="center")
    back.button(tr("Back"), on_click=go_from_class, args=(code, -1), key="lesson_back", width="stretch")
    forward.button(tr("Next"), on_click=go_from_class, args=(code, 1), key="lesson_next", width="stretch",
                   type="primary")
    listed.selectbox(tr("Step"), list(range(1, len(STEPS) + 1)), key=GO_TO, on_change=go_to_step,
                     placeholder=tr("Go to a step on your own"), label_visibility="collapsed",
                     format_func=lambda n: f"{n}. {tr(STEPS[n - 1].title)}")


def draw_student_step(state: ClassState) -> None:
    """The class's step on a following student's page; on an exploring student's, where the teacher is."""
    exploring = own_step() is not None
    follow(state.code, state, exploring=exploring)
    if exploring:
        st.button(tr("Follow the teacher (step {step})", step=state.step), on_click=forget, args=(OWN_STEP,),
                  type="primary", icon=":material/groups:", key="lesson_follow")
        return
    choose("step", state.step)  # where the page goes on alone when the class ends
    show_step(state.step, state.text)


student_step = class_part(draw_student_step, own_step)


def teacher_page(code: str | None, state: ClassState | None) -> None:
    """The teacher's page (or a visitor's alone): the sentence (folded away: a projector shows the step), the steps,
    and the class it moves. A teacher's tab shows the class's step and follows it (views/_class.teacher_follows):
    two tabs of one teacher show one step."""
    if chosen("text", None) is None:  # the lesson opens on the seeds' sentence (the teacher may change it once)
        choose("text", TRANSLATED["zh"] if i18n.current() == "zh" else TRANSLATED["en"])
    if state is not None:  # every student's page follows this
        state = teacher_follows(code, state, list(range(1, len(STEPS) + 1)))
    say_refused()
    sentence, panel = (st.container(), None) if state is None else st.columns([3, 2])  # one row: the step's room
    with sentence, st.expander(tr("**Sentence:** {text}", text=one_line(str(chosen("text", "")))),
                               icon=":material/edit:"):
        text = sentence_box()
    number = chosen("step", 1, options=list(range(1, len(STEPS) + 1)))
    if panel is not None:
        with panel:
            teacher_panel(code, number)
    last = step_controls(number)
    if state is None:
        last.button(tr("Start a class"), on_click=start_class, args=(text, number, current_model().name),
                    help=tr("Students open the link it gives (or scan its QR code) and their pages follow your steps."),
                    icon=":material/groups:", width="stretch")
    else:
        end_button(code, last)
    show_step(number, text, 0.0 if state is None else fit.CLASS_PANEL_REM)


def main() -> None:
    # the clicker's keys, the focus ring and projector mode: views/_presenter.py
    st.html(fit.PAGE_CSS + fit.PHONE_CSS + presenter(), unsafe_allow_javascript=True)
    cap_chart_heights(PROJECTOR_CHART_PX)
    code = class_code()
    state = class_state(code) if code else None
    if state is not None:
        reload_after_restart()
    if state is not None and not is_teaching(state.code):
        student_page(state.code, state)
    else:
        teacher_page(state.code if state else None, state)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
