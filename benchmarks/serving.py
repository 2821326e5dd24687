"""Start the app for tests and benchmarks: one `streamlit run`, or `deploy/serve.sh` (HAProxy + N processes).

Both yield a ServerGroup: the URL a student opens and the app processes' ids, from which the server's
CPU time and peak memory are read (/proc, Linux).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deploy.warm import wait_healthy

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# As `make run` and deploy/serve.sh start the app: two malloc arenas instead of one per thread (each
# session's script runs in its own thread; per-thread arenas kept ~300 MB more after 10 long texts).
SERVER_ENV = {"PYTHONUNBUFFERED": "1", "MALLOC_ARENA_MAX": "2"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_worker_port(workers: int) -> int:
    """FIRST_WORKER_PORT for `workers` app processes (deploy/serve.sh and host.sh listen on the next `workers` ports):
    200 above a free port, with each of those ports free now (make test-serve runs its tests at once, each starting
    servers: a port taken by another's was a failed start)."""
    while True:
        first = free_port() + 200
        if first + workers < 65536 and all(port_free(first + i) for i in range(1, workers + 1)):
            return first


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class ServerGroup:
    url: str  # what a browser opens
    pids: tuple[int, ...]  # the app processes (not the proxy)
    worker_urls: tuple[str, ...]  # each app process directly (behind a proxy: its loopback port)

    def cpu_seconds(self) -> float:
        """User + system CPU time of all app processes so far."""
        total = 0
        for pid in self.pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
        return total / CLOCK_TICKS

    def peak_rss(self) -> float:
        """Bytes: the sum of each app process's peak resident memory (VmHWM)."""
        total = 0
        for pid in self.pids:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        return total


@contextlib.contextmanager
def process_group(cmd: list[str], env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, Path]]:
    """`cmd` in a process group of its own, its output in a temporary file: (the process, the file); stopped and
    removed afterwards. Never a pipe: nobody reads it once the server is up, and a pipe holding 64 KB blocks the
    server at its next write (every thread that logs then waits: a stall)."""
    with tempfile.TemporaryDirectory(prefix="mha-server-") as folder:
        output = Path(folder) / "output.log"
        with output.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            yield proc, output
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def app_server(script: str = "app.py", timeout: float = 120, env: dict[str, str] | None = None,
               port: int | None = None, address: str = "127.0.0.1") -> Iterator[ServerGroup]:
    """One `streamlit run` on a port (a free one unless given: a restart reuses its server's) of `address`
    (loopback unless given: 0.0.0.0 is every interface, as a class's phones reach it); its url is loopback's."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
           "--server.address", address, "--server.headless", "true"]
    url = f"http://127.0.0.1:{port}"
    with process_group(cmd, {**os.environ, **SERVER_ENV, **(env or {})}) as (proc, output):
        wait_healthy(url, timeout, proc, output)
        yield ServerGroup(url, (proc.pid,), (url,))


def app_children(pid: int) -> tuple[int, ...]:
    """Ids of the streamlit processes started by deploy/serve.sh (process `pid`)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return tuple(int(c) for c in children if b"streamlit" in Path(f"/proc/{c}/cmdline").read_bytes())


@contextlib.contextmanager
def proxy_group(workers: int, timeout: float = 180) -> Iterator[ServerGroup]:
    """`deploy/serve.sh`: `workers` app processes behind HAProxy on a free loopback port."""
    port = free_port()
    env = {**os.environ, **SERVER_ENV, "WORKERS": str(workers), "PORT": str(port), "BIND": "127.0.0.1",
           "FIRST_WORKER_PORT": str(first_worker_port(workers)), "BIN": str(Path(sys.executable).parent)}
    url = f"http://127.0.0.1:{port}"
    with process_group(["bash", str(ROOT / "deploy" / "serve.sh")], env) as (proc, output):
        first = int(env["FIRST_WORKER_PORT"])
        workers_at = tuple(f"http://127.0.0.1:{first + i}" for i in range(1, workers + 1))
        for worker in workers_at:
            wait_healthy(worker, timeout, proc, output)
        wait_healthy(url, timeout, proc, output)
        balanced(url, workers, timeout)
        yield ServerGroup(url, app_children(proc.pid), workers_at)


