"""The address a class's phones can open (issue 77): the students' link is built from where the server can be reached
from another machine, never from the teacher's own browser address (http://localhost:8501 opens nothing on a phone).

In order: the setting MHA_PUBLIC_URL (a school's proxy, a name the teacher gives); the host the request came to
(Host, or X-Forwarded-Host / -Proto behind a proxy) when it is not a loopback name or address; else this machine's
own network address (as Streamlit's "Network URL" is found) with the port the browser used. A server that listens
only on loopback cannot be reached at all: the page says so, and how to change it. No Streamlit here: the page reads
its request and its options and hands them in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from mha_core.messages import N_

PUBLIC_URL_ENV = "MHA_PUBLIC_URL"  # the address students open, as a school's proxy or DNS name gives it
PROXY_ADDRESS_ENV = "MHA_PROXY_BIND"  # deploy/serve.sh: where its HAProxy listens (its processes listen on loopback)
LESSON_PATH = "lesson"  # the lesson page's path under the app's address
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
ALL_INTERFACES = {"", "0.0.0.0", "::", "[::]"}  # noqa: S104 -- the listen addresses that reach the network
LOOPBACK_ONLY = N_("This server listens only on this computer ({address}), so no phone can open the link: restart it "
                   "listening on the network (`make serve`, whose `BIND` is `0.0.0.0`, or `streamlit run app.py "
                   "--server.address 0.0.0.0`).")
PUBLIC_URL_UNUSABLE = N_("The setting MHA_PUBLIC_URL is not an http:// or https:// address of a host, so the link "
                         "below is this computer's network address: correct the setting and restart the server.")
MAX_PUBLIC_URL = 1000  # characters: the link and its code must fit one QR code a phone reads off a projector
SCHEMES = ("http", "https")  # what a phone's camera opens; a forwarded javascript: or data: scheme is not used
LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"  # one part of a DNS name (IDNA: xn--)
HOST_NAME = re.compile(rf"(?=.{{1,253}}$){LABEL}(?:\.{LABEL})*\.?", re.ASCII)  # a Host header's name, nothing more
PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only (str.isdigit() accepts ², int() accepts ٣)
UNSPECIFIED = {"0.0.0.0", "::"}  # noqa: S104 -- a listen address, never one a phone can open
NO_NETWORK = N_("This computer has no network address phones could reach: connect it to the class's network, or "
                "give the address students open in the setting MHA_PUBLIC_URL.")


@dataclass(frozen=True)
class Request:
    """What the page knows of its request and its server: the request's headers, the page's address in the browser
    (st.context.url: scheme, host, port, the app's path and the page's), the server's listen address and port, the
    setting."""

    headers: Mapping[str, str]
    app_url: str | None
    listen_address: str | None
    port: int
    public_url: str | None = None
    proxy_address: str | None = None  # where the proxy in front listens (make serve's BIND), if the server knows


@dataclass(frozen=True)
class StudentsAddress:
    base: str  # scheme://host[:port][/app path], no trailing slash: the lesson page and its query follow
    warning: str | None  # a marked sentence (with {address}) when phones cannot open it, else None

    def link(self, code: str, language: str) -> str:
        """The lesson page with the class's code and language (never the teacher's key)."""
        return f"{self.base}/{LESSON_PATH}?{urlencode({'class': code, 'lang': language})}"


def host_and_port(host: str) -> tuple[str, int | None]:
    """'example.org:8501' -> ('example.org', 8501); '[::1]:80' -> ('::1', 80); a port that is no number: None."""
    host = host.strip()
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest.removeprefix(":")
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    else:  # a bare name, or a bare IPv6 address
        name, port = host, ""
    return name.lower(), int(port) if PORT.fullmatch(port) and 0 < int(port) < 65536 else None


def valid_host(host: str) -> bool:
    """Whether a Host or X-Forwarded-Host value is a host a link can name: a DNS name, an IPv4 address or an IPv6
    one in brackets, and at most a port from 1 to 65535; no user, path, query, space, markup or scope."""
    host = host.strip()
    if host.startswith("["):
        name, _, port = host[1:].partition("]")
        if port and not port.startswith(":"):
            return False
        if not is_ip(name, 6):
            return False
    else:
        name, colon, port = host.partition(":")
        if ":" in port or not (is_ip(name, 4) or HOST_NAME.fullmatch(name.lower())):
            return False
        port = colon + port
    port = port.removeprefix(":") if port else None
    return port is None or PORT.fullmatch(port) is not None and 0 < int(port) < 65536


def is_ip(name: str, version: int) -> bool:
    try:
        return "%" not in name and ipaddress.ip_address(name).version == version
    except ValueError:
        return False


def is_loopback(name: str) -> bool:
    """Whether a host name or address means this machine only (localhost, 127.x, ::1, *.localhost)."""
    name = name.strip("[]").lower().rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def listens_only_on_loopback(listen_address: str | None) -> bool:
    return (listen_address or "").strip() not in ALL_INTERFACES and is_loopback(listen_address or "")


def first(value: str | None) -> str:
    """A forwarded header's first (the client's side) value."""
    return (value or "").split(",")[0].strip()


def header(headers: Mapping[str, str], name: str) -> str:
    return first(next((value for key, value in headers.items() if key.lower() == name.lower()), None))


def students_address(request: Request, network_ip: str | None) -> StudentsAddress:
    """Where the class's phones open the lesson (see the module's docstring); `network_ip` is this machine's own
    address on its network (streamlit.net_util.get_internal_ip), None or a loopback one when it has none."""
    public = public_base(request.public_url)
    if public:
        return StudentsAddress(public, None)
    app = urlsplit(request.app_url or "")
    scheme = next((value for value in (header(request.headers, "X-Forwarded-Proto").lower(), app.scheme.lower())
                   if value in SCHEMES), "http")
    host = header(request.headers, "X-Forwarded-Host") or header(request.headers, "Host") or app.netloc
    host = host.strip() if valid_host(host) else ""  # a value no link can carry: as if none came
    path = app.path.rstrip("/").removesuffix(f"/{LESSON_PATH}")  # the app's own path: the lesson page's address
    name, port = host_and_port(host)
    if name and not is_loopback(name) and name not in UNSPECIFIED:
        return StudentsAddress(f"{scheme}://{host}{path}", None)
    proxied = bool(header(request.headers, "X-Forwarded-For") or header(request.headers, "Forwarded"))
    port = port or (request.port if not host else None)
    shown_port = "" if port is None or port == {"http": 80, "https": 443}.get(scheme) else f":{port}"
    unusable = PUBLIC_URL_UNUSABLE if public is None else None
    if not network_ip or is_loopback(network_ip):
        return StudentsAddress(f"{scheme}://{host or 'localhost'}{path}", unusable or NO_NETWORK)
    network = f"[{network_ip}]" if ":" in network_ip else network_ip
    front = request.proxy_address if request.proxy_address is not None else None if proxied else request.listen_address
    warning = LOOPBACK_ONLY if front is not None and listens_only_on_loopback(front) else None
    return StudentsAddress(f"{scheme}://{network}{shown_port}{path}", unusable or warning)


def public_base(public_url: str | None) -> str | None:
    """The setting as the link's base ("" when not given; None when it is no http(s) address of a host): a name
    without a scheme is taken as http://."""
    value = (public_url or "").strip()
    if not value:
        return ""
    if len(value) > MAX_PUBLIC_URL:  # the QR code carries at most about 2,300 bytes (segno raised DataOverflowError)
        return None
    parts = urlsplit(value if "://" in value else f"http://{value}")
    usable = (parts.scheme.lower() in SCHEMES and valid_host(parts.netloc) and not parts.query and not parts.fragment
              and not any(char.isspace() or char in "<>\"`" for char in parts.path))
    return f"{parts.scheme.lower()}://{parts.netloc}{parts.path.rstrip('/')}" if usable else None
