"""The workflow's overhead report (tersetalk.pipeline.overhead): Snakemake logs in the format
Snakemake 9 writes them (built here from its formatter's layout: a ``time.asctime()``
stamp line, then the job's header and fields), run records with a ``calls`` column,
call-cache entries with their modification times, and a real Snakemake run of a small
workflow whose last rule is the report, run twice (the second time forced)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from tersetalk.pipeline import overhead

T0 = datetime(2026, 11, 27, 4, 1, 7, 798491)
LOG_NAME = "2026-11-27T040107.798491.snakemake.log"
KEY = "results/m"


def stamp(t: datetime) -> str:
    return f"[{time.asctime(t.timetuple())}]"


def header(cores: int | None = 2) -> list[str]:
    lines = [
        "Assuming unrestricted shared filesystem usage.",
        "",
        "SNAKEMAKE",
        "=========",
        f"  Date: {T0:%Y-%m-%d %H:%M:%S}",
        "  Snakemake version: 9.27.1",
        "",
        "Building DAG of jobs...",
        "Using shell: /usr/bin/bash",
    ]
    if cores is not None:
        lines += [f"Provided cores: {cores}", "Rules claiming more threads will be scaled down."]
    return lines + ["Select jobs to execute...", "Execute 2 jobs..."]


def start(t, rule, jobid, outputs, threads=1, local=True) -> list[str]:
    lines = [
        stamp(t),
        f"{'local' if local else ''}rule {rule}:",
        "    input: results/samples/x.parquet",
        f"    output: {', '.join(outputs)}",
        f"    log: results/logs/{rule}.log",
        f"    jobid: {jobid}",
        "    reason: Missing output files",
        "    wildcards: task=x",
    ]
    if threads != 1:
        lines.append(f"    threads: {threads}")
    return lines + [
        "    resources: tmpdir=/tmp, runtime=10, mem_mb=3000",
        "Select jobs to execute...",
    ]


def finish(t, rule, jobid, done=1, total=9) -> list[str]:
    return [stamp(t), f"Finished jobid: {jobid} (Rule: {rule})", f"{done} of {total} steps done"]


def error(t, rule, jobid) -> list[str]:
    return [
        stamp(t),
        f"Error in rule {rule}:",
        "    message: None",
        f"    jobid: {jobid}",
        "    output: results/x",
        "    shell:",
        "        false",
        "        (command exited with non-zero exit code)",
    ]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


RUN_A = f"{KEY}/runs/hotpotqa/freeform/default.parquet"
RUN_B = f"{KEY}/calibration/runs/hotpotqa/tersetalk/g06.parquet"
OUT = f"{KEY}/tables/overhead.csv"


def basic_log(*, complete=False, overhead_running=True) -> str:
    """Two model jobs of 1 thread on 2 cores, a score job, then the overhead job."""
    lines = header()
    lines += start(at(2), "sample", 1, ["results/samples/x.parquet"])
    lines += finish(at(5), "sample", 1)
    lines += start(at(5), "run_system", 2, [RUN_A])
    lines += start(at(6), "calibration_run", 3, [RUN_B])
    lines += finish(at(65), "run_system", 2)
    lines += finish(at(46), "calibration_run", 3)
    lines += start(at(65), "score", 4, [f"{KEY}/scores/x.parquet"])
    lines += finish(at(73), "score", 4)
    lines += start(at(74), "overhead", 5, [OUT])
    if not overhead_running:
        lines += finish(at(76), "overhead", 5)
    if complete:
        lines += start(at(76), "all", 0, []) + finish(at(76), "all", 0)
        lines += ["Complete log(s): /w/.snakemake/log/" + LOG_NAME]
    return "\n".join(lines) + "\n"


def write_run(path: Path, calls_per_example: list[list[dict]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"calls": [json.dumps(c) for c in calls_per_example]}).to_parquet(path)


def call(total_s: float, hit: bool = False, **extra) -> dict:
    return {"role": "worker", "total_s": total_s, "cache_hit": hit, **extra}


def cache_entry(cache: Path, key: str, mtime: float, total_s: float | None) -> Path:
    path = cache / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if total_s is None:
        body = {"key": key, "request": {}, "error": {"type": "X", "message": "m", "attempts": 4}}
    else:
        body = {"key": key, "request": {}, "result": {"total_s": total_s, "text": "t"}}
    path.write_text(json.dumps(body))
    os.utime(path, (mtime, mtime))
    return path


def table(rows) -> pd.DataFrame:
    return overhead.frame(rows)


def total(df: pd.DataFrame, metric: str) -> float:
    hit = df[(df["metric"] == metric) & df["rule"].isna()]
    assert len(hit) == 1, (metric, hit)
    return hit["value"].iloc[0]


def per_rule(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["rule"].notna()].pivot(index="rule", columns="metric", values="value")


# ---- the log ------------------------------------------------------------------------


def test_parse_log_reads_jobs_times_threads_outputs_and_cores():
    log = overhead.parse_log(basic_log(), f"/w/.snakemake/log/{LOG_NAME}")
    assert log.start == T0 and "file's name" in log.start_source
    assert log.cores == 2 and log.nodes is None and not log.complete
    by_id = {j.jobid: j for j in log.jobs}
    assert [by_id[i].rule for i in (1, 2, 3, 4, 5)] == [
        "sample", "run_system", "calibration_run", "score", "overhead"
    ]  # fmt: skip
    assert by_id[2].seconds == 60 and by_id[3].seconds == 40 and by_id[4].seconds == 8
    assert by_id[2].outputs == [RUN_A] and by_id[2].local
    assert by_id[5].status == "running" and by_id[5].seconds is None
    assert log.last == at(74).replace(microsecond=0)
    assert overhead.parse_log(basic_log(complete=True), LOG_NAME).complete


def test_threads_other_than_one_are_read_and_a_missing_line_means_one():
    lines = header(cores=8) + start(at(1), "run_system", 7, [RUN_A], threads=4)
    lines += finish(at(3), "run_system", 7)
    log = overhead.parse_log("\n".join(lines))
    assert log.cores == 8 and log.jobs[0].threads == 4
    assert overhead.parse_log(basic_log()).jobs[0].threads == 1


def test_failed_jobs_and_a_retry_are_both_timed():
    lines = header() + start(at(1), "score", 3, ["s"]) + error(at(4), "score", 3)
    lines += start(at(5), "score", 3, ["s"]) + finish(at(12), "score", 3)
    log = overhead.parse_log("\n".join(lines))
    assert [(j.status, j.seconds) for j in log.jobs] == [("failed", 3), ("finished", 7)]


def test_console_output_with_progress_bars_before_the_stamp():
    """The console copy: a job's tqdm bar ends without a newline, so the next stamp
    follows it on the same line; and Snakemake 8's ``Finished job N.``."""
    text = "\n".join(
        [
            *header(),
            "",
            *start(at(1), "run_system", 2, [RUN_A]),
            "x:  90%|#########| 9/10 [00:56<00:05,  5.03s/ex]" + stamp(at(31)),
            "Finished job 2.",
        ]
    )
    (job,) = overhead.parse_log(text).jobs
    assert job.status == "finished" and job.seconds == 30


