"""Hostile sweep after issues 77/78: the students' address from hostile request headers and settings. A header
value no link can carry (a markdown link, a user, a path, a port outside 1-65535 or written in other digits, CRLF,
unicode, a bare or scoped IPv6 address) is as if no header came: the link is this machine's network address.
A forwarded scheme other than http/https is not used. MHA_PUBLIC_URL without a scheme is http://; one that is no
http(s) address of a host is not used, and the teacher is told."""

from __future__ import annotations

import pytest

from mha_core.serving.reach import PUBLIC_URL_UNUSABLE, Request, students_address

NETWORK = "192.168.1.5"
HOSTILE_HOSTS = ["localhost:²", "example.org:²", "[::1]:²", "example.org:٣", "example.org:99999", "example.org:0",
                 "example.org:", "evil](javascript:alert(1))", "[CLICK](https://evil.example)", "user:pw@example.org",
                 "exa mple.org", "例子.中国", "[fe80::1%eth0]:8501", "::1", "a" * 10_000, "example.org:8501\r\nX: y",
                 "0.0.0.0:8501", "[::]:8501", ":8501", "]", "example.org/../x", "example.org#frag", "example.org?q=1",
                 "\u202eexample.org", "<script>x</script>"]


def address(headers: dict, public_url: str | None = None):
    return students_address(Request(headers, "http://localhost:8501/lesson", "0.0.0.0", 8501, public_url), NETWORK)


@pytest.mark.parametrize("header", ["Host", "X-Forwarded-Host"])
@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_host_no_link_can_carry_gives_the_network_address(header, host):
    """Before: '…:²' raised ValueError (the teacher's page crashed); the others became the link verbatim."""
    headers = {"Host": "localhost:8501", header: host} if header != "Host" else {header: host}
    assert address(headers).base == f"http://{NETWORK}:8501"


@pytest.mark.parametrize("host", ["example.org:8501", "[2001:db8::1]:8501", "10.0.0.5:8501", "xn--fsq.xn--fiqs8s",
                                  "school-pc.local", "[2001:db8::1]"])
def test_a_real_host_is_still_the_link(host):
    assert address({"Host": host}).base == f"http://{host}"


@pytest.mark.parametrize("proto", ["javascript", "JAVASCRIPT", "data", "ftp", "http\r\nx"])
def test_a_forwarded_scheme_other_than_http_is_not_used(proto):
    assert address({"Host": "example.org", "X-Forwarded-Proto": proto}).base == "http://example.org"
    assert address({"Host": "example.org", "X-Forwarded-Proto": "HTTPS"}).base == "https://example.org"


@pytest.mark.parametrize(("setting", "base"), [("school.example.org", "http://school.example.org"),
                                               ("school.example.org:8080/x/", "http://school.example.org:8080/x"),
                                               ("HTTPS://school.example.org/", "https://school.example.org")])
def test_a_public_url_without_a_scheme_is_http(setting, base):
    assert address({}, setting) == type(address({}))(base, None)


@pytest.mark.parametrize("setting", ["javascript:alert(1)", "http://a b/", "ftp://example.org", "http://",
                                     "http://user@example.org", "http://example.org:99999", "http://x.org/?q=<b>",
                                     "http://x.org/" + "a" * 5_000])
def test_a_public_url_that_is_no_address_is_not_used_and_said(setting):
    where = address({}, setting)
    assert where.base == f"http://{NETWORK}:8501" and where.warning == PUBLIC_URL_UNUSABLE


@pytest.fixture
def room(tmp_path):
    from mha_core.serving.classroom import Classroom

    return Classroom(tmp_path / "classes.sqlite")


PAST_THE_LAST = "one past the last step"  # len(STEPS) + 1, read from the lesson when the test runs
BAD_STEPS = [0, -1, PAST_THE_LAST, 10**30, 2**63, 1.5, "3", None, True]


def bad(step):
    from mha_core.teaching.lesson import STEPS

    return len(STEPS) + 1 if step == PAST_THE_LAST else step


@pytest.mark.parametrize("step", BAD_STEPS, ids=repr)
def test_a_class_starts_only_on_a_lesson_step(room, step):
    """Before: 0, -1, 1.5 and '3' were stored; 10**30 and 2**63 raised OverflowError; None raised 'no free class
    code' (its NOT NULL failure was read as a code in use, 20 times)."""
    from mha_core import InputError

    with pytest.raises(InputError) as refused:
        room.start("The animal crossed.", "en", "m", bad(step), visitor="v")
    assert refused.value.code == "no_such_step"


@pytest.mark.parametrize("step", [step for step in BAD_STEPS if step is not None], ids=repr)  # None: no move
def test_a_class_moves_only_to_a_lesson_step(room, step):
    from mha_core import InputError

    code, key = room.start("The animal crossed.", "en", "m", 2, visitor="v")
    with pytest.raises(InputError) as refused:
        room.move(code, key, room.state(code), step=bad(step))
    assert refused.value.code == "no_such_step" and room.state(code).step == 2


@pytest.mark.parametrize("where", ["start", "move", "key", "seen", "language", "visitor"])
def test_a_lone_surrogate_is_no_raw_error(room, where):
    """Before: UnicodeEncodeError from SQLite's or SHA-256's UTF-8 (a class sentence, a key, a student's id)."""
    lone = "it\ud800was"
    code, key = room.start(lone if where == "start" else "x", lone if where == "language" else "en", "m", 1,
                           visitor=lone if where == "visitor" else "v")
    if where == "move":
        room.move(code, key, room.state(code), text=lone)
    if where == "seen":
        room.seen(code, lone)
    assert room.is_teacher(code, lone if where == "key" else key) is (where != "key")
    assert room.state(code).text == ("it\ufffdwas" if where in ("start", "move") else "x")
