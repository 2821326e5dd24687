"""The one place with Streamlit caches, the chosen model, and the messages every page shows about its input.

Pages call mha_core only through the cached wrappers here; what the visitor chose lives in views/_visit.py.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

import mha_core
from mha_core import AttentionResult, InputError, LoadedModel, ModelLoadError, i18n
from mha_core.analysis.display import AttentionView, attention_view
from mha_core.analysis.params import ModelBreakdown, head_weight_norms, model_breakdown
from mha_core.engine.batching import Progress
from mha_core.engine.tokens import MAX_INPUT_CHARS
from mha_core.figures import charts
from mha_core.figures.spec import FigureDict
from mha_core.i18n import N_, tr, worded
from mha_core.serving.heavy import HeavyQueue, HeavyWork, JobState
from mha_core.serving.memory import COMPUTE_SLOTS, MODELS_KEPT, STORES
from mha_core.serving.menu import ModelChoice, available_models, default_choice
from mha_core.serving.store import SharedStore
from mha_core.teaching.walkthrough import Parity, PathTimings, backend_words, parity, path_words, time_paths
from views._visit import chosen, stop

MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|~$:<>&")
# GFM autolinks bare addresses even when their punctuation is escaped: a zero-width space breaks each
# pattern (www., scheme://, the @ of an e-mail address) without changing what a reader sees.
AUTOLINK_BREAKS = (("www.", "ww\u200bw."), ("WWW.", "WW\u200bW."), ("://", ":\u200b//"), ("@", "\u200b@"))
# Every session's script runs in its own thread of one process: one torch thread each. Two intra-op
# threads per forward made forwards 3-4x slower (and spun idle cores) as soon as two sessions ran at once.
torch.set_num_threads(int(os.environ.get("MHA_TORCH_THREADS", "1")))


def load_listed_model(model_dir: str) -> LoadedModel | ModelLoadError:
    """listed_model with a spinner in the page's language (a cached model returns at once)."""
    with st.spinner(tr("Loading the model…")):
        return listed_model(model_dir)


@st.cache_resource(max_entries=MODELS_KEPT, show_spinner=False)
def listed_model(model_dir: str) -> LoadedModel | ModelLoadError:
    """A model from the server's list, or why it cannot be used (kept, so a bad folder is not reloaded on
    every rerun). $MHA_DEVICE=cuda puts the model on a GPU (the fused path then runs CUDA kernels).

    Everything alive after loading (modules, tokenizer, imported libraries) is moved out of the
    garbage collector's generations (gc.freeze), so later collections only walk new objects."""
    try:
        model = mha_core.load_model(model_dir, device=os.environ.get("MHA_DEVICE", "cpu"))
    except ModelLoadError as err:
        return err
    gc.collect()
    gc.freeze()
    return model


def get_model(model_dir: str) -> LoadedModel:
    """A model already chosen from the list (its folder is the key of every shared result)."""
    loaded = load_listed_model(model_dir)
    if isinstance(loaded, ModelLoadError):
        raise loaded
    return loaded


def model_choices() -> dict[str, ModelChoice]:
    return {choice.name: choice for choice in available_models()}


def chosen_model_name() -> str:
    """The visitor's model (sidebar, address), else the default for the page's language
    (mha_core.serving.menu.default_choice)."""
    choices = model_choices()
    return chosen("model", default_choice(tuple(choices.values()), i18n.current()).name, options=list(choices))


def current_model() -> LoadedModel:
    """The chosen model; one that cannot be used (or is over the server's size limit) falls back to the first on the
    list (model_card says why, once per page); if that fails too, the page says so and stops."""
    choices = model_choices()
    chosen = choices[chosen_model_name()]
    loaded = chosen.refused or load_listed_model(str(chosen.path))
    if isinstance(loaded, LoadedModel):
        return loaded
    default = load_listed_model(str(next(iter(choices.values())).path))
    if isinstance(default, ModelLoadError):
        st.error(worded(default))
        stop()
    return default


@st.cache_resource(show_spinner=False)
def shared_store(name: str) -> SharedStore:
    """One compute-once LRU store per name for the whole server (every session reads the same one), bounded as
    mha_core.serving.memory.STORES says."""
    entries, megabytes = STORES[name]
    return SharedStore(entries, megabytes * 2**20)


def result_store() -> SharedStore:
    return shared_store("results")


def view_store() -> SharedStore:
    return shared_store("views")


def figure_store() -> SharedStore:
    return shared_store("figures")


@st.cache_resource(show_spinner=False)
def compute_slots() -> threading.BoundedSemaphore:
    """At most COMPUTE_SLOTS forward passes or view builds at once in this process: a class pasting long
    texts together queues instead of holding every text's intermediate maps in memory at the same time."""
    return threading.BoundedSemaphore(COMPUTE_SLOTS)


# Results and views are frozen and never mutated by pages, so every session reads the same object (no
# pickled copy per read). Bounded by estimated bytes: a 512-piece view holds 75 MB of maps.
def run_texts(model_dir: str, texts: tuple[str, ...], path: str) -> AttentionResult:
    def compute() -> AttentionResult:
        model = get_model(model_dir)
        with compute_slots():
            return mha_core.run(model, list(texts), path=path)

    return result_store().get((model_dir, texts, path), compute)


def view_of(model_dir: str, text: str, path: str, hide_special: bool, merge_words: bool,
            average_heads: bool = False) -> AttentionView:
    def compute() -> AttentionView:
        result = run_texts(model_dir, (text,), path)  # outside the slot: it takes one of its own
        with compute_slots():
            return attention_view(result, 0, hide_special, merge_words, average_heads)

    return view_store().get((model_dir, text, path, hide_special, merge_words, average_heads), compute)


