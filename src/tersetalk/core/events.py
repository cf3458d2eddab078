"""Progress events of a run, appended as JSON lines beside the run's output file.

A core service (standard library only): the runner, the dialogue engine and the
mediator write through it; the dashboard (:mod:`tersetalk.dashboard.tail`) only
reads what it writes.

Why a file and not an in-memory bus: Snakemake runs every (task, system, variant)
as its own process, so nothing in memory can reach a dashboard started elsewhere
(or later). Each run appends one JSON object per line to
``<out without .parquet>.events.jsonl``; ``tersetalk dashboard --attach results/``
tails those files and pushes what is new over its WebSocket.

Why beside the output: the run's checkpoint already lives there, so a calibration
run (``results/<model>/calibration/runs/...``) and a user's own ``tersetalk run --out
/tmp/x.parquet`` get their events without a second folder tree to mirror, and a
test writing to ``tmp_path`` never writes into the checkout.

The switch is ``tersetalk run --events/--no-events``, defaulting to the
environment variable ``TERSETALK_EVENTS`` (on unless ``0``/``off``/``false``/``no``).
It is deliberately not a config key: the config's run section is the job's spec
(a Snakemake param), and toggling an observer must not rerun the workflow.

Cost: with events off no publisher exists and the hooks in the dialogue engine
and the mediator do one ``ContextVar`` lookup; with events on, one ``json.dumps``,
``write`` and ``flush`` per event, no ``fsync`` (an observer's view: a lost tail
after a crash costs nothing). ``tersetalk bench events`` measures both.

Never breaks a run: any failure to write (disk full, folder removed, an
unserialisable value) disables the publisher with one warning and the run goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from tersetalk.core.io import message_list

__all__ = [
    "ENV_SWITCH",
    "EVENTS_SUFFIX",
    "NullPublisher",
    "RunPublisher",
    "current",
    "events_enabled_default",
    "events_path",
    "forward_pipeline_event",
    "on_message_sent",
    "open_publisher",
    "publishing",
]

log = logging.getLogger(__name__)

ENV_SWITCH = "TERSETALK_EVENTS"
EVENTS_SUFFIX = ".events.jsonl"
SCHEMA_VERSION = 1
#: a message's text is cut to this many characters in its event (the run file keeps it whole)
MAX_CONTENT_CHARS = 4000
#: any other text in an event (a prediction, an error, a mediator stage's text) is cut to
#: this many characters: a model that replies with 20 MB must not put 20 MB into every
#: dashboard's poll; the run file keeps the whole text
MAX_FIELD_CHARS = 64 * 1024
#: an event line longer than this (bytes) after the cuts (thousands of short keys, say)
#: is replaced by a stub that says so
MAX_LINE_BYTES = 1024 * 1024
_OFF = {"0", "off", "false", "no"}


def events_enabled_default() -> bool:
    """On unless ``TERSETALK_EVENTS`` says off (so ``TERSETALK_EVENTS=off snakemake`` works)."""
    return os.environ.get(ENV_SWITCH, "on").strip().lower() not in _OFF


def events_path(out: str | Path) -> Path:
    """Where the run writing ``out`` appends its events."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + EVENTS_SUFFIX)


class NullPublisher:
    """Events off: every hook is a no-op, so the runner's code stays one straight path."""

    enabled = False

    def run_started(self, **_: Any) -> None: ...
    def example_started(self, example: dict) -> None: ...
    def message(self, msg: dict) -> None: ...
    def pipeline(self, data: dict) -> None: ...
    def example_finished(self, rec: dict) -> None: ...
    def example_failed(self, example_id: str, error: str) -> None: ...
    def run_finished(self, status: str, **_: Any) -> None: ...
    def close(self) -> None: ...


