"""Streamlit's session message, its config part made once per server (issue 84). Every run, a class follower's
fragment rerun too, begins with Streamlit's new-session message, and Streamlit fills its config and six theme
sections by reading each option of the server's configuration anew: about 1 ms of a follower's rerun on the
development machine (a fifth of what a teacher's move costs a follower). The configuration is the server's, read
when it starts (and again if its file changes): the parts are made once and copied into each message, made again
when Streamlit parses its configuration again. Streamlit 1.67 (pinned): app_session's two module functions."""

from __future__ import annotations

import threading
from collections.abc import Callable

from google.protobuf.message import Message
from streamlit import config
from streamlit.runtime import app_session

MADE: dict[tuple[str, str], Message] = {}  # (which function, its section) -> the part as Streamlit fills it
LOCK = threading.Lock()


def made_once(populate: Callable[..., None], name: str) -> Callable[..., None]:
    """populate(msg, *section) as Streamlit's, the part filled once and copied after."""

    def copied(msg: Message, *section: str) -> None:
        key = (name, *section[:1])
        with LOCK:
            part = MADE.get(key)
            if part is None:
                part = MADE[key] = type(msg)()
                populate(part, *section)
        if part.ListFields():  # a section with nothing set is left untouched, as Streamlit leaves it (not present)
            msg.CopyFrom(part)

    copied.made_by = populate
    return copied


def keep_session_config() -> None:
    """Installs made_once over Streamlit's two functions (once a process; app.py's every run asks)."""
    with LOCK:
        if hasattr(app_session._populate_config_msg, "made_by"):  # noqa: SLF001 -- Streamlit's own, pinned
            return
        app_session._populate_config_msg = made_once(app_session._populate_config_msg, "config")  # noqa: SLF001
        app_session._populate_theme_msg = made_once(app_session._populate_theme_msg, "theme")  # noqa: SLF001
    config.on_config_parsed(forget_made, force_connect=True)  # a changed config file: made again


def forget_made() -> None:
    MADE.clear()