def test_start_falls_back_to_the_header_date_without_the_file_name():
    log = overhead.parse_log(basic_log(), "console.txt")
    assert log.start == T0.replace(microsecond=0) and "Date" in log.start_source


def test_find_log_takes_the_newest_log_that_runs_this_report(tmp_path):
    old = tmp_path / LOG_NAME
    old.write_text(basic_log(complete=True))
    rerun = tmp_path / "2026-11-27T050000.000001.snakemake.log"
    rerun.write_text(basic_log())
    # a later log of another invocation that did not run the report (a dry run, a target)
    other = tmp_path / "2026-11-27T060000.000001.snakemake.log"
    other.write_text("\n".join(header() + start(at(1), "sample", 1, ["x"])))
    assert overhead.find_log(tmp_path, output=OUT) == rerun
    assert overhead.find_log(tmp_path) == other
    assert overhead.find_log(tmp_path, output="results/elsewhere.csv") == other
    assert overhead.find_log(tmp_path / "none") is None


# ---- run records and the call cache -------------------------------------------------


def test_run_files_keeps_shards_not_their_merged_run():
    shard = f"{KEY}/runs/shards/hotpotqa/freeform/default/0-of-2.parquet"
    jobs = [
        overhead.Job("run_system", at(1), 1, [shard], status="finished"),
        overhead.Job("merge_run", at(2), 2, [RUN_A], status="finished"),
        overhead.Job("calibration_run", at(2), 3, [RUN_B], status="finished"),
        overhead.Job("run_system", at(2), 4, [f"{KEY}/runs/gsm8k/x/y.parquet"]),  # running
        overhead.Job("score", at(2), 5, [f"{KEY}/scores/a/b/c.parquet"], status="finished"),
    ]
    assert sorted(overhead.run_files(jobs)) == sorted([shard, RUN_B])


