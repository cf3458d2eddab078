"""Pipeline events and the emitter interface a dashboard subscribes to.

Every stage announces itself (message received, compression start / pass /
complete, extraction start / complete, judge start / complete, pipeline complete
or error). Emitters are synchronous and must never break the pipeline: a
subscriber that raises is logged and skipped, as the design asks for a
non-critical observer.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from tersetalk.core.events import forward_pipeline_event

__all__ = [
    "CollectingEmitter",
    "EventBus",
    "EventEmitter",
    "LoggingEmitter",
    "NullEmitter",
    "PipelineEvent",
    "PipelineEventPayload",
]

log = logging.getLogger(__name__)


class PipelineEvent(StrEnum):
    MESSAGE_RECEIVED = "message_received"
    COMPRESSION_START = "compression_start"
    COMPRESSION_PASS = "compression_pass"
    COMPRESSION_COMPLETE = "compression_complete"
    EXTRACTION_START = "extraction_start"
    EXTRACTION_COMPLETE = "extraction_complete"
    JUDGE_START = "judge_start"
    JUDGE_COMPLETE = "judge_complete"
    PIPELINE_COMPLETE = "pipeline_complete"
    PIPELINE_ERROR = "pipeline_error"


@dataclass(frozen=True)
class PipelineEventPayload:
    """One event: what happened, to which message, when (wall clock, UTC), and details."""

    event: PipelineEvent
    message_id: str
    data: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event.value, "message_id": self.message_id,
                "timestamp": self.timestamp.isoformat(), "data": self.data}  # fmt: skip


class EventEmitter(ABC):
    """Receives every pipeline event."""

    @abstractmethod
    def emit(self, payload: PipelineEventPayload) -> None:
        """Deliver one event; must not raise into the pipeline."""


class NullEmitter(EventEmitter):
    """The default: nobody subscribed. Inside a run that publishes progress events
    (:mod:`tersetalk.core.events`), the stage events go to the run's event file,
    so ``tersetalk dashboard --attach`` sees a ``mediator`` run stage by stage; outside
    one this is a single ``ContextVar`` lookup."""

    def emit(self, payload: PipelineEventPayload) -> None:
        forward_pipeline_event(payload)


class CollectingEmitter(EventEmitter):
    """Keeps every event in order (tests, the demo's summary)."""

    def __init__(self) -> None:
        self.events: list[PipelineEventPayload] = []

    def emit(self, payload: PipelineEventPayload) -> None:
        self.events.append(payload)

    def kinds(self) -> list[PipelineEvent]:
        return [e.event for e in self.events]


class LoggingEmitter(EventEmitter):
    def __init__(self, level: int = logging.DEBUG) -> None:
        self.level = level

    def emit(self, payload: PipelineEventPayload) -> None:
        log.log(self.level, "%s %s %s", payload.event.value, payload.message_id, payload.data)


Subscriber = Callable[[PipelineEventPayload], None]


class EventBus(EventEmitter):
    """Fan-out to subscribers; ``subscribe`` returns the function that unsubscribes.

    A subscriber that raises is logged and skipped: observers (a dashboard's
    websocket, a progress bar) are never allowed to stop a message.
    """

    def __init__(self) -> None:
        self._subs: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subs.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subs:
                    self._subs.remove(fn)

        return unsubscribe

    def emit(self, payload: PipelineEventPayload) -> None:
        with self._lock:
            subs = list(self._subs)
        for fn in subs:
            try:
                fn(payload)
            except Exception as exc:  # noqa: BLE001 - observers must not break the pipeline
                log.warning("event subscriber %r failed on %s: %s", fn, payload.event.value, exc)
