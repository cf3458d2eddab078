"""A real SLURM cluster: a small DAG through snakemake-executor-plugin-slurm, compared with
the same DAG run locally.

Needs a cluster: `.ci/slurm-local start` (as root) brings up a one-node SLURM from Debian's
slurm-wlm and munge on this machine. Without sinfo/sbatch, the plugin, or a node that is
up, every test here is skipped with the reason. Run with `pytest -m slurm`.

The DAG: sample HotpotQA (1 example), run freeform/default and tersetalk/caps_baseline on
the embedded model, score both (5 jobs). Each run directory has its own empty call cache,
so both sides make real model calls.
"""

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from workflow_support import copy_workflow

from tersetalk.core.records import deterministic_columns

# one cluster on this machine: its tests run on one worker, one after another
pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm-cluster")]

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
CONFIG = ["--config", "n_eval=1", "calibration_n=1", "tasks=[hotpotqa]"]
RUNS = ["freeform/default", "tersetalk/caps_baseline"]
TARGETS = [f"results/smollm2-135m-instruct/scores/hotpotqa/{run}.parquet" for run in RUNS]
# Without accounting (.ci/slurm-local keeps none) the plugin's default status check, sacct,
# never sees a job end; squeue does. The profile leaves both to the site.
LOCAL_CLUSTER = [
    "--slurm-no-account",
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "5",
    "--slurm-keep-successful-logs",
]
# Throughput in the score and metric tables is tokens over the wall time of the calls: a
# timing column that tersetalk.core.records.deterministic_columns does not name (it keys on t_).
TIMING_DERIVED = re.compile(r"^tokens_per_s")
HANG_GUARD_S = 3600  # a stuck status check must fail the test, not hang CI


