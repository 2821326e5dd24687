"""Child processes that keep what they compiled between requests, and can be killed mid-request."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.2  # how often a request in flight checks whether it is still wanted


class ChildPool:
    """Long-lived child processes (`python script --serve`), each taking one request at a time: a JSON line of
    arguments in, one line back ("ok", or "error: why"). A child keeps what it compiled between requests (UMAP's
    numba code: about a minute the first time). When check() raises (Cancelled) during a request, its child is
    killed, and a later request starts a fresh one. Children inherit the caller's lower CPU priority."""

    def __init__(self, script: Path, poll_s: float = POLL_S) -> None:
        self.script, self.poll_s = script, poll_s
        self._idle: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def _take(self) -> subprocess.Popen:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.poll() is None:
                    return child
        return subprocess.Popen([sys.executable, str(self.script), "--serve"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)

    def request(self, args: list[str], check: Callable[[], None]) -> None:
        """Run one request; check() every poll_s while it runs. A failed request raises RuntimeError(why)."""
        child, answered = self._take(), False
        try:
            child.stdin.write(json.dumps(args) + "\n")
            child.stdin.flush()
            while not select.select([child.stdout], [], [], self.poll_s)[0]:
                if child.poll() is not None:
                    break
                check()
            answer = child.stdout.readline().strip()
            answered = answer == "ok"
            if not answered:
                raise RuntimeError(answer.removeprefix("error: ") or f"{self.script.name} stopped")
        finally:
            if answered:
                with self._lock:
                    self._idle.append(child)
            else:
                child.kill()
                child.wait()

    def pids(self) -> list[int]:
        with self._lock:
            return [child.pid for child in self._idle if child.poll() is None]
