"""The workflow's own overhead: how far a Snakemake run is from the model's pace.

Why: the model calls are the work the study pays for; everything else a run spends
(imports, model loads, scoring, plotting, the scheduler's gaps) is overhead of the
workflow. This module reads what one Snakemake invocation left behind and writes one
long table, ``results/<key>/tables/overhead.csv`` (``metric, rule, value, unit,
source``), with:

- ``wall_s``: the invocation's wall time, from its Snakemake log (the log file's name
  holds its start to the microsecond; the end is the log's last timestamp once the run
  is over, else the moment this report is written, i.e. when the ``overhead`` job runs
  at the end of the invocation it reports on);
- ``model_call_s``: the seconds of the model calls this invocation made: the call cache
  entries written during it (every model call of the workflow goes through the call
  cache, and each entry keeps the call's ``total_s``); ``model_call_s_records`` is the
  same from the run records the invocation wrote (calls with ``cache_hit`` false), and
  ``cached_call_s`` what the calls served from the cache originally cost (a hit carries
  the stored call's timings);
- ``model_slots`` (how many model calls can run at once, with how that was derived),
  ``model_floor_s = model_call_s / model_slots`` and ``wall_over_floor``;
- ``compressor_s``: the seconds LLMLingua's compressor (a model the llmlingua, hybrid
  and some TerseTalk variants run) spent on the compressions computed during the
  invocation, from the LLMLingua cache's entries as for the calls, and the second floor
  ``model_and_compressor_floor_s`` with ``wall_over_model_and_compressor_floor``;
- ``jobs``, ``job_s`` and ``job_s_mean`` per rule (``rule`` column) and in total, from
  the job start (``rule X:``) and ``Finished jobid`` timestamps in the log;
- ``idle_core_s``: the core-seconds no job held (a local run's cores x its time from the
  first job, less what the jobs held): the rest of where the wall went, mostly the end of
  a run, where the last jobs run beside idle cores.

Why the main log and not Snakemake's metadata or ``benchmark:`` files: the log is
written for every executor and persistence backend, holds failed jobs and only this
invocation's jobs (a ``--forceall`` rerun gets a new log, so it reports the rerun), and
needs no change to the rules measured. Its timestamps have a resolution of one second,
so one job's seconds are within one second; sums over many jobs are not biased by it,
since start and end are truncated alike. Whatever cannot be measured is written as an
empty value with the reason in ``source``, never a guessed number.

The workflow's rule ``overhead`` writes the table when it is missing or forced, never
because another target or a shorter rerun rewrote a file it reads (its inputs are
ancient), so the table stays the measurement of the invocation that built the default
target, and the default target after any other target finds nothing to do.

Read it with ``pandas.read_csv``; the rows with an empty ``rule`` are the run's
totals, ``df[df.rule.notna()].pivot(index="rule", columns="metric", values="value")``
the per-rule table.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tersetalk.core.snakelog import Job, SnakemakeLog, parse_log

__all__ = [
    "COLUMNS",
    "Job",
    "SnakemakeLog",
    "add_commands",
    "cache_calls",
    "caption_line",
    "find_log",
    "idle_core_seconds",
    "main",
    "model_slots",
    "overhead_rows",
    "parse_log",
    "record_calls",
    "run_files",
    "write",
]

#: the table's columns, in order
COLUMNS = ("metric", "rule", "value", "unit", "source")
#: a run record written by a job: results/<key>/{runs,calibration/runs,topology/runs}/...
_RUN_FILE = re.compile(r"(?:^|/)results/[^/]+/(?:runs|calibration/runs|topology/runs)/.+\.parquet$")
#: a batch's or sweep's manifest (the run files it wrote: tersetalk.core.io.write_manifest)
_RUN_MANIFEST = re.compile(
    r"(?:^|/)results/[^/]+/"
    r"(?:runs/[^/]+/batches|calibration/runs/[^/]+/sweeps|topology/batches)/.+\.json$"
)
_MERGED_RUN = re.compile(
    r"^(?P<root>(?:.*/)?results/[^/]+/runs)/(?P<rest>[^/]+/[^/]+/[^/]+)\.parquet$"
)
#: backends that run the model in the job's own process (its threads are the job's)
IN_PROCESS = frozenset({"llamacpp"})
#: the rule of this report: its own job is still running when it reports
RULE = "overhead"


def _mentions(text: str, rule: str, output: str) -> bool:
    """Whether ``text`` (a log) starts a job of ``rule`` writing ``output``."""
    log = parse_log(text)
    return any(j.rule == rule and output in j.outputs for j in log.jobs)


def find_log(log_dir: str | Path, output: str | None = None, rule: str = RULE) -> Path | None:
    """The log of the invocation running this report: the newest ``*.snakemake.log`` in
    ``log_dir`` that starts a job of ``rule`` writing ``output`` (the newest log at all
    without ``output``, or when none does). None when there is no log."""
    logs = sorted(Path(log_dir).glob("*.snakemake.log"), key=lambda p: p.name, reverse=True)
    if not logs:
        return None
    if output:
        for log in logs:
            try:
                if _mentions(log.read_text(errors="replace"), rule, output):
                    return log
            except OSError:
                continue
    return logs[0]


def _manifest_files(path: str) -> list[str]:
    """The files a batch's or sweep's manifest lists (none where it cannot be read)."""
    try:
        return [str(f["path"]) for f in json.loads(Path(path).read_text("utf-8"))["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def run_files(jobs: Iterable[Job]) -> dict[str, Job]:
    """The run records finished ``jobs`` wrote, each with its job (a batch or a sweep:
    those its manifest lists): a sharded run's shards, not the merged file as well (its
    calls are the shards')."""
    found: dict[str, Job] = {}
    for job in jobs:
        if job.status == "finished":
            for out in job.outputs:
                if _RUN_MANIFEST.search(out):
                    for listed in _manifest_files(out):
                        if _RUN_FILE.search(listed):
                            found[listed] = job
                elif _RUN_FILE.search(out):
                    found[out] = job
    merged = []
    for out in found:
        m = _MERGED_RUN.match(out)
        if m and any(other.startswith(f"{m['root']}/shards/{m['rest']}/") for other in found):
            merged.append(out)
    for out in merged:
        del found[out]
    return found


