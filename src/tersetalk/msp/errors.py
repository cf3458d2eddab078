"""MSP's error classes, with the messages of the protocol's design.

``EncoderError("Input cannot be empty")``, ``EncoderError("LLM service unavailable")``,
``EncoderError("Failed to parse LLM response")``, ``DecoderError("Invalid signal
schema")``, ``DecoderError("LLM service unavailable")``, ``DecoderError("Decoder
produced empty output")``, ``JudgeError("Failed to compute embeddings")``,
``JudgeError("Sentence transformer model not available")`` and
:class:`RateLimitError`. Each message starts with the design's words, then says
where and how to fix it.
"""

from __future__ import annotations

from tersetalk.models.ratelimit import RateLimited

__all__ = [
    "DecoderError",
    "EncoderError",
    "JudgeError",
    "MSPConfigError",
    "MSPError",
    "RateLimitError",
]


class MSPError(Exception):
    """Base of every error raised by :mod:`tersetalk.msp`."""


class MSPConfigError(MSPError, ValueError):
    """The MSP configuration is invalid; the message names the key and the fix."""


class EncoderError(MSPError):
    """Natural language -> signal failed."""


class DecoderError(MSPError):
    """Signal -> natural language failed."""


class JudgeError(MSPError):
    """The semantic judge could not score a pair of texts."""


class RateLimitError(MSPError, RateLimited):
    """The provider's rate limit was still exceeded after every retry with backoff.

    A :class:`~tersetalk.models.ratelimit.RateLimited` error, so the shared limiter
    and :func:`~tersetalk.models.ratelimit.is_rate_limit_error` know it; it carries
    ``retry_after_s`` when the provider said how long to wait.
    """
