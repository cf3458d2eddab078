"""The shared rate limiter (models.ratelimit) and MSP's flavour of it, raising MSP's error.

What must hold across the move: the error a caller sees (MSP's ``RateLimitError`` from
MSP's client, a ``ModelCallError`` from the shared one), and the chain back to the
provider's error, through which ``caused_by`` finds a transient cause (a server fault
must fail the job for a rerun, never become a passthrough row).
"""

from __future__ import annotations

import pytest

from tersetalk.models import (
    CachedClient,
    GenerationConfig,
    ModelCallError,
    ModelError,
    ScriptedClient,
    TransientModelError,
    caused_by,
)
from tersetalk.models.ratelimit import (
    RateLimitConfig,
    RateLimited,
    RateLimitedClient,
    RateLimiter,
    RateLimitExceeded,
    is_rate_limit_error,
    under_cache,
)
from tersetalk.msp import MSPError, RateLimitError
from tersetalk.msp import RateLimitedClient as MSPRateLimitedClient
from tersetalk.msp import RateLimiter as MSPRateLimiter

MSGS = [{"role": "user", "content": "hi"}]


def _refusals(n: int) -> list[Exception]:
    return [TransientModelError("HTTP 429 Too Many Requests") for _ in range(n)]


def test_shared_client_raises_a_model_call_error_chained_from_the_provider():
    client = RateLimitedClient(ScriptedClient(_refusals(3)),
                               RateLimitConfig(max_retries=2, backoff_s=0),
                               sleep=lambda s: None)  # fmt: skip
    with pytest.raises(RateLimitExceeded, match="Rate limit exceeded") as info:
        client.chat(MSGS, GenerationConfig())
    exc = info.value
    assert isinstance(exc, ModelCallError) and isinstance(exc, RateLimited)
    assert isinstance(exc.__cause__, TransientModelError)
    assert caused_by(exc, TransientModelError) is exc.__cause__
    assert is_rate_limit_error(exc) and client.retries == 2


def test_msp_client_raises_msp_error_with_the_same_chain_as_before():
    client = MSPRateLimitedClient(ScriptedClient(_refusals(3)),
                                  RateLimitConfig(max_retries=2, backoff_s=0),
                                  sleep=lambda s: None)  # fmt: skip
    with pytest.raises(RateLimitError, match="still refused after 3 attempts") as info:
        client.chat(MSGS, GenerationConfig())
    exc = info.value
    assert isinstance(exc, MSPError) and not isinstance(exc, ModelError)
    assert isinstance(exc.__cause__, TransientModelError)  # the provider's error, directly
    assert caused_by(exc, TransientModelError) is not None
    assert is_rate_limit_error(exc)
    assert isinstance(client.limiter, MSPRateLimiter)


def test_a_request_larger_than_the_token_limit_raises_each_ones_error():
    with pytest.raises(RateLimitExceeded, match="tokens_per_minute"):
        RateLimiter(tokens_per_minute=100).acquire(101)
    with pytest.raises(RateLimitError, match="tokens_per_minute"):
        MSPRateLimiter(tokens_per_minute=100).acquire(101)


def test_under_cache_puts_the_limiter_below_the_cache(tmp_path):
    raw = ScriptedClient(["fresh", "second"])
    warm = CachedClient(raw, tmp_path)
    warm.chat(MSGS, GenerationConfig())
    client = under_cache(warm, RateLimitConfig(requests_per_minute=5))
    assert isinstance(client, CachedClient) and type(client.inner) is RateLimitedClient
    assert client.inner.inner is raw and client.cache_dir == warm.cache_dir
    assert client.chat(MSGS, GenerationConfig()).cache_hit
    assert len(client.inner.limiter._events) == 0  # a cache hit spends no quota
    assert under_cache(warm, None) is warm
    msp = under_cache(raw, RateLimitConfig(), limited=MSPRateLimitedClient)
    assert type(msp) is MSPRateLimitedClient and msp.inner is raw