@dataclass
class Calls:
    """Model calls counted from one source."""

    made_s: float = 0.0  # seconds of the calls made (not from the cache)
    made: int = 0
    cached_s: float = 0.0  # what the calls served from the cache originally cost
    cached: int = 0
    untimed: int = 0  # calls without a recorded time (a structured call that failed)
    files: int = 0  # run files read / cache entries counted
    missing: list[str] = field(default_factory=list)


def record_calls(paths: Iterable[str | Path]) -> Calls:
    """The model calls in run records (their ``calls`` column: one JSON list per
    example, each call with ``total_s`` and ``cache_hit``)."""
    import pyarrow.parquet as pq

    out = Calls()
    for path in paths:
        try:
            column = pq.read_table(path, columns=["calls"]).column("calls").to_pylist()
        except (OSError, KeyError, ValueError) as exc:
            out.missing.append(f"{path} ({type(exc).__name__})")
            continue
        out.files += 1
        for cell in column:
            for call in json.loads(cell) if cell else []:
                seconds = call.get("total_s")
                timed = isinstance(seconds, int | float) and not call.get("error")
                if not timed:
                    out.untimed += 1
                elif call.get("cache_hit"):
                    out.cached += 1
                    out.cached_s += float(seconds)
                else:
                    out.made += 1
                    out.made_s += float(seconds)
    return out


def cache_calls(
    cache_dir: str | Path, since: float, until: float | None = None, field: str = "total_s"
) -> Calls:
    """The model calls whose call-cache entries (``<cache_dir>/ab/<key>.json``) were
    written between ``since`` and ``until`` (epoch seconds): the calls made then. A
    failed structured call is stored without its time (``untimed``). ``field``: the
    result's key holding the seconds (``seconds`` in the LLMLingua cache, whose entries
    are laid out alike)."""
    out = Calls()
    until = math.inf if until is None else until
    for entry in Path(cache_dir).glob("*/*.json"):
        try:
            mtime = entry.stat().st_mtime
            if not since <= mtime <= until:
                continue
            data = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            out.missing.append(f"{entry} ({type(exc).__name__})")
            continue
        out.files += 1
        seconds = (data.get("result") or {}).get(field) if isinstance(data, dict) else None
        if isinstance(seconds, int | float):
            out.made += 1
            out.made_s += float(seconds)
        else:
            out.untimed += 1
    return out


