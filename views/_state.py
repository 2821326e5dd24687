"""What every page needs from Streamlit: the chosen model (loaded once per process), this process's Server (every
shared store and the queue: mha_core.serving.server), how a page shows a wait, shared figures, and the messages every
page shows about its input. Pages ask mha_core.serving.computed.text for values by name; what the visitor chose lives in
views/_visit.py; how user and model text is shown, in views/_text.py.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

import plotly.graph_objects as go
import streamlit as st
import torch

from mha_core import AttentionResult, InputError, LoadedModel, ModelLoadError, i18n
from mha_core.analysis.heads.display import fragments_note, unknown_note
from mha_core.figures import capped, charts
from mha_core.figures.projector import for_projector
from mha_core.figures.spec import FigureDict
from mha_core.figures.summary import describe, described
from mha_core.i18n import tr, worded
from mha_core.messages import N_
from mha_core.serving.caches import MODELS
from mha_core.serving.computed import text as computed
from mha_core.serving.computed.seq2seq import KINDS
from mha_core.serving.heavy import JobState
from mha_core.serving.limits import MAX_INPUT_CHARS
from mha_core.serving.menu import ModelChoice, available_models, default_choice, default_kind, page_model
from mha_core.serving.sent import SentFigure
from mha_core.serving.server import Server, Wait
from mha_core.teaching.walkthrough import backend_words, path_words
from views._sent import send_chart
from views._text import literal
from views._visit import RUN_MEMO, chosen, once_per_run, stop

T = TypeVar("T")

# Every session's script runs in its own thread of one process: one torch thread each. Two intra-op
# threads per forward made forwards 3-4x slower (and spun idle cores) as soon as two sessions ran at once.
torch.set_num_threads(int(os.environ.get("MHA_TORCH_THREADS", "1")))


def load_listed_model(model_dir: str) -> LoadedModel | ModelLoadError:
    """listed_model, with a spinner in the page's language only where it will load (a spinner costs a page's run
    two messages and a timer thread: a sixth of a Heads click's CPU when the page asked for its model every run)."""
    if MODELS.holds(model_dir):
        return listed_model(model_dir)
    with st.spinner(tr("Loading the model…")):
        return listed_model(model_dir)


def listed_model(model_dir: str) -> LoadedModel | ModelLoadError:
    """A model from the server's list, or why it cannot be used, kept by mha_core.serving.caches.MODELS (MODELS_KEPT
    of them, so a bad folder is not reloaded on every rerun; held() lists them with their bytes). $MHA_DEVICE=cuda
    puts the model on a GPU (the fused path then runs CUDA kernels).

    Everything alive after loading (modules, tokenizer, imported libraries) is moved out of the
    garbage collector's generations (gc.freeze), so later collections only walk new objects."""
    return MODELS.get(model_dir, after_load=frozen_heap)


def frozen_heap() -> None:
    gc.collect()
    gc.freeze()


def model_choices() -> dict[str, ModelChoice]:
    """The server's list of models, read once per run (a page asked for it about a dozen times, each a few stats)."""
    return once_per_run("model choices", lambda: {choice.name: choice for choice in available_models()})


def chosen_model_name() -> str:
    """The visitor's model (sidebar, address), else the default for the page's language
    (mha_core.serving.menu.default_choice)."""
    choices, language, page = model_choices(), i18n.current(), st.session_state.get(PAGE)
    default = once_per_run(f"default model {language} {page}",
                           lambda: default_choice(tuple(choices.values()), language, page))
    return chosen("model", default.name, options=list(choices))


PAGE = "_page"  # the url path of the page this run shows (set by the router)


STACK_KIND = "stack_kind"  # which attention of an encoder–decoder a page reads (views/_stacks.attention_kind)


def stack_kind(model: LoadedModel) -> str:
    """The visitor's choice of an encoder–decoder's kinds of attention (encoder, decoder, cross)."""
    return chosen(STACK_KIND, default_kind(model), (model.arch.audio,), KINDS)


def loaded_here(path: str) -> LoadedModel | ModelLoadError:
    """A listed model as this page reads it (menu.page_model: a text encoder–decoder's encoder alone where the page
    reads it as an encoder), or why this page cannot read it (Whisper's encoder hears audio)."""
    loaded = load_listed_model(path)
    if isinstance(loaded, LoadedModel):
        kind = stack_kind(loaded) if loaded.encoder_decoder else None
        try:
            return page_model(loaded, st.session_state.get(PAGE), kind)
        except ModelLoadError as err:
            return err
    return loaded


