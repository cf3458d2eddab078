"""Every Snakemake job of the newest invocation, read from Snakemake's own log.

Snakemake writes one log per invocation under ``<workdir>/.snakemake/log/`` (``...
.snakemake.log``): a block per job it starts (``rule score:`` or ``localrule
score:`` with ``output:``, ``jobid:`` and ``wildcards:`` lines, after a ``[date]``
line), ``Finished jobid: 12 (Rule: score)`` (older versions: ``Finished job 12.``),
``Error in rule score:`` and ``7 of 31 steps (23%) done``. :class:`SnakemakeLog`
reads the newest log again only when it changed and folds it into the jobs with
their rule, status and times, and the overall progress with the elapsed time and an
estimate of the time left (the mean time per finished step so far, times the steps
left).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["SnakemakeLog", "parse_log"]

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?(?:checkpoint|rule) (\S+?):$")
_FIELD = re.compile(r"^\s+(output|jobid|wildcards|log|reason): ?(.*)$")
_FINISHED = re.compile(r"^Finished job(?:id:)? (\d+)")
_ERROR = re.compile(r"^Error in rule (\S+?):$")
_PLANNED = re.compile(r"^(\S+)\s+(\d+)$")
_STEPS = re.compile(r"^(\d+) of (\d+) steps \(\d+%\) done$")
#: the last lines of a log whose invocation has ended
_ENDED = ("Complete log", "Nothing to be done", "Shutting down, this might take some time.")


def _stamp(text: str) -> float | None:
    try:
        return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y").timestamp()
    except ValueError:
        return None


def parse_log(text: str, now: float | None = None) -> dict[str, Any]:
    """The jobs and progress of one Snakemake log's text (see the module's doc)."""
    jobs: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    done = total = 0
    t: float | None = None
    started: float | None = None
    updated: float | None = None
    current: dict[str, Any] | None = None  # the job block being read
    error_rule: str | None = None
    ended = False
    planned: dict[str, int] = {}  # the "Job stats:" table: jobs per rule this invocation
    in_stats = False
    for line in text.splitlines():
        if line.startswith("Job stats:"):
            in_stats, planned = True, {}
            continue
        if in_stats:
            if not line.strip():
                in_stats = False
            elif (m := _PLANNED.match(line)) and m.group(1) not in ("job", "total"):
                planned[m.group(1)] = int(m.group(2))
            continue
        if m := _STAMP.match(line.strip()):
            t = _stamp(m.group(1))
            started = started if started is not None else t
            updated = t
            current = None
            continue
        if m := _RULE.match(line):
            current = {"rule": m.group(1), "started": t, "status": "running", "finished": None}
            error_rule = None
            continue
        if m := _ERROR.match(line):
            error_rule, current = m.group(1), None
            continue
        if m := _FIELD.match(line):
            name, value = m.group(1), m.group(2).strip()
            if name == "jobid":
                if error_rule is not None:
                    job = jobs.get(value)
                    if job is not None:
                        job["status"] = "failed"
                        job["finished"] = t
                    error_rule = None
                elif current is not None:
                    current["jobid"] = value
                    if value not in jobs:
                        order.append(value)
                    jobs[value] = current
            elif current is not None and name in ("output", "wildcards"):
                current[name] = value
            continue
        if m := _FINISHED.match(line):
            job = jobs.get(m.group(1))
            if job is not None:
                job["status"], job["finished"] = "finished", t
            continue
        if m := _STEPS.match(line):
            done, total = int(m.group(1)), int(m.group(2))
            continue
        if line.startswith(_ENDED):
            ended = True
        current = None if not line.startswith(" ") else current
    if ended:
        for job in jobs.values():
            if job["status"] == "running":
                job["status"] = "stopped"
    now = time.time() if now is None else now
    end = updated if ended else now
    elapsed = (end - started) if started is not None and end is not None else None
    eta = None
    if not ended and elapsed is not None and 0 < done < total:
        eta = elapsed / done * (total - done)
    by_rule: dict[str, dict[str, int]] = {
        rule: {"planned": n, "jobs": 0, "finished": 0, "failed": 0} for rule, n in planned.items()
    }
    for jid in order:
        job = jobs[jid]
        counts = by_rule.setdefault(
            job["rule"], {"planned": 0, "jobs": 0, "finished": 0, "failed": 0}
        )
        counts["jobs"] += 1
        counts["finished"] += job["status"] == "finished"
        counts["failed"] += job["status"] == "failed"
    return {
        "done": done,
        "total": total,
        "started": started,
        "updated": updated,
        "ended": ended,
        "elapsed_s": elapsed,
        "eta_s": eta,
        "rules": by_rule,
        "jobs": [jobs[jid] for jid in order],
    }


@dataclass
class SnakemakeLog:
    """The newest ``*.snakemake.log`` under ``workdir/.snakemake/log``, read again when it
    changed (``poll`` says whether it did)."""

    workdir: Path
    _stamp: tuple[str, float, int] | None = None
    _state: dict[str, Any] | None = field(default=None)

    def newest(self) -> Path | None:
        folder = Path(self.workdir) / ".snakemake" / "log"
        try:
            logs = [p for p in folder.iterdir() if p.name.endswith(".snakemake.log")]
        except OSError:
            return None
        return max(logs, key=lambda p: (p.stat().st_mtime, p.name), default=None)

    def poll(self) -> bool:
        """Read the newest log if it changed; True if the state changed."""
        path = self.newest()
        if path is None:
            changed, self._state, self._stamp = self._state is not None, None, None
            return changed
        try:
            st = path.stat()
            stamp = (str(path), st.st_mtime, st.st_size)
            if stamp == self._stamp:
                return False
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        self._stamp = stamp
        self._state = {**parse_log(text), "log": path.name}
        return True

    def state(self) -> dict[str, Any] | None:
        """The jobs and progress (elapsed and ETA as of now while the invocation runs)."""
        if self._state is None:
            return None
        s = dict(self._state)
        if not s["ended"] and s["started"] is not None:
            s["elapsed_s"] = time.time() - s["started"]
            if 0 < s["done"] < s["total"]:
                s["eta_s"] = s["elapsed_s"] / s["done"] * (s["total"] - s["done"])
        return s
