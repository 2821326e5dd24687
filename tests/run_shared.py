"""One process for every test process of a pytest run (issue 44: the browser tier's one app server, shared by
pytest-xdist's workers). The workers share the run's temporary folder: the first worker that needs the process starts
it (in a process group of its own, so that it outlives the worker that started it), each worker using it keeps a file
of its own beside it, and the last one to leave stops it. A worker that died no longer counts; a process that died or
stopped answering is started again."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

Started = tuple[int, str]  # (the process group's leader, the address its users connect to)


def run_folder(base_temp: Path, worker_id: str) -> Path:
    """The folder every test process of this run shares: the parent of an xdist worker's basetemp (each worker has
    its own below it), or the basetemp of a run without workers (never a folder other runs share)."""
    return base_temp if worker_id == "master" else base_temp.parent


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """`path` locked against the run's other test processes (flock: released if the holder dies)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (one whose parent has not reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_group(pid: int, timeout: float = 15) -> None:
    """SIGTERM to the process group `pid` leads, SIGKILL if it is still there after `timeout` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reaped here when this process started it


def users(folder: Path, name: str) -> list[int]:
    """The test processes using `name` now (each one's file, its process alive); a dead one's file is removed."""
    found = []
    for mark in folder.glob(f"{name}.user.*"):
        pid = int(mark.name.rsplit(".", 1)[1])
        if alive(pid):
            found.append(pid)
        else:
            mark.unlink(missing_ok=True)
    return found


@contextlib.contextmanager
def shared_by_the_run(folder: Path, name: str, start: Callable[[Path], Started],
                      answers: Callable[[str], bool]) -> Iterator[str]:
    """The address of the run's one `name` process: the one running (its leader alive and `answers(address)`), else
    one `start(folder)` starts in a process group of its own. The last test process to leave stops it."""
    state, mine = folder / f"{name}.json", folder / f"{name}.user.{os.getpid()}"
    with locked(folder / f"{name}.lock"):
        found = json.loads(state.read_text()) if state.is_file() else None
        if found is None or not (alive(found["pid"]) and answers(found["address"])):
            if found is not None:
                stop_group(found["pid"])
            pid, address = start(folder)
            found = {"pid": pid, "address": address}
            state.write_text(json.dumps(found))
        mine.touch()
    try:
        yield found["address"]
    finally:
        with locked(folder / f"{name}.lock"):
            mine.unlink(missing_ok=True)
            if not users(folder, name):
                stop_group(found["pid"])
                state.unlink(missing_ok=True)