def chosen_whole_model() -> LoadedModel | None:
    """The chosen model whole (an encoder–decoder with its decoder), None when it cannot be used."""
    choice = model_choices()[chosen_model_name()]
    loaded = choice.refused or load_listed_model(str(choice.path))
    return loaded if isinstance(loaded, LoadedModel) else None


def current_model() -> LoadedModel:
    """The chosen model; one that cannot be used (or is over the server's size limit, or an encoder–decoder on a page
    that reads one text) falls back to the first on the list (model_card says why, once per page); if that fails
    too, the page says so and stops. Read once per run and page (a Heads run asked four times, each a lookup in
    the models' cache that hashes its key: about 2 % of a click)."""
    return once_per_run(f"current model {st.session_state.get(PAGE)}", chosen_or_first_model)


def chosen_or_first_model() -> LoadedModel:
    choices = model_choices()
    chosen = choices[chosen_model_name()]
    loaded = chosen.refused or loaded_here(str(chosen.path))
    if isinstance(loaded, LoadedModel):
        return loaded
    default = load_listed_model(str(next(iter(choices.values())).path))
    if isinstance(default, ModelLoadError):
        st.error(worded(default))
        stop()
    return default


@st.cache_resource(show_spinner=False)
def server() -> Server:
    """This process's shared side (mha_core.serving.server): every store, the compute slots, the heavy-work queue.
    Pages ask mha_core.serving.computed.text's named functions for values, handing it this."""
    return Server()


def progress_note(note: str) -> str:
    """What was left out, as it follows a progress bar's label."""
    return f" · {note}" if note else ""


@contextlib.contextmanager
def waiting(note: str = "") -> Iterator[Wait]:
    """How this page shows a wait for queued work: a progress bar with the work's label (in the page's language),
    its place in the queue, then its progress; `note` says what was left out. The bar goes once the work is done."""
    bar = None

    def show(label: str, state: JobState) -> None:
        nonlocal bar
        text = state.describe(label) + progress_note(note)
        if bar is None:
            bar = st.progress(state.fraction(), text=text)
        else:
            bar.progress(state.fraction(), text=text)

    try:
        yield show
    finally:
        if bar is not None:
            bar.empty()


def queued(compute: Callable[..., T], *args: object, note: str = "", **options: object) -> T | None:
    """compute(server, *args, wait, **options) — a queued function of mha_core.serving.computed.text(_corpus) — with
    this page's progress bar; None, with the reason shown, for input it cannot use or work over the budget."""
    with waiting(note) as wait:
        return answered(compute, *args, wait, **options)


def answered(compute: Callable[..., T], *args: object, **options: object) -> T | None:
    """compute(server, *args, **options) — a function of mha_core.serving.computed.text(_corpus) that runs at once —
    or None, with the reason shown, for input it cannot use."""
    try:
        return compute(server(), *args, **options)
    except InputError as err:
        st.warning(literal(worded(err)))
        return None


def narrow_screen() -> bool:
    """A phone (its browser says "Mobi" in its user agent, as mobile browsers do)."""
    return "Mobi" in (st.context.headers.get("User-Agent") or "")


HEIGHT_CAP = "chart_height_cap"  # a run's limit on its charts' height (the run's memo holds it)


PROJECTED = "charts_projected"  # a run whose charts a projector shows (the run's memo holds it)


def project_charts() -> None:
    """This run's charts as a projector shows them (mha_core.figures.projector)."""
    st.session_state.setdefault(RUN_MEMO, {})[PROJECTED] = True


def cap_chart_heights(px: int) -> None:
    """This run's charts no taller than `px` (the lesson: a projector shows a step without scrolling)."""
    st.session_state.setdefault(RUN_MEMO, {})[HEIGHT_CAP] = px


def chart(cache_key: tuple, build: Callable[[], FigureDict], **plotly_chart_args: object) -> object:
    """st.plotly_chart of a figure dict (mha_core.figures.spec) built once per server for
    `cache_key` (which must name everything the figure depends on, the model included); the first session to
    ask builds it, the others reuse it. On a phone: no numbers in cells and no toolbar over the title; under a
    height cap (cap_chart_heights), no taller than it."""
    narrow = narrow_screen()
    cap = st.session_state.get(RUN_MEMO, {}).get(HEIGHT_CAP)
    projected = st.session_state.get(RUN_MEMO, {}).get(PROJECTED, False)

    def shared_figure() -> SentFigure:
        figure_dict = described(build())  # its sentence (mha_core.figures.summary) in its layout's meta
        figure_dict = charts.for_narrow_screen(figure_dict) if narrow else figure_dict
        figure_dict = capped.within_height(figure_dict, cap, projected) if cap else figure_dict
        figure_dict = for_projector(figure_dict) if projected else figure_dict
        return SentFigure.of(figure_dict)  # its JSON made once too: each session sends it as it is

    cache_key = (*cache_key, i18n.current(), cap, projected)  # titles, axes and hovers in the page's language
    sent = server().kept("figures", (*cache_key, "narrow") if narrow else cache_key, shared_figure)
    if narrow:
        plotly_chart_args.setdefault("config", {"displayModeBar": False})
    sentence = describe(sent.figure)
    drawn = send_chart(sent, sentence, **plotly_chart_args)  # a widget too (on_select): its JSON not made again
    say_under(sentence)
    return drawn


