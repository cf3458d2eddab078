"""MSP's rate limiter: the shared one of :mod:`tersetalk.models.ratelimit`, raising MSP's error.

MSP's design names :class:`~tersetalk.msp.errors.RateLimitError` as the error a
caller sees when the provider's quota is used up, so MSP's limiter and client are the
shared ones with ``error`` set to it (raised at the same places, chained ``from``
the provider's error as before).
"""

from __future__ import annotations

from tersetalk.models import ratelimit as _shared
from tersetalk.models.ratelimit import RateLimitConfig, is_rate_limit_error, retry_after_s
from tersetalk.msp.errors import RateLimitError

__all__ = [
    "RateLimitConfig",
    "RateLimitedClient",
    "RateLimiter",
    "is_rate_limit_error",
    "retry_after_s",
]


class RateLimiter(_shared.RateLimiter):
    """:class:`tersetalk.models.ratelimit.RateLimiter` raising :class:`RateLimitError`."""

    error = RateLimitError


class RateLimitedClient(_shared.RateLimitedClient):
    """:class:`tersetalk.models.ratelimit.RateLimitedClient` raising :class:`RateLimitError`."""

    error = RateLimitError
    limiter_class = RateLimiter