def test_run_files_reads_the_runs_a_batch_or_sweep_wrote_from_its_manifest(tmp_path, monkeypatch):
    """A batch job's output is its manifest: the run files it lists are the job's."""
    from tersetalk.core.io import write_manifest

    monkeypatch.chdir(tmp_path)
    runs = [f"{KEY}/runs/hotpotqa/tersetalk/caps_{i}.parquet" for i in range(2)]
    points = [f"{KEY}/calibration/runs/gsm8k/tersetalk/g0{i}.parquet" for i in range(2)]
    routed = [
        f"{KEY}/topology/runs/boolq/topology_tersetalk/{v}.parquet" for v in ("star", "chain")
    ]
    for f in runs + points + routed:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_bytes(b"x")
    batch = f"{KEY}/runs/hotpotqa/batches/ablations/tersetalk.json"
    sweep = f"{KEY}/calibration/runs/gsm8k/sweeps/tersetalk.json"
    write_manifest(batch, runs, "tersetalk run")
    write_manifest(sweep, points, "tersetalk run")
    topology = f"{KEY}/topology/batches/boolq/topology_tersetalk.json"
    write_manifest(topology, routed, "tersetalk run")
    jobs = [
        overhead.Job("topology_batch", at(1), 4, [topology], status="finished"),
        overhead.Job("run_batch", at(1), 1, [batch], status="finished"),
        overhead.Job("calibration_sweep", at(1), 2, [sweep], status="finished"),
        overhead.Job(
            "score", at(2), 3, [f"{KEY}/scores/hotpotqa/groups/ablations.json"], status="finished"
        ),  # fmt: skip
    ]
    found = overhead.run_files(jobs)
    assert sorted(found) == sorted(runs + points + routed)
    assert {found[r].rule for r in runs} == {"run_batch"}
    assert {found[r].rule for r in routed} == {"topology_batch"}


def test_record_calls_splits_made_cached_and_untimed(tmp_path):
    write_run(
        tmp_path / "a.parquet",
        [[call(2.5), call(1.0, hit=True)], [call(0.0, error="schema"), call(4.0)]],
    )
    got = overhead.record_calls([tmp_path / "a.parquet", tmp_path / "missing.parquet"])
    assert (got.made, got.made_s, got.cached, got.cached_s) == (2, 6.5, 1, 1.0)
    assert got.untimed == 1 and got.files == 1 and "missing.parquet" in got.missing[0]


