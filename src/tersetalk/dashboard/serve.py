"""Binding the dashboard's socket and running uvicorn on it (blocking, or in a thread).

The socket is bound here, before uvicorn starts, for two reasons: a taken port
becomes one clear sentence (which port, on which address, what to do) instead of
uvicorn's log line and exit, and ``--port 0`` can print the port the system chose.
"""

from __future__ import annotations

import errno
import socket
import threading
import time

__all__ = ["PortTakenError", "ServerThread", "bind_socket", "url_for"]


class PortTakenError(OSError):
    """The port is in use (or not allowed) on that address."""


def url_for(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # reuse a port left in TIME_WAIT by a dashboard just stopped; a live listener still wins
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            why = "is taken" if exc.errno == errno.EADDRINUSE else "is not allowed"
            raise PortTakenError(
                exc.errno,
                f"port {port} on {host} {why} (another dashboard or server?); choose another "
                "with --port N, or --port 0 for any free port",
            ) from None
        raise
    sock.set_inheritable(True)
    return sock


class ServerThread:
    """uvicorn serving ``app`` on a thread; ``with ServerThread(app) as url: ...``.

    Used by the browser tests and by anything that wants a dashboard beside other
    work in one process.
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.sock = bind_socket(host, port)
        self.host, self.port = host, self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", ws="websockets-sansio")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self.sock]},
            name="dashboard-server",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return url_for(self.host, self.port)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the dashboard server did not start")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