DESCRIBE = "describe"  # the visitor's choice: each chart's sentence shown under it (views/_inputs.describe_toggle)


def described_chart(figure: go.Figure | FigureDict, sentence: str, plotly_chart_args: dict) -> object:
    """st.plotly_chart with the chart's sentence as its accessible name (a screen reader reads it), and under the
    chart when the visitor asked for sentences."""
    drawn = st.plotly_chart(figure, alt=sentence, **plotly_chart_args)
    say_under(sentence)
    return drawn


def say_under(sentence: str) -> None:
    """The chart's sentence under it, when the visitor asked for sentences."""
    if chosen(DESCRIBE, False):
        st.caption(literal(sentence))


def plain_chart(figure: FigureDict, **plotly_chart_args: object) -> object:
    """st.plotly_chart of a figure built for this run only (not shared), with chart()'s phone rules: the title
    wrapped to fit, no numbers in narrow cells, no toolbar over the title."""
    if narrow_screen():
        figure = charts.for_narrow_screen(figure)
        plotly_chart_args.setdefault("config", {"displayModeBar": False})
    if st.session_state.get(RUN_MEMO, {}).get(PROJECTED, False):
        figure = for_projector(figure)
    return described_chart(figure, describe(figure), plotly_chart_args)


def run_one(text: str, path: str = "auto", pair: str | None = None) -> AttentionResult:
    return computed.result_of(server(), current_model(), (text,), path, None if pair is None else (pair,))


def checked_run(text: str, path: str = "auto", pair: str | None = None) -> AttentionResult:
    """run_one, with bad input shown as a message and the page stopped (the typed text stays)."""
    check_length(text)
    try:
        result = run_one(text, path, pair)
    except InputError as err:
        st.info(worded(err) + " " + tr("Type a sentence in the sentence box or pick an example."))
        stop()
    reading_notes(result)
    if result.truncated[0]:
        n, kept = result.n_tokens[0], result.lengths[0]
        st.warning(tr("The text was cut to the model's {kept} word pieces: {n:,} of {n2:,} pieces at the end are not "
                      "shown.", kept=kept, n=n - kept, n2=n) + long_limit_note(current_model()))
    return result


def reading_notes(result: AttentionResult) -> None:
    """What the model cannot read of the text: characters it reads as unknown, Chinese read as byte fragments."""
    unknown = unknown_note(result, 0)
    if unknown:
        st.warning(literal(unknown))
    fragments = fragments_note(result, 0, default_choice(tuple(model_choices().values()), "zh").name)
    if fragments:
        st.warning(literal(fragments))


def long_limit_note(model: LoadedModel) -> str:
    """Why a page other than Heads stops at arch.MAX_PIECES when the model reads more (empty when it does not)."""
    long_limit = model.arch.long_max_length
    if long_limit <= model.max_length:
        return ""
    return " " + tr("This page stops at {limit:,} pieces because it keeps every head's whole map (or more); the "
                    "Heads page reads up to {long_limit:,}, rebuilding each map from the queries and keys.",
                    limit=model.max_length, long_limit=long_limit)


def check_length(text: str, box: str = N_("The text")) -> None:
    """Every text box has the main sentence box's limit; longer input is a message and the page stops."""
    if len(text) > MAX_INPUT_CHARS:
        st.error(
            tr(
                "{box} has {text:,} characters; paste at most {max_input_chars:,}.",
                box=tr(box),
                text=len(text),
                max_input_chars=MAX_INPUT_CHARS,
            )
        )
        stop()


def path_caption(result: AttentionResult) -> str:
    return tr("{n} word pieces · path **{path}** ({reason}) · backend {backend}", n=result.lengths[0],
              path=path_words(result.path), reason=worded(result.path_reason), backend=backend_words(result.backend))
