"""The visit's state on the page: every choice a widget shows is read from and written to the one record
(mha_core.serving.visit.Visit) kept for the session, and the address is written from it once per run. Pages choose
through the functions here, never through st.query_params or widget keys of their own; no widget is bound to the
address (bind="query-params"): the record decides what the address says.

A widget's key is its choice's name. Before a widget is drawn its value is set from the record (its default when
the visitor has not chosen it for the current context); when the visitor changes it, its callback records the value
with the context it was shown in.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Sequence
from typing import TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from mha_core import i18n
from mha_core.figures.charts import head_tick
from mha_core.i18n import tr
from mha_core.serving.pages import PAGES
from mha_core.serving.visit import UNBOUND, Visit
from views._session_config import keep_session_config

T = TypeVar("T")

RECORD, WRITTEN = "_visit", "_addresses"  # the session's record; the addresses it has written (and the first)
SHOWN_TABS = "_shown_tabs"  # the label each tab bar was last drawn with
RUN_MEMO = "_run_memo"  # what one run reads many times and that does not change within it


def visit() -> Visit:
    """This session's record, made from the address on its first run."""
    record = st.session_state.get(RECORD)
    if record is None:
        opened = st.query_params.to_dict()
        record = st.session_state[RECORD] = Visit.from_address(opened)
        st.session_state[WRITTEN] = [opened]
    return record


def begin_run() -> None:
    """First thing in every run: an address the browser brings that this visit did not write (a link to a page with
    choices, st.page_link) gives its values; a page switch's bare address gives none. Then the language."""
    record = visit()
    record.shown = set()
    st.session_state[RUN_MEMO] = {}
    current = st.query_params.to_dict()
    if current and current not in st.session_state[WRITTEN]:
        record.adopt(current)
        st.session_state[WRITTEN].append(current)
    i18n.use(language())
    keep_session_config()


@st.cache_resource(show_spinner=False, max_entries=len(i18n.LANGUAGES))
def page_templates(language: str) -> tuple[st.Page, ...]:
    """The pages (each declared once: mha_core.serving.pages) with their titles in `language`, made once per server:
    making one resolves and checks its file, and making all fourteen was about 4 % of a click's server time when
    every run made them."""
    return tuple(st.Page(page.path, title=tr(page.title), icon=page.icon, default=k == 0)
                 for k, page in enumerate(PAGES))


LINKED: dict[tuple[str, str], st.Page] = {}  # (language, path) -> the server's st.Page for it (page_link)


def page_link(path: str, where: object = st, **options: object) -> None:
    """st.page_link (in `where`) to the page at `path` as mha_core.serving.pages declares it, through this server's
    st.Page for it, looked up once: given a path, Streamlit resolves the file twice (realpath) and walks the pages on
    every call (30 µs; asking page_templates, a cached resource, costs as much)."""
    key = (i18n.current(), path)
    if key not in LINKED:
        LINKED[key] = page_templates(key[0])[[page.path for page in PAGES].index(path)]
    where.page_link(LINKED[key], **options)


def navigation_pages() -> list[st.Page]:
    """This run's pages, in the visit's language: copies of the server's, since st.navigation marks the page it
    returns as this run's to call (sessions run at once, each in its own thread)."""
    return [copy.copy(page) for page in page_templates(i18n.current())]


def once_per_run(name: str, compute: Callable[[], T]) -> T:
    """compute() the first time this run asks for `name`, the same value after that (begin_run forgets it)."""
    memo = st.session_state.setdefault(RUN_MEMO, {})
    if name not in memo:
        memo[name] = compute()
    return memo[name]


class PageStopped(Exception):  # noqa: N818 - a page's own st.stop(), caught by the router
    """The page said why it stops (stop()); the router writes the address and the run ends."""


def stop() -> None:
    """What st.stop() is on a page: after st.stop() no message reaches the browser, the address included, so the
    page ends here and the router (app.py) writes the address before it stops the run."""
    raise PageStopped


RUNS, SESSION_MARK = "_runs", "_session_mark"  # finished runs, and the session's name, on the run_marker


def end_run() -> None:
    """Last thing in every run (also after a page's stop()): the address says what this run showed, and the run's
    marker that it has finished (after the address: a browser that sees the marker sees the address too)."""
    write_address()
    st.session_state[RUN_MEMO] = {}  # an idle session holds nothing of its last run (its model among them)
    run_marker()


def fragment_run() -> bool:
    """This run reruns a fragment of the page alone (its other elements stay as the last whole run drew them)."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def begin_fragment_run() -> None:
    """What begin_run does that a fragment's run (app.py does not run) needs: the language, an empty run memo."""
    st.session_state[RUN_MEMO] = {}
    i18n.use(language())


def write_address() -> None:
    """The address says what this run showed."""
    address = visit().address(i18n.current())
    if st.query_params.to_dict() != address:
        st.query_params.from_dict(address)
    written = st.session_state[WRITTEN]
    if address not in written:
        written[1:] = written[-8:]  # the first address (the link this visit came by) and the latest ones
        written.append(address)