def model_slots(
    log: SnakemakeLog,
    model_jobs: Iterable[Job],
    *,
    backend: str = "llamacpp",
    max_concurrency: int | None = None,
    model_threads: int | None = None,
    override: int | None = None,
) -> tuple[int | None, str]:
    """How many model calls this run could have in progress at once, and how that is
    known: the cores Snakemake ran with over the threads of a model job (the embedded
    model computes in the job's own threads), the server's ``max_concurrency`` for a
    served model, or the remote nodes of a cluster run."""
    if override:
        return override, "given (--model-slots)"
    if backend not in IN_PROCESS:
        n = max_concurrency or 1
        return n, (
            f"models.max_concurrency = {n}: a {backend} server computes the calls, so the "
            "calls it takes at once bound them (the client's count; the server's own "
            "batch size is not visible here)"
        )
    jobs = list(model_jobs)
    if jobs:
        threads = max(j.threads for j in jobs)
        how = f"the threads of this run's {len(jobs)} model jobs (the log's threads:)"
    elif model_threads:
        threads, how = (
            model_threads,
            "models.threads as the workflow resolves it (no model job ran)",
        )
    else:
        return None, "unavailable: no model job in the log and no --model-threads"
    if log.cores:
        per_job = min(threads, log.cores)  # Snakemake scales a job's threads down to the cores
        return max(1, log.cores // per_job), (
            f"{log.cores} cores (the log's 'Provided cores') // {per_job} threads per model "
            f"job ({how})"
        )
    if log.nodes and log.nodes.isdigit():
        return int(log.nodes), (
            f"{log.nodes} remote nodes (the log's 'Provided remote nodes'): one model job per "
            "cluster job"
        )
    return None, "unavailable: the log names neither cores nor a number of remote nodes"


def _row(metric: str, value: Any, unit: str, source: str, rule: str | None = None) -> dict:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        value = None
    return {"metric": metric, "rule": rule, "value": value, "unit": unit, "source": source}


def _fmt_time(t: datetime | None) -> str:
    return "unknown" if t is None else t.isoformat(sep=" ", timespec="seconds")


def _no_log_rows(why_no_log: str) -> list[dict]:
    """The table without a log: its headline rows, empty, each saying why."""
    why = f"unavailable: {why_no_log} (a run on a cluster or in another folder leaves none here)"
    return [
        _row(metric, None, unit, why)
        for metric, unit in (("wall_s", "s"), ("job_s", "s"), ("jobs", "jobs"))
    ]


def _wall_time(
    log: SnakemakeLog, name: str, now: datetime, running: bool, rule: str
) -> tuple[float | None, str]:
    """The invocation's wall time and its source: from the log's start to now when this
    report is a job of an invocation still going, else to the log's last timestamp."""
    if log.start is None:
        return None, f"unavailable: {name} records no start"
    if running and not log.complete:
        return (now - log.start).total_seconds(), (
            f"Snakemake log {name}: from its start ({_fmt_time(log.start)}, {log.start_source}) "
            f"to this report ({_fmt_time(now)}), written by the '{rule}' job at the end of "
            "that invocation"
        )
    if log.last is None:
        return None, f"unavailable: {name} has no timestamp"
    how = (
        "the invocation is over"
        if log.complete
        else "the log ends without Snakemake's closing line: interrupted, or still running"
    )
    return (log.last - log.start).total_seconds(), (
        f"Snakemake log {name}: from its start ({_fmt_time(log.start)}, {log.start_source}) "
        f"to its last timestamp ({_fmt_time(log.last)}; {how})"
    )


def _startup_rows(log: SnakemakeLog, name: str) -> list[dict]:
    """``startup_s``, Snakemake's time before its first job, when the log knows its own
    start (from its file name or header), not only its first job's."""
    first = log.first_job_start
    if log.start is None or first is None or not log.start_source.startswith("the log"):
        return []
    return [
        _row(
            "startup_s",
            max(0.0, (first - log.start).total_seconds()),
            "s",
            f"Snakemake log {name}: from its start to its first job (parsing, DAG)",
        )
    ]