class RunPublisher(NullPublisher):
    """Appends one run's events to its ``.events.jsonl`` file, one flushed line each."""

    enabled = True

    def __init__(self, path: str | Path, *, task: str, system: str, variant: str) -> None:
        self.path = Path(path)
        self.run_id = uuid.uuid4().hex[:12]
        self.labels = {"task": task, "system": system, "variant": variant}
        self._lock = threading.Lock()  # a system may send from a worker thread
        self._example: str | None = None
        self._sent = 0  # messages of the current example already published
        self._fh = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            self._disable(exc)

    # -- writing ---------------------------------------------------------------
    def _disable(self, exc: BaseException) -> None:
        log.warning(
            "run events disabled for this run: cannot write %s (%s: %s); the run "
            "goes on without them",
            self.path,
            type(exc).__name__,
            exc,
        )
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(Exception):
                fh.close()

    def publish(self, event: str, **fields: Any) -> None:
        """One event line; ``t`` is wall-clock seconds (what a dashboard shows).

        Text longer than :data:`MAX_FIELD_CHARS` is cut, and ``truncated_fields`` maps
        each cut field (``data.text``, ``prediction``) to its original length in
        characters; a line still over :data:`MAX_LINE_BYTES` becomes a stub event."""
        if self._fh is None:
            return
        try:
            cut: dict[str, int] = {}
            fields = _cap_text(fields, "", cut)
            if cut:
                fields["truncated_fields"] = cut
            head = {"v": SCHEMA_VERSION, "t": time.time(), "run": self.run_id, "event": event}
            line = json.dumps({**head, **fields}, ensure_ascii=False)
            if len(line) > MAX_LINE_BYTES // 4 and len(line.encode()) > MAX_LINE_BYTES:
                stub = {"example_id": fields.get("example_id"), "dropped": True}
                stub["bytes"] = len(line.encode())
                line = json.dumps({**head, **stub}, ensure_ascii=False)
            with self._lock:
                self._fh.write(line + "\n")
                self._fh.flush()
        except Exception as exc:  # noqa: BLE001 - an observer never stops a run
            self._disable(exc)

    # -- the run's hooks ---------------------------------------------------------
    def run_started(self, *, n_examples: int, n_done: int = 0, model: str = "") -> None:
        self.publish(
            "run_started",
            **self.labels,
            n_examples=n_examples,
            n_done=n_done,
            model=model,
            pid=os.getpid(),
            host=socket.gethostname(),
        )

    def example_started(self, example: dict) -> None:
        self._example, self._sent = str(example["example_id"]), 0
        self.publish("example_started", example_id=self._example, position=example.get("position"))

    def message(self, msg: dict) -> None:
        """A message as the engine sends it (live), counted so none is published twice."""
        self._sent += 1
        content = str(msg.get("content", ""))
        self.publish(
            "message",
            example_id=self._example,
            turn=msg.get("turn"),
            sender=msg.get("sender"),
            receiver=msg.get("receiver"),
            kind=msg.get("kind"),
            tokens=msg.get("tokens_cl100k"),
            tokens_model=msg.get("tokens_model"),
            bytes=msg.get("bytes"),
            content=content[:MAX_CONTENT_CHARS],
            truncated=len(content) > MAX_CONTENT_CHARS,
            content_chars=len(content),
        )

    def pipeline(self, data: dict) -> None:
        """A mediator stage event inside this run (see :mod:`tersetalk.mediator.events`)."""
        self.publish(
            "stage",
            example_id=self._example,
            stage=data.get("event"),
            message_id=data.get("message_id"),
            data=data.get("data", {}),
        )

    def example_finished(self, rec: dict) -> None:
        """The record is in: messages the engine hook did not see, the verdict, the totals."""
        if self._fh is None:
            return
        messages = []
        if self._sent < (rec.get("n_messages") or 0):  # parse only when some were missed
            try:
                messages = message_list(rec.get("messages"))
            except (TypeError, ValueError):
                messages = []
        for msg in messages[self._sent :]:  # sent outside the hook (another thread, a test)
            self.message(msg)
        eid = str(rec.get("example_id", self._example))
        self.publish(
            "verdict",
            example_id=eid,
            prediction=rec.get("prediction"),
            gold=rec.get("gold"),
            correct=rec.get("correct"),
            em=rec.get("em"),
            f1=rec.get("f1"),
            error=rec.get("error"),
        )
        self.publish(
            "example_finished",
            example_id=eid,
            tokens=rec.get("tokens_total_cl100k"),
            n_messages=rec.get("n_messages"),
            n_model_calls=rec.get("n_model_calls"),
            elapsed_s=rec.get("t_example_s"),
            error=rec.get("error"),
        )
        self._example, self._sent = None, 0

    def example_failed(self, example_id: str, error: str) -> None:
        """A passing server fault: not checkpointed, retried on the next run."""
        self.publish("error", example_id=str(example_id), error=error, transient=True)
        self._example, self._sent = None, 0

    def run_finished(self, status: str, **fields: Any) -> None:
        self.publish("run_finished", status=status, **fields)

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(Exception):
                fh.close()


def _cap_text(value: Any, where: str, cut: dict[str, int]) -> Any:
    """``value`` with every string over :data:`MAX_FIELD_CHARS` cut, at any depth;
    ``cut`` collects each cut field's dotted path and original length."""
    if isinstance(value, str):
        if len(value) <= MAX_FIELD_CHARS:
            return value
        cut[where] = len(value)
        return value[:MAX_FIELD_CHARS]
    if isinstance(value, dict):
        return {k: _cap_text(v, f"{where}.{k}" if where else str(k), cut) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cap_text(v, f"{where}[{i}]", cut) for i, v in enumerate(value)]
    return value


def open_publisher(out: str | Path, spec: dict, enabled: bool | None = None) -> NullPublisher:
    """The publisher of the run writing ``out`` (a no-op one when events are off)."""
    if enabled is None:
        enabled = events_enabled_default()
    if not enabled:
        return NullPublisher()
    return RunPublisher(
        events_path(out), task=spec["task"], system=spec["system"], variant=spec["variant"]
    )


_current: ContextVar[NullPublisher | None] = ContextVar("tersetalk_run_events", default=None)


def current() -> NullPublisher | None:
    return _current.get()


@contextlib.contextmanager
def publishing(pub: NullPublisher) -> Iterator[NullPublisher]:
    """Make ``pub`` the publisher the engine's and the mediator's hooks write to."""
    token = _current.set(pub if pub.enabled else None)
    try:
        yield pub
    finally:
        _current.reset(token)


def on_message_sent(msg: dict) -> None:
    """Hook of :meth:`tersetalk.agents.conversation.Conversation.send`."""
    pub = _current.get()
    if pub is not None:
        pub.message(msg)


def forward_pipeline_event(payload: Any) -> None:
    """Hook of the mediator's default emitter: its stage events join the run's events."""
    pub = _current.get()
    if pub is not None:
        try:
            pub.pipeline(payload.as_dict())
        except Exception as exc:  # noqa: BLE001 - an observer never stops a run
            log.debug("mediator event not published: %s", exc)
