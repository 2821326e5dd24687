"""Issue 77.1: the students' link is one a phone can open. mha_core.serving.reach chooses its address from the
setting, the request's host (or a proxy's forwarded host), and else this machine's network address with the port the
browser used; a server listening only on loopback is said, with how to change it."""

from __future__ import annotations

import pytest

from mha_core.serving.reach import (
    LOOPBACK_ONLY,
    NO_NETWORK,
    Request,
    host_and_port,
    is_loopback,
    students_address,
)

NET = "192.0.2.7"  # this machine's network address in the table
APP = "http://localhost:8501"  # the teacher's browser, on the laptop itself

CASES = [  # (what the page knows, this machine's network address) -> (the link's base, the warning)
    pytest.param(Request({"Host": "localhost:8501"}, APP, None, 8501), NET, f"http://{NET}:8501", None,
                 id="localhost, listening everywhere: the network address, the browser's port"),
    pytest.param(Request({"Host": "127.0.0.1:9000"}, "http://127.0.0.1:9000", "", 9000), NET, f"http://{NET}:9000",
                 None, id="127.0.0.1 on another port"),
    pytest.param(Request({"Host": "[::1]:8501"}, "http://[::1]:8501", "0.0.0.0", 8501), NET, f"http://{NET}:8501",
                 None, id="IPv6 loopback"),
    pytest.param(Request({"Host": "192.0.2.9:8501"}, "http://192.0.2.9:8501", None, 8501), NET,
                 "http://192.0.2.9:8501", None, id="reached at a network address: that one"),
    pytest.param(Request({"Host": "lab-pc.school.example:8501"}, None, None, 8501), NET,
                 "http://lab-pc.school.example:8501", None, id="reached by a name: that name"),
    pytest.param(Request({"Host": "localhost:8501"}, APP, "127.0.0.1", 8501), NET, f"http://{NET}:8501",
                 LOOPBACK_ONLY, id="listening on loopback only: said"),
    pytest.param(Request({"Host": "localhost:8501"}, APP, "localhost", 8501), NET, f"http://{NET}:8501",
                 LOOPBACK_ONLY, id="listening on localhost only: said"),
    pytest.param(Request({"Host": "localhost:8501"}, APP, None, 8501), "127.0.0.1", "http://localhost:8501",
                 NO_NETWORK, id="no network address (get_internal_ip's fallback): said"),
    pytest.param(Request({"Host": "localhost:8501"}, APP, None, 8501), None, "http://localhost:8501", NO_NETWORK,
                 id="no network address at all"),
    pytest.param(Request({"Host": "localhost:8501"}, APP, "127.0.0.1", 8501, " https://attention.school.example/x/ "),
                 NET, "https://attention.school.example/x", None, id="MHA_PUBLIC_URL overrides everything"),
    pytest.param(Request({"Host": "127.0.0.1:8601", "X-Forwarded-Host": "explorer.school.example",
                          "X-Forwarded-Proto": "https", "X-Forwarded-For": "192.0.2.50"}, None, "127.0.0.1", 8601),
                 NET, "https://explorer.school.example", None, id="behind a proxy: its forwarded host and scheme"),
    pytest.param(Request({"Host": "localhost:8501", "X-Forwarded-For": "127.0.0.1"}, APP, "127.0.0.1", 8601), NET,
                 f"http://{NET}:8501", None,
                 id="make serve: a worker on loopback behind HAProxy, its port the proxy's, no warning"),
    pytest.param(Request({"Host": "localhost:8501", "X-Forwarded-For": "127.0.0.1"}, APP, "127.0.0.1", 8601,
                         proxy_address="127.0.0.1"), NET, f"http://{NET}:8501", LOOPBACK_ONLY,
                 id="make serve BIND=127.0.0.1: the proxy listens on loopback only, said"),
    pytest.param(Request({"Host": "localhost:8501", "X-Forwarded-For": "127.0.0.1"}, APP, "127.0.0.1", 8601,
                         proxy_address="0.0.0.0"), NET, f"http://{NET}:8501", None,
                 id="make serve: the proxy on every interface"),
    pytest.param(Request({"host": "LOCALHOST"}, "http://localhost/app/", None, 80), NET, f"http://{NET}/app",
                 None, id="headers in any case, the default port left out, the app's path kept"),
    pytest.param(Request({}, None, None, 8501), NET, f"http://{NET}:8501", None, id="nothing known: the server's port"),
    pytest.param(Request({"Host": "127.0.0.1:8501"}, "http://127.0.0.1:8501/school/lesson/", None, 8501), NET,
                 f"http://{NET}:8501/school", None, id="the lesson page's address: the app's path, the page's dropped"),
]


@pytest.mark.parametrize(("request_", "network_ip", "base", "warning"), CASES)
def test_the_students_address_is_one_another_machine_can_open(request_, network_ip, base, warning):
    where = students_address(request_, network_ip)
    assert (where.base, where.warning) == (base, warning)
    assert where.link("ABC234", "zh") == f"{base}/lesson?class=ABC234&lang=zh"


@pytest.mark.parametrize(("host", "loopback"), [("localhost", True), ("127.0.0.1", True), ("127.3.2.1", True),
                                                ("::1", True), ("[::1]", True), ("app.localhost", True),
                                                ("localhost.", True), ("192.0.2.7", False), ("fd00::2", False),
                                                ("example.org", False), ("localhostess.example", False)])
def test_loopback_names_and_addresses(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("host", "parts"), [("example.org:8501", ("example.org", 8501)), ("[::1]:80", ("::1", 80)),
                                             ("fd00::2", ("fd00::2", None)), ("Example.org", ("example.org", None)),
                                             ("example.org:x", ("example.org", None))])
def test_a_host_header_splits_into_name_and_port(host, parts):
    assert host_and_port(host) == parts