@dataclass
class _CallsMade:
    """The model calls this invocation made, as counted by the best source at hand."""

    seconds: float
    calls: int
    source: str
    untimed: int
    untimed_source: str


def _calls_made(
    records: Calls, rec_src: str, cache_dir: str | Path | None, since: float | None, now: datetime
) -> _CallsMade:
    """The calls made, from the call-cache entries written during the invocation (every
    model call goes through the cache), else from the run records, saying why."""
    cache: Calls | None = None
    if cache_dir is not None and since is not None and Path(cache_dir).is_dir():
        cache = cache_calls(cache_dir, since, now.timestamp())
    if cache is not None:
        return _CallsMade(
            cache.made_s,
            cache.made,
            f"call cache {cache_dir}: total_s of the {cache.files} entries written during "
            "this invocation (every model call of the workflow goes through the cache)",
            cache.untimed,
            f"call cache {cache_dir}: entries of this invocation without a time (structured "
            "calls whose answer failed: stored without their timing; not in model_call_s)",
        )
    why = (
        "no call cache given"
        if cache_dir is None
        else f"call cache {cache_dir} not found"
        if since is not None
        else "the log has no start"
    )
    return _CallsMade(
        records.made_s,
        records.made,
        f"{rec_src} ({why}: calls outside run records are not counted)",
        records.untimed,
        f"{rec_src}: calls without a time",
    )


def _model_call_rows(made: _CallsMade, records: Calls, rec_src: str) -> list[dict]:
    """The rows of the calls made, and of the run records' own counts: made and cached."""
    return [
        _row("model_call_s", made.seconds, "s", made.source),
        _row("model_calls", made.calls, "calls", made.source),
        _row("model_calls_untimed", made.untimed, "calls", made.untimed_source),
        _row("model_call_s_records", records.made_s, "s", rec_src + ", calls with cache_hit false"),
        _row("model_calls_records", records.made, "calls", rec_src + ", cache_hit false"),
        _row(
            "cached_call_s",
            records.cached_s,
            "s",
            rec_src + ", calls with cache_hit true: the total_s the cache stored when the "
            "call was made",
        ),
        _row("cached_calls", records.cached, "calls", rec_src + ", cache_hit true"),
    ]


def _floor_rows(
    slots: int | None, slots_src: str, model_s: float, wall: float | None
) -> list[dict]:
    """The model slots, the floor (model seconds over slots) and wall over floor."""
    floor = None if slots is None else model_s / slots
    ratio, ratio_src = _ratio(wall, floor, "model_floor_s")
    return [
        _row("model_slots", slots, "slots", slots_src),
        _row(
            "model_floor_s",
            floor,
            "s",
            "model_call_s / model_slots" if floor is not None else f"model_slots {slots_src}",
        ),
        _row("wall_over_floor", ratio, "ratio", ratio_src),
    ]


def _compressor_rows(
    lingua_cache_dir: str | Path,
    since: float,
    now: datetime,
    slots: int | None,
    model_s: float,
    wall: float | None,
) -> list[dict]:
    """LLMLingua's compressor, a model the systems under test run besides the calls: its
    seconds during the invocation and the floor that counts them too."""
    lingua = cache_calls(lingua_cache_dir, since, now.timestamp(), field="seconds")
    src = (
        f"LLMLingua cache {lingua_cache_dir}: seconds of the {lingua.files} compressions "
        "computed during this invocation (the compressor model's forward passes; its "
        "loading is not in it)"
    )
    both = None if slots is None else (model_s + lingua.made_s) / slots
    ratio, ratio_src = _ratio(wall, both, "model_and_compressor_floor_s")
    return [
        _row("compressor_s", lingua.made_s, "s", src),
        _row("compressions", lingua.made, "compressions", src),
        _row(
            "model_and_compressor_floor_s",
            both,
            "s",
            "(model_call_s + compressor_s) / model_slots: the floor counting every model "
            "the systems run (the call model and LLMLingua's compressor, one thread each)",
        ),
        _row("wall_over_model_and_compressor_floor", ratio, "ratio", ratio_src),
    ]


