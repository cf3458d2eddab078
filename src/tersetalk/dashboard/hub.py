"""Fan-out of dashboard messages to the connected WebSocket clients.

Each client owns a bounded queue; :meth:`Hub.broadcast` only puts into queues and
never waits, so a slow or vanished browser cannot hold up the server, the tailer
or a mediator run. A client whose queue fills up is told to ``resync`` (fetch a
fresh snapshot) instead of being fed an unbounded backlog.

:meth:`Hub.threadsafe` is how code on other threads (the mediator's worker) hands
a message to the event loop; once the loop is gone it drops messages quietly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["Hub"]

log = logging.getLogger(__name__)


class Hub:
    def __init__(self, maxsize: int = 2000) -> None:
        self.maxsize = maxsize
        self._clients: set[asyncio.Queue] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the clients' queues live on (set when the server starts)."""
        self._loop = loop

    @property
    def n_clients(self) -> int:
        return len(self._clients)

    def subscribe(self) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue(maxsize=self.maxsize)
        self._clients.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue) -> None:
        self._clients.discard(q)

    def broadcast(self, msg: dict[str, Any]) -> None:
        """Queue ``msg`` for every client (call on the loop's thread)."""
        for q in list(self._clients):
            try:
                q.put_nowait(msg)
            except asyncio.QueueFull:
                while not q.empty():  # too far behind: drop the backlog, ask for a snapshot
                    q.get_nowait()
                q.put_nowait({"type": "resync"})

    def threadsafe(self, msg: dict[str, Any]) -> None:
        """:meth:`broadcast` from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self.broadcast, msg)
        except RuntimeError:  # the loop closed between the check and the call
            log.debug("dashboard loop closed; message dropped")
