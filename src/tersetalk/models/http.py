"""HTTP as the model backends speak it: bounded requests, and what an error says.

Bounded requests: every request a backend makes ends by its deadline and reads at
most its byte cap, however the server behaves (a trickle of bytes, interim ``102``
responses for ever, a compressed body that would inflate to gigabytes). The chat
path enforces :class:`Guard` limits inside the openai client's HTTP client;
:func:`side_request` does the same for every other request (model listings, tokenize
endpoints, llama.cpp's ``/props``, Ollama's ``/api/tags`` and ``/api/show``), each on
a connection of its own.

What an error says: its status and how long the server asked us to wait. Shared by
the OpenAI-compatible backend (transport retries) and the MSP rate limiter, so both
read ``Retry-After`` the same way. Library errors are often wrapped
(``ModelCallError(...) from openai.RateLimitError``), so every helper looks through
the exception's ``__cause__``/``__context__`` chain.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import heapq
import itertools
import json as jsonlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

__all__ = [
    "SIDE_REPLY_CAP",
    "DeadlineExceeded",
    "Guard",
    "GuardedStream",
    "ReplyTooLarge",
    "SideReply",
    "Watchdog",
    "error_chain",
    "refusal",
    "retry_after_s",
    "side_request",
    "status_of",
]

#: the most bytes a reply to a side request may hold unless the caller says otherwise:
#: far above any honest model listing, ``/props`` or ``/api/show`` (tens of KB)
SIDE_REPLY_CAP = 8 * 2**20


class ReplyTooLarge(Exception):
    """The reply went over its byte cap, or could not be bounded; reading stopped."""


class DeadlineExceeded(Exception):
    """The request ran past its deadline."""


@dataclass
class Guard:
    """The limits of one request: its deadline (``time.monotonic()``) and byte cap.

    ``cap_note`` says in an error message what the cap is for. ``body``, when given,
    keeps the reply's bytes as they arrive (at most ``cap`` of them), for a caller that
    checks what the server sent before a library reinterprets it.
    """

    deadline: float
    cap: int
    timeout_s: float
    cap_note: str = "the cap for this request's max_tokens"
    expired: bool = False
    body: bytearray | None = None


class Watchdog:
    """Ends one request at its deadline, however the server stalls.

    A read timeout alone does not bound a request: a server can keep each read short
    (a chunk a second, or an interim ``102 Processing`` every moment before the headers)
    and never finish. So a deadline set before the request is sent (kept by one thread
    for the whole process, :class:`_Timers`) shuts the
    connection's socket down at the deadline, which ends a blocked read at once; the
    error that read raises is then reported as the deadline it was. The socket is taken
    from httpcore's trace of the connection being opened: requests under a watchdog ask
    for ``Connection: close``, so each one has a connection of its own (a pooled one
    has no such trace, and could be in another request's hands when the timer fires).
    """

    _OPENED = ("connection.connect_tcp.complete", "connection.start_tls.complete")

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self._stream: Any = None
        self.cancelled = False
        _TIMERS.add(guard.deadline, self)

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if name in self._OPENED and info.get("return_value") is not None:
            self._stream = info["return_value"]

    def _expire(self) -> None:
        self.guard.expired = True
        sock = self._stream.get_extra_info("socket") if self._stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            _TIMERS.cancelled()


class _Timers:
    """The deadlines of every watchdog in the process, kept by one thread.

    Why one thread: a timer thread of its own per request (``threading.Timer``) costs a
    thread start and its switches on every model call and token count, a real share of
    the client's CPU when a fast server answers in milliseconds. Cancelled watchdogs are
    dropped lazily (when they come due, or when they pile up).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Watchdog]] = []
        self._seq = itertools.count()
        self._n_cancelled = 0
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, watchdog: Watchdog) -> None:
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), watchdog))
            if self._thread is None or not self._thread.is_alive():  # first use, or a fork
                self._thread = threading.Thread(
                    target=self._loop, name="tersetalk-watchdog", daemon=True
                )
                self._thread.start()
            if self._heap[0][2] is watchdog:  # sooner than what the thread waits for
                self._cond.notify()

    def cancelled(self) -> None:
        with self._cond:
            self._n_cancelled += 1
            if self._n_cancelled > 256 and self._n_cancelled * 2 > len(self._heap):
                self._heap = [e for e in self._heap if not e[2].cancelled]
                heapq.heapify(self._heap)
                self._n_cancelled = 0

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                        self._n_cancelled = max(0, self._n_cancelled - 1)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        due = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(wait)
            if not due.cancelled:
                due._expire()


_TIMERS = _Timers()


class GuardedStream:
    """A response body that stops at the request's byte cap and deadline (its watchdog's)."""

    def __init__(self, inner: Iterable[bytes], watchdog: Watchdog) -> None:
        self._inner = inner
        self._watchdog = watchdog
        self._guard = watchdog.guard
        self._n = 0

    def _late(self) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"the reply was still arriving after {self._guard.timeout_s:g}s "
            f"({self._n} bytes so far)"
        )

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                if self._guard.expired or time.monotonic() > self._guard.deadline:
                    raise self._late()
                self._n += len(chunk)
                if self._n > self._guard.cap:
                    raise ReplyTooLarge(
                        f"the reply went over {self._guard.cap} bytes ({self._guard.cap_note}); "
                        "reading stopped there"
                    )
                if self._guard.body is not None:
                    self._guard.body += chunk
                yield chunk
            if self._guard.expired:  # a shut-down socket can look like the body's end
                raise self._late()
        except (ReplyTooLarge, DeadlineExceeded):
            raise
        except Exception as exc:
            if self._guard.expired:  # the watchdog ended a blocked read
                raise self._late() from exc
            raise
        finally:
            self._watchdog.cancel()

    def close(self) -> None:
        self._watchdog.cancel()
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