def _job_source(name: str) -> str:
    """Where a job's seconds come from: its start and end stamps in the log."""
    return (
        f"Snakemake log {name}: from a job's start (its rule header) to its 'Finished jobid' "
        "(1 s resolution)"
    )


def _job_rows(
    made_jobs: list[Job], name: str, rule: str, model_s: float, job_src: str
) -> list[dict]:
    """The job-seconds of the whole invocation (jobs timed, failed, still running) and
    the share the model calls took of them."""
    done = [j for j in made_jobs if j.seconds is not None]
    total_s = sum(j.seconds or 0.0 for j in done)
    rows = [
        _row("jobs", len(done), "jobs", job_src + "; finished and failed jobs"),
        _row("jobs_failed", sum(j.status == "failed" for j in done), "jobs", job_src),
        _row(
            "jobs_running",
            sum(j.status == "running" for j in made_jobs),
            "jobs",
            f"Snakemake log {name}: started, not finished when this report was written "
            f"(the '{rule}' job itself not counted)",
        ),
        _row("job_s", total_s, "s", job_src),
        _row(
            "model_share_of_job_s",
            model_s / total_s if total_s > 0 else None,
            "ratio",
            "model_call_s / job_s" if total_s > 0 else "unavailable: no job-seconds",
        ),
        _row(
            "non_model_job_s",
            total_s - model_s,
            "s",
            "job_s - model_call_s: the workflow's own work (imports, loads, scoring, plots)",
        ),
    ]
    return rows


def _per_rule_rows(made_jobs: list[Job], job_src: str) -> list[dict]:
    """Per rule, in name order: its timed jobs, their seconds and mean, and the failed."""
    per_rule: dict[str, list[Job]] = {}
    for job in made_jobs:
        if job.seconds is not None:
            per_rule.setdefault(job.rule, []).append(job)
    rows = []
    for rule_name in sorted(per_rule):
        jobs = per_rule[rule_name]
        seconds = [j.seconds or 0.0 for j in jobs]
        rows += [
            _row("jobs", len(jobs), "jobs", job_src, rule_name),
            _row("job_s", sum(seconds), "s", job_src, rule_name),
            _row("job_s_mean", sum(seconds) / len(seconds), "s", job_src, rule_name),
        ]
        failed = sum(j.status == "failed" for j in jobs)
        if failed:
            rows.append(_row("jobs_failed", failed, "jobs", job_src, rule_name))
    return rows


def overhead_rows(
    log: SnakemakeLog | None,
    *,
    cache_dir: str | Path | None = None,
    lingua_cache_dir: str | Path | None = None,
    now: datetime | None = None,
    backend: str = "llamacpp",
    max_concurrency: int | None = None,
    model_threads: int | None = None,
    model_slots_override: int | None = None,
    rule: str = RULE,
    running: bool = False,
    why_no_log: str = "no Snakemake log found",
) -> list[dict]:
    """The rows of the overhead table for the invocation ``log`` describes. ``running``:
    this report is a job of that invocation, which ends now (``now``, default the clock);
    otherwise the log's last timestamp is its end."""
    now = now or datetime.now()
    if log is None:
        return _no_log_rows(why_no_log)
    name = Path(log.path).name or "the log"
    wall, wall_src = _wall_time(log, name, now, running, rule)
    rows = [_row("wall_s", wall, "s", wall_src), *_startup_rows(log, name)]

    # the jobs measured: every one but this report's own, still running
    made_jobs = [j for j in log.jobs if not (j.rule == rule and j.status == "running")]
    runs = run_files(made_jobs)
    records = record_calls(runs)
    rec_src = (
        f"run records: the calls column of the {records.files} run files written by this "
        f"invocation's jobs (the log's output: lines, and the manifests of batches and sweeps)"
    )
    if records.missing:
        rec_src += f"; unreadable: {', '.join(records.missing[:3])}"
    since = log.start.timestamp() if log.start is not None else None
    made = _calls_made(records, rec_src, cache_dir, since, now)
    rows += _model_call_rows(made, records, rec_src)

    slots, slots_src = model_slots(
        log,
        list({id(j): j for j in runs.values()}.values()),  # the jobs that wrote run records
        backend=backend,
        max_concurrency=max_concurrency,
        model_threads=model_threads,
        override=model_slots_override,
    )
    rows += _floor_rows(slots, slots_src, made.seconds, wall)
    if lingua_cache_dir is not None and since is not None and Path(lingua_cache_dir).is_dir():
        rows += _compressor_rows(lingua_cache_dir, since, now, slots, made.seconds, wall)

    job_src = _job_source(name)
    rows += _job_rows(made_jobs, name, rule, made.seconds, job_src)
    rows.append(_idle_row(log, running, now, name))
    rows += _per_rule_rows(made_jobs, job_src)
    return rows


