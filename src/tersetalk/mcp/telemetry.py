"""Local telemetry for ``tersetalk mcp-proxy``: what the tuner needs, and never the payloads.

Why: the rules of :mod:`tersetalk.mcp.tune` read per-endpoint statistics (dup rate,
response sizes, shapes, inner formats, nesting depth) and per-session ones (events,
compactions). The proxy is the one place that sees every tool result, so it measures
them there, on the user's machine, and writes them to a local folder that only
``tersetalk mcp tune analyze --telemetry-dir`` and ``tersetalk mcp telemetry``
read. Nothing here opens a socket.

What is written, in ``<folder>``:

- ``events-<session_hash>.jsonl``: one JSON object per sampled tool-result text (see
  :meth:`TelemetryRecorder.record` for the fields): the endpoint (the MCP tool name, the
  key the tuner's per-endpoint knobs use), the payload's shape, the inner formats seen in
  its strings, its size, the original and sent tokens per tokenizer, the encoder chosen
  per subtree (format names only), the dedup outcome, the hint kinds, timings, the
  compaction partition, and a 128-bit SHA-256 prefix of the text. No payload text, no
  tool arguments, no key names, no error messages.
- ``summary-<session_hash>.json``: the session's roll-up, written at close over every
  response (sampled or not).

Sampling is decided per event from a hash of the session and the event's sequence
number, so the same session replayed samples the same events, and a rate of r keeps
close to r of them without a random generator. Events are buffered and appended every
``flush_every_n`` events and at close: a proxy killed (SIGKILL, SIGTERM, power loss)
loses at most the one buffer not yet written (at most ``flush_every_n - 1`` events) and
the session's summary; a write cut in the middle leaves a truncated last line, which the
readers skip and count.

Telemetry is off unless ``--telemetry-dir`` or a tuned file's ``telemetry`` section turns
it on, and ``TERSETALK_TELEMETRY=off`` turns it off whatever else says
(:func:`resolve_settings`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tersetalk.core.io import write_atomic
from tersetalk.mcp.tune import TelemetryKnobs, TuneError, weighted_quantile

log = logging.getLogger(__name__)

ENV = "TERSETALK_TELEMETRY"
ENV_OFF = ("off", "0", "false", "no")
ENV_ON = ("", "on", "1", "true", "yes")
EVENT_SCHEMA = 1
SUMMARY_SCHEMA = 1
#: the per-endpoint fingerprint's columns, in this order (what tune.EndpointStats reads)
FINGERPRINT_COLUMNS = (
    "endpoint_class",
    "call_count",
    "avg_response_chars",
    "response_chars_p25",
    "response_chars_p50",
    "response_chars_p90",
    "shape_dominant",
    "shape_mix",
    "shape_entropy",
    "dup_rate",
    "repeat_burst_p90",
    "inner_formats_top3",
    "avg_cols",
    "avg_rows",
    "nested_object_depth_p95",
    "first_seen_ms",
    "last_seen_ms",
    "source_sessions",
)
_INT_COLUMNS = ("call_count", "first_seen_ms", "last_seen_ms", "source_sessions")
_STR_COLUMNS = ("endpoint_class", "shape_dominant", "shape_mix", "inner_formats_top3")
#: how many recent bodies a session remembers for the dup statistics (per partition)
SEEN_LIMIT = 4096
#: how much of a payload's strings the inner-format detectors read
SCAN_CHARS = 256 * 1024
DAY_MS = 86_400_000


class TelemetryError(TuneError):
    """A telemetry folder or setting that cannot be used; the message says what to do.

    A :class:`~tersetalk.mcp.tune.TuneError`, so ``tune analyze --telemetry-dir`` reports
    it as its own usage error."""


# --- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TelemetrySettings:
    """Where and how a session's telemetry is written (telemetry is on when one exists)."""

    folder: Path
    sample_rate: float = 1.0
    flush_every_n: int = 25
    #: tokenizers counted on sampled events besides the proxy's own
    tokenizers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 <= self.sample_rate <= 1.0:
            raise TelemetryError(f"telemetry sample_rate {self.sample_rate}: use 0.0 to 1.0")
        if self.flush_every_n < 1:
            raise TelemetryError(f"telemetry flush_every_n {self.flush_every_n}: use 1 or more")


