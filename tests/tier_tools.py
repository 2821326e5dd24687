"""Each tier of `make test` uses only the Debian tools its Makefile target installs (issue 79).

A fresh machine has none of them: a tier that uses one it does not install passes on a developer's machine, which
has them all, and fails on the first fresh clone (make check once spoke a sentence with espeak-ng, which only the
slow tier installed). The Makefile tells each tier's pytest which tools it installs (MHA_TIER_TOOLS, the tier's own
prerequisites: `check: … $(CHECK_TOOLS)`, so the list is written once); every other tool of TOOLS is shadowed, for
that run, by a stand-in at the front of PATH that says which tier forgot it and fails. A test that needs an
undeclared tool therefore fails on every machine, not only on a fresh one. Without MHA_TIER_TOOLS (pytest run by
hand) nothing is shadowed."""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from pathlib import Path

# Makefile target -> the programs it installs (and that the code finds on PATH: shutil.which or a subprocess).
TOOLS = {
    "chromium": ("chromium", "chromium-headless-shell"),
    "espeak": ("espeak-ng",),
    "haproxy": ("haproxy",),
    "redis": ("redis-server",),
}
STAND_IN = """#!/bin/sh
echo "$(basename "$0") is not installed by this tier of make test (MHA_TIER_TOOLS='{declared}'): add its Makefile \
target ({target}) to the tier's tools" >&2
exit 127
"""


def shadowed(declared: str) -> dict[str, str]:
    """program -> the Makefile target that installs it, for every tool the tier does not declare."""
    named = set(declared.split())
    unknown = named - set(TOOLS)
    if unknown:
        raise ValueError(f"MHA_TIER_TOOLS names {sorted(unknown)}; tools are {sorted(TOOLS)}")
    return {program: target for target, programs in TOOLS.items() if target not in named for program in programs}


def shadow_undeclared_tools() -> Path | None:
    """Put stand-ins for the undeclared tools at the front of PATH (for this process and those it starts)."""
    declared = os.environ.get("MHA_TIER_TOOLS")
    if declared is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="mha-tier-tools-"))
    for program, target in shadowed(declared).items():
        stand_in = folder / program
        stand_in.write_text(STAND_IN.format(declared=declared, target=target))
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    return folder
