"""Bootstrap the tuner's configuration from a coding agent's own session logs (P1-P3).

Why: the rules R1-R5 read the proxy's telemetry, which does not exist on a fresh
install. The agent has been logging its sessions all along, and those logs already say
which model the user runs, how the agent works (many file reads, long sessions with
compactions) and which MCP tools it calls and how large their answers are. Three rules
turn that into a first schema-v2 configuration that ``tune analyze`` refines once
telemetry exists.

The log format read is Claude Code's: ``~/.claude/projects/<project>/<session-id>.jsonl``,
one JSON object a line. Its record format is internal to Claude Code and changes between
releases, so the reader is tolerant on purpose: a line of an unknown ``type`` is counted
as skipped, a line that is not a JSON object (or is nested too deeply to parse) is
counted as malformed (with its file and line number), and nothing in a log stops the
scan. What it relies on:

- ``type`` ``assistant``: ``message.model``, ``message.id``, ``message.usage`` and
  ``message.content`` blocks; a ``tool_use`` block has ``id`` and ``name``
  (``mcp__<server>__<tool>`` for an MCP tool). One API response may be written as
  several lines that share ``message.id`` and each repeat the full usage, so a turn is
  one message id and its usage is counted once (the last line's, as streaming
  snapshots overwrite). ``model: "<synthetic>"`` marks an API error that reached no
  model: not a turn;
- ``type`` ``user``: a prompt (text content) or ``tool_result`` blocks with
  ``tool_use_id``, ``content`` (a string, or a list of text/image blocks) and
  ``is_error``; ``isCompactSummary`` marks the summary written after a compaction;
- ``type`` ``system`` with ``subtype: compact_boundary``: a compaction;
- ``type`` ``summary``: a session title (for ``--resume``), counted, not a compaction.

Lines without a ``sessionId`` (titles) belong to the first session of their file.

Privacy: nothing of the text is kept. A session is reduced to counts (models, turns,
tool calls per tool, compactions, tokens) and one integer per tool result (its size in
characters); tool inputs, prompts and answers are read and dropped line by line.

The rules, each a pure function of the statistics and the base configuration:

- **P1 dominant model**: the model with the most assistant turns, if it has at least
  ``P1_MIN_SHARE`` (the design's 80%) of them, pins ``profiles.llm.active`` to the
  profile it resolves to (a variant's name or ``match`` glob); a model no profile
  knows gets a new variant (its tokenizer family guessed from the id, the other values
  from the first profile of that family);
- **P2 agent class**: each session is classified by the base config's own classifier
  (the design's thresholds: file_search_heavy at <= 200 tool calls and a read share
  >= 0.5, marathon_refactor at >= 500 calls and >= 3 compactions); the class that
  holds more than ``P2_MIN_SHARE`` of all tool calls pins ``profiles.agent.active``;
- **P3 placeholder data profiles**: every observed MCP endpoint (server, tool) that no
  data profile matches yet gets a placeholder variant: its pattern is the tool's name
  (the proxy names endpoints by tool), no preferred format (the logs do not show a
  payload's structure; a user fills it in), and the reference hint when its median
  answer is above the design's break-even size for one. With at least ``MIN_CALLS``
  MCP results, ``dedup.min_body_chars`` follows R5's formula over their sizes.

Every change is a :class:`tersetalk.mcp.tune.Change` (the tuner's evidence row). The
rules only add what is missing or move a value to the one the logs give, so running
them again with their own output as the base changes nothing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from tersetalk.mcp import tune as T

#: P1: the design's share of assistant turns a model needs before the llm profile is pinned
P1_MIN_SHARE = 0.80
#: P2: a class must hold more than this share of the tool calls to be pinned
P2_MIN_SHARE = 0.50
#: P3: the design's break-even size (chars) above which a reference hint saves tokens
REF_BREAK_EVEN_CHARS = 175
#: P3: results needed before dedup.min_body_chars is set (R1/R2's small-corpus guard)
MIN_CALLS = T.MIN_CALLS
#: the agent's built-in tools that only read (the design's "read-class" calls)
READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "NotebookRead"})
#: model ids -> tokenizer family, for a model no llm profile matches (first match wins)
TOKENIZER_GUESS = (
    ("claude-*", "anthropic_class"),
    ("*glm*", "anthropic_class"),
    ("*:*", "ollama_bpe"),  # an Ollama tag (name:size)
)
SYNTHETIC_MODEL = "<synthetic>"
UNKNOWN_MODEL = "(unknown)"  # an assistant line without a model id
COMPACT_PREFIX = "This session is being continued from a previous conversation"
#: how many malformed lines are listed by place (the rest only counted)
MAX_LISTED = 20


class AgentLogError(ValueError):
    """Logs that cannot be used: no such path, no log file, nothing parseable."""


# --- statistics -----------------------------------------------------------------------------


@dataclass
class SessionLog:
    """What one session's lines reduce to: counts and result sizes, no text."""

    session_id: str
    files: set[str] = field(default_factory=set)
    #: model id -> assistant turns (distinct message ids)
    models: Counter[str] = field(default_factory=Counter)
    user_prompts: int = 0
    api_errors: int = 0
    #: tool name as the agent calls it -> calls
    tool_calls: Counter[str] = field(default_factory=Counter)
    #: tool name -> sizes (chars) of its non-error results
    result_chars: dict[str, list[int]] = field(default_factory=dict)
    result_errors: int = 0
    compact_boundaries: int = 0
    compact_summaries: int = 0
    titles: int = 0
    tokens: Counter[str] = field(default_factory=Counter)
    first_ts: str | None = None
    last_ts: str | None = None
    # de-duplication state (ids only)
    _usage: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    _tool_ids: dict[str, str] = field(default_factory=dict, repr=False)
    _result_ids: set[str] = field(default_factory=set, repr=False)

    @property
    def assistant_turns(self) -> int:
        return sum(self.models.values())

    @property
    def events(self) -> int:
        """Tool calls: the pipeline's unit (one response per call)."""
        return sum(self.tool_calls.values())

    @property
    def compactions(self) -> int:
        # a compaction writes a boundary and a summary message; older logs only the latter
        return max(self.compact_boundaries, self.compact_summaries)

    @property
    def read_share(self) -> float:
        n = self.events
        return sum(c for t, c in self.tool_calls.items() if t in READ_TOOLS) / n if n else 0.0

    @property
    def calls_per_turn(self) -> float:
        return self.events / self.assistant_turns if self.assistant_turns else 0.0

    def finish(self) -> None:
        """Sum the usage of each message once (the last line of a message wins)."""
        for usage in self._usage.values():
            self.tokens.update(usage)
        self._usage.clear()

    def merge(self, other: SessionLog) -> None:
        """Fold a bucket of the same session (another file, or lines without an id)."""
        self.files |= other.files
        self.models.update(other.models)
        self.user_prompts += other.user_prompts
        self.api_errors += other.api_errors
        self.tool_calls.update(other.tool_calls)
        for tool, sizes in other.result_chars.items():
            self.result_chars.setdefault(tool, []).extend(sizes)
        self.result_errors += other.result_errors
        self.compact_boundaries += other.compact_boundaries
        self.compact_summaries += other.compact_summaries
        self.titles += other.titles
        self.tokens.update(other.tokens)
        stamps = [t for t in (self.first_ts, other.first_ts) if t]
        self.first_ts = min(stamps) if stamps else None
        stamps = [t for t in (self.last_ts, other.last_ts) if t]
        self.last_ts = max(stamps) if stamps else None