def balanced(url: str, workers: int, timeout: float) -> None:
    """Until HAProxy sends new visitors to every process (its first health checks mark each up): a request without
    a cookie gets the cookie of the process that served it. (A fixed 2.5 s wait did the same.)"""
    import urllib.request

    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} sent visitors only to {sorted(seen)} in {timeout:.0f} s")
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as answer:
            seen.update(c.split(";")[0] for c in answer.headers.get_all("Set-Cookie") or [] if "MHA_WORKER" in c)
        time.sleep(0.05)


@contextlib.contextmanager
def redis_server(folder: Path, timeout: float = 30, port: int | None = None, kept: bool = False) -> Iterator[str]:
    """Debian's redis-server on a loopback port (a free one unless given: a restart reuses its server's), its files
    in `folder` (`kept`: every write logged there, as deploy/redis.conf has it, so a restart finds the classes; else
    nothing saved): its address (redis://127.0.0.1:PORT/0) until stopped. Found on PATH (a test tier that does not
    install it is told so)."""
    import redis

    port = port or free_port()
    program = shutil.which("redis-server") or "redis-server"
    cmd = [program, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
           "--appendonly", "yes" if kept else "no", "--protected-mode", "yes"]
    with process_group(cmd, dict(os.environ)) as (proc, output):
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + timeout
        while True:
            try:
                redis.Redis.from_url(url, socket_connect_timeout=1).ping()
                break
            except redis.ConnectionError as err:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = output.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"redis-server did not start: {said}") from err
                time.sleep(0.05)
        yield url


@contextlib.contextmanager
def school_host(workers: int, store: str, cache: Path, secret: str, timeout: float = 180) -> Iterator[ServerGroup]:
    """`deploy/host.sh`: one of a school's hosts, `workers` app processes on loopback with a cache folder of their
    own, reading the classes from the Redis at `store`; its url is its first process's (the proxy is apart)."""
    first = first_worker_port(workers)
    env = {**os.environ, **SERVER_ENV, "WORKERS": str(workers), "BIND": "127.0.0.1", "FIRST_WORKER_PORT": str(first),
           "BIN": str(Path(sys.executable).parent), "MHA_CLASS_STORE": store, "MHA_CACHE_DIR": str(cache),
           "STREAMLIT_SERVER_COOKIE_SECRET": secret}
    with process_group(["bash", str(ROOT / "deploy" / "host.sh")], env) as (proc, output):
        urls = tuple(f"http://127.0.0.1:{first + i}" for i in range(1, workers + 1))
        for url in urls:
            wait_healthy(url, timeout, proc, output)
        yield ServerGroup(urls[0], app_children(proc.pid), urls)


@contextlib.contextmanager
def front_proxy(hosts: list[ServerGroup], timeout: float = 60) -> Iterator[str]:
    """HAProxy on a free loopback port in front of every process of `hosts` (deploy/hosts.py writes its config):
    the school's one address."""
    specs = [url.removeprefix("http://") for host in hosts for url in host.worker_urls]
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mha-front-") as folder:
        config = Path(folder) / "haproxy.cfg"
        written = subprocess.run([sys.executable, str(ROOT / "deploy" / "hosts.py"), *specs], capture_output=True,
                                 text=True, check=True)
        config.write_text(written.stdout)
        env = {**os.environ, "MHA_BIND": "127.0.0.1", "MHA_PORT": str(port)}
        with process_group(["haproxy", "-db", "-f", str(config)], env) as (proc, output):
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, timeout, proc, output)
            balanced(url, len(specs), timeout)
            yield url
