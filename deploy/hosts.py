"""The HAProxy config of a school's front machine (issue 84): deploy/haproxy.cfg followed by one server line per app
process of every host, each with its own sticky-session cookie (a browser's page, websocket, uploads and downloads
reach the process that holds its session; a process that stops answering its health check gets no new visitor, and
its students reconnect to another, where their address brings them back to the class's step).

    python deploy/hosts.py 10.0.0.11:8601-8604 10.0.0.12:8601-8604 > haproxy.cfg
    MHA_BIND=0.0.0.0 MHA_PORT=80 haproxy -f haproxy.cfg

Each argument is a host and its app processes' ports (one port, or FIRST-LAST); `make serve` writes its own
(127.0.0.1:FIRST-LAST) the same way. Exits 2 with one line for an argument it cannot read.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import sys
from pathlib import Path

BASE = Path(__file__).with_name("haproxy.cfg")
HOST_PORTS = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(?P<first>\d{1,5})(?:-(?P<last>\d{1,5}))?$")
MAX_PROCESSES = 1000  # server lines one config holds (a typo's 8601-86010 is refused, not written)


def processes(spec: str) -> list[tuple[str, int]]:
    """A host's app processes: (host, port) for `HOST:PORT` or `HOST:FIRST-LAST`; ValueError says why not."""
    found = HOST_PORTS.match(spec.strip())
    if found is None:
        raise ValueError(f"{spec!r} is not HOST:PORT or HOST:FIRST-LAST")
    host, first = found["host"], int(found["first"])
    last = int(found["last"] or first)
    if host.startswith("["):
        ipaddress.IPv6Address(host[1:-1])
    if not 0 < first <= last <= 65535:
        raise ValueError(f"{spec!r}: ports run from 1 to 65535, the first before the last")
    return [(host, port) for port in range(first, last + 1)]


def config(specs: list[str]) -> str:
    """deploy/haproxy.cfg and a server line per process: app1, app2, … in the order given (each its cookie)."""
    servers = [process for spec in specs for process in processes(spec)]
    if not servers:
        raise ValueError("no host given")
    if len(servers) > MAX_PROCESSES:
        raise ValueError(f"{len(servers)} processes: one config holds at most {MAX_PROCESSES}")
    lines = [f"    server app{k} {host}:{port} check cookie app{k} inter 2s"
             for k, (host, port) in enumerate(servers, start=1)]
    return BASE.read_text(encoding="utf-8").rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hosts", nargs="+", help="HOST:PORT or HOST:FIRST-LAST, one per host")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(config(args.hosts))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
