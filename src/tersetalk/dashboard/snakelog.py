"""Every Snakemake job of the newest invocation, read from Snakemake's own log.

The log is parsed by :func:`tersetalk.core.snakelog.parse_log` (the overhead table reads it
the same way); :func:`parse_log` here folds it into what the Workflow view shows: the
jobs with their rule, status and times, and the overall progress with the elapsed time
and an estimate of the time left (the mean time per finished step so far, times the
steps left). :class:`SnakemakeLog` reads the newest log again only when it changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tersetalk.core import snakelog

__all__ = ["SnakemakeLog", "parse_log"]


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def parse_log(text: str, now: float | None = None) -> dict[str, Any]:
    """The jobs and progress of one Snakemake log's text (see the module's doc): a job
    still running when the invocation ended is ``stopped``; a retried job is shown once,
    as its last attempt, where its first attempt stood."""
    log = snakelog.parse_log(text)
    jobs: dict[int, dict[str, Any]] = {}
    for job in log.jobs:
        if job.jobid is None:  # a header whose jobid line never came
            continue
        status = "stopped" if log.complete and job.status == "running" else job.status
        jobs[job.jobid] = {
            "rule": job.rule, "started": _epoch(job.start), "status": status,
            "finished": _epoch(job.end), "jobid": str(job.jobid),
            "output": ", ".join(job.outputs), "wildcards": job.wildcards,
        }  # fmt: skip
    started, updated = _epoch(log.first_stamp), _epoch(log.last)
    now = time.time() if now is None else now
    end = updated if log.complete else now
    elapsed = (end - started) if started is not None and end is not None else None
    done, total = log.steps_done, log.steps_total
    eta = None
    if not log.complete and elapsed is not None and 0 < done < total:
        eta = elapsed / done * (total - done)
    by_rule: dict[str, dict[str, int]] = {
        rule: {"planned": n, "jobs": 0, "finished": 0, "failed": 0}
        for rule, n in log.planned.items()
    }
    for job in jobs.values():
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
        "ended": log.complete,
        "elapsed_s": elapsed,
        "eta_s": eta,
        "rules": by_rule,
        "jobs": list(jobs.values()),
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