def _why_no_cluster() -> str | None:
    missing = [tool for tool in ("sinfo", "sbatch", "squeue", "srun") if not shutil.which(tool)]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} not on PATH): .ci/slurm-local start"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed: pip install -e '.[cluster]'"
    try:
        res = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 30 s: no SLURM controller is up (.ci/slurm-local start)"
    if res.returncode != 0:
        return f"no SLURM cluster is up (sinfo: {res.stderr.strip()}): .ci/slurm-local start"
    states = res.stdout.split()
    if not any(s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"no SLURM node is up (sinfo node states: {states or 'none'})"
    return None


REASON = _why_no_cluster()
if REASON:
    pytestmark = [*pytestmark, pytest.mark.skip(reason=REASON)]


def _snakemake(args: list[str], cwd: Path) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    res = subprocess.run(
        SNAKEMAKE + args + CONFIG + ["--", *TARGETS],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"snakemake {shlex.join(args)} failed:\n{out[-5000:]}"
    return out


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory):
    """(local dir, its log, SLURM dir, its log): the same DAG run both ways."""
    repo = REPO
    base = tmp_path_factory.mktemp("slurm")
    local = copy_workflow(repo, base / "local")
    cluster = copy_workflow(repo, base / "cluster")
    profile = ["--workflow-profile", "workflow/profiles/slurm", "--verbose"]
    # both at once: the cluster's run spends most of its time between status checks
    # (the plugin waits longer after each check that finds no job ended)
    with ThreadPoolExecutor(2) as pool:
        local_log = pool.submit(_snakemake, ["--cores", "2"], local)
        cluster_log = pool.submit(_snakemake, profile + LOCAL_CLUSTER, cluster)
        return local, local_log.result(), cluster, cluster_log.result()


def _sbatch_calls(log: str) -> dict[str, str]:
    """'rule_<name>_wildcards_<values>' (the job's --comment) -> its sbatch command line."""
    calls = {}
    for line in log.splitlines():
        if "sbatch call: sbatch " in line:
            comment = re.search(r"--comment (\S+)", line).group(1).strip("'\"")
            calls[comment] = line
    return calls


def _declared(log: str) -> dict[str, dict[str, int]]:
    """'rule_<name>_wildcards_<values>' -> mem_mb, runtime, threads as the local run
    scheduled the job (Snakemake prints each job's resources)."""
    jobs, job = {}, None
    for line in log.splitlines():
        head = re.match(r"^(?:local)?rule (\w+):$", line)
        if head:
            job = {"rule": head.group(1), "wildcards": [], "threads": 1}
            jobs[id(job)] = job
        elif job is not None and line.startswith("    "):
            key, _, value = line.strip().partition(": ")
            if key == "wildcards":
                job["wildcards"] = [kv.split("=", 1)[1] for kv in value.split(", ")]
            elif key == "threads":
                job["threads"] = int(value)
            elif key == "resources":
                for item in value.split(", "):
                    name, _, val = item.partition("=")
                    if name in ("mem_mb", "runtime"):
                        job[name] = int(val)
    out = {}
    for job in jobs.values():
        comment = f"rule_{job['rule']}"
        if job["wildcards"]:
            comment += "_wildcards_" + "_".join(job["wildcards"])
        out[comment] = job
    return out


def test_tiny_dag_through_slurm_matches_the_local_run(both_runs):
    local, _, cluster, _ = both_runs
    a = pd.read_parquet(local / "results/samples/hotpotqa.parquet")
    b = pd.read_parquet(cluster / "results/samples/hotpotqa.parquet")
    pd.testing.assert_frame_equal(a, b)
    for run in RUNS:
        for kind in ("runs", "scores", "metrics"):
            path = f"results/smollm2-135m-instruct/{kind}/hotpotqa/{run}.parquet"
            a, b = pd.read_parquet(local / path), pd.read_parquet(cluster / path)
            assert list(a.columns) == list(b.columns), path
            cols = [c for c in deterministic_columns(a) if not TIMING_DERIVED.match(c)]
            assert len(cols) > 10, (path, cols)
            pd.testing.assert_frame_equal(a[cols], b[cols], obj=path)
        runs = pd.read_parquet(
            cluster / f"results/smollm2-135m-instruct/runs/hotpotqa/{run}.parquet"
        )
        assert (runs["n_model_calls"] >= 2).all(), run
        assert runs["backend"].tolist() == ["llamacpp"] and runs["error"].isna().all(), run
    # real model calls on the cluster's node, from an empty call cache: the same distinct
    # requests as the local run, each computed once. Which run pays for a request several
    # runs make is not a property of either side: a task's score job takes all its ablation
    # runs (batch scoring), so the DAG holds other runs whose calls can be the same
    # requests (TerseTalk variants whose brief the caps leave unchanged, the hybrid's, which
    # sends TerseTalk messages too), and the order they run in decides who computes and who
    # reads the cache (on the cluster, caps_baseline once found all 3 of its calls cached)
    entries = {
        side: sorted(p.name for p in (root / "results/cache/calls").rglob("*.json"))
        for side, root in (("local", local), ("cluster", cluster))
    }
    assert len(entries["cluster"]) >= 2 * len(RUNS), entries
    assert entries["cluster"] == entries["local"]


def test_every_job_went_through_sbatch_asking_for_what_its_rule_declares(both_runs):
    _, local_log, cluster, cluster_log = both_runs
    declared = _declared(local_log)
    calls = _sbatch_calls(cluster_log)
    # every job of the DAG (sample, two runs, two scores), each submitted once
    assert sorted(calls) == sorted(declared), (sorted(calls), sorted(declared))
    assert len(calls) >= 5
    for comment, call in calls.items():
        want = declared[comment]
        assert f" -t {want['runtime']} " in call, (comment, want, call)
        assert f" --mem {want['mem_mb']} " in call, (comment, want, call)
        assert f" --cpus-per-task={want['threads']} " in call, (comment, want, call)
    # and each ran as a SLURM job: the plugin kept its log, named by the SLURM job id
    logs = sorted((cluster / ".snakemake/slurm_logs").rglob("*.log"))
    assert len(logs) == len(calls), logs
    assert all(re.fullmatch(r"\d+\.log", p.name) for p in logs), logs
    run_logs = [p for p in logs if "rule_run_system" in p.parts]
    assert len(run_logs) >= 2 and all("Finished job" in p.read_text() for p in run_logs)