def test_cache_calls_counts_only_entries_written_in_the_window(tmp_path):
    t = 1_000_000.0
    cache_entry(tmp_path, "aa01", t - 10, 5.0)  # before the invocation
    cache_entry(tmp_path, "ab02", t + 1, 2.0)
    cache_entry(tmp_path, "ac03", t + 2, 3.5)
    cache_entry(tmp_path, "ad04", t + 3, None)  # a failed structured call: no time
    cache_entry(tmp_path, "ae05", t + 100, 7.0)  # after the report
    got = overhead.cache_calls(tmp_path, t, t + 50)
    assert (got.made, got.made_s, got.untimed, got.files) == (2, 5.5, 1, 3)


# ---- the table ----------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A workflow folder: run records of the two model jobs of basic_log() and a call
    cache with entries written before and during the invocation."""
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / RUN_A, [[call(20.0), call(10.0, hit=True)], [call(25.0)]])
    write_run(tmp_path / RUN_B, [[call(30.0), call(0.0, error="schema")]])
    cache = tmp_path / "results/cache/calls"
    start_s = T0.timestamp()
    cache_entry(cache, "aa01", start_s - 3600, 10.0)  # the hit's entry, from an earlier run
    for i, seconds in enumerate((20.0, 25.0, 30.0, 5.0)):  # 5.0: a call outside run records
        cache_entry(cache, f"b{i}00", start_s + 10 + i, seconds)
    cache_entry(cache, "c000", start_s + 20, None)
    return tmp_path


def test_the_table_reports_wall_model_seconds_floor_ratio_and_rules(workdir):
    log = overhead.parse_log(basic_log(), LOG_NAME)
    now = at(80)
    df = table(overhead.overhead_rows(log, cache_dir="results/cache/calls", now=now, running=True))
    assert total(df, "wall_s") == pytest.approx(80.0)
    assert total(df, "startup_s") == pytest.approx(2 - 0.798491)
    assert total(df, "model_call_s") == 80.0 and total(df, "model_calls") == 4
    assert total(df, "model_calls_untimed") == 1
    assert total(df, "model_call_s_records") == 75.0 and total(df, "model_calls_records") == 3
    assert total(df, "cached_call_s") == 10.0 and total(df, "cached_calls") == 1
    assert total(df, "model_slots") == 2
    assert total(df, "model_floor_s") == 40.0
    assert total(df, "wall_over_floor") == pytest.approx(2.0)
    # job-seconds: sample 3 + run 60 + calibration 40 + score 8; the report itself not
    assert total(df, "job_s") == 111 and total(df, "jobs") == 4
    assert total(df, "jobs_running") == 0
    assert total(df, "non_model_job_s") == 31
    rules = per_rule(df)
    assert "overhead" not in rules.index
    assert rules.loc["run_system", "job_s"] == 60 and rules.loc["score", "jobs"] == 1
    assert rules.loc["calibration_run", "job_s_mean"] == 40
    # every row says where its number comes from
    assert df["source"].str.len().min() > 10
    assert "cores" in df.loc[df.metric == "model_slots", "source"].iloc[0]


def lingua_entry(cache: Path, key: str, mtime: float, seconds: float) -> Path:
    """An LLMLingua cache entry as tersetalk.encoders.lingua_cache writes it."""
    path = cache / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "request": {}, "result": {"seconds": seconds}}))
    os.utime(path, (mtime, mtime))
    return path


def test_the_compressor_seconds_give_a_second_floor(workdir):
    lingua = workdir / "results/cache/lingua"
    start_s = T0.timestamp()
    lingua_entry(lingua, "aa01", start_s - 60, 99.0)  # computed by an earlier run
    lingua_entry(lingua, "ab02", start_s + 12, 6.0)
    lingua_entry(lingua, "ac03", start_s + 14, 14.0)
    log = overhead.parse_log(basic_log(), LOG_NAME)
    rows = overhead.overhead_rows(log, cache_dir="results/cache/calls",
                                  lingua_cache_dir=lingua, now=at(80), running=True)  # fmt: skip
    df = table(rows)
    assert total(df, "compressor_s") == 20.0 and total(df, "compressions") == 2
    assert total(df, "model_and_compressor_floor_s") == 50.0  # (80 + 20) / 2 slots
    assert total(df, "wall_over_model_and_compressor_floor") == pytest.approx(1.6)
    assert total(df, "wall_over_floor") == pytest.approx(2.0)  # the calls' floor unchanged
    # without the folder, no such rows (and nothing invented)
    rows = overhead.overhead_rows(log, cache_dir="results/cache/calls", now=at(80), running=True)
    assert "compressor_s" not in set(table(rows)["metric"])


def test_a_finished_log_read_later_ends_at_its_last_stamp(workdir):
    log = overhead.parse_log(basic_log(complete=True, overhead_running=False), LOG_NAME)
    df = table(overhead.overhead_rows(log, cache_dir="results/cache/calls", now=at(9999)))
    assert total(df, "wall_s") == pytest.approx(76 - 0.798491)
    assert "is over" in df.loc[df.metric == "wall_s", "source"].iloc[0]
    # once finished, the report's own job is one of the rules
    assert per_rule(df).loc["overhead", "job_s"] == 2


def test_without_the_cache_the_model_seconds_come_from_the_run_records(workdir):
    log = overhead.parse_log(basic_log(), LOG_NAME)
    df = table(overhead.overhead_rows(log, cache_dir=None, now=at(80), running=True))
    assert total(df, "model_call_s") == 75.0 and total(df, "model_floor_s") == 37.5
    assert (
        "calls outside run records are not counted"
        in (df.loc[df.metric == "model_call_s", "source"].iloc[0])
    )


def test_a_forced_rerun_reports_its_own_log_and_no_model_call(tmp_path, monkeypatch):
    """Every call served from the cache: no entry written, floor 0, ratio unavailable
    with the reason; the wall time is the rerun's."""
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / RUN_A, [[call(20.0, hit=True), call(25.0, hit=True)]])
    write_run(tmp_path / RUN_B, [[call(30.0, hit=True)]])
    cache = tmp_path / "results/cache/calls"
    for i, seconds in enumerate((20.0, 25.0, 30.0)):  # written by the first run
        cache_entry(cache, f"b{i}00", T0.timestamp() - 600, seconds)
    logs = tmp_path / ".snakemake/log"
    logs.mkdir(parents=True)
    (logs / "2026-11-27T035000.000001.snakemake.log").write_text(basic_log(complete=True))
    (logs / LOG_NAME).write_text(basic_log())
    found = overhead.find_log(logs, output=OUT)
    assert found.name == LOG_NAME
    log = overhead.parse_log(found.read_text(), found)
    rows = overhead.overhead_rows(log, cache_dir=cache, now=at(30), running=True)
    df = table(rows)
    assert total(df, "wall_s") == pytest.approx(30.0)
    assert total(df, "model_call_s") == 0 and total(df, "cached_call_s") == 75.0
    assert total(df, "cached_calls") == 3 and total(df, "model_floor_s") == 0
    assert pd.isna(total(df, "wall_over_floor"))
    assert "floor is 0" in df.loc[df.metric == "wall_over_floor", "source"].iloc[0]
    line = overhead.caption_line(overhead.write(rows, tmp_path / "o.csv"))
    assert "wall time 30 s" in line and "no wall / floor ratio" in line
    assert "the 3 calls served from the cache originally cost 75 s" in line


