"""One reader of Snakemake's log for the dashboard and the overhead table
(:mod:`tersetalk.core.snakelog`): on the same log they see the same jobs, the same way."""

from __future__ import annotations

from tersetalk.core import snakelog
from tersetalk.dashboard import snakelog as dashboard_log
from tersetalk.pipeline import overhead

#: a console log as Snakemake 9 writes it: a stamp after a progress bar on its line, an
#: error whose jobid is on its own line and one whose jobid is inline, a retried job
LOG = """\
Provided cores: 2
Job stats:
job       count
------  -------
run           3
score         1
total         4

[Fri Nov 27 04:01:09 2026]
rule run:
    output: results/m/runs/gsm8k/freeform/default.parquet
    jobid: 3
    wildcards: task=gsm8k, system=freeform, variant=default
    threads: 2
[Fri Nov 27 04:01:10 2026]
rule run:
    output: results/m/runs/gsm8k/msp/default.parquet
    jobid: 4
    wildcards: task=gsm8k, system=msp, variant=default
1 of 4 steps (25%) done\r[Fri Nov 27 04:01:15 2026]
Finished jobid: 3 (Rule: run)
[Fri Nov 27 04:01:20 2026]
Error in rule run:
    jobid: 4
[Fri Nov 27 04:01:21 2026]
rule run:
    output: results/m/runs/gsm8k/msp/default.parquet
    jobid: 4
    wildcards: task=gsm8k, system=msp, variant=default
[Fri Nov 27 04:01:30 2026]
rule run:
    output: results/m/runs/hotpotqa/msp/default.parquet
    jobid: 5
[Fri Nov 27 04:01:40 2026]
Error in rule run, jobid: 5
[Fri Nov 27 04:01:41 2026]
Finished jobid: 4 (Rule: run)
2 of 4 steps (50%) done
Exiting because a job execution failed. Look below for error messages
"""


def test_the_dashboard_and_the_overhead_table_read_one_log_alike():
    log = snakelog.parse_log(LOG)
    assert overhead.parse_log is snakelog.parse_log  # the overhead table's reader
    # every attempt: 3 finished, 4 failed then retried and finished, 5 failed inline
    assert [(j.jobid, j.status) for j in log.jobs] == [
        (3, "finished"), (4, "failed"), (4, "finished"), (5, "failed")]  # fmt: skip
    assert log.jobs[0].threads == 2 and log.jobs[0].seconds == 6.0  # the stamp after "\r"
    assert log.planned == {"run": 3, "score": 1} and (log.steps_done, log.steps_total) == (2, 4)
    assert log.complete and log.cores == 2
    shown = dashboard_log.parse_log(LOG, now=0.0)
    # the dashboard: one row per jobid (a retry shown as its last attempt), same statuses
    assert [(j["jobid"], j["status"]) for j in shown["jobs"]] == [
        ("3", "finished"), ("4", "finished"), ("5", "failed")]  # fmt: skip
    assert shown["jobs"][0]["wildcards"] == "task=gsm8k, system=freeform, variant=default"
    assert shown["rules"]["run"] == {"planned": 3, "jobs": 3, "finished": 2, "failed": 1}
    assert shown["ended"] and (shown["done"], shown["total"]) == (2, 4)
    assert shown["elapsed_s"] == 32.0  # first stamp to last


def test_a_job_still_running_when_the_invocation_ends_is_stopped_on_the_dashboard():
    text = ("[Fri Nov 27 04:01:09 2026]\nrule run:\n    jobid: 1\n"
            "Shutting down, this might take some time.\n")  # fmt: skip
    assert snakelog.parse_log(text).jobs[0].status == "running"
    assert dashboard_log.parse_log(text)["jobs"][0]["status"] == "stopped"