@dataclass
class LogScan:
    """Every session found, and what could not be read."""

    sessions: dict[str, SessionLog]
    files: list[str]
    lines: int = 0
    malformed: int = 0
    malformed_at: list[str] = field(default_factory=list)  # "file:line", the first few
    unreadable: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # type (or type/subtype) -> lines

    def models(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for s in self.sessions.values():
            out.update(s.models)
        return out

    def mcp_results(self) -> dict[tuple[str, str], list[int]]:
        """(server, tool) -> result sizes over all sessions."""
        out: dict[tuple[str, str], list[int]] = {}
        for s in self.sessions.values():
            for tool, sizes in s.result_chars.items():
                ep = mcp_endpoint(tool)
                if ep is not None:
                    out.setdefault(ep, []).extend(sizes)
        return out

    def mcp_calls(self) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for s in self.sessions.values():
            for tool, n in s.tool_calls.items():
                ep = mcp_endpoint(tool)
                if ep is not None:
                    out[ep] += n
        return out


def mcp_endpoint(tool: str) -> tuple[str, str] | None:
    """``mcp__<server>__<tool>`` as (server, tool); None for the agent's own tools."""
    if not tool.startswith("mcp__"):
        return None
    server, sep, name = tool[5:].partition("__")
    if not sep or not server or not name:
        return None
    return server, name


def log_files(paths: Sequence[str | Path]) -> list[Path]:
    """The ``*.jsonl`` files of ``paths`` (a file as given, a folder walked), sorted and
    without repeats."""
    out: dict[Path, None] = {}
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_file():
            out[p] = None
        elif p.is_dir():
            found = sorted(q for q in p.rglob("*.jsonl") if q.is_file())
            if not found:
                raise AgentLogError(f"{p}: no session logs (*.jsonl) in this folder")
            out.update(dict.fromkeys(found))
        else:
            raise AgentLogError(f"{p}: no such file or folder")
    return list(out)


def _text_chars(content: Any) -> int:
    """The size of a tool result: a string's length, or its text blocks' lengths."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        n = 0
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                n += len(block["text"])
        return n
    return 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _assistant(s: SessionLog, message: dict[str, Any], index: str) -> None:
    model = message.get("model")
    if model == SYNTHETIC_MODEL:
        s.api_errors += 1
        return
    mid = message.get("id")
    key = mid if isinstance(mid, str) and mid else f"line:{index}"
    if key not in s._usage:
        s.models[model if isinstance(model, str) and model else UNKNOWN_MODEL] += 1
    usage = message.get("usage")
    if isinstance(usage, dict):
        s._usage[key] = {
            "input": _int(usage.get("input_tokens")),
            "output": _int(usage.get("output_tokens")),
            "cache_read": _int(usage.get("cache_read_input_tokens")),
            "cache_creation": _int(usage.get("cache_creation_input_tokens")),
        }
    else:
        s._usage.setdefault(key, {})
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        name, bid = block.get("name"), block.get("id")
        if not isinstance(name, str) or not name:
            continue
        if isinstance(bid, str) and bid:
            if bid in s._tool_ids:  # the same block written again (a snapshot)
                continue
            s._tool_ids[bid] = name
        s.tool_calls[name] += 1


def _user(s: SessionLog, line: dict[str, Any], message: dict[str, Any]) -> None:
    content = message.get("content")
    if line.get("isCompactSummary") is True:
        s.compact_summaries += 1
        return
    if isinstance(content, str):
        if content.startswith(COMPACT_PREFIX):
            s.compact_summaries += 1
        elif line.get("isMeta") is not True:
            s.user_prompts += 1
        return
    if not isinstance(content, list):
        return
    prompt = False
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            tid = block.get("tool_use_id")
            if isinstance(tid, str) and tid:
                if tid in s._result_ids:
                    continue
                s._result_ids.add(tid)
            tool = s._tool_ids.get(tid, "(unknown)") if isinstance(tid, str) else "(unknown)"
            if block.get("is_error") is True:
                s.result_errors += 1
            else:
                s.result_chars.setdefault(tool, []).append(_text_chars(block.get("content")))
        elif kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text.startswith(COMPACT_PREFIX):
                s.compact_summaries += 1
                return
            prompt = True
    if prompt and line.get("isMeta") is not True:
        s.user_prompts += 1


def _scan_file(path: Path, scan: LogScan) -> None:
    """Fold one file's lines into ``scan.sessions``, line by line (nothing kept)."""
    buckets: dict[str | None, SessionLog] = {}
    where = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        scan.unreadable.append(f"{where} ({exc.strerror or exc})")
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            scan.lines += 1
            why = ""
            try:
                line = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                line = None
            except RecursionError:  # nested deeper than the parser goes
                line, why = None, " (nested too deeply)"
            if not isinstance(line, dict):
                scan.malformed += 1
                if len(scan.malformed_at) < MAX_LISTED:
                    scan.malformed_at.append(f"{where}:{number}{why}")
                continue
            kind = line.get("type")
            sid = line.get("sessionId")
            sid = sid if isinstance(sid, str) and sid else None
            message = line.get("message")
            if kind == "summary":
                known = True
            elif kind in ("user", "assistant"):
                known = isinstance(message, dict)
            elif kind == "system":
                known = line.get("subtype") == "compact_boundary"
            else:
                known = False
            if not known:
                label = kind if isinstance(kind, str) else "(no type)"
                if kind == "system":
                    label = f"system/{line.get('subtype')}"
                elif kind in ("user", "assistant"):
                    label = f"{kind}/(no message)"
                scan.skipped[label] += 1
                continue
            s = buckets.get(sid)
            if s is None:
                s = buckets[sid] = SessionLog(session_id=sid or "")
                s.files.add(where)
            ts = line.get("timestamp")
            if isinstance(ts, str) and ts:
                s.first_ts = ts if s.first_ts is None else min(s.first_ts, ts)
                s.last_ts = ts if s.last_ts is None else max(s.last_ts, ts)
            if kind == "summary":
                s.titles += 1
            elif kind == "system":
                s.compact_boundaries += 1
            elif kind == "assistant":
                _assistant(s, message, f"{where}:{number}")
            else:
                _user(s, line, message)
    orphans = buckets.pop(None, None)
    if orphans is not None:
        home = next(iter(buckets), None) or path.stem
        if home not in buckets:
            orphans.session_id = home
            buckets[home] = orphans
        else:
            # results of tool calls made in the id'd bucket are resolved there already
            buckets[home].merge(_finished(orphans))
    for sid, s in buckets.items():
        s.finish()
        if sid in scan.sessions:
            scan.sessions[sid].merge(s)
        else:
            scan.sessions[sid] = s


def _finished(s: SessionLog) -> SessionLog:
    s.finish()
    return s


def scan_logs(paths: Sequence[str | Path]) -> LogScan:
    """Read the session logs under ``paths`` into per-session statistics.

    Raises :class:`AgentLogError` for a path that does not exist, a folder without
    ``*.jsonl`` files, and logs in which no session could be found.
    """
    files = log_files(paths)
    scan = LogScan(sessions={}, files=[str(f) for f in files])
    for f in files:
        _scan_file(f, scan)
    scan.sessions = dict(sorted(scan.sessions.items()))
    if not scan.sessions:
        raise AgentLogError(
            f"no session found in {len(files)} file(s): {scan.lines} line(s), "
            f"{scan.malformed} malformed, {sum(scan.skipped.values())} of types not read"
            + (f"; unreadable: {', '.join(scan.unreadable)}" if scan.unreadable else "")
        )
    return scan


# --- the rules --------------------------------------------------------------------------------


def quantile(values: Sequence[int], q: float) -> float:
    """The lower ``q``-quantile by nearest rank (the tuner's convention)."""
    return float(T.weighted_quantile(list(values), [1.0] * len(values), q))


def dominant_model(models: Counter[str]) -> tuple[str, float] | None:
    """The model with the most turns (ties: the smaller id) and its share."""
    total = sum(models.values())
    if not total:
        return None
    model, n = min(models.items(), key=lambda kv: (-kv[1], kv[0]))
    return model, n / total


def guess_tokenizer(model_id: str) -> str | None:
    for pattern, tokenizer in TOKENIZER_GUESS:
        if fnmatchcase(model_id.lower(), pattern):
            return tokenizer
    return None


def _auto(config: T.AdaptiveConfig, axis: str) -> T.AdaptiveConfig:
    """``config`` with one profile axis set back to ``auto`` (what the logs would pick)."""
    profiles = config.profiles
    ax = getattr(profiles, axis).model_copy(update={"active": "auto"})
    return config.model_copy(update={"profiles": profiles.model_copy(update={axis: ax})})


def p1(config: T.AdaptiveConfig, models: Counter[str]) -> tuple[str | None, dict | None, list]:
    """P1: (the llm profile to pin, a new variant's fields or None, the evidence rows).

    The profile is the one the dominant model resolves to with the axis on ``auto``, so
    a file that already pins it (this rule's own output) gives no change.
    """
    top = dominant_model(models)
    if top is None or top[1] < P1_MIN_SHARE or top[0] == UNKNOWN_MODEL:
        return None, None, []
    model, share = top
    threshold = f">= {P1_MIN_SHARE:.2f}"
    name = T.resolve_llm(_auto(config, "llm"), model)
    variant = None
    rows = []
    if name == "default":
        family = guess_tokenizer(model)
        profiles = config.profiles.llm.all()
        base = profiles["default"]
        if family is not None:
            base = next((p for p in profiles.values() if p.tokenizer == family), base)
        pattern = re.sub(r"-\d{8}$", "-*", model)  # a dated release: every date
        variant = {
            **base.model_dump(mode="json"),
            "match": [pattern] if pattern != model else [],
            "tokenizer": family or base.tokenizer,
        }
        name = model
        rows.append(
            T.Change(
                "P1",
                "profiles.llm.variants",
                model,
                None,
                variant,
                "dominant_model_share",
                share,
                f"{threshold}; no profile matches {model}; tokenizer "
                f"{variant['tokenizer']} ({'guessed from the id' if family else 'the default'})",
            )  # fmt: skip
        )
    old = config.profiles.llm.active
    if name != old:
        rows.append(
            T.Change(
                "P1",
                "profiles.llm.active",
                None,
                old,
                name,
                "dominant_model_share",
                share,
                f"{threshold}; {model} -> profile {name}",
            )  # fmt: skip
        )
    return name, variant, rows


def classify_session(config: T.AdaptiveConfig, s: SessionLog) -> str:
    """The agent class of one session by the config's own classifier (axis as auto)."""
    context = T.SessionContext(
        event_count=s.events, compaction_count=s.compactions, read_share=s.read_share
    )
    return T.classify_agent(_auto(config, "agent"), context)


def agent_shares(config: T.AdaptiveConfig, sessions: Iterable[SessionLog]) -> dict[str, float]:
    """Each class's share of all tool calls (the pipeline serves calls, not sessions)."""
    weight: Counter[str] = Counter()
    for s in sessions:
        weight[classify_session(config, s)] += s.events
    total = sum(weight.values())
    return {k: v / total for k, v in sorted(weight.items())} if total else {}


def p2(
    config: T.AdaptiveConfig, sessions: Iterable[SessionLog]
) -> tuple[str | None, T.Change | None]:
    shares = agent_shares(config, sessions)
    if not shares:
        return None, None
    cls, share = min(shares.items(), key=lambda kv: (-kv[1], kv[0]))
    if share <= P2_MIN_SHARE:
        return None, None
    old = config.profiles.agent.active
    if cls == old:
        return cls, None
    c = config.profiles.agent.classifier
    change = T.Change(
        "P2", "profiles.agent.active", None, old, cls, "class_share_of_tool_calls", share,
        f"> {P2_MIN_SHARE:.2f}; file_search_heavy: <= {c.file_search_max_events} calls and "
        f"read share >= {c.file_search_min_read_share:g}; marathon_refactor: >= "
        f"{c.marathon_min_events} calls and >= {c.marathon_min_compactions} compactions",
    )  # fmt: skip
    return cls, change


def glob_literal(name: str) -> str:
    """``name`` as a glob that matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def p3(
    config: T.AdaptiveConfig,
    calls: Counter[tuple[str, str]],
    results: dict[tuple[str, str], list[int]],
) -> tuple[dict[str, dict], list[T.Change]]:
    """P3: a placeholder data profile per observed MCP endpoint no profile matches."""
    existing = config.profiles.data.all()
    new: dict[str, dict] = {}
    changes = []
    for server, tool in sorted(calls):
        name = f"mcp__{server}__{tool}"
        if name in existing or any(
            fnmatchcase(tool, p.endpoint_pattern) for p in existing.values()
        ):
            continue
        if any(p["endpoint_pattern"] == glob_literal(tool) for p in new.values()):
            continue  # the same tool name on another server: one pattern covers both
        sizes = results.get((server, tool), [])
        p50 = quantile(sizes, 0.5) if sizes else None
        hints = ["ref"] if p50 is not None and p50 >= REF_BREAK_EVEN_CHARS else []
        profile = {"endpoint_pattern": glob_literal(tool), "hint_set": hints}
        T.DataProfile.model_validate(profile)
        new[name] = profile
        changes.append(
            T.Change(
                "P3",
                "profiles.data.variants",
                name,
                None,
                profile,
                "result_chars_p50",
                p50 if p50 is not None else 0.0,
                f"ref hint if >= {REF_BREAK_EVEN_CHARS}"
                + ("" if sizes else "; no result seen")
                + f"; {calls[(server, tool)]} call(s)",
            )  # fmt: skip
        )
    return new, changes


def p3_min_body(
    config: T.AdaptiveConfig, results: dict[tuple[str, str], list[int]]
) -> T.Change | None:
    sizes = [n for v in results.values() for n in v]
    if len(sizes) < MIN_CALLS:
        return None
    p25 = quantile(sizes, 0.25)
    new = T.r5_min_body(p25)
    old = config.dedup.min_body_chars
    if new == old:
        return None
    return T.Change(
        "P3", "dedup.min_body_chars", None, old, new, "mcp_result_chars_p25", p25,
        f"clamp(x, 100, 500) (R5); >= {MIN_CALLS} MCP results",
    )  # fmt: skip


def bootstrap(config: T.AdaptiveConfig, scan: LogScan) -> tuple[T.AdaptiveConfig, list[T.Change]]:
    """P1-P3 over the scanned logs: the proposed config and every value it changes.

    A pure function of ``config`` and the statistics; its output as ``config`` gives the
    same output and no change.
    """
    data = T.dump_adaptive(config)
    profiles = data.setdefault("profiles", {})
    tuned = dict(config.tuned)
    changes: list[T.Change] = []

    llm, variant, rows = p1(config, scan.models())
    if rows:
        llm_axis = profiles.setdefault("llm", {})
        if variant is not None:
            llm_axis.setdefault("variants", {})[llm] = variant
            tuned[f"profiles.llm.variants.{llm}"] = "P1"
        llm_axis["active"] = llm
        tuned["profiles.llm.active"] = "P1"
        changes += rows

    cls, change = p2(config, scan.sessions.values())
    if change is not None:
        profiles.setdefault("agent", {})["active"] = cls
        tuned["profiles.agent.active"] = "P2"
        changes.append(change)

    results = scan.mcp_results()
    placeholders, more = p3(config, scan.mcp_calls(), results)
    if placeholders:
        variants = profiles.setdefault("data", {}).setdefault("variants", {})
        for name, profile in placeholders.items():
            variants[name] = profile
            tuned[f"profiles.data.variants.{name}"] = "P3"
        changes += more
    change = p3_min_body(config, results)
    if change is not None:
        data.setdefault("dedup", {})["min_body_chars"] = change.new
        tuned["dedup.min_body_chars"] = "P3"
        changes.append(change)

    if not changes:
        return config, []
    if not profiles:
        data.pop("profiles")
    data["tuned"] = tuned
    return T.parse_adaptive(data, "the bootstrapped config"), changes
