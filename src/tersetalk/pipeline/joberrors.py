"""Why each failed job failed, in Snakemake's own output.

Why: every rule sends its command's output to the job's log file, so Snakemake's error
block for a failed job says only ``message: None`` and points at the log, where the
command's one-line error (``tersetalk run: error: ...``) is. The Snakefile's ``onerror``
handler calls :func:`explain` with the invocation's main log: it finds each failed job
(``Error in rule X:`` and its ``log:`` field, read by :mod:`tersetalk.core.snakelog`) and
prints that job's reason, read from its log, at the end of Snakemake's output, where the
run stops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["explain", "failed_jobs", "reason"]

#: a command's own one-line error (``tersetalk run: error: ...``, argparse's usage errors)
_ONE_LINE = re.compile(r"(?:^|\s)(?:[\w.-]+(?: [\w.-]+)?: )?error: \S", re.IGNORECASE)
#: the last line of a Python traceback (``ValueError: ...``)
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b.*")
#: how much of a log is read (its end: the reason is written last)
TAIL_BYTES = 64_000


def failed_jobs(text: str) -> list[tuple[str, list[str]]]:
    """``(rule, [log files])`` for each ``Error in rule`` block of a Snakemake log, in
    order, each job once (a retried job's blocks are one), as the workflow's one log
    reader (:func:`tersetalk.core.snakelog.parse_log`) finds them."""
    from tersetalk.core.snakelog import parse_log

    out: list[tuple[str, list[str]]] = []
    seen: set[tuple[str, str]] = set()
    for failure in parse_log(text).failures:
        key = (failure.rule, str(failure.jobid) if failure.jobid is not None
               else ",".join(failure.logs))  # fmt: skip
        if key not in seen:
            seen.add(key)
            out.append((failure.rule, failure.logs))
    return out


def _lines(path: Path) -> list[str]:
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - TAIL_BYTES))
        data = fh.read().decode("utf-8", errors="replace")
    # a progress bar rewrites its line with carriage returns: keep what was shown last
    return [line.split("\r")[-1].strip() for line in data.splitlines()]


def reason(log: str | Path) -> str:
    """The reason a job failed, from its log: the last one-line error a command wrote,
    else the last line of a traceback, else the log's last line; says so when the log
    is missing or empty."""
    path = Path(log)
    try:
        lines = [line for line in _lines(path) if line]
    except OSError as exc:
        return f"(its log {path} cannot be read: {exc.strerror or type(exc).__name__})"
    if not lines:
        return f"(its log {path} is empty)"
    for pattern in (_ONE_LINE, _EXCEPTION):
        for line in reversed(lines):
            if pattern.search(line):
                return line
    return lines[-1]


def explain(main_logs: str | Path | Iterable[str | Path] | None) -> list[str]:
    """One line per failed job of the invocation whose main log(s) are ``main_logs``:
    ``rule X failed: <reason> (log: <file>)``."""
    if main_logs is None:
        return []
    if isinstance(main_logs, str | Path):
        main_logs = [main_logs]
    out: list[str] = []
    for main in main_logs:
        try:
            text = Path(main).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for rule, logs in failed_jobs(text):
            if not logs:
                out.append(f"rule {rule} failed (it has no log: its error is above)")
            for log in logs:
                out.append(f"rule {rule} failed: {reason(log)} (log: {log})")
    return out
