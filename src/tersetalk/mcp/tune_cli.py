"""``tersetalk mcp tune``: propose a proxy configuration from telemetry, and show one.

tersetalk mcp tune analyze --fingerprints endpoints.parquet --summaries-dir tel/ \\
    --out tuned.yaml --evidence evidence.csv
tersetalk mcp tune show --adaptive-config tuned.yaml --model-id gpt-oss:20b
tersetalk mcp-proxy --tuned tuned.yaml -- uvx mcp-server-git    # the next session uses it
tersetalk mcp tune from-agent-logs ~/.claude/projects/my-project --out first.yaml

analyze applies the rules R1-R5 (per-endpoint dedup, per-endpoint templates, LRU size,
knapsack recursion depth, minimum body size) to per-endpoint fingerprints and session
summaries, writes the proposed schema-v2 file and one evidence row per changed value.
With --telemetry-dir it replays the proxy's events instead: the LRU size is the one that
catches 95% of the repeats at their observed distances, a knob that only saves tokens
changes only where the replay saves tokens (evidence column tokens_saved), and R6/R7
turn a tool's re-encoding off after decode failures or edits that quote it back.
show prints the effective configuration for a session and where each value came from.
from-agent-logs bootstraps a configuration before any telemetry exists, from a coding
agent's session logs (Claude Code's JSONL), with the rules P1-P3 (dominant model -> llm
profile, agent class from the sessions' statistics, placeholder data profiles for the
MCP tools called).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

from tersetalk.core.cliargs import add_renamed_option

EVIDENCE_COLUMNS = (
    "rule",
    "knob",
    "endpoint",
    "old",
    "new",
    "statistic",
    "value",
    "threshold",
    "tokens_saved",
)


def _fail(message: str) -> None:
    print(f"tersetalk mcp tune: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def read_summaries(folder: Path, since_ms: int | None) -> list[dict[str, Any]]:
    """The ``summary-<session_hash>.json`` files of ``folder`` that ended in the window."""
    out = []
    for path in sorted(folder.glob("summary-*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            _fail(f"{path}: not a JSON session summary ({exc})")
        except RecursionError:
            _fail(f"{path}: not a session summary (nested too deeply to read); remove it")
        if not isinstance(row, dict):
            _fail(f"{path}: a session summary is a JSON object")
        ended = row.get("ended_at_ms")
        if since_ms is not None and isinstance(ended, int) and ended < since_ms:
            continue
        out.append(row)
    return out


def _fingerprints(args: argparse.Namespace, since_ms: int | None):
    import pandas as pd

    if args.fingerprints is not None:
        if not args.fingerprints.is_file():
            _fail(f"{args.fingerprints}: no such fingerprints file")
        df = pd.read_parquet(args.fingerprints)
        if since_ms is not None and "last_seen_ms" in df:
            df = df[df["last_seen_ms"].isna() | (df["last_seen_ms"] >= since_ms)]
        return df
    if importlib.util.find_spec("tersetalk.mcp.telemetry") is None:
        _fail(
            "--telemetry-dir needs tersetalk.mcp.telemetry, which this install does not "
            "have; pass --fingerprints FILE.parquet (per-endpoint fingerprints) instead"
        )
    telemetry = importlib.import_module("tersetalk.mcp.telemetry")
    return pd.DataFrame(telemetry.endpoint_fingerprints(args.telemetry_dir, args.days))


def write_evidence(changes, path: Path) -> None:
    """One CSV row per change (EVIDENCE_COLUMNS), the same table for every rule set."""
    import pandas as pd

    rows = [
        {
            "rule": c.rule,
            "knob": c.knob,
            "endpoint": c.endpoint or "",
            "old": _cell(c.old),
            "new": _cell(c.new),
            "statistic": c.statistic,
            "value": float(c.value),
            "threshold": c.threshold,
            "tokens_saved": None if c.tokens_saved is None else float(c.tokens_saved),
        }
        for c in changes
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(EVIDENCE_COLUMNS)).to_csv(path, index=False)


def _print_changes(changes) -> None:
    if not changes:
        print("no change: the current configuration already follows the rules")
    for c in changes:
        where = f" [{c.endpoint}]" if c.endpoint else ""
        saved = "" if c.tokens_saved is None else f"; replay: {c.tokens_saved:+g} tokens saved"
        print(
            f"  {c.rule} {c.knob}{where}: {_cell(c.old) or '(unset)'} -> {_cell(c.new)}  "
            f"({c.statistic} = {c.value:g}; {c.threshold}{saved})"
        )


def _cmd_analyze(args: argparse.Namespace) -> None:
    from tersetalk.mcp.tune import (
        TuneError,
        endpoint_stats,
        load_adaptive,
        save_adaptive,
        session_stats,
        tune,
    )

    since_ms = None if args.days is None else int((time.time() - args.days * 86400) * 1000)
    summaries_dir = args.summaries_dir or args.telemetry_dir
    try:
        current = load_adaptive(args.adaptive_config)
        df = _fingerprints(args, since_ms)
        endpoints = endpoint_stats(
            df.to_dict("records"), str(args.fingerprints or args.telemetry_dir)
        )
        events = None
        if args.telemetry_dir is not None:  # the events: the measured rules replay them
            from tersetalk.mcp.telemetry import read_events

            events, _ = read_events(args.telemetry_dir, args.days)
        sessions = []
        if summaries_dir is not None:
            if not summaries_dir.is_dir():
                _fail(f"{summaries_dir}: no such folder of session summaries")
            sessions = session_stats(read_summaries(summaries_dir, since_ms), str(summaries_dir))
        tuned, changes = tune(current, endpoints, sessions, events)
        save_adaptive(tuned, args.out)
    except TuneError as exc:
        _fail(str(exc))
    if args.evidence is not None:
        write_evidence(changes, args.evidence)
    guarded = sum(e.call_count < 20 for e in endpoints)
    print(
        f"{len(endpoints)} endpoint(s) ({guarded} under 20 calls: R1/R2 skip them), "
        f"{len(sessions)} session summar{'y' if len(sessions) == 1 else 'ies'}"
    )
    if events is not None:
        print(
            f"measured rules on {len(events)} event(s): a token knob changes only where a "
            "replay of these sessions saves tokens (R1 on, R3 LRU from repeat distances, "
            "R5); R6/R7 turn re-encoding off for a tool from decode failures and edits; "
            "R2 and R4 have no mechanism in the proxy and are left"
        )
    else:
        print("rules on aggregates (no events to replay): R1-R5 act on their thresholds")
    _print_changes(changes)
    print(f"wrote {args.out}" + (f" and {args.evidence}" if args.evidence else ""))


def show_lines(effective) -> list[str]:
    """``knob = value  [source]`` for every value of an effective configuration."""
    from tersetalk.mcp.tune import SECTIONS

    lines = [
        f"model_id = {effective.context.model_id or '(unknown)'}; events "
        f"{effective.context.event_count}, compactions {effective.context.compaction_count},"
        f" read share {effective.context.read_share:g}"
    ]

    def line(knob: str, value: Any, source: str | None = None) -> None:
        lines.append(f"{knob} = {_cell(value)}  [{source or effective.source(knob)}]")

    line("profiles.llm", effective.llm)
    line("profiles.tokenizer", effective.tokenizer)
    line("profiles.agent", effective.agent)
    for name, value in effective.llm_profile.model_dump(mode="json").items():
        line(f"llm.{name}", value, f"profile llm:{effective.llm}")
    for name, value in effective.tokenizer_profile.model_dump(mode="json").items():
        line(f"tokenizer.{name}", value, f"profile tokenizer:{effective.tokenizer}")
    for name in ("priority", "hint_aggressiveness"):
        line(
            f"agent.{name}",
            getattr(effective.agent_profile, name),
            f"profile agent:{effective.agent}",
        )
    for section in SECTIONS:
        model = getattr(effective, section)
        for name, value in model.model_dump(mode="json").items():
            knob = f"{section}.{name}"
            if isinstance(value, dict) and name in ("enabled_per_endpoint", "endpoint_overrides",
                                                    "per_endpoint"):  # fmt: skip
                line(knob, value)
                for key, v in value.items():
                    line(f"{knob}.{key}", v)
            else:
                line(knob, value)
    for name, rule in effective.hints.items():
        allowed = "allowed" if name in effective.hints_allowed else "not allowed"
        extra = f"; {rule.reason}" if rule.reason else ""
        line(
            f"hints.{name}", f"{allowed} (max {rule.max_per_session or 'unlimited'}/session{extra})"
        )
    for name, profile in effective.data.items():
        line(
            f"profiles.data.{name}",
            f"{profile.endpoint_pattern} -> {profile.preferred_format or '-'}",
            effective.sources.get(f"profiles.data.{name}", "default"),
        )
    return lines


def _cmd_show(args: argparse.Namespace) -> None:
    from pydantic import ValidationError

    from tersetalk.mcp.tune import SessionContext, TuneError, load_adaptive, resolve

    try:
        config = load_adaptive(args.adaptive_config)
        context = SessionContext(
            model_id=args.model_id,
            event_count=args.events,
            compaction_count=args.compactions,
            read_share=args.read_share,
        )
    except TuneError as exc:
        _fail(str(exc))
    except ValidationError as exc:
        flags = {
            "event_count": "--events",
            "compaction_count": "--compactions",
            "read_share": "--read-share",
            "model_id": "--model-id",
        }
        _fail(
            "; ".join(
                f"{flags.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in exc.errors()
            )
        )
    for text in show_lines(resolve(config, context)):
        print(text)


def scan_report(scan) -> list[str]:
    """What the logs held: files, lines, sessions, what was not read, models, MCP tools."""
    n = len(scan.sessions)
    lines = [
        f"{len(scan.files)} file(s), {scan.lines} line(s), {n} session(s); "
        f"{scan.malformed} malformed line(s), "
        f"{sum(scan.skipped.values())} line(s) of types not read"
    ]
    if scan.malformed_at:
        more = scan.malformed - len(scan.malformed_at)
        lines.append(
            "  malformed at " + ", ".join(scan.malformed_at) + (f" and {more} more" if more else "")
        )
    if scan.unreadable:
        lines.append("  unreadable: " + ", ".join(scan.unreadable))
    if scan.skipped:
        lines.append(
            "  not read: " + ", ".join(f"{k} {v}" for k, v in sorted(scan.skipped.items()))
        )
    models = scan.models()
    if models:
        lines.append(
            "  assistant turns per model: "
            + ", ".join(
                f"{m} {c}" for m, c in sorted(models.items(), key=lambda kv: (-kv[1], kv[0]))
            )
        )
    calls = scan.mcp_calls()
    if calls:
        lines.append(
            "  MCP calls: " + ", ".join(f"{s}/{t} {c}" for (s, t), c in sorted(calls.items()))
        )
    return lines


def _cmd_from_agent_logs(args: argparse.Namespace) -> None:
    from tersetalk.mcp.agent_logs import AgentLogError, bootstrap, scan_logs
    from tersetalk.mcp.tune import TuneError, load_adaptive, save_adaptive

    if args.out.suffix not in (".yaml", ".yml", ".toml"):
        _fail(f"--out {args.out}: give a .yaml, .yml or .toml file")
    try:
        base = load_adaptive(args.base)
        scan = scan_logs(args.paths)
        config, changes = bootstrap(base, scan)
        save_adaptive(config, args.out)
    except (AgentLogError, TuneError) as exc:
        _fail(str(exc))
    if args.evidence is not None:
        write_evidence(changes, args.evidence)
    for text in scan_report(scan):
        print(text)
    _print_changes(changes)
    print(f"wrote {args.out}" + (f" and {args.evidence}" if args.evidence else ""))


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="tune the proxy from telemetry (rules R1-R5) or an agent's session logs (P1-P3), "
        "and show the effective configuration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ts = p.add_subparsers(dest="tune_command", required=True, metavar="COMMAND")
    _add_analyze(ts)
    _add_show(ts)
    _add_from_agent_logs(ts)


def _add_analyze(ts: argparse._SubParsersAction) -> None:
    """``tersetalk mcp tune analyze``."""
    a = ts.add_parser(
        "analyze",
        help="apply R1-R5 to fingerprints and session summaries; write the proposed config",
        description="Apply the rules R1-R5 to per-endpoint fingerprints (and, for R3, session "
        "summaries), write the proposed schema-v2 configuration and, with --evidence, one "
        "CSV row per changed value (rule, knob, endpoint, old, new, statistic, value, "
        "threshold). R1 and R2 act only on endpoints with at least 20 calls.",
    )
    src = a.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--fingerprints",
        type=Path,
        metavar="FILE",
        help="per-endpoint fingerprints (Parquet, one row per endpoint_class)",
    )
    src.add_argument(
        "--telemetry-dir",
        type=Path,
        metavar="DIR",
        help="the proxy's telemetry folder: fingerprints are computed from its "
        "events (needs tersetalk.mcp.telemetry) and its summary-*.json are read",
    )
    a.add_argument(
        "--summaries-dir",
        type=Path,
        metavar="DIR",
        help="folder of summary-<session_hash>.json session summaries (R3); "
        "default: --telemetry-dir, or none (R3 does not act)",
    )
    a.add_argument(
        "--days",
        type=float,
        default=None,
        metavar="N",
        help="only sessions ended and endpoints seen in the last N days "
        "(default: everything given)",
    )
    a.add_argument(
        "--adaptive-config",
        type=Path,
        metavar="FILE",
        help="the current tuner config (YAML/TOML, schema v1 or v2) the rules start "
        "from; default: the built-in defaults",
    )
    add_renamed_option(a, "--config", "--adaptive-config")
    a.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="where to write the proposed config (.yaml or .toml, schema v2)",
    )
    a.add_argument(
        "--evidence",
        type=Path,
        metavar="FILE",
        help="where to write the evidence table (CSV, one row per changed value)",
    )
    a.set_defaults(func=_cmd_analyze)


def _add_show(ts: argparse._SubParsersAction) -> None:
    """``tersetalk mcp tune show``."""
    s = ts.add_parser(
        "show",
        help="the effective configuration of a session, and where each value came from",
        description="Resolve the profiles for a session (the model's llm profile, its "
        "tokenizer, the agent class from the session's statistics) and print every value "
        "with its origin: default, file, profile <axis>:<variant> or rule R<n>.",
    )
    s.add_argument(
        "--adaptive-config",
        type=Path,
        metavar="FILE",
        help="the tuner config (e.g. analyze's --out); default: the built-in defaults",
    )
    add_renamed_option(s, "--config", "--adaptive-config")
    s.add_argument("--model-id", metavar="M", help="the agent's model id (picks the llm profile)")
    s.add_argument(
        "--events",
        type=int,
        default=0,
        metavar="N",
        help="the session's tool calls so far (default %(default)s)",
    )
    s.add_argument(
        "--compactions",
        type=int,
        default=0,
        metavar="K",
        help="the session's context compactions so far (default %(default)s)",
    )
    s.add_argument(
        "--read-share",
        type=float,
        default=0.0,
        metavar="S",
        help="the share of read-class calls, 0..1 (default %(default)s)",
    )
    s.set_defaults(func=_cmd_show)


def _add_from_agent_logs(ts: argparse._SubParsersAction) -> None:
    """``tersetalk mcp tune from-agent-logs``."""
    g = ts.add_parser(
        "from-agent-logs",
        help="bootstrap a config from a coding agent's session logs (rules P1-P3)",
        description="Read a coding agent's session logs (Claude Code's JSONL: "
        "~/.claude/projects/<project>/<session-id>.jsonl) and propose a first schema-v2 "
        "configuration before any telemetry exists. P1: the model with at least 80%% of "
        "the assistant turns pins the llm profile (a new variant if no profile matches "
        "it). P2: each session is classified by its tool calls, read share and "
        "compactions; the class with more than half of all tool calls pins the agent "
        "profile. P3: every MCP tool called (mcp__<server>__<tool>) that no data profile "
        "matches gets a placeholder profile; with at least 20 MCP results, "
        "dedup.min_body_chars follows R5 over their sizes. Only counts and result sizes "
        "are kept from the logs. Malformed lines are counted and listed, never fatal.",
    )
    g.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a session log (.jsonl) or a folder searched for *.jsonl (e.g. "
        "~/.claude/projects/<project>)",
    )
    g.add_argument(
        "--base",
        type=Path,
        metavar="FILE",
        help="the tuner config (YAML/TOML, schema v1 or v2) the rules start from; what "
        "the rules do not change is kept; default: the built-in defaults",
    )
    g.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="where to write the proposed config (.yaml or .toml, schema v2)",
    )
    g.add_argument(
        "--evidence",
        type=Path,
        metavar="FILE",
        help="where to write the evidence table (CSV, one row per changed value)",
    )
    g.set_defaults(func=_cmd_from_agent_logs)