def test_model_slots_for_threads_servers_clusters_and_overrides():
    jobs = [overhead.Job("run_system", at(1), 1, [RUN_A], threads=3)]
    log = overhead.parse_log("\n".join(header(cores=8)))
    assert overhead.model_slots(log, jobs)[0] == 2  # 8 cores // 3 threads
    assert overhead.model_slots(log, [], model_threads=4)[0] == 2
    assert overhead.model_slots(log, [])[0] is None
    few = overhead.parse_log("\n".join(header(cores=2)))
    slots, how = overhead.model_slots(few, jobs)  # Snakemake scales 3 threads down to 2
    assert slots == 1 and "// 2 threads per model job" in how
    slots, how = overhead.model_slots(log, jobs, backend="ollama", max_concurrency=4)
    assert slots == 4 and "max_concurrency" in how
    remote = overhead.parse_log("Provided remote nodes: 16\n")
    assert overhead.model_slots(remote, jobs)[0] == 16
    unlimited = overhead.parse_log("Provided remote nodes: unlimited\n")
    slots, how = overhead.model_slots(unlimited, jobs)
    assert slots is None and how.startswith("unavailable")
    assert overhead.model_slots(log, jobs, override=5) == (5, "given (--model-slots)")


def test_no_log_is_said_not_invented():
    df = table(overhead.overhead_rows(None, why_no_log="no *.snakemake.log in x"))
    assert df["value"].isna().all() and set(df.metric) >= {"wall_s", "job_s"}
    assert df["source"].str.startswith("unavailable: no *.snakemake.log in x").all()


