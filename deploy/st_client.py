"""A Streamlit session without a browser: Streamlit's own websocket protocol, one connection per student.

The client does what the browser does: it opens `/_stcore/stream` (subprotocols ["streamlit", token]),
sends `BackMsg.rerun_script` with a `ClientState` (query string, page, later the page's script hash and
the widget states) and reads `ForwardMsg`s until `script_finished`. Widgets are found by their labels
in the elements the server sent, so a text change is sent exactly as a browser sends it.
Used by deploy/warm.py, benchmarks/bench_classroom.py and the serving tests; nothing here imports the app.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
CLOSE_TIMEOUT_S = 1.0  # for the server's answer to our closing frame (Session.close)
EARLY_FOR_RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN


@dataclass
class Interaction:
    """One script run as the client saw it."""

    seconds: float = 0.0
    exceptions: list[str] = field(default_factory=list)  # st.exception / uncaught errors shown
    errors: list[str] = field(default_factory=list)  # st.error boxes
    texts: list[str] = field(default_factory=list)  # markdown, captions, alerts: what a reader sees
    charts: int = 0  # plotly charts received
    text_values: dict[str, str] = field(default_factory=dict)  # text widgets' values shown, by label
    codes: list[str] = field(default_factory=list)  # st.code blocks' text (the class's links)
    bytes: int = 0  # size of the ForwardMsgs
    elements: Counter = field(default_factory=Counter)  # what the run drew: elements by kind, "block:" + containers


@dataclass
class Session:
    """One browser tab's worth of protocol state."""

    base_url: str
    page: str = ""  # "" for the default page, else the url path ("coreference")
    query: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    widget_ids: dict[str, str] = field(default_factory=dict)  # label -> widget id
    page_script_hash: str = ""
    session_id: str = ""
    cookie: str = ""  # sent with the websocket handshake (a proxy's sticky-session cookie)
    headers: dict[str, str] = field(default_factory=dict)  # more handshake headers (a proxy's X-Forwarded-Host)
    served_by: str = ""  # the sticky-session cookie a proxy set in its handshake response, if any
    auto_reruns: dict[str, float] = field(default_factory=dict)  # fragment id -> seconds (st.fragment(run_every))
    _ws: object = None

    async def open(self) -> Interaction:
        """Connect and run the page as a first visit does."""
        await self._connect()
        return await self.rerun()

    async def _connect(self) -> None:
        url = self.base_url.replace("http", "ws", 1).rstrip("/") + "/_stcore/stream"
        headers = {**self.headers, **({"Cookie": self.cookie} if self.cookie else {})} or None
        self._ws = await websockets.connect(url, subprotocols=["streamlit", "no-token"], max_size=MAX_MESSAGE_BYTES,
                                            open_timeout=self.timeout, ping_interval=None, additional_headers=headers,
                                            close_timeout=CLOSE_TIMEOUT_S)
        self.served_by = self._ws.response.headers.get("Set-Cookie", "").split(";")[0]

    async def close(self) -> None:
        """Leave, as a closed tab does: a session that stopped reading its page's messages (a visitor who left in the
        middle of a run) has its closing handshake stuck behind them, so the connection ends after CLOSE_TIMEOUT_S
        (websockets' default, 10 s, held every such test for 10 s)."""
        if self._ws is not None:
            await self._ws.close()

    async def set_text(self, label: str, text: str) -> Interaction:
        """Type `text` into the text widget labelled `label` and submit it, as the browser does."""
        return await self.set_texts({label: text})

    async def set_texts(self, texts: dict[str, str]) -> Interaction:
        """Submit several text widgets' values (by label) in one rerun, as a browser sends its widget states."""
        return await self.rerun({self.widget_ids[label]: text for label, text in texts.items()})

    async def click(self, label: str) -> Interaction:
        """Press the button labelled `label`, as the browser does (its trigger, once)."""
        return await self.rerun(triggers=[self.widget_ids[label]])

    async def rerun(self, strings: dict[str, str] | None = None, triggers: list[str] | None = None) -> Interaction:
        start = time.perf_counter()
        await self.start(strings, triggers=triggers)
        result = await asyncio.wait_for(self.read_until_finished(), self.timeout)
        result.seconds = time.perf_counter() - start
        return result

    async def connect_and_start(self) -> None:
        """Connect and ask for the page's run without waiting for it (a visitor who then leaves)."""
        await self._connect()
        await self.start()

    async def rerun_fragment(self, fragment_id: str) -> Interaction:
        """What a browser sends every run_every seconds for a fragment: its rerun alone (which may rerun the page)."""
        start = time.perf_counter()
        await self.start(fragment_id=fragment_id)
        result = await asyncio.wait_for(self.read_until_finished(), self.timeout)
        result.seconds = time.perf_counter() - start
        return result

    async def start(self, strings: dict[str, str] | None = None, fragment_id: str = "",
                    triggers: list[str] | None = None) -> None:
        """Send a rerun (widget values by id, buttons pressed by id; or one fragment's, as its timer does) without
        reading what comes back."""
        msg = BackMsg()
        state = msg.rerun_script
        if fragment_id:
            state.fragment_id = fragment_id
            state.is_auto_rerun = True
        state.query_string = urllib.parse.urlencode(self.query)
        state.page_name = self.page
        state.page_script_hash = self.page_script_hash
        for widget_id, value in (strings or {}).items():
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            widget.string_value = value
        for widget_id in triggers or []:
            widget = state.widget_states.widgets.add()
            widget.id, widget.trigger_value = widget_id, True
        await self._ws.send(msg.SerializeToString())

    async def read_until_finished(self, result: Interaction | None = None) -> Interaction:
        """Read until the run finishes, into `result` (so a caller that times out keeps what arrived)."""
        result = result or Interaction()
        while True:
            raw = await self._ws.recv()
            result.bytes += len(raw)
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                self.session_id = fwd.new_session.initialize.session_id or self.session_id
            elif kind == "navigation":
                self.page_script_hash = fwd.navigation.page_script_hash
            elif kind == "page_info_changed":  # the page wrote its address: the next request sends it, as a browser
                self.query = dict(urllib.parse.parse_qsl(fwd.page_info_changed.query_string))
            elif kind == "auto_rerun":
                self.auto_reruns[fwd.auto_rerun.fragment_id] = fwd.auto_rerun.interval
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                self._read_element(fwd.delta.new_element, result)
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "add_block":
                result.elements[f"block:{fwd.delta.add_block.WhichOneof('type') or 'vertical'}"] += 1
            elif kind == "script_finished" and fwd.script_finished != EARLY_FOR_RERUN:
                return result

    def _read_element(self, element: object, result: Interaction) -> None:
        kind = element.WhichOneof("type")
        if kind is None:
            return
        body = getattr(element, kind)
        result.elements[kind] += 1
        if kind == "exception":
            result.exceptions.append(f"{body.type}: {body.message}")
        elif kind == "alert":
            result.texts.append(body.body)
            if body.format == Alert.ERROR:
                result.errors.append(body.body)
        elif kind in ("markdown", "heading"):
            result.texts.append(body.body)
        elif kind == "code":
            result.codes.append(body.code_text)
        elif kind == "plotly_chart":
            result.charts += 1
        elif kind == "progress":
            result.texts.append(body.text)
        elif kind in ("text_area", "text_input"):
            result.text_values[body.label] = body.value if body.HasField("value") else body.default
        if hasattr(body, "id") and hasattr(body, "label") and body.id:
            self.widget_ids[body.label] = body.id