class SharedFigure(go.Figure):
    """An empty figure shell around a built figure's dict. st.plotly_chart calls to_dict() on every run (a
    deep copy that re-encodes every array); a figure shared by all sessions needs that only once."""

    _shared_dict: dict | None = None

    @classmethod
    def of(cls, figure_dict: dict) -> SharedFigure:
        shell = cls()
        shell._shared_dict = figure_dict
        return shell

    def to_dict(self) -> dict:
        return self._shared_dict  # never mutated: streamlit only serialises it


def narrow_screen() -> bool:
    """A phone (its browser says "Mobi" in its user agent, as mobile browsers do)."""
    return "Mobi" in (st.context.headers.get("User-Agent") or "")


def chart(cache_key: tuple, build: Callable[[], FigureDict], **plotly_chart_args: object) -> object:
    """st.plotly_chart of a figure dict (mha_core.figures.spec) built once per server for
    `cache_key` (which must name everything the figure depends on, the model included); the first session to
    ask builds it, the others reuse it. On a phone: no numbers in cells and no toolbar over the title."""
    narrow = narrow_screen()

    def shared_figure() -> tuple[SharedFigure, dict]:
        figure_dict = build()
        figure_dict = charts.for_narrow_screen(figure_dict) if narrow else figure_dict
        return SharedFigure.of(figure_dict), figure_dict  # the dict beside the shell: the store weighs it

    cache_key = (*cache_key, i18n.current())  # titles, axes and hover texts are in the page's language
    shell, _ = figure_store().get((*cache_key, "narrow") if narrow else cache_key, shared_figure)
    if narrow:
        plotly_chart_args.setdefault("config", {"displayModeBar": False})
    return st.plotly_chart(shell, **plotly_chart_args)


def small_store() -> SharedStore:
    return shared_store("small")


def shared(key: tuple, compute: Callable[[], object]) -> object:
    """A computation shared by every session (a sentence's parse, a walkthrough's tensors, an ablation grid, the
    value-weighted maps of a text), kept within the "small" store's bytes (serving.memory.STORES). A value holding
    text a person reads (a table's headers, hover texts) puts the page's language in its key; numbers need not."""
    return small_store().get(key, compute)


@st.cache_resource(show_spinner=False)
def heavy_work() -> HeavyWork:
    """This process's side of the server-wide queue for heavy analyses (mha_core.serving.heavy)."""
    return HeavyWork(HeavyQueue.from_env())


def heavy(key: tuple, label: str, compute: Callable[[Progress], object], store: SharedStore | None = None,
          note: str = "") -> object:
    """compute(progress) once per key for the whole server, through its heavy-work queue, with a bar that shows
    the visitor's place in the queue, then the progress (`note`: what was left out). A visitor who leaves stops
    waiting (the bar's update raises in a stopped session); the work stops once nobody waits for it."""
    store = store or small_store()
    found, value = store.lookup(key)
    if found:
        return value
    bar = st.progress(0.0, text=tr(label) + note)

    def show(state: JobState) -> None:
        bar.progress(state.fraction(), text=state.describe(label) + note)

    try:
        return heavy_work().result(store, key, compute, show)
    finally:
        bar.empty()


@st.cache_resource(show_spinner=False)
def model_breakdown_of(model_dir: str) -> ModelBreakdown:
    return model_breakdown(get_model(model_dir))


@st.cache_resource(show_spinner=False)
def weight_norms_of(model_dir: str) -> tuple[np.ndarray, np.ndarray]:
    qk, ov = head_weight_norms(get_model(model_dir))
    return qk.numpy(), ov.numpy()


def parity_of(model_dir: str, text: str) -> Parity:
    return shared(("parity", model_dir, text), lambda: parity(get_model(model_dir), text,
                                                            run_texts(model_dir, (text,), "explicit")))


def timings_of(model_dir: str, text: str) -> PathTimings:
    return shared(("timings", model_dir, text), lambda: time_paths(get_model(model_dir), text))


def run_one(text: str, path: str = "auto") -> AttentionResult:
    return run_texts(str(current_model().model_dir), (text,), path)


def checked_run(text: str, path: str = "auto") -> AttentionResult:
    """run_one, with bad input shown as a message and the page stopped (the typed text stays)."""
    check_length(text)
    try:
        result = run_one(text, path)
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
    unknown = result.unknown_note(0)
    if unknown:
        st.warning(literal(unknown))
    fragments = result.fragments_note(0, default_choice(tuple(model_choices().values()), "zh").name)
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


def literal(text: str) -> str:
    """User text (a sentence, a token, a file name, a message quoting them) for any element that renders
    markdown: emphasis, links, HTML, LaTeX and Streamlit's colour and icon directives stay literal, and
    bare web and e-mail addresses are not turned into links."""
    for pattern, broken in AUTOLINK_BREAKS:
        text = text.replace(pattern, broken)
    return "".join("\\" + c if c in MARKDOWN_SPECIALS else c for c in text)


def literal_lines(text: str) -> str:
    """User or model text of several lines for markdown: each line literal, its line breaks kept."""
    return "  \n".join(literal(line) for line in text.split("\n"))


def emphasised(text: str) -> str:
    """Model text in bold, line by line (bold marks cannot span a blank line: they would show as **)."""
    return "  \n".join(f"**{literal(line.strip())}**" if line.strip() else "" for line in text.split("\n"))


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
