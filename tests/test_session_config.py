"""Issue 84: Streamlit's new-session message (sent at every run, a class follower's fragment rerun too) takes its
config and theme parts made once per server (views/_session_config.py), byte for byte what Streamlit makes, and
made again when Streamlit parses its configuration again."""

from __future__ import annotations

from streamlit import config
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime import app_session

SECTIONS = ("theme.light", "theme.dark", "theme.sidebar", "theme.light.sidebar", "theme.dark.sidebar")


def session_message() -> bytes:
    """The parts of a new-session message the two functions fill, as AppSession._create_new_session_message calls
    them."""
    msg = ForwardMsg()
    theme = msg.new_session.custom_theme
    app_session._populate_config_msg(msg.new_session.config)  # noqa: SLF001
    app_session._populate_theme_msg(theme)  # noqa: SLF001
    for section, part in zip(SECTIONS, (theme.light, theme.dark, theme.sidebar, theme.light.sidebar,
                                        theme.dark.sidebar), strict=True):
        app_session._populate_theme_msg(part, section)  # noqa: SLF001
    return msg.SerializeToString()


def test_the_session_message_s_config_is_made_once_and_again_after_a_new_config(monkeypatch):
    from views import _session_config

    for name in ("_populate_config_msg", "_populate_theme_msg"):  # Streamlit's own (an AppTest of this process
        populate = getattr(app_session, name)                        # may have installed the copies), put back after
        monkeypatch.setattr(app_session, name, getattr(populate, "made_by", populate))
    monkeypatch.setattr(_session_config, "MADE", {})
    config.get_config_options()
    original = config.get_option("theme.light.primaryColor")
    try:
        config.set_option("theme.light.primaryColor", "#123456")  # a section with a value, one without (dark)
        made_and_copied(_session_config, monkeypatch)
    finally:
        config.set_option("theme.light.primaryColor", original)


def made_and_copied(_session_config: object, monkeypatch: object) -> None:
    streamlit_s = session_message()
    _session_config.keep_session_config()
    _session_config.keep_session_config()  # every run asks: installed once
    assert hasattr(app_session._populate_config_msg, "made_by")  # noqa: SLF001
    assert not hasattr(app_session._populate_config_msg.made_by, "made_by")  # noqa: SLF001 -- not wrapped twice
    assert session_message() == streamlit_s  # byte for byte, the empty sections left absent
    reads = []
    with monkeypatch.context() as reading:
        reading.setattr(config, "get_option", lambda *a: reads.append(a))
        reading.setattr(config, "get_options_for_section", lambda *a: reads.append(a))
        assert session_message() == streamlit_s and reads == []  # no option read again
    config.set_option("theme.light.primaryColor", "#654321")
    assert b"#654321" not in session_message()  # the part made before
    config._on_config_parsed.send()  # noqa: SLF001 -- Streamlit parsed its configuration again
    assert b"#654321" in session_message() and hasattr(app_session._populate_theme_msg, "made_by")  # noqa: SLF001