def default_folder(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/tersetalk/telemetry`` (``~/.local/state/...`` without it): where a
    tuned file that turns telemetry on writes when no ``--telemetry-dir`` is given."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tersetalk" / "telemetry"


def env_switch(environ: Mapping[str, str] | None = None) -> tuple[bool, str | None]:
    """(allowed, why not): ``TERSETALK_TELEMETRY`` off/0/false/no forbids telemetry.

    An unrecognised value also forbids it (a mistyped kill switch must still kill),
    and the reason says which values are understood."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV)
    if raw is None:
        return True, None
    value = raw.strip().lower()
    if value in ENV_ON:
        return True, None
    if value in ENV_OFF:
        return False, f"{ENV}={raw} turns telemetry off"
    return False, (
        f"{ENV}={raw!r} is not understood, so telemetry stays off; "
        f"use {ENV}=off to disable it or unset it"
    )


def resolve_settings(
    folder: Path | None = None,
    knobs: TelemetryKnobs | None = None,
    knobs_set: bool = False,
    environ: Mapping[str, str] | None = None,
    tokenizers: tuple[str, ...] = (),
) -> tuple[TelemetrySettings | None, str]:
    """The session's telemetry settings, or None for off, and one sentence saying why.

    Off by default. On when ``folder`` is given (``--telemetry-dir``) or when a tuned
    file sets its ``telemetry`` section (``knobs_set``; then into ``folder`` or
    :func:`default_folder`). ``TERSETALK_TELEMETRY=off`` wins over both. The sample rate
    and flush interval come from ``knobs`` (the tuned file's, or the defaults)."""
    allowed, why = env_switch(environ)
    if folder is None and not knobs_set:
        return None, "telemetry off (no --telemetry-dir, no telemetry section in --tuned)"
    if not allowed:
        return None, f"telemetry off: {why}"
    knobs = knobs or TelemetryKnobs()
    where = Path(folder) if folder is not None else default_folder(environ)
    settings = TelemetrySettings(where, knobs.sample_rate, knobs.flush_every_n, tokenizers)
    return settings, (
        f"telemetry on: {where} (sample rate {knobs.sample_rate:g}, written every "
        f"{knobs.flush_every_n} events; no payload text; {ENV}=off disables it)"
    )


def sampled(session_hash: str, seq: int, rate: float) -> bool:
    """Whether event ``seq`` of a session is written: a hash of both below ``rate``.

    Deterministic (the same session and number always decide the same way) and uniform
    over [0, 1), so about ``rate`` of a session's events are kept."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = hashlib.sha256(f"{session_hash}/{seq}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64 < rate


# --- what a payload is (shape, inner formats, size), never what it says ---------------------

_URL = re.compile(r"\bhttps?://[^\s\"'<>]+")
_LOG = re.compile(
    r"^\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}[^\n]*?\b(?:TRACE|DEBUG|INFO|WARN|WARNING|"
    r"ERROR|FATAL|CRITICAL)\b|^\s*\[?(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\]?[: ]",
    re.M,
)
_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}\b")
_DIFF = re.compile(r"^(?:@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|diff --git |\+\+\+ [ab/])", re.M)
_STACK = re.compile(
    r"Traceback \(most recent call last\)|^\s+at [\w.$<>]+\(.*\)\s*$|^\s*File \".*\", line \d+",
    re.M,
)
_FENCE = re.compile(r"^\s*(?:```|~~~)", re.M)
_PATH = re.compile(r"(?:^|[\s\"'(=])(?:~|\.{1,2})?(?:/[\w.@+-]+){2,}|\b[\w.-]+/[\w.-]+\.\w{1,5}\b")
_TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?")
_MD_ROW = re.compile(r"^\s*\|.*\|\s*$", re.M)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+\S")
_DIFF_LINE = re.compile(r"^(?:[+-]|@@ |diff --git |index [0-9a-f]+\.\.)")


def inner_formats(strings: Iterable[str]) -> list[str]:
    """The embedded formats found in ``strings`` (the first :data:`SCAN_CHARS` of them)."""
    parts, size, json_seen = [], 0, False
    for s in strings:
        if not s:
            continue
        if not json_seen and s.lstrip()[:1] in ("{", "[") and len(s) <= SCAN_CHARS:
            try:
                json_seen = isinstance(json.loads(s), dict | list)
            except (ValueError, RecursionError):
                pass
        parts.append(s[: SCAN_CHARS - size])
        size += len(parts[-1])
        if size >= SCAN_CHARS:
            break
    text = "\n".join(parts)
    found = {
        "url": _URL.search(text),
        "log": _LOG.search(text),
        "hash": _HASH.search(text),
        "diff": _DIFF.search(text),
        "md_table": len(_MD_ROW.findall(text)) >= 2,
        "stack_trace": _STACK.search(text),
        "code_fence": _FENCE.search(text),
        "json": json_seen,
        "path": _PATH.search(text),
        "timestamp": _TIMESTAMP.search(text),
    }
    return sorted(k for k, v in found.items() if v)


def _walk(value: Any) -> tuple[int, list[str]]:
    """(nesting depth, the string leaves) of a JSON-like value, without recursion."""
    depth, strings = 0, []
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            depth = max(depth, d + 1)
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            depth = max(depth, d + 1)
            stack.extend((x, d + 1) for x in v)
        elif isinstance(v, str):
            strings.append(v)
    return depth, strings


def _parse(text: str) -> tuple[bool, Any]:
    """(structured, value): JSON or a Python literal (what mcp-server-sqlite prints)."""
    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        return True, json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    if stripped[0] in "[{":
        from tersetalk.mcp.literal import parse_literal

        value = parse_literal(stripped)
        if value is not None:
            return True, value
    return False, None


def describe(text: str) -> dict[str, Any]:
    """The shape, inner formats, table size and nesting depth of one payload.

    Shapes are the tuner's (:data:`tersetalk.mcp.tune.SHAPES`). A JSON (or Python
    literal) value is classified by its structure; text is a ``markdown_table`` when GFM
    table rows are at least half its lines, ``code`` when fenced or diff lines are,
    ``numbered_list`` when list items are, else ``prose``. Columns and rows are given for
    tables and arrays of objects (the largest table of a Markdown text); the depth for
    structured values only."""
    structured, value = _parse(text)
    out: dict[str, Any] = {"n_cols": None, "n_rows": None, "depth": None}
    if structured:
        depth, strings = _walk(value)
        out["depth"] = depth
        if value in ([], {}, None, ""):
            shape = "empty"
        elif isinstance(value, list):
            if all(isinstance(x, dict) for x in value):
                shape = "array_of_objects"
                out["n_cols"] = len({k for x in value for k in x})
                out["n_rows"] = len(value)
            elif any(isinstance(x, dict | list) for x in value):
                shape = "nested_object"
            else:
                shape = "array_of_scalars"
        elif isinstance(value, dict):
            nests = any(isinstance(x, dict | list) for x in value.values())
            shape = "nested_object" if nests else "flat_object"
        else:
            shape = "scalar"
        out["shape"] = shape
        out["inner_formats"] = inner_formats(strings)
        return out
    lines = [x for x in text.split("\n") if x.strip()]
    if not lines:
        out["shape"], out["inner_formats"] = "empty", []
        return out
    table_lines = len(_MD_ROW.findall(text))
    diff = _DIFF.search(text) is not None  # else a "- item" line is a list, not a diff
    fenced, inside = 0, False
    for x in lines:
        if _FENCE.match(x):
            inside = not inside
            fenced += 1
        elif inside or (diff and _DIFF_LINE.match(x)):
            fenced += 1
    if table_lines >= 2 and table_lines * 2 >= len(lines):
        shape = "markdown_table"
        cols, rows = _largest_table(text)
        out["n_cols"], out["n_rows"] = cols, rows
    elif fenced * 2 >= len(lines):
        shape = "code"
    elif sum(bool(_LIST_ITEM.match(x)) for x in lines) * 2 >= len(lines):
        shape = "numbered_list"
    else:
        shape = "prose"
    out["shape"] = shape
    out["inner_formats"] = inner_formats([text])
    return out


def _largest_table(text: str) -> tuple[int | None, int | None]:
    from tersetalk.formats.markdown import table_spans

    try:
        spans = table_spans(text)
    except Exception:  # a parser fault on odd Markdown: the sizes are unknown, not fatal
        return None, None
    if not spans:
        return None, None
    t = max((s.table for s in spans), key=lambda t: len(t.rows))
    return len(t.header), len(t.rows)


_BLOCK_HEADER = re.compile(r"\(([a-z_]+)\):$")
_TT_FENCE = re.compile(r"^(`{3,})tt:(.*)$")


def encoders(sent: str, kind: str) -> dict[str, int]:
    """The encoder chosen per subtree of a sent text: format name -> subtrees.

    Read back from what was sent (the format hint, the container's block headers, the
    Markdown fences the proxy wrote); compact JSON where no block was chosen. Empty for
    a text sent as it came and for a reference."""
    from tersetalk.formats.container import BLOCK_FORMATS

    if kind != "encoded":
        return {}
    names = set(BLOCK_FORMATS) | {"json", "mckp", "toon", "csv", "kv", "markdown_table"}
    counts: Counter[str] = Counter()
    for line in sent.split("\n"):
        if line.startswith("> [encoded: ") and line.endswith("]"):
            for part in line[len("> [encoded: ") : -1].split("|"):
                name = part.strip()
                if name in names and name != "mckp":
                    counts[name] += 1
            continue
        m = _TT_FENCE.match(line)
        if m:
            for part in m.group(2).split("|"):
                name = part.strip()
                if name in names and name != "mckp":
                    counts[name] += 1
            continue
        m = _BLOCK_HEADER.search(line)
        if m and m.group(1) in BLOCK_FORMATS:
            counts[m.group(1)] += 1
    if not counts:
        counts["json_compact"] = 1
    return dict(sorted(counts.items()))


def fallback_kind(fallback: str | None) -> str | None:
    """A fixed name for why the pipeline fell back (its message may quote the payload)."""
    from tersetalk.mcp.session import fallback_kind as kind

    return kind(fallback)


# --- the recorder ------------------------------------------------------------------------------


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TelemetryRecorder:
    """One proxy session's telemetry: its events file and, at close, its summary.

    Not thread-safe: the proxy calls it under its session lock, one result at a time.
    Use as a context manager or call :meth:`close`; a recorder that saw no tool result
    writes nothing (an empty session would only pull the tuner's averages down).
    """

    settings: TelemetrySettings
    tokenizer: str = "o200k_base"
    server: str | None = None
    session_id: str | None = None
    clock: Any = field(default=_now_ms, repr=False)

    def __post_init__(self) -> None:
        sid = self.session_id or uuid.uuid4().hex
        self.session_hash = hashlib.sha256(sid.encode()).hexdigest()[:16]
        self.folder = Path(self.settings.folder)
        self.events_path = self.folder / f"events-{self.session_hash}.jsonl"
        self.summary_path = self.folder / f"summary-{self.session_hash}.json"
        self.started_at_ms = self.clock()
        self.seq = 0
        self.sampled_events = 0
        self.written_events = 0
        self.buffer: list[str] = []
        self.flushes = 0
        self.write_errors = 0
        self.closed = False
        self._partition = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._totals: Counter[str] = Counter()
        self._tokens: dict[str, list[int]] = {}
        self._endpoints: Counter[str] = Counter()
        self._kinds: Counter[str] = Counter()
        self._hints: Counter[str] = Counter()
        self._fallbacks: Counter[str] = Counter()
        self._max_partition = 0

    # -- one result --------------------------------------------------------------------

    def _dup(self, digest: str, partition: int) -> int | None:
        """The LRU stack distance of ``digest`` in this partition (distinct bodies seen
        since its last occurrence), or None for a first occurrence; then remember it."""
        if partition != self._partition:
            self._partition = partition
            self._seen.clear()
        distance = None
        if digest in self._seen:
            distance = 0
            for key in reversed(self._seen):
                if key == digest:
                    break
                distance += 1
            self._seen.move_to_end(digest)
        else:
            self._seen[digest] = None
            while len(self._seen) > SEEN_LIMIT:
                self._seen.popitem(last=False)
        return distance

    def record(
        self,
        endpoint: str,
        text: str,
        processed: Any,
        *,
        context_partition: int = 0,
        downstream_s: float | None = None,
        part: int = 0,
    ) -> dict[str, Any] | None:
        """Count one tool-result text and, if sampled, buffer its event (returned).

        ``processed`` is the pipeline's :class:`~tersetalk.mcp.session.Processed` for
        ``text``. Every result counts in the summary and in the dup statistics; only
        sampled ones are described (shape, formats) and written. The event holds:
        ``v, session_hash, seq, part, ts_ms, endpoint_class, server, kind, layer, source,
        shape, inner_formats, response_chars, n_cols, n_rows, depth, tokens`` (tokenizer
        -> [original, sent]), ``encoders`` (format -> subtrees), ``dedup_hit``,
        ``dup_in_partition, repeat_distance, hints, content_sha_prefix,
        context_partition, lossless, fallback`` (a fixed name), ``sample_rate``,
        ``timings`` (pipeline_s, downstream_s, describe_s).

        A text the pipeline did not read (longer than its ``max_result_chars``: no
        tokens counted) is counted in the summary by its size and as ``too_long``, and
        is neither hashed nor described here either: it has no event."""
        if self.closed:
            raise TelemetryError("this telemetry session is closed; start a new recorder")
        t0 = time.perf_counter()
        self.seq += 1
        counted = self._count(endpoint, text, processed, context_partition)
        if counted is None:
            return None
        if not sampled(self.session_hash, self.seq, self.settings.sample_rate):
            return None
        self.sampled_events += 1
        digest, distance = counted
        event = self._event(endpoint, text, processed, digest, distance, part, context_partition)
        event["timings"] = {
            "pipeline_s": processed.pipeline_s,
            "downstream_s": downstream_s,
            "describe_s": time.perf_counter() - t0,
        }
        self.buffer.append(json.dumps(event, ensure_ascii=True, sort_keys=True) + "\n")
        if len(self.buffer) >= self.settings.flush_every_n:
            self.flush()
        return event

    def _count(
        self, endpoint: str, text: str, p: Any, context_partition: int
    ) -> tuple[str, int | None] | None:
        """Count one result in the summary and the dup statistics: its digest and its
        repeat distance, or None for a text the pipeline did not read (``too_long``)."""
        self._max_partition = max(self._max_partition, context_partition)
        self._totals["events"] += 1
        self._totals["response_chars"] += len(text)
        self._endpoints[endpoint] += 1
        self._kinds[p.kind] += 1
        fallback = fallback_kind(p.fallback)
        if fallback is not None:  # a fixed name, never the payload
            self._fallbacks[fallback] += 1
        if p.raw_tokens is None:  # longer than the proxy reads: counted, never read
            self._totals["too_long"] += 1
            return None
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        distance = self._dup(digest, context_partition)
        self._totals["dedup_hits"] += p.kind == "ref"
        self._totals["near_refs"] += p.kind == "near-ref"
        self._totals["dup_in_partition"] += distance is not None
        tok = self._tokens.setdefault(self.tokenizer, [0, 0])
        tok[0] += p.raw_tokens
        tok[1] += p.sent_tokens
        self._hints.update(p.hints)
        return digest, distance

    def _event(
        self,
        endpoint: str,
        text: str,
        p: Any,
        digest: str,
        distance: int | None,
        part: int,
        context_partition: int,
    ) -> dict[str, Any]:
        """A sampled result's event (:meth:`record`'s docstring lists its fields), its
        timings left to the caller."""
        shape = describe(text)
        tokens = {self.tokenizer: [p.raw_tokens, p.sent_tokens]}
        if self.settings.tokenizers:
            from tersetalk.core.tokens import count_tokens

            for name in self.settings.tokenizers:
                if name not in tokens:
                    tokens[name] = [count_tokens(text, name), count_tokens(p.text, name)]
        return {
            "v": EVENT_SCHEMA,
            "session_hash": self.session_hash,
            "seq": self.seq,
            "part": part,
            "ts_ms": self.clock(),
            "endpoint_class": endpoint,
            "server": self.server,
            "kind": p.kind,
            "layer": {"ref": "L0", "near-ref": "L0", "encoded": "L2"}.get(p.kind, "none"),
            "source": p.source,
            "shape": shape["shape"],
            "inner_formats": shape["inner_formats"],
            "response_chars": len(text),
            "n_cols": shape["n_cols"],
            "n_rows": shape["n_rows"],
            "depth": shape["depth"],
            "tokens": tokens,
            "encoders": encoders(p.text, p.kind),
            "dedup_hit": p.kind == "ref",
            "dup_in_partition": distance is not None,
            "repeat_distance": distance,
            "hints": list(p.hints),
            "content_sha_prefix": digest[:32],
            "context_partition": context_partition,
            "lossless": bool(p.lossless),
            "fallback": fallback_kind(p.fallback),
            "sample_rate": self.settings.sample_rate,
        }

    def note(self, what: str) -> None:
        """Count a call that has no result text to describe (``error``, ``retrieval``)."""
        self._totals[what] += 1

    # -- writing -----------------------------------------------------------------------

    def flush(self) -> None:
        """Append the buffered events in one write. A failing disk costs the buffer and a
        count (``write_errors`` in the summary), never the proxy's answer."""
        if not self.buffer:
            return
        data = "".join(self.buffer)
        n = len(self.buffer)
        self.buffer = []
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            with self.events_path.open("a", encoding="utf-8") as fh:
                fh.write(data)
        except OSError as exc:
            self.write_errors += 1
            log.warning("telemetry: cannot append %d event(s) to %s (%s); they are dropped",
                        n, self.events_path, exc)  # fmt: skip
            return
        self.flushes += 1
        self.written_events += n

    def summary(self) -> dict[str, Any]:
        """The session's roll-up over every result, sampled or not.

        ``total_events`` counts every result, so ``sample_rate_applied`` is 1.0: the
        tuner divides the counts by it, and these are not down-sampled. The rate the
        events file was written at is ``events_sample_rate``."""
        from tersetalk.mcp.session import READBACK_KINDS

        t = self._totals
        events = t["events"]
        ended = self.clock()
        base, final = self._tokens.get(self.tokenizer, [0, 0])
        return {
            "v": SUMMARY_SCHEMA,
            "session_hash": self.session_hash,
            "server": self.server,
            "started_at_ms": self.started_at_ms,
            "ended_at_ms": ended,
            "duration_sec": (ended - self.started_at_ms) / 1000.0,
            "total_events": events,
            "sampled_events": self.sampled_events,
            "written_events": self.written_events,
            "sample_rate_applied": 1.0,
            "events_sample_rate": self.settings.sample_rate,
            "flush_every_n": self.settings.flush_every_n,
            "compaction_count": self._max_partition,
            "dedup_hits": t["dedup_hits"],
            "dedup_hit_rate": t["dedup_hits"] / events if events else 0.0,
            "near_refs": t["near_refs"],
            "dup_in_partition": t["dup_in_partition"],
            "avg_response_chars": t["response_chars"] / events if events else 0.0,
            "tokenizer": self.tokenizer,
            "total_baseline_tokens": base,
            "total_final_tokens": final,
            "savings_pct": 100.0 * (1 - final / base) if base else 0.0,
            "tokens": {k: list(v) for k, v in self._tokens.items()},
            "kinds": dict(sorted(self._kinds.items())),
            "hints": dict(sorted(self._hints.items())),
            "endpoint_mix": dict(self._endpoints.most_common(20)),
            "errors": t["error"],
            "too_long": t["too_long"],
            # re-encodings that did not decode to what the downstream sent (the original
            # went instead), and every fallback by its fixed name
            "readback_failures": sum(self._fallbacks[k] for k in READBACK_KINDS),
            "fallbacks": dict(sorted(self._fallbacks.items())),
            "retrievals": t["retrieval"],
            "write_errors": self.write_errors,
        }

    def close(self) -> Path | None:
        """Flush, then write the summary atomically (a reader never sees half of one).
        Returns its path, or None when the session had no result (nothing written)."""
        if self.closed:
            return self.summary_path if self.summary_path.exists() else None
        self.flush()
        self.closed = True
        if not self._totals["events"] and not self._totals["error"]:
            return None
        text = json.dumps(self.summary(), indent=1, sort_keys=True) + "\n"
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_atomic(self.summary_path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        except OSError as exc:
            log.warning("telemetry: cannot write %s (%s)", self.summary_path, exc)
            return None
        return self.summary_path

    def __enter__(self) -> TelemetryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- reading ------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _valid(ev: Any) -> bool:
    """Whether a parsed line is an event the aggregates can use."""
    if not isinstance(ev, dict):
        return False
    if not (isinstance(ev.get("endpoint_class"), str) and ev["endpoint_class"]):
        return False
    if not isinstance(ev.get("session_hash"), str) or not isinstance(ev.get("shape"), str):
        return False
    if not _is_int(ev.get("ts_ms")) or not _is_int(ev.get("response_chars")):
        return False
    if ev["response_chars"] < 0:
        return False
    rate = ev.get("sample_rate", 1.0)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1:
        return False
    for key in ("n_cols", "n_rows", "depth", "repeat_distance"):
        v = ev.get(key)
        if v is not None and not (_is_int(v) and v >= 0):
            return False
    formats = ev.get("inner_formats", [])
    if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
        return False
    return isinstance(ev.get("dup_in_partition", False), bool)


def _since_ms(days: float | None, now_ms: int | None) -> int | None:
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int | float) or not days > 0:
        raise TelemetryError(f"days {days!r}: give a positive number of days, or none for all")
    return int((now_ms if now_ms is not None else _now_ms()) - days * DAY_MS)


def _folder(folder: str | Path) -> Path:
    p = Path(folder)
    if not p.is_dir():
        raise TelemetryError(
            f"{p}: no such telemetry folder; give the folder the proxy wrote with "
            "--telemetry-dir (it holds events-*.jsonl and summary-*.json)"
        )
    return p


def read_events(
    folder: str | Path, days: float | None = None, *, now_ms: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The events of ``folder`` in the window (the last ``days`` days; None: all), and
    how many lines were skipped as malformed (a warning per file says how many).

    A truncated last line (a proxy killed mid-write), garbage, or a line whose fields
    have the wrong types is skipped, never fatal."""
    p = _folder(folder)
    since = _since_ms(days, now_ms)
    out: list[dict[str, Any]] = []
    skipped = 0
    for path in sorted(p.glob("events-*.jsonl")):
        bad = 0
        try:
            with path.open("rb") as fh:
                for raw in fh:
                    if not raw.strip():
                        continue
                    try:
                        ev = json.loads(raw)
                    except (ValueError, RecursionError):
                        bad += 1
                        continue
                    if not _valid(ev):
                        bad += 1
                        continue
                    if since is None or ev["ts_ms"] >= since:
                        out.append(ev)
        except OSError as exc:
            log.warning("telemetry: cannot read %s (%s); skipped", path, exc)
            continue
        if bad:
            log.warning("telemetry: %s: skipped %d malformed line(s) (a truncated last "
                        "line is what a killed proxy leaves)", path, bad)  # fmt: skip
        skipped += bad
    return out, skipped


def read_session_summaries(
    folder: str | Path, days: float | None = None, *, now_ms: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The ``summary-*.json`` of ``folder`` that ended in the window (newest last), and
    how many files were skipped as unreadable."""
    p = _folder(folder)
    since = _since_ms(days, now_ms)
    out, skipped = [], 0
    for path in sorted(p.glob("summary-*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            row = None
        if not isinstance(row, dict) or not _is_int(row.get("total_events")):
            log.warning("telemetry: %s is not a session summary; skipped", path)
            skipped += 1
            continue
        ended = row.get("ended_at_ms")
        if since is not None and _is_int(ended) and ended < since:
            continue
        out.append(row)
    out.sort(key=lambda r: (r.get("ended_at_ms") or 0, str(r.get("session_hash"))))
    return out, skipped


# --- per-endpoint fingerprints ------------------------------------------------------------


def _top(weights: Mapping[str, float]) -> list[str]:
    """Names by weight, heaviest first, ties by name."""
    return [k for k, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))]


def fingerprint(endpoint: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    """One endpoint's fingerprint from its events.

    Each event weighs ``1 / sample_rate`` (so sessions sampled at different rates count
    for the calls they stand for): ``call_count`` is the rounded sum of weights, the
    means and the fractions are weighted, and the quantiles are weighted nearest-rank
    (the smallest value whose cumulative weight reaches q of the total;
    :func:`tersetalk.mcp.tune.weighted_quantile`). ``dup_rate`` is the share of calls
    whose exact body came earlier in the same compaction partition of the session;
    ``repeat_burst_p90`` is the 90th percentile, over those repeats, of the number of
    distinct bodies seen since the earlier copy (an LRU of ``1 + that`` entries would
    have caught it; 0 without repeats). ``avg_cols``/``avg_rows`` average the tables
    and arrays of objects, ``nested_object_depth_p95`` the structured payloads (None
    when there are none)."""
    w = [1.0 / e.get("sample_rate", 1.0) for e in events]
    total = sum(w)
    chars = [float(e["response_chars"]) for e in events]
    shapes: Counter[str] = Counter()
    formats: Counter[str] = Counter()
    for e, wi in zip(events, w, strict=True):
        shapes[e["shape"]] += wi
        for f in set(e.get("inner_formats", [])):
            formats[f] += wi
    mix = {k: shapes[k] / total for k in sorted(shapes)}
    entropy = -sum(v * math.log2(v) for v in mix.values() if v > 0)
    dup_w = [wi for e, wi in zip(events, w, strict=True) if e.get("dup_in_partition")]
    distances = [
        (float(e["repeat_distance"]), wi)
        for e, wi in zip(events, w, strict=True)
        if e.get("dup_in_partition") and e.get("repeat_distance") is not None
    ]
    tables = [
        (e["n_cols"], e.get("n_rows"), wi)
        for e, wi in zip(events, w, strict=True)
        if e.get("n_cols") is not None
    ]
    depths = [
        (float(e["depth"]), wi)
        for e, wi in zip(events, w, strict=True)
        if e.get("depth") is not None
    ]
    rows_known = [(r, wi) for _, r, wi in tables if r is not None]

    def q(pairs: list[tuple[float, float]], at: float) -> float:
        return float(weighted_quantile([v for v, _ in pairs], [x for _, x in pairs], at))

    sizes = list(zip(chars, w, strict=True))
    return {
        "endpoint_class": endpoint,
        "call_count": int(round(total)),
        "avg_response_chars": sum(c * wi for c, wi in sizes) / total,
        "response_chars_p25": q(sizes, 0.25),
        "response_chars_p50": q(sizes, 0.50),
        "response_chars_p90": q(sizes, 0.90),
        "shape_dominant": _top(shapes)[0],
        "shape_mix": json.dumps(mix, sort_keys=True),
        "shape_entropy": entropy + 0.0,
        "dup_rate": sum(dup_w) / total,
        "repeat_burst_p90": q(distances, 0.90) if distances else 0.0,
        "inner_formats_top3": json.dumps(_top(formats)[:3]),
        "avg_cols": (sum(c * wi for c, _, wi in tables) / sum(wi for *_, wi in tables))
        if tables
        else None,
        "avg_rows": (sum(r * wi for r, wi in rows_known) / sum(wi for _, wi in rows_known))
        if rows_known
        else None,
        "nested_object_depth_p95": q(depths, 0.95) if depths else None,
        "first_seen_ms": min(e["ts_ms"] for e in events),
        "last_seen_ms": max(e["ts_ms"] for e in events),
        "source_sessions": len({e["session_hash"] for e in events}),
    }


def endpoint_fingerprints(
    folder: str | Path, days: float | None = None, *, now_ms: int | None = None
) -> list[dict[str, Any]]:
    """Per-endpoint fingerprints over the events of the last ``days`` days (None: all),
    one dict per endpoint with exactly :data:`FINGERPRINT_COLUMNS`, sorted by endpoint.

    What ``tersetalk mcp tune analyze --telemetry-dir`` reads; each row validates as
    :class:`tersetalk.mcp.tune.EndpointStats`. Malformed lines are skipped (and counted
    in a warning)."""
    events, _ = read_events(folder, days, now_ms=now_ms)
    by: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by.setdefault(e["endpoint_class"], []).append(e)
    return [fingerprint(name, by[name]) for name in sorted(by)]


def fingerprints_frame(rows: list[dict[str, Any]]):
    """The fingerprints as a DataFrame with a stable schema (also when empty)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(FINGERPRINT_COLUMNS))
    for col in FINGERPRINT_COLUMNS:
        if col in _INT_COLUMNS:
            df[col] = df[col].astype("int64")
        elif col in _STR_COLUMNS:
            df[col] = df[col].astype("string")
        else:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    return df


def write_fingerprints(
    folder: str | Path, out: str | Path, days: float | None = None, *, now_ms: int | None = None
) -> Path:
    """Write the fingerprints of ``folder`` to the Parquet file ``out`` (atomically), with
    the window and the time it was computed in the file's metadata."""
    from tersetalk.core.io import write_parquet_atomic

    now = now_ms if now_ms is not None else _now_ms()
    rows = endpoint_fingerprints(folder, days, now_ms=now)
    meta = {"source": "tersetalk.mcp.telemetry", "folder": str(folder), "days": days,
            "computed_at_ms": now, "schema": EVENT_SCHEMA}  # fmt: skip
    return write_parquet_atomic(fingerprints_frame(rows), out, meta)
