"""The Minimal Signal: a strict, human-readable JSON message between agents.

``{version, intent, target, params, constraints, state, priority, trace_id,
timestamp, parent_id}`` with extra fields forbidden. The model never writes the
tracing fields: it fills :class:`SignalDraft` (the six content fields) under a
JSON schema, and the encoder adds version, trace id, timestamp and parent id.

What travels between agents is a *wire form*: ``core`` (the six content fields,
the form the design's table lists) or ``traced`` (core plus version, trace id and
parent id). The wall-clock timestamp stays in the signal object and in traces,
not on the wire, so run records are reproducible.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "INTENTS",
    "PRIORITIES",
    "SIGNAL_VERSION",
    "WIRE_FORMS",
    "MSPJudgeResult",
    "MinimalSignal",
    "PipelineMetrics",
    "PipelineResult",
    "SignalDraft",
    "deterministic_trace_id",
]

SIGNAL_VERSION = "1.0"
INTENTS = ("ANALYZE", "GENERATE", "EVALUATE", "TRANSFORM", "QUERY", "RESPOND", "DELEGATE",
           "REPORT")  # fmt: skip
PRIORITIES = ("low", "medium", "high", "critical")
WIRE_FORMS = ("core", "traced")

Intent = Literal["ANALYZE", "GENERATE", "EVALUATE", "TRANSFORM", "QUERY", "RESPOND", "DELEGATE",
                 "REPORT"]  # fmt: skip
Priority = Literal["low", "medium", "high", "critical"]
CORE_FIELDS = ("intent", "target", "params", "constraints", "state", "priority")
_NS = uuid.UUID("0b5f3a8e-9d2c-4e71-8a64-1c3f5e7b9d20")


def _now() -> datetime:
    return datetime.now(UTC)


class MinimalSignal(BaseModel):
    """One signal. Strict: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")

    version: str = SIGNAL_VERSION
    intent: Intent
    target: Annotated[str, StringConstraints(min_length=1)]
    params: dict[str, Any] = Field(default_factory=dict)
    constraints: list[str] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    priority: Priority = "medium"
    trace_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: datetime = Field(default_factory=_now)
    parent_id: str | None = None

    def core(self) -> dict[str, Any]:
        """The six content fields."""
        data = self.model_dump(mode="json")
        return {k: data[k] for k in CORE_FIELDS}

    def wire(self, form: str = "core") -> str:
        """Compact JSON of a wire form (``core`` or ``traced``); never the timestamp."""
        if form == "core":
            data = self.core()
        elif form == "traced":
            data = {"version": self.version, **self.core(), "trace_id": self.trace_id}
            if self.parent_id is not None:
                data["parent_id"] = self.parent_id
        else:
            raise ValueError(f"unknown wire form {form!r}; use one of {WIRE_FORMS}")
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


_Text = Annotated[str, StringConstraints(min_length=1, max_length=120)]
_Key = Annotated[str, StringConstraints(min_length=1, max_length=32)]


class _Pair(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: _Key
    value: _Text


class SignalDraft(BaseModel):
    """What the encoder's model fills in (decoding constrained by this schema).

    Every string and list is bounded, so a constrained decoder cannot loop past its
    token budget; params and state are key/value lists here (a JSON object with
    free keys gives a small model too much rope) and become objects in the signal.
    """

    model_config = ConfigDict(extra="forbid")

    intent: Intent
    target: _Text
    params: list[_Pair] = Field(default_factory=list, max_length=5)
    constraints: list[_Text] = Field(default_factory=list, max_length=3)
    state: list[_Pair] = Field(default_factory=list, max_length=3)
    priority: Priority = "medium"

    def signal_fields(self) -> dict[str, Any]:
        """The content fields of a :class:`MinimalSignal` (first value wins on a repeated key)."""

        def as_dict(pairs: list[_Pair]) -> dict[str, str]:
            out: dict[str, str] = {}
            for p in pairs:
                out.setdefault(p.key.strip() or p.key, p.value.strip() or p.value)
            return out

        return {"intent": self.intent, "target": self.target.strip() or self.target,
                "params": as_dict(self.params),
                "constraints": [c.strip() for c in self.constraints if c.strip()],
                "state": as_dict(self.state), "priority": self.priority}  # fmt: skip


def deterministic_trace_id(*parts: object) -> str:
    """A trace id derived from its parts (e.g. seed and example id), not from the clock."""
    return str(uuid.uuid5(_NS, "/".join(str(p) for p in parts)))


class MSPJudgeResult(BaseModel):
    """The semantic judge's verdict: similarity in [0, 1]; passed (semantically adequate)
    iff similarity >= threshold and, when the signal was checked, intent and target are
    both mentioned in the decoded text (``None``: not checked)."""

    model_config = ConfigDict(extra="forbid")

    passed: bool
    confidence: float = Field(ge=0.0, le=1.0)
    similarity_score: float = Field(ge=0.0, le=1.0)
    threshold: float = Field(ge=0.0, le=1.0)
    similarity_passed: bool | None = None
    intent_present: bool | None = None
    target_present: bool | None = None
    target_coverage: float | None = Field(None, ge=0.0, le=1.0)
    issues: list[str] = Field(default_factory=list)


class PipelineMetrics(BaseModel):
    """Sizes under one tokenizer, and how long each step took (wall clock)."""

    model_config = ConfigDict(extra="forbid")

    original_tokens: int = Field(ge=0)
    signal_tokens: int = Field(ge=0)
    decoded_tokens: int = Field(ge=0)
    compression_ratio: float = Field(ge=0.0)
    latency_ms: float = Field(ge=0.0)
    encode_ms: float = Field(0.0, ge=0.0)
    decode_ms: float = Field(0.0, ge=0.0)
    judge_ms: float = Field(0.0, ge=0.0)
    tokenizer: str = "cl100k_base"


class PipelineResult(BaseModel):
    """One message through encode -> (decode -> judge)."""

    original_text: str
    signal: MinimalSignal
    signal_text: str
    wire: str = "core"
    decoded_text: str | None = None
    judge: MSPJudgeResult | None = None
    metrics: PipelineMetrics
    trace_id: str
    timestamp: datetime