def refusal(headers: Mapping[str, str], guard: Guard) -> ReplyTooLarge | None:
    """Why a reply with these headers is refused before a byte of its body is read:
    it declares more bytes than the cap, or it is compressed (the cap counts bytes as
    they arrive, and a compressed body's size after decoding cannot be bounded so)."""
    try:
        declared = int(headers.get("content-length") or 0)
    except ValueError:
        declared = 0
    encoding = (headers.get("content-encoding") or "identity").strip().lower()
    if encoding not in ("", "identity"):
        return ReplyTooLarge(
            f"the reply is {encoding}-encoded although the request asked for identity; "
            "its size after decoding cannot be bounded as it arrives"
        )
    if declared > guard.cap:
        return ReplyTooLarge(
            f"the reply declares {declared} bytes, over the {guard.cap} allowed ({guard.cap_note})"
        )
    return None


@dataclass(frozen=True)
class SideReply:
    """A side request's reply, read whole (within its cap)."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` when it is not."""
        return jsonlib.loads(self.body)


@functools.cache
def _side_client() -> Any:
    """One HTTP client for every side request: built once (a client and its TLS context
    cost some 20 ms of CPU), while each request still gets a connection of its own."""
    import httpx2

    return httpx2.Client(follow_redirects=False)


def side_request(
    method: str,
    url: str,
    *,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float,
    max_bytes: int = SIDE_REPLY_CAP,
    client: Any = None,
) -> SideReply:
    """One request other than a chat call, bounded like one: it ends within
    ``timeout_s`` of being sent (a total wall deadline, kept by a :class:`Watchdog`,
    not a per-read timeout), its reply holds at most ``max_bytes`` bytes, uncompressed
    (``Accept-Encoding: identity``; a compressed reply is refused), and it has a
    connection of its own (``Connection: close``), never one a chat call reuses.

    ``client`` is the HTTP client (``httpx2.Client``) to send it with: a backend passes
    its own, the one its chat calls use (one client, one TLS context, per backend);
    without one, a client shared by the process.

    Returns the reply whatever its status. Raises :class:`DeadlineExceeded`,
    :class:`ReplyTooLarge`, or the HTTP library's transport errors (``httpx2``).
    """
    client = client if client is not None else _side_client()
    guard = Guard(time.monotonic() + timeout_s, max_bytes, timeout_s,
                  cap_note="the cap for this request")  # fmt: skip
    sent = {"Accept-Encoding": "identity", **(headers or {}), "Connection": "close"}
    request = client.build_request(method, url, json=json, headers=sent, timeout=timeout_s)
    watchdog = Watchdog(guard)
    request.extensions["trace"] = watchdog.trace
    try:
        response = client.send(request, stream=True, follow_redirects=False)
    except BaseException as exc:
        watchdog.cancel()
        if guard.expired:
            raise DeadlineExceeded(f"no reply headers within {timeout_s:g}s") from exc
        raise
    try:
        refused = refusal(response.headers, guard)
        if refused is not None:
            raise refused
        body = b"".join(GuardedStream(response.iter_raw(), watchdog))
    finally:
        watchdog.cancel()
        response.close()
    return SideReply(response.status_code, dict(response.headers), body)


def error_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes/contexts, outermost first (cycle-safe, bounded)."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < 16 and all(cur is not e for e in out):
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def status_of(exc: BaseException) -> int | None:
    """The HTTP status one exception carries (openai/httpx/requests style), if any."""
    for holder in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status"):
            value = getattr(holder, attr, None) if holder is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def _headers_of(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    return headers if headers is not None else getattr(exc, "headers", None)


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, dict):  # plain dicts are case-sensitive
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:  # noqa: BLE001 - an odd headers object means: no header
        return None
    return None if value is None else str(value)


def retry_after_s(exc: BaseException, now: Callable[[], float] = time.time) -> float | None:
    """Seconds the server asked us to wait before trying again, or None.

    An exception with a numeric ``retry_after_s`` attribute says so itself; otherwise
    ``retry-after-ms`` (OpenAI-style) or ``Retry-After`` (seconds, or an HTTP date) is
    read from the response headers of any exception in the cause chain.
    """
    for e in error_chain(exc):
        own = getattr(e, "retry_after_s", None)
        if isinstance(own, int | float) and not isinstance(own, bool):
            return max(0.0, float(own))
        headers = _headers_of(e)
        if headers is None:
            continue
        ms = _header(headers, "retry-after-ms")
        if ms is not None:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        raw = _header(headers, "retry-after")
        if raw is None:
            continue
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            continue
        if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are always GMT
            when = when.replace(tzinfo=UTC)
        return max(0.0, when.timestamp() - now())
    return None
