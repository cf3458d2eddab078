"""Who may talk to the dashboard, and what the browser is told about every response.

Why a Host allowlist although the server listens on loopback only: DNS rebinding.
A page on ``evil.example`` can make its own name resolve to 127.0.0.1 once it is
loaded; the browser then treats ``http://evil.example:8765`` as that page's own
origin, so the Origin check of :mod:`.app` (Origin equals Host) passes, and the
page could read results and queue messages to the user's model. What such a page
cannot choose is the name in the ``Host`` header: it is the name in its own URL.
So every request must name this server by a loopback name (``localhost``,
``127.0.0.1``, ``[::1]``), by the address the user bound on purpose (``--host``,
unless a wildcard) or by a name the user allowed (``--allow-host``), with the
serving port. Another name or port gets a 421 and a sentence saying why; a Host
that is no host at all (missing, empty, a port that is not 1 to 5 ASCII digits up to
65535) gets a 400, as HTTP asks.

Why the headers: the results folder holds files the workflow (and so, indirectly,
a model) wrote. ``nosniff`` stops a browser from guessing a text file is HTML or
script; the page's Content-Security-Policy allows only the app's own static files
(no inline script or style, nothing from another host), so text that slipped into
the DOM could not run; files under ``/files/`` get a sandboxing policy of their
own, and HTML/SVG ones are sent as downloads (see :func:`download_only`).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable
from typing import Any

__all__ = [
    "LOOPBACK_NAMES",
    "WILDCARDS",
    "HostGuard",
    "allowed_names",
    "download_only",
    "host_label",
    "page_csp",
]

log = logging.getLogger(__name__)

#: the names a browser on this machine uses for a loopback server
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
#: bind addresses that mean "every interface": they name no host to allow
WILDCARDS = {"", "0.0.0.0", "::", "[::]", "*"}
#: served under /files/ as a download, never rendered as a page of this origin
DOWNLOAD_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml", ".svg", ".svgz", ".xml", ".xsl")
#: what a file from results/ or figures/ may do if a browser renders it: show itself
FILES_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"


def host_label(host: str) -> str:
    """The form a Host header uses for ``host``: lowercase, an IPv6 literal in brackets."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return host
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass
    return host


def allowed_names(bound: str | None = None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The loopback names, plus the bound address unless it is a wildcard, plus ``extra``."""
    names = set(LOOPBACK_NAMES)
    if bound is not None and bound.strip() not in WILDCARDS:
        names.add(host_label(bound))
    names.update(host_label(h) for h in extra if h.strip())
    return frozenset(names)


def split_host(value: str) -> tuple[str, int | None] | None:
    """``("name", port)`` from a Host header (port None when absent); None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text = value.partition(":")
        if not sep:
            port_text = None
    if not name:
        return None
    if port_text is None:
        return name, None
    # ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses
    if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5:
        return None
    port = int(port_text)
    return (name, port) if port <= 65535 else None


def page_csp(host: str) -> str:
    """The HTML page's policy: the app's own scripts, styles and images, its own WebSocket.

    ``host`` is the request's (already allowed) Host header; the WebSocket is named
    explicitly because older browsers do not let ``'self'`` cover ``ws:``.
    """
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self' ws://{host} wss://{host}; font-src 'self'; manifest-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
    )


def download_only(name: str) -> bool:
    """Is this a file a browser would run as a page (HTML, SVG, XML)? Then it is sent as
    an attachment: opened from the dashboard it must not run with the dashboard's origin."""
    return name.lower().endswith(DOWNLOAD_SUFFIXES)


class HostGuard:
    """ASGI middleware: refuses requests whose Host is not this server, adds the headers.

    ``port`` None takes the port of the socket the request came in on (the ASGI
    ``server`` entry), which is right for ``--port 0`` and for test servers alike.
    """

    def __init__(self, app: Any, names: Iterable[str] = LOOPBACK_NAMES, port: int | None = None):
        self.app = app
        self.names = frozenset(host_label(n) for n in names)
        self.port = port
        self._warned: set[str] = set()

    def _port(self, scope: dict) -> int | None:
        if self.port is not None:
            return self.port
        server = scope.get("server")
        return int(server[1]) if server and server[1] is not None else None

    def refusal(self, scope: dict, host: str | None) -> tuple[int, str] | None:
        """Why this request is refused, with the HTTP status (None: it is not): 400 for a
        Host that is missing or malformed, 421 for another server's name or port."""
        port = self._port(scope)
        parsed = split_host(host) if host else None
        expected = ", ".join(sorted(f"{n}:{port}" if port else n for n in self.names))
        if not host:
            return 400, f"refused: the request has no Host header (this dashboard is {expected})"
        if parsed is None:
            return 400, (
                f"refused: Host {host!r} is not a valid host[:port] (the port must be ASCII "
                f"digits, at most 65535); this dashboard is {expected}"
            )
        name, got_port = parsed
        if got_port is None:
            got_port = 443 if scope.get("scheme") in ("https", "wss") else 80
        if name in self.names and (port is None or got_port == port):
            return None
        return 421, (
            f"refused: Host {host!r} is not this dashboard's address ({expected}). A page on "
            "another site may be trying to reach it through DNS rebinding. If you use "
            "another name on purpose, restart with `tersetalk dashboard --allow-host NAME`."
        )

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = None
        for key, value in scope.get("headers") or ():
            if key == b"host":
                host = value.decode("latin-1")
                break
        refused = self.refusal(scope, host)
        if refused is not None:
            status, why = refused
            if why not in self._warned and len(self._warned) < 100:
                self._warned.add(why)
                log.warning("dashboard: %s", why)
            if scope["type"] == "websocket":
                # before accept: the server answers the handshake with 403
                await send({"type": "websocket.close", "code": 1008, "reason": "Host refused"})
                return
            body = json.dumps({"error": why}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"x-content-type-options", b"nosniff"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        files = scope.get("path", "").startswith("/files/")
        assert host is not None  # a request without one was refused above
        csp = page_csp(host.strip().lower()).encode("latin-1")

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or ())
                present = {k.lower() for k, _ in headers}
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                extra = [(b"x-content-type-options", b"nosniff")]
                if files:
                    extra.append((b"content-security-policy", FILES_CSP.encode()))
                elif ctype.lower().startswith(b"text/html"):
                    extra.append((b"content-security-policy", csp))
                    extra.append((b"x-frame-options", b"DENY"))
                    extra.append((b"referrer-policy", b"same-origin"))
                headers += [(k, v) for k, v in extra if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
