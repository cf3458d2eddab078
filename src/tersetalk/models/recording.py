"""A model client wrapper that remembers every call, so a system can log them.

Components that call the model on a system's behalf (the mediator's summarizer,
extractor and judge; MSP's encoder and decoder) cost tokens and time like the
agents' calls. Each gets a :class:`CallRecorder` with its role; the system copies
the recorded results into the conversation's call log, so usage and timing columns
include them.

Such a recorder is built once per run and shared by its examples, and with
``models.max_concurrency`` > 1 several examples run at once on worker threads. So the
log is kept per thread: an example runs on one thread from start to end, and
:meth:`CallRecorder.drain` on that thread returns that example's calls only, never
those of an example running beside it.
"""

from __future__ import annotations

import threading
from typing import Any

import pydantic

from tersetalk.models.base import CallResult, GenerationConfig, ModelClient

__all__ = ["CallRecorder"]


class _ThreadLogs(threading.local):
    """One call list per thread, shared by the recorders made with :meth:`with_role`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, CallResult]] = []


class CallRecorder(ModelClient):
    """Delegates to ``inner``; appends ``(role, CallResult)`` to the calling thread's log.

    ``log`` is this thread's list (see the module docstring). A list given as ``log``
    is used as is, shared by every thread: for callers that run one example at a time.
    """

    def __init__(self, inner: ModelClient, role: str, log: list | None = None) -> None:
        self.inner = inner
        self.role = role
        self._given = log
        self._logs = _ThreadLogs()
        self.backend = inner.backend
        self.model = inner.model

    @property
    def log(self) -> list[tuple[str, CallResult]]:
        return self._given if self._given is not None else self._logs.calls

    def with_role(self, role: str) -> CallRecorder:
        """Another recorder on the same client and the same (per-thread) log."""
        other = CallRecorder(self.inner, role, self._given)
        other._logs = self._logs
        return other

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
