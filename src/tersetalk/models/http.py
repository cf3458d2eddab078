"""What an HTTP error says: its status and how long the server asked us to wait.

Shared by the OpenAI-compatible backend (transport retries) and the MSP rate
limiter, so both read ``Retry-After`` the same way. Library errors are often
wrapped (``ModelCallError(...) from openai.RateLimitError``), so every helper looks
through the exception's ``__cause__``/``__context__`` chain.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from datetime import UTC
from typing import Any

__all__ = ["error_chain", "retry_after_s", "status_of"]


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