def idle_core_seconds(jobs: Iterable[Job], cores: int, end: datetime) -> float:
    """Core-seconds no job held, from the first job's start to ``end``: with the
    job-seconds, where a local run's cores x wall went (cores waiting for a job to be
    ready, mostly at the end, where the last jobs run beside idle cores).

    A job holds its threads, at most ``cores`` (Snakemake scales them down); a job still
    running holds them until ``end``. The log's stamps have 1 s resolution, so the total
    is within a second per job start or end.
    """
    events: list[tuple[datetime, int]] = []
    for job in jobs:
        if job.start is None or job.start >= end:
            continue
        held = min(max(job.threads, 1), cores)
        events += [(job.start, held), (min(job.end or end, end), -held)]
    if not events:
        return 0.0
    events.sort(key=lambda e: (e[0], e[1]))
    idle, busy, t = 0.0, 0, events[0][0]
    for when, delta in events:
        idle += (when - t).total_seconds() * max(0, cores - busy)
        t, busy = when, busy + delta
    return idle + (end - t).total_seconds() * max(0, cores - busy)


def _idle_row(log: SnakemakeLog, running: bool, now: datetime, name: str) -> dict:
    """``idle_core_s`` of a local run (a cluster run has no cores to count)."""
    if not log.cores:
        why = f"unavailable: {name} names no 'Provided cores' (a cluster run)"
        return _row("idle_core_s", None, "core-s", why)
    to_now = running and not log.complete
    end = now if to_now else log.last
    if end is None:
        return _row("idle_core_s", None, "core-s", f"unavailable: {name} has no timestamp")
    # every job, the report itself too: it holds a core while it runs, like any job
    return _row(
        "idle_core_s",
        idle_core_seconds(log.jobs, log.cores, end),
        "core-s",
        f"Snakemake log {name}: {log.cores} cores x the time from the first job's start to "
        f"{'this report' if to_now else 'its last timestamp'}, less the cores its jobs held "
        "(a job holds its threads; 1 s resolution): cores waiting for a job to be ready",
    )


def _ratio(wall: float | None, floor: float | None, name: str) -> tuple[float | None, str]:
    if floor is None or wall is None:
        return None, "unavailable: " + ("no floor" if floor is None else "no wall time")
    if floor <= 0:
        return None, "unavailable: the floor is 0 (this invocation made no model call)"
    return wall / floor, f"wall_s / {name}"


def frame(rows: list[dict]):
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype("float64")
    return df


def caption_line(csv: str | Path) -> str:
    """One sentence of the numbers in ``csv`` for the report's caption; says so when
    the table is not there or lacks a number. (The csv module, not pandas: Snakemake
    evaluates this in its own process.)"""
    import csv as csv_module

    path = Path(csv)
    if not path.is_file():
        return "Not built yet."
    with path.open(newline="", encoding="utf-8") as fh:
        totals = {r["metric"]: r["value"] for r in csv_module.DictReader(fh) if not r["rule"]}

    def s(metric: str, digits: int = 0) -> str | None:
        try:
            value = float(totals[metric])
        except (KeyError, ValueError):
            return None
        return None if math.isnan(value) else f"{value:,.{digits}f}"

    wall, slots, floor, ratio = (
        s("wall_s"),
        s("model_slots"),
        s("model_floor_s"),
        s("wall_over_floor", 2),
    )
    return (
        f"This run: wall time {f'{wall} s' if wall else 'not measured'}; model calls "
        f"{s('model_call_s')} s ({s('model_calls')} calls; the {s('cached_calls')} calls served "
        f"from the cache originally cost {s('cached_call_s')} s), "
        + (f"{slots} model slots, a floor of {floor} s; " if slots and floor else "no floor; ")
        + (f"wall / floor {ratio}; " if ratio else "no wall / floor ratio (see source); ")
        + (
            f"with LLMLingua's compressor ({s('compressor_s')} s) in the floor, "
            f"{s('wall_over_model_and_compressor_floor', 2)}; "
            if s("wall_over_model_and_compressor_floor", 2)
            else ""
        )
        + f"{s('job_s')} job-seconds in {s('jobs')} jobs, {s('non_model_job_s')} of them "
        "outside model calls."
    )