# ---- the command and the file -------------------------------------------------------


def test_the_command_writes_a_table_pandas_reads_and_a_caption_line(workdir):
    logs = workdir / ".snakemake/log"
    logs.mkdir(parents=True)
    (logs / LOG_NAME).write_text(basic_log(complete=True, overhead_running=False))
    assert overhead.main(["--cache-dir", "results/cache/calls", "--out", OUT]) == 0
    df = pd.read_csv(workdir / OUT)
    assert list(df.columns) == list(overhead.COLUMNS)
    assert df["value"].dtype == "float64" and df["rule"].isna().any()
    assert total(df, "model_call_s") == 80.0
    assert (workdir / (OUT + ".meta.json")).is_file()
    line = overhead.caption_line(workdir / OUT)
    assert "model calls 80 s" in line and "2 model slots, a floor of 40 s" in line
    assert overhead.caption_line(workdir / "nothing.csv") == "Not built yet."


def test_a_missing_named_log_is_reported_in_the_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["--snakemake-log", "gone.log", "--out", "o.csv"]
    assert overhead.main(args) == 0
    df = pd.read_csv(tmp_path / "o.csv")
    assert df["value"].isna().all() and df["source"].str.contains("gone.log").all()


# ---- a real Snakemake run -----------------------------------------------------------

SNAKEFILE = """
MODEL = "results/m/runs/t/s/v.parquet"


def current_log(wildcards, output):
    logs = workflow.logger_manager.get_logfile()
    return logs[0] if logs else ""


rule all:
    input:
        "results/m/tables/overhead.csv",


rule model:
    output:
        MODEL,
    shell:
        "sleep 2; PYTHON -c 'import json, sys, pandas as pd; "
        "calls = json.dumps([dict(total_s=1.5, cache_hit=False)]); "
        "pd.DataFrame(dict(calls=[calls])).to_parquet(sys.argv[1])' {output}"


rule slow:
    output:
        "results/slow.txt",
    shell:
        "sleep 3; touch {output}"


rule overhead:
    input:
        MODEL,
        "results/slow.txt",
    output:
        "results/m/tables/overhead.csv",
    localrule: True
    params:
        log=current_log,
    shell:
        "PYTHON -m tersetalk.pipeline.overhead --in-progress --snakemake-log {params.log:q} "
        "--out {output}"
"""


