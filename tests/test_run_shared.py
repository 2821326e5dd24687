"""tests/run_shared.py: the test processes of one run share one process (the browser tier's app server); the last
to leave stops it, a dead user does not keep it, a dead process is started again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.run_shared import alive, shared_by_the_run

ROOT = Path(__file__).resolve().parents[1]
# Another test process of the run: it joins, prints the address it got, and leaves when told (a line on stdin).
OTHER_WORKER = """
import sys
from tests.run_shared import shared_by_the_run
from tests.test_run_shared import answers, refuse_to_start
with shared_by_the_run(__import__("pathlib").Path(sys.argv[1]), "shared", refuse_to_start, answers) as address:
    print(address, flush=True)
    sys.stdin.readline()
"""


def start_sleeper(folder: Path) -> tuple[int, str]:
    """Stands for the app server: a process in a group of its own; its address names it."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    return proc.pid, f"sleeper-{proc.pid}"


def answers(address: str) -> bool:
    return alive(int(address.rsplit("-", 1)[1]))


def refuse_to_start(folder: Path) -> tuple[int, str]:
    raise AssertionError("a second process was started while the first one served")


def other_worker(folder: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", OTHER_WORKER, str(folder)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_the_run_shares_one_process_and_the_last_to_leave_stops_it(tmp_path):
    with shared_by_the_run(tmp_path, "shared", start_sleeper, answers) as mine:
        other, theirs = other_worker(tmp_path)
        assert theirs == mine  # joined, not started again (refuse_to_start would have failed it)
    pid = int(mine.rsplit("-", 1)[1])
    assert alive(pid)  # the first to leave leaves it to the other
    other.communicate("leave\n", timeout=30)
    assert other.returncode == 0 and not alive(pid)  # the last one stopped it


def test_a_worker_that_died_does_not_keep_it(tmp_path):
    with shared_by_the_run(tmp_path, "shared", start_sleeper, answers) as address:
        other, theirs = other_worker(tmp_path)
        assert theirs == address
        other.kill()  # a worker that crashed without leaving: its file stays
        other.wait()
    assert not answers(address)  # the last living user left: stopped


def test_a_process_that_died_is_started_again(tmp_path):
    with shared_by_the_run(tmp_path, "shared", start_sleeper, answers) as first:
        subprocess.run(["kill", first.rsplit("-", 1)[1]], check=True)  # the server crashed mid-run
        with shared_by_the_run(tmp_path, "shared", start_sleeper, answers) as again:  # the next test to ask
            assert again != first and answers(again)
    assert not answers(again)
