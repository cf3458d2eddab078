"""A rate limiter and retrying client for remote OpenAI-compatible providers.

Free tiers (Groq's is the example in ``config/msp.example.yaml``: 30 requests and
6,000 tokens per minute) answer HTTP 429 when a client goes faster. The
:class:`RateLimiter` keeps a sliding one-minute window of requests and tokens and
waits before a call would exceed either; :class:`RateLimitedClient` wraps any model
client with it and retries calls the provider still refuses as rate-limited, with
exponential backoff (or the provider's ``Retry-After``, when it sends one), before
raising :class:`RateLimitExceeded` (a :class:`~tersetalk.models.ModelCallError`),
chained ``from`` the provider's last error so a transient cause stays visible to
:func:`~tersetalk.models.caused_by`. A package with its own error type sets
``error`` on subclasses (MSP raises its own error, see :mod:`tersetalk.msp.ratelimit`);
any :class:`RateLimited` error counts as rate-limited.

"Rate-limited" is decided by the HTTP status the error carries (429), looked up
through the exception's cause chain; text is read only when no status is known.
Put the limiter *under* the call cache (:func:`under_cache`:
``CachedClient(RateLimitedClient(raw))``) so cache hits cost no quota.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from tersetalk.models.base import CallResult, GenerationConfig, ModelCallError, ModelClient
from tersetalk.models.http import error_chain as _chain
from tersetalk.models.http import retry_after_s
from tersetalk.models.http import status_of as _status_of

__all__ = [
    "RateLimitConfig",
    "RateLimitExceeded",
    "RateLimited",
    "RateLimitedClient",
    "RateLimiter",
    "is_rate_limit_error",
    "retry_after_s",
    "under_cache",
]

log = logging.getLogger(__name__)

WINDOW_S = 60.0


class RateLimited(Exception):
    """Any error that means the provider's rate limit was hit, or would be.

    ``retry_after_s`` is how long the provider asked to wait, when it said.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimitExceeded(RateLimited, ModelCallError):
    """The rate limit was still exceeded after every retry with backoff (or a single
    request is larger than the token limit)."""


