"""The classroom store (issue 47, class mode's state): a class's code and secret, only the secret moves it, every
process reads the same step, students counted while they check in, a class ends when ended or idle for 3 hours."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mha_core.messages import InputError
from mha_core.serving.classroom import CODE_ALPHABET, CODE_LENGTH, FOLLOWING_S, IDLE_LIMIT_S, Classroom, digest


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


READ_STEP = """import sys
from pathlib import Path
from mha_core.serving.classroom import Classroom
print(Classroom(Path(sys.argv[1])).state(sys.argv[2]).step, "torch" in sys.modules)"""


def test_only_the_teacher_s_secret_moves_the_class(tmp_path):
    room = Classroom(tmp_path / "classes.sqlite")
    code, secret = room.start("那只动物没有过马路，因为它太累了。", "zh")
    assert len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET) and len(secret) >= 32
    assert room.state(code).step == 1 and room.state(code.lower()).text.startswith("那只")
    assert room.move(code, secret, step=3).step == 3
    one_off = secret[:-1] + ("y" if secret.endswith("x") else "x")  # its last character changed (1 secret in 64
    for wrong in (None, "", one_off, code):  # ends in "x": "+ x" had left it the secret itself)
        with pytest.raises(InputError, match="Only the teacher's own link"):
            room.move(code, wrong, step=4)
    assert room.state(code).step == 3
    stored = (tmp_path / "classes.sqlite").read_bytes()
    assert secret.encode() not in stored and digest(secret).encode() in stored  # its hash is kept, not the secret
    other, other_secret = room.start("Another class.", "en")
    with pytest.raises(InputError, match="Only the teacher"):
        room.move(code, other_secret, step=5)  # another class's secret moves nothing here
    assert other != code and room.state(other).step == 1


def test_every_process_reads_the_teacher_s_step(tmp_path):
    """Another process (as another server process behind the proxy) reads the step the teacher set. A Python of its
    own, not multiprocessing's spawn: after an AppTest, this process's __main__ is app.py, which a spawned child
    runs again (10 s measured)."""
    path = tmp_path / "classes.sqlite"
    room = Classroom(path)
    code, secret = room.start("The animal didn't cross the street because it was too tired.", "en")
    room.move(code, secret, step=7)
    read = subprocess.run([sys.executable, "-c", READ_STEP, str(path), code], capture_output=True, text=True,
                          timeout=60)
    assert read.returncode == 0 and read.stdout.split() == ["7", "False"], read.stderr


def test_a_class_ends_when_ended_or_idle_and_says_so(tmp_path):
    clock = Clock()
    room = Classroom(tmp_path / "c.sqlite", clock)
    code, secret = room.start("text", "en")
    clock.now += IDLE_LIMIT_S - 1
    assert room.state(code).step == 1
    clock.now += 2
    with pytest.raises(InputError, match=f"Class {code} has ended"):
        room.state(code)
    code, secret = room.start("text", "en")
    with pytest.raises(InputError, match="Only the teacher"):
        room.end(code, "guess")
    room.end(code, secret)
    with pytest.raises(InputError, match="has ended"):
        room.state(code)
    with pytest.raises(InputError, match="no class ZZZZZZ"):
        room.state("ZZZZZZ")


def test_the_teacher_sees_how_many_students_follow(tmp_path):
    clock = Clock()
    room = Classroom(tmp_path / "c.sqlite", clock)
    code, _ = room.start("text", "en")
    for student in ("a", "b", "c"):
        room.seen(code, student)
    room.seen(code, "a")  # a student checking in again is still one
    assert room.following(code) == 3
    clock.now += FOLLOWING_S / 2
    room.seen(code, "b")
    clock.now += FOLLOWING_S / 2 + 0.1
    assert room.following(code) == 1  # a and c stopped checking in
