"""Issue 84: Streamlit's new-session message (sent at every run, a class follower's fragment rerun too) made once per
server and page list and copied (views/_session_config.py): byte for byte what Streamlit makes for each session and
run, nothing read again for the next one, and made again when Streamlit parses its configuration again or the pages
change."""

from __future__ import annotations

from types import SimpleNamespace

from streamlit import config
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner_utils.run_descriptor import RunDescriptor

STREAMLIT_S = getattr(AppSession._create_new_session_message, "made_by",  # noqa: SLF001 -- an AppTest of this
                      AppSession._create_new_session_message)  # noqa: SLF001 -- process may have installed the copy


class Visit:
    """What Streamlit's method reads of an AppSession."""

    _compute_skills_nudge_state = AppSession._compute_skills_nudge_state  # noqa: SLF001
    _populate_app_pages = AppSession._populate_app_pages  # noqa: SLF001

    def __init__(self, session: str, pages: dict, running: bool, on_save: bool = False) -> None:
        self.id, self._run_on_save = session, on_save
        self._state = AppSessionState.APP_IS_RUNNING if running else AppSessionState.APP_NOT_RUNNING
        self._script_data = SimpleNamespace(name="app", main_script_path="/srv/app.py", is_hello=False)
        self._pages_manager = SimpleNamespace(main_script_path="/srv/app.py", main_script_hash="main",
                                              get_pages=lambda: dict(pages))


def pages(*names: str) -> dict:
    return {f"hash-{name}": {"page_name": name, "icon": ":material/school:", "script_path": f"/srv/{name}.py"}
            for name in names}


def message(create: object, visit: Visit, page: str, fragments: tuple[str, ...] = ()) -> bytes:
    msg = create(visit, page, RunDescriptor(f"run-{visit.id}-{page}", fragments))
    return msg.SerializeToString(deterministic=True)


def test_the_session_message_is_streamlit_s_for_every_session_and_made_once(monkeypatch):
    from views import _session_config

    monkeypatch.setattr(_session_config, "MADE", {})
    _session_config.keep_session_config()  # forgets what it made when Streamlit parses its configuration again
    ours = _session_config.made_once(STREAMLIT_S)
    config.get_config_options()
    original = config.get_option("theme.light.primaryColor")
    try:
        config.set_option("theme.light.primaryColor", "#123456")  # a theme section with a value, one without (dark)
        listed = pages("heads", "lesson")
        visits = [(Visit("s1", listed, True), "hash-heads", ()),
                  (Visit("s2", listed, False, True), "hash-lesson", ("f",)),
                  (Visit("s3", listed, True), "hash-lesson", ("f", "g"))]
        for visit, page, fragments in visits:  # the first made by Streamlit, the others copied: each as Streamlit's
            assert message(ours, visit, page, fragments) == message(STREAMLIT_S, visit, page, fragments)
        assert len(_session_config.MADE) == 1
        reads = []
        with monkeypatch.context() as reading:
            for name in ("get_option", "get_options_for_section"):
                reading.setattr(config, name, lambda *a: reads.append(a))
            message(ours, Visit("s4", listed, True), "hash-heads")
        assert reads == []  # no option read again
        config.set_option("theme.light.primaryColor", "#654321")
        assert b"#654321" not in message(ours, Visit("s5", listed, True), "hash-heads")  # the one made before
        config._on_config_parsed.send()  # noqa: SLF001 -- Streamlit parsed its configuration again: forgotten
        assert b"#654321" in message(ours, Visit("s6", listed, True), "hash-heads")
        other = Visit("s7", pages("heads", "lesson", "roles"), True)  # another page list (another language's titles)
        assert message(ours, other, "hash-roles") == message(STREAMLIT_S, other, "hash-roles")
        assert len(_session_config.MADE) == 2
    finally:
        config.set_option("theme.light.primaryColor", original)


def test_the_copy_is_installed_once_and_undone_by_nothing():
    from views import _session_config

    _session_config.keep_session_config()
    _session_config.keep_session_config()  # every run asks: installed once
    assert hasattr(AppSession._create_new_session_message, "made_by")  # noqa: SLF001
    assert not hasattr(AppSession._create_new_session_message.made_by, "made_by")  # noqa: SLF001 -- not twice


def test_addresses_a_visitor_makes_up_keep_no_message_each(monkeypatch):
    """Hostile review of issue 84: before st.navigation runs, a session's first run lists one page named after the
    address asked for (/no-such-page-7), so each address a visitor made up kept its own whole message for as long as
    the server ran (30 made-up addresses on a real server: 29 more kept). A few dozen lists are kept; the rest are
    made as Streamlit makes them, still Streamlit's byte for byte."""
    from views import _session_config

    monkeypatch.setattr(_session_config, "MADE", {})
    ours = _session_config.made_once(STREAMLIT_S)
    for k in range(3 * _session_config.MAX_MADE):
        visit = Visit(f"s{k}", pages(f"no-such-page-{k}"), True)
        assert message(ours, visit, f"hash-no-such-page-{k}") == message(STREAMLIT_S, visit, f"hash-no-such-page-{k}")
    assert len(_session_config.MADE) == _session_config.MAX_MADE
