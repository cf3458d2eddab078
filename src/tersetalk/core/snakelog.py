"""Snakemake's own log, read once for everyone: the dashboard's progress and the overhead
table both stand on :func:`parse_log`.

Snakemake (9.x; 8.x's ``Finished job N.`` too) writes one log per invocation under
``<workdir>/.snakemake/log/`` and the same lines to the console: a block per job it
starts (``rule score:``, ``localrule score:`` or ``checkpoint score:`` after a
``[Fri Nov 27 04:01:09 2026]`` stamp, with ``jobid:``, ``output:``, ``wildcards:``,
``threads:`` lines), ``Finished jobid: 12 (Rule: score)``, ``Error in rule score:``
(its ``jobid:`` below or on the same line), ``7 of 31 steps (23%) done``, the ``Job
stats:`` table of what it plans, and, once the invocation is over, ``Complete log``,
``Nothing to be done``, ``Exiting because a job execution failed`` or ``Shutting down``.

On the console a stamp may follow other text on its line (a progress bar); a retried
job (``--retries``) is started again under its jobid, and each attempt is a job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

__all__ = ["Failure", "Job", "SnakemakeLog", "log_name_time", "parse_log"]

#: Snakemake's ``time.asctime()`` stamps: ``[Fri Nov 27 04:01:09 2026]`` (day space-padded)
_STAMP = re.compile(
    r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ((?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r" +\d{1,2} \d\d:\d\d:\d\d \d{4})\]"
)
#: a job's header: ``rule X:``, ``localrule X:``, ``checkpoint X:`` (4 spaces in a group)
_JOB = re.compile(r"^(?: {4})?(local)?(?:rule|checkpoint) ([A-Za-z_][A-Za-z0-9_]*):\s*$")
_FINISHED = re.compile(r"Finished jobid: (\d+)(?: \(Rule: ([A-Za-z_][A-Za-z0-9_]*)\))?")
_FINISHED_OLD = re.compile(r"Finished job (\d+)\.")  # Snakemake < 9
_ERROR = re.compile(r"Error in rule ([A-Za-z_][A-Za-z0-9_]*)(?:, jobid: (\d+))?")
_FIELD = re.compile(r"^\s+(jobid|output|threads|wildcards|log): ?(.*)$")
#: a log field's note in an error block
_CHECK_LOG = " (check log file(s) for error details)"
_CORES = re.compile(r"^Provided cores: (\d+)")
_NODES = re.compile(r"^Provided remote nodes: (\S+)")
_DATE = re.compile(r"^\s*Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_STEPS = re.compile(r"^(\d+) of (\d+) steps \(\d+%\) done")
_PLANNED = re.compile(r"^(\S+)\s+(\d+)$")
#: lines that only an invocation that is over writes
_DONE = re.compile(
    r"^(Complete log|Nothing to be done|Exiting because a job execution failed|Shutting down)"
)


def _stamp(text: str) -> datetime | None:
    """The time of a stamp; None for one that matches the pattern but names no real time
    (``99:99:99`` in a damaged or hand-edited log), which is then not a time at all."""
    try:
        return datetime.strptime(" ".join(text.split()), "%b %d %H:%M:%S %Y")
    except ValueError:
        return None


def log_name_time(name: str) -> datetime | None:
    """The start encoded in a log's file name (``2026-11-27T040107.798491.snakemake.log``,
    local time, as Snakemake names it); None for another name."""
    stem = name.split(".snakemake.log")[0]
    for fmt in ("%Y-%m-%dT%H%M%S.%f", "%Y-%m-%dT%H%M%S"):
        try:
            return datetime.strptime(stem, fmt)
        except ValueError:
            continue
    return None


@dataclass
class Job:
    """One job (one attempt of it) as the log shows it: started at ``start``; ``end``
    when it finished or failed (``status``), None while it runs."""

    rule: str
    start: datetime | None
    jobid: int | None = None
    outputs: list[str] = field(default_factory=list)
    threads: int = 1  # Snakemake prints ``threads:`` only when it is not 1
    local: bool = False
    end: datetime | None = None
    status: str = "running"  # running | finished | failed
    wildcards: str = ""  # as printed: ``task=gsm8k, system=freeform``

    @property
    def seconds(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return (self.end - self.start).total_seconds()


@dataclass
class Failure:
    """One ``Error in rule`` block: the rule, its jobid and the log files it names."""

    rule: str
    jobid: int | None = None
    logs: list[str] = field(default_factory=list)


@dataclass
class SnakemakeLog:
    """What one Snakemake log says: when it started (and how that is known), the cores or
    remote nodes, the jobs, the plan and progress, whether the invocation is over."""

    path: str
    start: datetime | None
    start_source: str
    cores: int | None
    nodes: str | None
    jobs: list[Job]
    complete: bool
    last: datetime | None  # the last timestamp in the log
    first_stamp: datetime | None = None  # the first timestamp in the log
    steps_done: int = 0
    steps_total: int = 0
    planned: dict[str, int] = field(default_factory=dict)  # the last "Job stats:" table
    failures: list[Failure] = field(default_factory=list)  # every "Error in rule" block

    @property
    def first_job_start(self) -> datetime | None:
        starts = [j.start for j in self.jobs if j.start is not None]
        return min(starts) if starts else None


@dataclass
class _LogReader:
    """What one pass over a log's lines has gathered so far, and where it stands: inside a
    ``Job stats:`` table, inside a job's header block (``current``) or inside an ``Error in
    rule`` block (``error_rule``). Each line goes to :meth:`feed`."""

    jobs: list[Job] = field(default_factory=list)
    open_jobs: dict[int, Job] = field(default_factory=dict)  # started, not yet ended
    last: datetime | None = None
    first: datetime | None = None
    header_date: datetime | None = None
    cores: int | None = None
    nodes: str | None = None
    complete: bool = False
    done: int = 0
    total: int = 0
    planned: dict[str, int] = field(default_factory=dict)
    in_stats: bool = False
    current: Job | None = None  # the job whose header fields are being read
    error_rule: str | None = None  # an "Error in rule X:" block waiting for its jobid
    failures: list[Failure] = field(default_factory=list)

    def feed(self, line: str) -> None:
        """Read one line of the log."""
        if self._read_stats(line):
            return
        rest = self._read_stamps(line)
        if rest is None:
            return
        if (self.current is not None or self.error_rule is not None) and self._read_block(rest):
            return
        if not self._read_job_event(rest):
            self._read_summary(rest)

    def _close(self, jobid: int, status: str) -> None:
        """End a started job at the last time seen; a job whose start is not in this log
        has nothing to time and is left alone."""
        job = self.open_jobs.pop(jobid, None)
        if job is None:
            return
        job.end, job.status = self.last, status

    def _read_stats(self, line: str) -> bool:
        """Read a line of a ``Job stats:`` table (a new table replaces the last one's
        counts); False for a line outside one."""
        if line.startswith("Job stats:"):
            self.in_stats, self.planned = True, {}
            return True
        if not self.in_stats:
            return False
        if not line.strip():
            self.in_stats = False
        elif (m := _PLANNED.match(line)) and m.group(1) not in ("job", "total"):
            self.planned[m.group(1)] = int(m.group(2))
        return True

    def _read_stamps(self, line: str) -> str | None:
        """Note the time of the line's last stamp and return the text after it; None when
        only a stamp is on the line, which ends the job header being read."""
        stamps = _STAMP.findall(line)
        if not stamps:
            return line
        self.last = _stamp(stamps[-1]) or self.last
        self.first = self.first or self.last
        rest = _STAMP.split(line)[-1]
        if not rest.strip():
            self.current = None
            return None
        return rest

    def _read_block(self, line: str) -> bool:
        """Read a line inside a job's header or an error block: True for one of its fields
        or another indented line; otherwise the block is over and False."""
        m = _FIELD.match(line)
        if m:
            name, value = m.group(1), m.group(2).strip()
            if self.error_rule is not None:
                self._read_error_field(name, value)
            elif self.current is not None:
                self._read_job_field(self.current, name, value)
            return True
        if line.startswith(" ") and not _JOB.match(line):
            return True  # another field (input, reason, resources, ...)
        self.current, self.error_rule = None, None
        return False

    def _read_error_field(self, name: str, value: str) -> None:
        """An error block's ``jobid:`` (the failed job) or ``log:`` (its log files)."""
        if name == "jobid" and value.isdigit():
            self._close(int(value), "failed")
            self.failures[-1].jobid = int(value)
        elif name == "log":
            value = value.removesuffix(_CHECK_LOG.strip()).strip()
            self.failures[-1].logs = [v.strip() for v in value.split(",") if v.strip()]

    def _read_job_field(self, job: Job, name: str, value: str) -> None:
        """A job header's ``jobid:``, ``output:``, ``threads:`` or ``wildcards:``."""
        if name == "jobid" and value.isdigit():
            job.jobid = int(value)
            self.open_jobs[job.jobid] = job  # a retry (--retries) opens it again
        elif name == "output":
            job.outputs = [o.strip() for o in value.split(",") if o.strip()]
        elif name == "threads" and value.isdigit():
            job.threads = int(value)
        elif name == "wildcards":
            job.wildcards = value

    def _read_job_event(self, line: str) -> bool:
        """A job's start (its header), end (``Finished``) or failure (``Error in rule``);
        False for any other line."""
        m = _JOB.match(line)
        if m:
            self.current = Job(rule=m.group(2), start=self.last, local=bool(m.group(1)))
            self.jobs.append(self.current)
            return True
        m = _FINISHED.search(line) or _FINISHED_OLD.search(line)
        if m:
            self._close(int(m.group(1)), "finished")
            return True
        m = _ERROR.search(line)
        if m:
            jobid = int(m.group(2)) if m.group(2) else None
            self.failures.append(Failure(m.group(1), jobid))
            if jobid is not None:
                self._close(jobid, "failed")
            self.error_rule = m.group(1)  # its fields follow: the jobid (when not inline), logs
            return True
        return False

    def _read_summary(self, line: str) -> None:
        """The invocation's own lines: progress, cores or nodes, the header's date, and
        whether it is over."""
        if m := _STEPS.match(line):
            self.done, self.total = int(m.group(1)), int(m.group(2))
        elif m := _CORES.match(line):
            self.cores = int(m.group(1))
        elif m := _NODES.match(line):
            self.nodes = m.group(1)
        elif m := _DATE.match(line):
            self.header_date = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        elif _DONE.match(line):
            self.complete = True


def _log_start(
    path: str, header_date: datetime | None, jobs: list[Job]
) -> tuple[datetime | None, str]:
    """When the invocation started and how that is known: the log file's name, else the
    header's ``Date:``, else the first job's start (Snakemake's startup then left out)."""
    start = log_name_time(Path(path).name) if path else None
    if start is not None:
        return start, f"the log file's name ({Path(path).name})"
    if header_date is not None:
        return header_date, "the log's header (Date:)"
    starts = [j.start for j in jobs if j.start is not None]
    start = min(starts) if starts else None
    return start, "the log's first job (no start recorded: Snakemake's startup is left out)"


def parse_log(text: str, path: str | Path = "") -> SnakemakeLog:
    """Parse a Snakemake log's text (the main log in ``.snakemake/log/`` or the console
    output); ``path``, when given, names it (its start time is in the file name)."""
    path = str(path)
    r = _LogReader()
    for line in text.splitlines():
        r.feed(line)
    start, source = _log_start(path, r.header_date, r.jobs)
    return SnakemakeLog(path, start, source, r.cores, r.nodes, r.jobs, r.complete, r.last,
                        r.first, r.done, r.total, r.planned, r.failures)  # fmt: skip
