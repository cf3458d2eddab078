"""Encoder (natural language -> signal) and decoder (signal -> natural language).

Both go through the model backend. The encoder uses constrained structured output:
the :class:`~tersetalk.msp.schema.SignalDraft` JSON schema is compiled into a
grammar by llama.cpp (or sent as ``response_format`` to a server), so the model
can only produce a schema-valid draft. Model failures become the design's
:class:`EncoderError` / :class:`DecoderError` / :class:`RateLimitError`.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from tersetalk.models import GenerationConfig, ModelEnvironmentError, ModelError
from tersetalk.models.ratelimit import is_rate_limit_error
from tersetalk.msp.errors import DecoderError, EncoderError, RateLimitError
from tersetalk.msp.schema import INTENTS, PRIORITIES, MinimalSignal, SignalDraft

__all__ = ["MSPDecoder", "MSPEncoder"]

ENCODER_SYSTEM = (
    "You are a semantic encoder. Turn the message into a minimal signal, a JSON object: "
    f"intent (one of {', '.join(INTENTS)}), target (what the action is about), params "
    "(the key facts, as a list of short key/value pairs), constraints (requirements, a "
    f"list), state (current status, key/value pairs), priority (one of {', '.join(PRIORITIES)}). "
    "Keep every name, number and date. Be concise."
)

#: a single user turn: small models echo a system prompt back more than they follow it
DECODER_PROMPT = (
    "Here is a task signal in JSON:\n{signal}\n\nRewrite it as one or two plain English "
    "sentences in a {style} style. Mention the intent, the target and every value. "
    "Add nothing else."
)


def _model_error(kind: type[Exception], exc: ModelError, what: str) -> Exception:
    if is_rate_limit_error(exc):
        return RateLimitError(f"Rate limit exceeded while {what}: {exc}")
    if isinstance(exc, ModelEnvironmentError):
        return kind(f"LLM service unavailable while {what}: {exc}")
    text = str(exc)
    if kind is EncoderError and ("valid for" in text or "cut off" in text):
        return kind(f"Failed to parse LLM response while {what}: {exc}")
    return kind(f"LLM service unavailable while {what}: {exc}")


class MSPEncoder:
    """Natural language -> :class:`MinimalSignal` (the model fills the content fields)."""

    def __init__(self, client, gen: GenerationConfig | None = None, max_tokens: int = 320):
        self.client = client
        self.gen = dataclasses.replace(gen or GenerationConfig(), max_tokens=max_tokens)

    def encode(
        self,
        text: str,
        *,
        trace_id: str | None = None,
        parent_id: str | None = None,
        timestamp: datetime | None = None,
    ) -> MinimalSignal:
        if not isinstance(text, str) or not text.strip():
            raise EncoderError("Input cannot be empty: give the encoder a non-empty message")
        messages = [{"role": "system", "content": ENCODER_SYSTEM},
                    {"role": "user", "content": text}]  # fmt: skip
        try:
            res = self.client.structured(messages, SignalDraft, self.gen)
        except RateLimitError:
            raise
        except ModelError as exc:
            raise _model_error(EncoderError, exc, "encoding") from exc
        extra: dict[str, Any] = {"parent_id": parent_id}
        if trace_id is not None:
            extra["trace_id"] = trace_id
        if timestamp is not None:
            extra["timestamp"] = timestamp
        try:
            return MinimalSignal(**SignalDraft.model_validate(res.parsed).signal_fields(), **extra)
        except ValidationError as exc:
            raise EncoderError(
                f"Failed to parse LLM response: the draft is not a valid signal ({exc}); "
                f"raw output: {res.text[:200]!r}"
            ) from exc


class MSPDecoder:
    """:class:`MinimalSignal` -> natural language in a requested style."""

    def __init__(self, client, gen: GenerationConfig | None = None, max_tokens: int = 96):
        self.client = client
        self.gen = dataclasses.replace(gen or GenerationConfig(), max_tokens=max_tokens)

    def decode(self, signal: MinimalSignal | dict | str, style: str = "professional") -> str:
        try:
            if isinstance(signal, str):
                signal = MinimalSignal.model_validate_json(signal)
            elif not isinstance(signal, MinimalSignal):
                signal = MinimalSignal.model_validate(signal)
        except ValidationError as exc:
            raise DecoderError(f"Invalid signal schema: {exc}") from exc
        messages = [
            {
                "role": "user",
                "content": DECODER_PROMPT.format(signal=signal.wire("core"), style=style),
            }
        ]
        try:
            text = self.client.chat(messages, self.gen).text.strip()
        except RateLimitError:
            raise
        except ModelError as exc:
            raise _model_error(DecoderError, exc, "decoding") from exc
        if not text:
            raise DecoderError(
                "Decoder produced empty output; raise the decoder's max_tokens or use a "
                "stronger model"
            )
        return text
