"""Issue 84: deploy/hosts.py writes the front HAProxy's config for a school's hosts: deploy/haproxy.cfg (websockets,
sticky sessions, health checks) and one server line per app process of every host, each with its own cookie; an
argument it cannot read is one line and exit 2 (make proxy stops before HAProxy starts)."""

from __future__ import annotations

import pytest

from deploy import hosts


def test_every_process_of_every_host_is_a_server_with_its_own_cookie():
    written = hosts.config(["10.0.0.11:8601-8603", "host-b.school.example:8601", "[fd00::5]:9000-9001"])
    assert written.startswith(hosts.BASE.read_text(encoding="utf-8").rstrip("\n"))
    assert "timeout tunnel 8h" in written and "cookie MHA_WORKER insert" in written  # websockets; sticky
    servers = [line.split() for line in written.splitlines() if line.strip().startswith("server ")]
    assert [(s[1], s[2], s[5]) for s in servers] == [
        ("app1", "10.0.0.11:8601", "app1"), ("app2", "10.0.0.11:8602", "app2"), ("app3", "10.0.0.11:8603", "app3"),
        ("app4", "host-b.school.example:8601", "app4"), ("app5", "[fd00::5]:9000", "app5"),
        ("app6", "[fd00::5]:9001", "app6")]
    assert all(s[3] == "check" and s[4] == "cookie" for s in servers)


@pytest.mark.parametrize("given", ["10.0.0.11", "10.0.0.11:0", "10.0.0.11:8604-8601", "10.0.0.11:70000",
                                   "a host:8601", "[zz::1]:8601", "10.0.0.11:8601-9999;rm -rf /"])
def test_an_argument_it_cannot_read_is_one_line_and_exit_2(given, capsys):
    assert hosts.main([given]) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.startswith("error: ") and said.err.count("\n") == 1, said.err


def test_a_typo_s_thousand_processes_are_refused():
    with pytest.raises(ValueError, match="at most 1000"):
        hosts.config(["10.0.0.11:8601-9700"])  # 8601-9600 meant