def write(rows: list[dict], out: str | Path) -> Path:
    """Write the table (atomically) and its provenance sidecar."""
    from tersetalk.core import figmeta
    from tersetalk.core.io import write_csv_atomic

    df = frame(rows)
    path = write_csv_atomic(df, out)
    figmeta.write(path, figmeta.describe(None, out=out))
    return Path(path)


def _cmd_overhead(args: argparse.Namespace) -> None:
    why = "no Snakemake log found"
    if args.snakemake_log:
        log_path: Path | None = Path(args.snakemake_log)
        if not log_path.is_file():
            why, log_path = f"the Snakemake log {args.snakemake_log} does not exist", None
    else:
        log_path = find_log(args.log_dir, output=args.out)
        if log_path is None:
            why = f"no *.snakemake.log in {args.log_dir}"
    log = None
    if log_path is not None:
        log = parse_log(log_path.read_text(errors="replace"), log_path)
    rows = overhead_rows(
        log,
        cache_dir=args.cache_dir,
        lingua_cache_dir=args.lingua_cache_dir,
        backend=args.backend,
        max_concurrency=args.max_concurrency,
        model_threads=args.model_threads,
        model_slots_override=args.model_slots,
        running=args.in_progress,
        why_no_log=why,
    )
    path = write(rows, args.out)
    print(caption_line(path), file=sys.stderr)
    print(path)


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "overhead",
        help="the workflow's own overhead: wall time against the model floor (overhead.csv)",
        description="Read one Snakemake invocation's log, the run records its jobs wrote and "
        "the call-cache entries written during it, and write a long table (metric, rule, "
        "value, unit, source): wall time, model-call seconds, model slots, the floor "
        "(model seconds / slots), wall / floor, and job-seconds per rule. Run as the last "
        "job of a workflow (rule overhead), it reports the invocation running it.",
    )
    p.add_argument(
        "--snakemake-log",
        default="",
        help="the invocation's log (default: the newest one in --log-dir that runs the "
        "job writing --out, else the newest)",
    )
    p.add_argument("--log-dir", default=".snakemake/log", help="where Snakemake keeps its logs")
    p.add_argument("--cache-dir", help="the model-call cache folder (results/cache/calls)")
    p.add_argument(
        "--lingua-cache-dir",
        help="the LLMLingua compression cache folder (results/cache/lingua): its entries "
        "written during the invocation give compressor_s and a second floor counting it",
    )
    p.add_argument("--backend", default="llamacpp", help="models.backend of the run")
    p.add_argument("--max-concurrency", type=int, help="models.max_concurrency (servers)")
    p.add_argument(
        "--model-threads", type=int, help="threads of a model job, when none ran (models.threads)"
    )
    p.add_argument(
        "--in-progress",
        action="store_true",
        help="this is a job of the invocation reported on (rule overhead): its wall time "
        "ends now, not at the log's last timestamp",
    )
    p.add_argument("--model-slots", type=int, help="model slots, overriding the derivation")
    p.add_argument(
        "--out", required=True, help="the CSV to write (results/<key>/tables/overhead.csv)"
    )
    p.set_defaults(func=_cmd_overhead)


def main(argv: list[str] | None = None) -> int:
    """``python -m tersetalk.pipeline.overhead ...``: the ``overhead`` subcommand on its own."""
    parser = argparse.ArgumentParser(prog="tersetalk")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    args = parser.parse_args(["overhead", *(sys.argv[1:] if argv is None else argv)])
    try:
        args.func(args)
    except FileNotFoundError as exc:
        print(f"tersetalk overhead: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