def run_marker() -> None:
    """An empty element, last on the page, carrying this session's count of finished runs: a browser (or a test)
    that saw count n knows that the run its click started has drawn everything once the count is above n."""
    st.session_state[RUNS] = st.session_state.get(RUNS, 0) + 1
    if SESSION_MARK not in st.session_state:  # a reload is a new session
        st.session_state[SESSION_MARK] = secrets.token_hex(4)
    session = st.session_state[SESSION_MARK]
    st.html(f'<span class="mha-run" data-session="{session}" data-run="{st.session_state[RUNS]}"></span>')


def language() -> str:
    """The interface language: the visitor's (picker, address), else the browser's (st.context.locale)."""
    return visit().get("lang", i18n.language_of(st.context.locale), options=list(i18n.LANGUAGES))


def _record(name: str, context: tuple) -> None:
    visit().choose(name, st.session_state[name], context)


def _record_tab(name: str, ids: dict[str, str]) -> None:
    visit().choose(name, ids.get(st.session_state[name]), ())


def chosen(name: str, default: object, context: tuple = (), options: Sequence | None = None,
           fits: Callable[[object], bool] | None = None, like: object = None) -> object:
    """A choice without a widget of its own (a chart's selection sets it; a derived value read by several views)."""
    return visit().get(name, default, context, options, fits, like)


def marked(name: str, value: str) -> bool:
    """Whether the choice `name` is `value`, read without a widget's options (a name two pages use for different
    things: the lesson's view=projector, the Heads page's tab): another value is left as it is; this one stays in the
    address."""
    record = visit()
    given = record.chosen.get(name)
    if given is None or str(given.value) != value:
        return False
    record.shown.add(name)
    return True


def choose(name: str, value: object, context: tuple = ()) -> None:
    """Set a choice by hand from a callback (an example picked, a chart clicked, a lesson's sentence loaded)."""
    visit().choose(name, value, context)


def forget(name: str) -> None:
    """Drop the choice `name` (from a callback): its default shows again."""
    visit().forget(name)


def head_taps(n_heads: int, layer: int, head: int, name: str = "head", context: tuple = ()) -> None:
    """A phone's one-tap way to open a head of the layer its tiles show: a row of pills (a tile of a Plotly chart
    needs two taps on a touch screen: the first only hovers). Picking one sets the choice `name` (with `context`)."""
    key = f"_taps_{name}_{layer}_{head}"  # a new widget after every change: it shows the head now open

    def tapped() -> None:
        if st.session_state.get(key) is not None:
            choose(name, int(st.session_state[key]), context)

    st.pills(tr("Open a head of layer {layer}", layer=layer), list(range(n_heads)), default=head, key=key,
             format_func=head_tick, on_change=tapped)


def widget(draw: Callable[..., object], name: str, default: object, *args: object, context: tuple = (),
           options: Sequence | None = None, fits: Callable[[object], bool] | None = None, like: object = None,
           **kwargs: object) -> object:
    """draw(*args, options, key=name, …) showing the choice `name` (see chosen); the visitor's change is recorded
    with `context`. `options` are passed to the widget too (a selectbox's, a radio's)."""
    if options is not None:
        read_labels(name, options)
    value = chosen(name, default, context, options, fits, like)
    st.session_state[name] = value
    if options is not None:
        args = (*args, list(options))
    draw(*args, key=name, on_change=_record, args=(name, context), **kwargs)
    return value


def read_labels(name: str, options: Sequence) -> None:
    """An address may name a choice by its label in either language (a tab's, a radio's: 单个标记 for One token):
    read as the option it names."""
    given = visit().chosen.get(name)
    if given is not None and given.context == UNBOUND:
        given.value = next((str(option) for option in options if isinstance(option, str)
                            and given.value in {i18n.catalogue(lang).gettext(option) for lang in i18n.LANGUAGES}),
                           given.value)


def tabs(name: str, ids: Sequence[str], where: object = st) -> list:
    """st.tabs over translated labels, the open one a choice by its untranslated id (so it survives a language
    switch and reads the same in any address); only the open tab's content runs (`.open`)."""
    labels = {tab_id: i18n.tr(tab_id) for tab_id in ids}
    read_labels(name, ids)
    ids_by_label = {label: tab_id for tab_id, label in labels.items()}
    clicked, shown = st.session_state.get(name), st.session_state.setdefault(SHOWN_TABS, {})
    if clicked in ids_by_label and clicked != shown.get(name):  # a click whose callback did not run (a tab bar
        choose(name, ids_by_label[clicked])  # drawn again after a page switch reports its first click so)
    opened = chosen(name, ids[0], options=list(ids))
    st.session_state[name] = shown[name] = labels[opened]
    return where.tabs(list(labels.values()), key=name, on_change=_record_tab, args=(name, ids_by_label))