class RateLimitConfig(BaseModel):
    """Limits of one provider; null limits are not enforced."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: float | None = Field(None, gt=0)
    max_retries: int = Field(4, ge=0)
    backoff_s: float = Field(2.0, ge=0)
    max_backoff_s: float = Field(60.0, ge=0)


class RateLimiter:
    """Sliding-window limiter: at most N requests and T tokens in any 60 seconds."""

    #: raised for a request that can never fit (more tokens than the per-minute limit)
    error: type[RateLimited] = RateLimitExceeded

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if requests_per_minute is not None and requests_per_minute < 1:
            raise ValueError(f"requests_per_minute must be >= 1, got {requests_per_minute}")
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self.clock, self.sleep = clock, sleep
        self._events: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()
        self.waited_s = 0.0

    def _prune(self, now: float) -> None:
        while self._events and now - self._events[0][0] >= WINDOW_S:
            self._events.popleft()

    def _wait_needed(self, now: float, tokens: int) -> float:
        self._prune(now)
        wait = 0.0
        if self.rpm is not None and len(self._events) + 1 > self.rpm:
            k = len(self._events) - int(self.rpm)  # oldest event that must expire
            wait = max(wait, self._events[k][0] + WINDOW_S - now)
        if self.tpm is not None:
            used = sum(t for _, t in self._events)
            if used + tokens > self.tpm:
                freed, need = 0, used + tokens - self.tpm
                for t0, t in self._events:
                    freed += t
                    if freed >= need:
                        wait = max(wait, t0 + WINDOW_S - now)
                        break
        return wait

    def acquire(self, tokens: int = 0) -> float:
        """Block until one request of ``tokens`` fits; return the seconds waited."""
        if self.tpm is not None and tokens > self.tpm:
            raise self.error(
                f"Rate limit exceeded: one request of about {tokens} tokens is larger than "
                f"tokens_per_minute={self.tpm:g}; shorten the message or raise the limit"
            )
        waited = 0.0
        with self._lock:
            while True:
                now = self.clock()
                wait = self._wait_needed(now, tokens)
                if wait <= 0:
                    self._events.append((now, tokens))
                    self.waited_s += waited
                    return waited
                log.info("rate limiter: waiting %.1fs before the next request", wait)
                self.sleep(wait)
                waited += wait


#: text patterns that plainly say "rate limited", used only when no exception in the
#: chain carries an HTTP status (a bare "429" could be a token count or an id)
_RATE_LIMIT_TEXT = re.compile(
    r"\b429\s+too\s+many\s+requests\b|\btoo\s+many\s+requests\b|\bHTTP\s*429\b"
    r"|\brate[\s_-]?limit(?:ed|s)?\b",
    re.IGNORECASE,
)


def _is_openai_rate_limit(exc: BaseException) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a project dependency
        return False
    return isinstance(exc, openai.RateLimitError)


def is_rate_limit_error(exc: BaseException) -> bool:
    """Did the provider refuse the call for going too fast?

    Decided by the HTTP status where one is known: a :class:`RateLimited` error,
    ``openai.RateLimitError``, or a ``status_code`` (on the exception or its
    ``response``) anywhere in the ``__cause__`` chain; the first status found
    decides (429 or not). Only when no exception carries a status does the text
    decide, and then only a clear phrase counts ("429 Too Many Requests", "HTTP 429",
    "rate limit"), never a bare "429" somewhere in the message.
    """
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, RateLimited) or _is_openai_rate_limit(e):
            return True
        status = _status_of(e)
        if status is not None:
            return status == 429
    return any(_RATE_LIMIT_TEXT.search(str(e)) for e in chain)


class RateLimitedClient(ModelClient):
    """Any model client behind a :class:`RateLimiter`, retrying rate-limited calls."""

    #: raised when the retries are used up or the provider asks to wait too long
    error: type[RateLimited] = RateLimitExceeded
    limiter_class: type[RateLimiter] = RateLimiter

    def __init__(
        self,
        inner: ModelClient,
        config: RateLimitConfig,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.config = config
        self.backend = inner.backend
        self.model = inner.model
        self.sleep = sleep
        self.limiter = self.limiter_class(config.requests_per_minute, config.tokens_per_minute,
                                          clock=clock, sleep=sleep)  # fmt: skip
        self.retries = 0
        self._retries_lock = threading.Lock()  # one client may serve several threads

    def _estimate(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> int:
        from tersetalk.core.tokens import count_tokens

        return sum(count_tokens(m.get("content", "")) for m in messages) + gen.max_tokens

    def _call(self, fn: Callable[[], CallResult], tokens: int) -> CallResult:
        attempt = 0
        while True:
            self.limiter.acquire(tokens)
            try:
                return fn()
            except ModelCallError as exc:
                if not is_rate_limit_error(exc):
                    raise
                if attempt >= self.config.max_retries:
                    raise self.error(
                        f"Rate limit exceeded: {self.backend} model {self.model!r} still refused "
                        f"after {attempt + 1} attempts ({exc}); lower requests_per_minute / "
                        "tokens_per_minute, raise max_retries, or wait for the quota to reset"
                    ) from exc
                delay = min(self.config.max_backoff_s, self.config.backoff_s * 2**attempt)
                asked = retry_after_s(exc)
                if asked is not None:
                    if asked > self.config.max_backoff_s:
                        raise self.error(
                            f"Rate limit exceeded: {self.backend} model {self.model!r} asks to "
                            f"retry after {asked:.0f}s (Retry-After), longer than "
                            f"max_backoff_s={self.config.max_backoff_s:g}; wait for the quota "
                            "to reset or raise max_backoff_s",
                            retry_after_s=asked,
                        ) from exc
                    delay = max(delay, asked)  # the provider knows when its window resets
                attempt += 1
                with self._retries_lock:
                    self.retries += 1
                log.warning("rate limited (%s); retry %d/%d in %.1fs", exc, attempt,
                            self.config.max_retries, delay)  # fmt: skip
                self.sleep(delay)

    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        return self._call(lambda: self.inner.chat(messages, gen), self._estimate(messages, gen))

    def structured(
        self, messages: list[dict[str, Any]], schema: type[pydantic.BaseModel],
        gen: GenerationConfig,
    ) -> CallResult:  # fmt: skip
        return self._call(lambda: self.inner.structured(messages, schema, gen),
                          self._estimate(messages, gen))  # fmt: skip

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "rate_limit": self.config.model_dump()}

    def close(self) -> None:
        self.inner.close()


def under_cache(
    client: ModelClient,
    limits: RateLimitConfig | None,
    limited: type[RateLimitedClient] = RateLimitedClient,
) -> ModelClient:
    """``client`` behind the rate limiter, with the limiter *under* the call cache.

    A run's client is usually ``CachedClient(raw)``. Wrapping it whole would make
    cache hits wait for (and use up) the provider's quota, so the limiter goes
    between the cache and the raw client: ``CachedClient(limited(raw))``. The new
    cache reads and writes the same folder with the same keys (the cache identity
    ignores the rate-limit settings), so earlier entries still hit. ``limited`` is
    the limiter class (a package's subclass raising its own error).
    """
    from tersetalk.models.cache import CachedClient

    if limits is None:
        return client
    if isinstance(client, CachedClient):
        return CachedClient(limited(client.inner, limits), client.cache_dir)
    return limited(client, limits)
