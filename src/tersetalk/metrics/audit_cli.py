"""``tersetalk audit``: where the messages of one or more runs spend their tokens."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

log = logging.getLogger("tersetalk.audit")

_KINDS = "brief,deref,draft,verdict,final"

DESCRIPTION = """\
Re-tokenise every message of the given run files and split each line's tokens into
payload (the text values) and overhead. Writes a tidy table (mean tokens per example
per task, system, variant, message kind, direction, format and line tag; --out) and a
summary per message kind (--summary-out), and prints markdown tables with the runs
side by side (also --markdown). The attribution rules are in the docstring of
tersetalk.metrics.audit and summarised after the options.
"""

EPILOG = """\
Every number is a whole-string token count; overhead = tokens(line) - tokens(payload
values), split into: syntax (tags, brackets, quotes, commas, prose labels, newlines),
escape (JSON escaping), label (x keys, q addressee), ref (M# ids, overflow methods),
role (role lines), goal (goal lines), title (HotpotQA titles repeated in their
sentence), question (reply spans of 4+ words copied from the question), echo (reply
spans copied from a reply the receiver itself sent). Means are per example over the
run's examples without an error.

example:
  tersetalk audit results/<model>/runs/hotpotqa/freeform/default.parquet \\
      results/<model>/runs/hotpotqa/tersetalk/*.parquet --out results/audit/audit.csv
"""


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    if not kinds:
        raise argparse.ArgumentTypeError(f"expected comma-separated message kinds, got {text!r}")
    return kinds


def _cmd_audit(args: argparse.Namespace) -> None:
    from tersetalk.core.io import InputFileError, read_parquet, write_csv_atomic, write_text_atomic

    from .audit import RUN_KEYS, audit_runs, audit_summary, audit_table, render_markdown

    frames = []
    for path in args.runs:
        df = read_parquet(path, "run")
        missing = [c for c in (*RUN_KEYS, "messages") if c not in df.columns]
        if missing:
            raise InputFileError(
                f"run file {path} has no column(s) {', '.join(missing)}: give run files written "
                "by `tersetalk run` (results/<model>/runs/<task>/<system>/<variant>.parquet)"
            )
        if df.empty:
            log.warning("run file %s has no rows; left out", path)
        frames.append(df)
    lines, runs = audit_runs(frames, tokenizer=args.tokenizer)
    if args.kinds:
        lines = lines[lines["kind"].isin(args.kinds)]
    if lines.empty:
        log.warning("no messages to audit in %d run file(s)", len(args.runs))
    table = audit_table(lines, runs)
    summary = audit_summary(lines, runs, reference=args.reference or None)
    if args.out:
        write_csv_atomic(table, args.out)
        log.info("wrote %s (%d rows)", args.out, len(table))
    if args.summary_out:
        write_csv_atomic(summary, args.summary_out)
        log.info("wrote %s (%d rows)", args.summary_out, len(summary))
    markdown = render_markdown(
        summary,
        table,
        runs,
        tokenizer=args.tokenizer,
        reference=args.reference or None,
        detail_kinds=args.detail_kinds,
    )
    if args.markdown:
        write_text_atomic(markdown, Path(args.markdown))
        log.info("wrote %s", args.markdown)
    print(markdown, end="")


def add_commands(sub: argparse._SubParsersAction) -> None:
    from tersetalk.core.tokens import ENCODINGS

    p = sub.add_parser(
        "audit",
        help="per-line token audit of run messages: payload vs protocol overhead",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run Parquet files (results/<model>/runs/<task>/<system>/<variant>.parquet)",
    )
    p.add_argument("--out", help="CSV path for the tidy per-line-tag table (written atomically)")
    p.add_argument(
        "--summary-out", help="CSV path for the per-message-kind summary (written atomically)"
    )
    p.add_argument("--markdown", help="also write the printed markdown tables to this path")
    p.add_argument(
        "--reference",
        default="freeform/default",
        help="system/variant the summary's d_* columns compare against, for the "
        "same task, kind and direction ('' for none; default: %(default)s)",
    )
    p.add_argument(
        "--kinds",
        type=_kinds,
        help=f"comma-separated message kinds to audit (default: all, e.g. {_KINDS})",
    )
    p.add_argument(
        "--detail-kinds",
        type=_kinds,
        default=["brief"],
        help="comma-separated message kinds whose per-line tables are printed (default: brief)",
    )
    p.add_argument(
        "--tokenizer",
        choices=ENCODINGS,
        default="cl100k_base",
        help="tiktoken encoding to count with (default: %(default)s)",
    )
    p.set_defaults(func=_cmd_audit)
