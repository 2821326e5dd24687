"""`app [--port N] [--address HOST]`: the web app, from wherever it is (the checkout, or the data folder a pip-installed
wheel put it in: mha_core.app_files), started as `streamlit run app.py` would be, its .streamlit/config.toml read
from beside app.py. The process becomes Streamlit's (exec): Ctrl+C or a signal stops the server itself."""

from __future__ import annotations

import argparse
import os
import sys

from mha_core.app_files import app_dir
from mha_core.cli.common import CliError, positive_int

LAST_PORT = 65535  # TCP's: 70000 was handed to Streamlit, which failed on it
MALLOC_ARENA_MAX = "2"  # as deploy/run.sh: each session's thread kept its own malloc arena of freed memory


def port_number(value: str) -> int:
    """argparse type: a TCP port, 1 to 65535 (argparse says what is wrong in one line, exit 2)."""
    number = positive_int(value)
    if number > LAST_PORT:
        raise argparse.ArgumentTypeError(f"a port is at most {LAST_PORT}, not {number}")
    return number


def streamlit_command(port: int, address: str | None) -> list[str]:
    """The command that serves the app: this interpreter's Streamlit on app.py."""
    app = app_dir() / "app.py"
    if not app.is_file():
        raise CliError(f"the app's files are not installed: no {app}")
    command = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port)]
    return command + (["--server.address", address] if address else [])


def cmd_app(args: argparse.Namespace) -> None:
    command = streamlit_command(args.port, args.address)
    os.environ.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENA_MAX)
    sys.stdout.flush()
    os.chdir(app_dir())  # the app's own folder: its .streamlit/ and relative page paths, wherever it was started
    os.execv(sys.executable, command)


def add_app_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help="start the web app (http://localhost:PORT); Ctrl+C stops it")
    p.add_argument("--port", type=port_number, default=8501, help="the port it listens on")
    p.add_argument("--address", default=None, help="the address it listens on (default: every interface)")
    p.set_defaults(func=cmd_app)
