"""``tersetalk mcp telemetry``: read the proxy's local telemetry folder.

tersetalk mcp-proxy --telemetry-dir tel/ -- uvx mcp-server-git     # writes tel/
tersetalk mcp telemetry show --dir tel/                         # one line per session
tersetalk mcp telemetry fingerprints --dir tel/ --days 30 --out endpoints.parquet
tersetalk mcp tune analyze --telemetry-dir tel/ --out tuned.yaml

The folder holds per-response events (events-<session>.jsonl: shapes, sizes, tokens,
hashes; never the payloads' text) and session summaries (summary-<session>.json).
Nothing is sent anywhere; TERSETALK_TELEMETRY=off stops the proxy from writing it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def _fail(message: str) -> None:
    print(f"tersetalk mcp telemetry: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of days, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a positive number of days, got {text}")
    return value


def _cmd_fingerprints(args: argparse.Namespace) -> None:
    from tersetalk.mcp.telemetry import TelemetryError, read_events, write_fingerprints

    try:
        _, skipped = read_events(args.dir, args.days)
        out = write_fingerprints(args.dir, args.out, args.days)
    except TelemetryError as exc:
        _fail(str(exc))
    import pandas as pd

    df = pd.read_parquet(out)
    window = "all events" if args.days is None else f"the last {args.days:g} day(s)"
    note = f" ({skipped} malformed line(s) skipped)" if skipped else ""
    print(f"{len(df)} endpoint(s) over {window}, from {int(df['call_count'].sum())} call(s) "
          f"in {args.dir}{note}")  # fmt: skip
    for r in df.itertuples():
        print(f"  {r.endpoint_class}: {r.call_count} calls, {r.shape_dominant}, "
              f"dup rate {r.dup_rate:.2f}, p50 {r.response_chars_p50:g} chars")  # fmt: skip
    print(f"wrote {out}")


def _when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def summary_table(rows: list[dict[str, Any]]) -> list[str]:
    """The session summaries as aligned text lines, a header first."""
    head = ("session", "ended (UTC)", "seconds", "events", "sampled", "compactions",
            "dedup hits", "tokens in", "tokens out", "saving")  # fmt: skip
    lines = [head]
    for r in rows:
        base, final = r.get("total_baseline_tokens"), r.get("total_final_tokens")
        saving = f"{r['savings_pct']:.1f}%" if isinstance(r.get("savings_pct"), int | float) else ""
        duration = r.get("duration_sec")
        lines.append((
            str(r.get("session_hash", "?")), _when(r.get("ended_at_ms")),
            f"{duration:.1f}" if isinstance(duration, int | float) else "?",
            str(r.get("total_events", "?")), str(r.get("sampled_events", "?")),
            str(r.get("compaction_count", "?")), str(r.get("dedup_hits", "?")),
            str(base if base is not None else "?"), str(final if final is not None else "?"),
            saving,
        ))  # fmt: skip
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)).rstrip() for x in lines]


def _cmd_show(args: argparse.Namespace) -> None:
    from tersetalk.mcp.telemetry import TelemetryError, read_session_summaries

    try:
        rows, skipped = read_session_summaries(args.dir, args.days)
    except TelemetryError as exc:
        _fail(str(exc))
    if not rows:
        print(f"no session summaries in {args.dir}" + (" in that window" if args.days else ""))
    else:
        for line in summary_table(rows):
            print(line)
    if skipped:
        print(f"({skipped} unreadable summary file(s) skipped)")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "telemetry",
        help="the proxy's local telemetry: session summaries and per-endpoint fingerprints",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ts = p.add_subparsers(dest="telemetry_command", required=True, metavar="COMMAND")
    f = ts.add_parser(
        "fingerprints",
        help="per-endpoint fingerprints of a telemetry folder, as Parquet",
        description="Aggregate the events of a telemetry folder per endpoint (the MCP tool "
        "name): call count, response size mean and p25/p50/p90, dominant shape and shape "
        "mix with its entropy, dup rate, repeat burst p90, top inner formats, table "
        "columns and rows, nesting depth p95, first and last seen, sessions. Malformed "
        "lines (a killed proxy's truncated last line) are skipped and counted.",
    )
    f.add_argument("--dir", type=Path, required=True, metavar="D",
                   help="the telemetry folder (mcp-proxy --telemetry-dir)")  # fmt: skip
    f.add_argument("--days", type=_days, default=None, metavar="N",
                   help="only events of the last N days (default: all)")  # fmt: skip
    f.add_argument("--out", type=Path, required=True, metavar="F",
                   help="the Parquet file to write (one row per endpoint)")  # fmt: skip
    f.set_defaults(func=_cmd_fingerprints)
    s = ts.add_parser(
        "show",
        help="one line per session summary of a telemetry folder",
        description="Print the session summaries of a telemetry folder, oldest first: "
        "session hash, end time, duration, events (all, and sampled into the events "
        "file), compactions, dedup hits, tokens before and after the proxy, saving.",
    )
    s.add_argument("--dir", type=Path, required=True, metavar="D",
                   help="the telemetry folder (mcp-proxy --telemetry-dir)")  # fmt: skip
    s.add_argument("--days", type=_days, default=None, metavar="N",
                   help="only sessions that ended in the last N days (default: all)")  # fmt: skip
    s.set_defaults(func=_cmd_show)
