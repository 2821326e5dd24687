"""Streamlit's new-session message, made once per server and page list (issue 84). Every run, a class follower's
fragment rerun too, begins with Streamlit's new-session message: the app's pages, the config and six theme sections
read option by option from the server's configuration, the installation's and environment's facts. Of a follower's
rerun among 300 that was a tenth of the server's time (py-spy, GIL held), though only the run's identity, its page,
its session and whether it runs differ between two such messages. The rest is the server's (read when it starts, and
again if its configuration is parsed again): the message is made as Streamlit makes it the first time for a page list,
and copied after with those fields set. Streamlit 1.67 (pinned): AppSession._create_new_session_message."""

from __future__ import annotations

import threading
from collections.abc import Callable

from streamlit import config
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime import app_session
from streamlit.runtime.app_session import AppSession, AppSessionState

MADE: dict[tuple, tuple[ForwardMsg, bool]] = {}  # (script, page list) -> the message Streamlit made, headless
MAX_MADE = 64  # page lists kept: a first run's list names the address's page, whatever a visitor typed (each
# made address kept a message for good: hostile review of issue 84); the app's own lists are a few dozen
LOCK = threading.Lock()


def made_once(create: Callable[..., ForwardMsg]) -> Callable[..., ForwardMsg]:
    """AppSession._create_new_session_message as Streamlit's, the server's part made once per page list and copied.
    The skills nudge depends on the visitor's connection unless the server is headless (Streamlit's own rule): a
    message made without one asks Streamlit again each time."""

    def copied(session: AppSession, page_script_hash: str, run_descriptor: object,
               pages: dict | None = None) -> ForwardMsg:
        pages = pages or session._pages_manager.get_pages()  # noqa: SLF001 -- Streamlit's own, pinned
        key = (session._script_data.name, session._script_data.main_script_path,  # noqa: SLF001
               tuple((page, info["page_name"], info["icon"]) for page, info in pages.items()))
        with LOCK:
            made = MADE.get(key)
        if made is None:
            msg, kept = create(session, page_script_hash, run_descriptor, pages), ForwardMsg()
            kept.CopyFrom(msg)
            with LOCK:
                if len(MADE) < MAX_MADE:
                    MADE[key] = (kept, bool(config.get_option("server.headless")))
            return msg
        made, headless = made
        msg = ForwardMsg()
        msg.CopyFrom(made)
        msg.ClearField("metadata")
        app_session._set_run_identity(msg, run_descriptor)  # noqa: SLF001
        news, started = msg.new_session, msg.new_session.initialize
        news.page_script_hash, started.session_id = page_script_hash, session.id
        started.session_status.run_on_save = session._run_on_save  # noqa: SLF001
        started.session_status.script_is_running = session._state == AppSessionState.APP_IS_RUNNING  # noqa: SLF001
        if not headless:
            started.recommend_skills_install, started.skills_nudge_suppressed_reason = (
                session._compute_skills_nudge_state())  # noqa: SLF001
        return msg

    copied.made_by = create
    return copied


def keep_session_config() -> None:
    """Installs made_once over Streamlit's method (once a process; app.py's every run asks)."""
    with LOCK:
        if hasattr(AppSession._create_new_session_message, "made_by"):  # noqa: SLF001 -- Streamlit's own, pinned
            return
        AppSession._create_new_session_message = made_once(AppSession._create_new_session_message)  # noqa: SLF001
    config.on_config_parsed(forget_made, force_connect=True)  # a changed config file: made again


def forget_made() -> None:
    with LOCK:
        MADE.clear()