@pytest.mark.integration
def test_a_real_snakemake_run_and_its_forced_rerun(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE.replace("PYTHON", sys.executable))
    env = {**os.environ, "PYTHONPATH": str(Path(overhead.__file__).parents[2])}

    def snakemake(*extra):
        res = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "2", "-p", *extra],
            cwd=tmp_path, capture_output=True, text=True, env=env,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        return res.stdout + res.stderr

    def run(*extra):
        out = snakemake(*extra)
        # the log comes from Snakemake itself (the derived param), not from a search
        assert "--snakemake-log /" in out and ".snakemake/log/" in out
        return pd.read_csv(tmp_path / "results/m/tables/overhead.csv")

    first = run()
    # the log param changes with every invocation but is derived: no rerun trigger
    assert "Nothing to be done" in snakemake("-n")
    rules = per_rule(first)
    assert set(rules.index) == {"model", "slow"}
    assert total(first, "jobs") == 2 and total(first, "model_slots") == 2
    assert total(first, "model_call_s_records") == 1.5
    assert total(first, "model_calls_records") == 1 and total(first, "cached_calls") == 0
    # both jobs ran side by side on the 2 cores: the wall time is less than their sum
    assert 2 <= rules.loc["slow", "job_s"] and total(first, "wall_s") > rules.loc["slow", "job_s"]
    logs = sorted((tmp_path / ".snakemake/log").glob("*.snakemake.log"))
    assert len(logs) == 1 and logs[0].name in first.loc[0, "source"]

    again = run("--forceall")
    logs = sorted((tmp_path / ".snakemake/log").glob("*.snakemake.log"))
    assert len(logs) == 2
    assert logs[1].name in again.loc[0, "source"] and logs[0].name not in again.loc[0, "source"]
    assert total(again, "jobs") == 2


def test_a_damaged_log_gives_a_table_not_a_traceback(tmp_path):
    """A stamp with an impossible time and random bytes are skipped, not a crash."""
    from tersetalk.pipeline.overhead import parse_log

    text = (
        "\ufffd\x00garbage\n[Fri Nov 27 10:00:00 2026]\nrule a:\n    jobid: 1\n"
        "[Fri Nov 27 99:99:99 2026]\nFinished jobid: 1 (Rule: a)\n"
    )
    log = parse_log(text)
    (job,) = log.jobs
    assert job.rule == "a" and job.status == "finished"
    assert job.seconds == 0  # the impossible stamp left the last real time in force


def test_idle_core_seconds_count_the_cores_no_job_held(workdir):
    """basic_log on 2 cores, from the first job (2 s) to the report (80 s): one core idle
    2-6 s (the sample, then the run alone: 4), 46-73 s (the run, then the score: 27), both
    73-74 s (2), one while the report runs 74-80 s (6); 39 with the 117 core-seconds the
    jobs held, 2 x 78."""
    log = overhead.parse_log(basic_log(), LOG_NAME)
    df = table(overhead.overhead_rows(log, cache_dir="results/cache/calls", now=at(80),
                                      running=True))  # fmt: skip
    # (the stamps drop T0's 0.798491 s, the report's end keeps it: one core idle for it)
    assert total(df, "idle_core_s") == pytest.approx(39 + 0.798491)
    assert "2 cores" in df.loc[df.metric == "idle_core_s", "source"].iloc[0]
    # a job of more threads than cores holds them all; one still running holds them to
    # the end; a job that starts after the end is not counted
    jobs = [overhead.Job("a", at(0), threads=4, end=at(10)),
            overhead.Job("b", at(10), threads=1),
            overhead.Job("c", at(30), threads=1, end=at(31))]  # fmt: skip
    assert overhead.idle_core_seconds(jobs, 2, at(20)) == 10  # b alone 10-20 s
    assert overhead.idle_core_seconds([], 2, at(20)) == 0


def test_a_cluster_run_has_no_idle_cores_to_count(workdir):
    log = overhead.parse_log(basic_log().replace("Provided cores: 2", "Provided remote nodes: 4"),
                             LOG_NAME)  # fmt: skip
    df = table(overhead.overhead_rows(log, cache_dir="results/cache/calls", now=at(80),
                                      running=True))  # fmt: skip
    row = df[df.metric == "idle_core_s"].iloc[0]
    assert pd.isna(row["value"]) and "no 'Provided cores'" in row["source"]
