"""A model client wrapper that remembers every call, so a system can log them.

Components that call the model on a system's behalf (the mediator's summarizer,
extractor and judge; MSP's encoder and decoder) cost tokens and time like the
agents' calls. Each gets a :class:`CallRecorder` with its role; the system copies
the recorded results into the conversation's call log, so usage and timing columns
include them.
"""

from __future__ import annotations

from typing import Any

import pydantic

from tersetalk.models.base import CallResult, GenerationConfig, ModelClient

__all__ = ["CallRecorder"]


class CallRecorder(ModelClient):
    """Delegates to ``inner``; appends ``(role, CallResult)`` to ``log`` for every call."""

    def __init__(self, inner: ModelClient, role: str, log: list | None = None) -> None:
        self.inner = inner
        self.role = role
        self.log: list[tuple[str, CallResult]] = log if log is not None else []
        self.backend = inner.backend
        self.model = inner.model

    def with_role(self, role: str) -> CallRecorder:
        """Another recorder on the same client and the same log."""
        return CallRecorder(self.inner, role, self.log)

    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        res = self.inner.chat(messages, gen)
        self.log.append((self.role, res))
        return res

    def structured(
        self, messages: list[dict[str, Any]], schema: type[pydantic.BaseModel],
        gen: GenerationConfig,
    ) -> CallResult:  # fmt: skip
        res = self.inner.structured(messages, schema, gen)
        self.log.append((self.role, res))
        return res

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def drain(self) -> list[tuple[str, CallResult]]:
        """The calls recorded so far, emptying the log."""
        out = list(self.log)
        self.log.clear()
        return out
