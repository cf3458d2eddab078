"""Trace records: one JSON line per message that went through the mediator.

The fields follow the design's trace schema - ``timestamp``, ``message_id``,
``original`` (text, tokens), ``compression`` (each pass with input tokens, output
tokens and ratio; final text and tokens; total ratio), ``extraction`` (keys,
schema version, raw output), ``judge`` (or null when disabled), ``duration_ms`` -
plus what was delivered to Agent B and any stage error, so a failed message
leaves a record too. Wall-clock fields live here, never in the deterministic
columns of run records.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["REQUIRED_FIELDS", "TraceWriter", "read_trace", "trace_problems"]

log = logging.getLogger(__name__)

REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "": ("timestamp", "message_id", "original", "compression", "extraction", "judge",
         "delivered", "duration_ms", "error"),
    "original": ("text", "tokens"),
    "compression": ("passes", "final_text", "final_tokens", "total_ratio", "stop_reason"),
    "extraction": ("keys", "schema_version", "raw_output"),
}  # fmt: skip
PASS_FIELDS = ("input_tokens", "output_tokens", "ratio")


def trace_problems(record: dict[str, Any]) -> list[str]:
    """What a trace record lacks (empty when complete). Stages that failed or were
    disabled may be null, but then ``error`` must say why or the stage must be off."""
    problems = [f"missing field {f!r}" for f in REQUIRED_FIELDS[""] if f not in record]
    if problems:
        return problems
    if not isinstance(record["original"], dict):
        return ["original must be an object with text and tokens"]
    problems += [f"missing field original.{f}" for f in REQUIRED_FIELDS["original"]
                 if f not in record["original"]]  # fmt: skip
    for block in ("compression", "extraction"):
        value = record[block]
        if value is None:
            if record["error"] is None and record.get("stages", {}).get(block, True):
                problems.append(f"{block} is null although the stage is on and nothing failed")
            continue
        problems += [f"missing field {block}.{f}" for f in REQUIRED_FIELDS[block] if f not in value]
        if block == "compression":
            for i, p in enumerate(value.get("passes", [])):
                problems += [f"missing field compression.passes[{i}].{f}" for f in PASS_FIELDS
                             if f not in p]  # fmt: skip
    if (record["judge"] is None and record.get("stages", {}).get("judge")
            and record["error"] is None and not record.get("warnings")):  # fmt: skip
        problems.append("judge is null although it is enabled and reported no error")
    return problems


class TraceWriter:
    """Appends trace records to a JSONL file (one line each, flushed)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.written = 0

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, sort_keys=True)
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.written += 1


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a trace file, in order."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(json.loads(line))
    return out
