"""Sharded runs (run.shard_size): shard files, the merge's checks, and real Snakemake runs.

The integration test runs the same tiny config twice in separate working directories
(each with its own empty call cache, so both make real calls to the embedded model):
once unsharded and once in shards of 1, whose job is killed once a shard is finished.
A dry run then plans only the unfinished shard, and the merged run equals the
unsharded one in every deterministic column.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_support import MODEL_THREADS, copy_workflow

from tersetalk.core.io import read_metadata, write_parquet_atomic
from tersetalk.core.records import deterministic_columns
from tersetalk.pipeline.shards import (
    ShardError,
    merge_runs,
    parse_shard_name,
    shard_count,
    shard_names,
    split_sample,
)

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


# --- shard names and counts ---------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "size", "count"), [(3, None, 1), (3, 0, 1), (3, 1, 3), (3, 2, 2), (4, 2, 2), (3, 5, 1)]
)
def test_shard_count_covers_the_sample(n, size, count):
    assert shard_count(n, size) == count
    assert shard_names(n, size) == [f"{i}-of-{count}" for i in range(count)]


@pytest.mark.parametrize("bad", ["3-of-3", "a-of-2", "1of2", "-1-of-2", ""])
def test_a_malformed_shard_name_is_refused(bad):
    with pytest.raises(ShardError, match="<index>-of-<count>"):
        parse_shard_name(bad)


# --- splitting a real sample --------------------------------------------------------


@pytest.fixture
def gsm8k_sample(repo, tmp_path) -> Path:
    from tersetalk.tasks.loading import load_records, sample

    records = load_records("gsm8k", source="local", data_dir=str(repo / "data"), options={})
    ev, _ = sample("gsm8k", records, n=5, calibration_n=0, seed=7)
    path = tmp_path / "sample.parquet"
    write_parquet_atomic(ev, path, {"task": "gsm8k", "n": 5})
    return path


def test_shards_partition_the_sample_in_order(gsm8k_sample, tmp_path):
    full = pd.read_parquet(gsm8k_sample)
    parts = []
    for name in shard_names(len(full), 2):
        out = tmp_path / f"{name}.parquet"
        split_sample(gsm8k_sample, name, 2, out)
        parts.append(pd.read_parquet(out))
        assert read_metadata(out)["shard"]["name"] == name
    assert [len(p) for p in parts] == [2, 2, 1]
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), full)


def test_a_shard_count_the_sample_does_not_give_is_refused(gsm8k_sample, tmp_path):
    with pytest.raises(ShardError, match="cuts into 3 shards, not 2"):
        split_sample(gsm8k_sample, "0-of-2", 2, tmp_path / "x.parquet")


# --- merging: what it refuses (run-shaped frames; control flow only) ----------------


def _shard_run(path: Path, ids: list[str], spec_hash: str = "abc") -> Path:
    df = pd.DataFrame({"example_id": ids, "prediction": [f"p{i}" for i in ids]})
    meta = {"spec": {"task": "gsm8k"}, "spec_hash": spec_hash,
            "model": {"cache_hits": len(ids), "cache_misses": 1}}  # fmt: skip
    write_parquet_atomic(df, path, meta)
    return path


def test_merge_concatenates_in_order_and_sums_cache_counters(gsm8k_sample, tmp_path):
    ids = pd.read_parquet(gsm8k_sample)["example_id"].tolist()
    a = _shard_run(tmp_path / "a.parquet", ids[:2])
    b = _shard_run(tmp_path / "b.parquet", ids[2:])
    out = tmp_path / "run.parquet"
    assert merge_runs([a, b], gsm8k_sample, out) == 5
    assert pd.read_parquet(out)["example_id"].tolist() == ids
    meta = read_metadata(out)
    assert meta["spec_hash"] == "abc"
    assert meta["model"] == {"cache_hits": 5, "cache_misses": 2}
    assert [s["n"] for s in meta["shards"]] == [2, 3]


def test_merge_concatenates_the_shards_traces_in_shard_order(gsm8k_sample, tmp_path):
    ids = pd.read_parquet(gsm8k_sample)["example_id"].tolist()
    a = _shard_run(tmp_path / "a.parquet", ids[:2])
    b = _shard_run(tmp_path / "b.parquet", ids[2:])
    (tmp_path / "a.trace.jsonl").write_text('{"e": 1}\n{"e": 2}')  # no final newline
    (tmp_path / "b.trace.jsonl").write_text('{"e": 3}\n')
    merge_runs([a, b], gsm8k_sample, tmp_path / "run.parquet")
    assert (tmp_path / "run.trace.jsonl").read_text() == '{"e": 1}\n{"e": 2}\n{"e": 3}\n'
    # no shard trace: no merged trace
    c = _shard_run(tmp_path / "c" / "a.parquet", ids[:2])
    d = _shard_run(tmp_path / "c" / "b.parquet", ids[2:])
    merge_runs([c, d], gsm8k_sample, tmp_path / "c" / "run.parquet")
    assert not (tmp_path / "c" / "run.trace.jsonl").exists()


def test_merge_refuses_shards_in_the_wrong_order(gsm8k_sample, tmp_path):
    ids = pd.read_parquet(gsm8k_sample)["example_id"].tolist()
    a = _shard_run(tmp_path / "a.parquet", ids[:2])
    b = _shard_run(tmp_path / "b.parquet", ids[2:])
    with pytest.raises(ShardError, match="not in the sample's order"):
        merge_runs([b, a], gsm8k_sample, tmp_path / "run.parquet")


def test_merge_refuses_a_missing_shard(gsm8k_sample, tmp_path):
    ids = pd.read_parquet(gsm8k_sample)["example_id"].tolist()
    a = _shard_run(tmp_path / "a.parquet", ids[:2])
    with pytest.raises(ShardError, match=r"missing \["):
        merge_runs([a], gsm8k_sample, tmp_path / "run.parquet")
    assert not (tmp_path / "run.parquet").exists()


def test_merge_refuses_shards_of_different_specs(gsm8k_sample, tmp_path):
    ids = pd.read_parquet(gsm8k_sample)["example_id"].tolist()
    a = _shard_run(tmp_path / "a.parquet", ids[:2], spec_hash="abc")
    b = _shard_run(tmp_path / "b.parquet", ids[2:], spec_hash="def")
    with pytest.raises(ShardError, match="different run specs"):
        merge_runs([a, b], gsm8k_sample, tmp_path / "run.parquet")


# --- real Snakemake, real embedded model --------------------------------------------


def _workdir(repo: Path, dest: Path, shard_size: int | None) -> Path:
    """A copy of the workflow with a tiny config: gsm8k, free-form only, n_eval 2, short
    replies (the test is about which examples run where, not about the answers)."""
    copy_workflow(repo, dest)
    path = dest / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg.update(n_eval=2, calibration_n=0, tasks=["gsm8k"], calibration={}, ablations={})
    cfg["generation"].update(max_tokens=32, critic_max_tokens=16)
    cfg["systems"] = {"freeform": {"variants": {"default": {}}}}
    cfg["evaluation"]["comparisons"] = []
    cfg["run"] = {"shard_size": shard_size}
    cfg["models"]["threads"] = MODEL_THREADS
    path.write_text(yaml.safe_dump(cfg))
    return dest


RUN = "results/smollm2-135m-instruct/runs/gsm8k/freeform/default.parquet"
SHARDS = "results/smollm2-135m-instruct/runs/shards/gsm8k/freeform/default"


def _sm(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    res = subprocess.run(SNAKEMAKE + args, cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def _planned(dry_run_output: str) -> list[tuple[str, str]]:
    """(rule, output) of every job a dry run plans."""
    jobs, rule = [], None
    for line in dry_run_output.splitlines():
        s = line.strip()
        if s.startswith(("rule ", "localrule ")) and s.endswith(":"):
            rule = s.split()[1].rstrip(":")
        elif s.startswith("output:") and rule:
            jobs.append((rule, s.removeprefix("output:").strip()))
            rule = None
    return jobs


@pytest.mark.integration
def test_sharded_run_equals_unsharded_and_a_killed_shard_alone_is_redone(repo, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    whole = _workdir(repo, tmp_path / "whole", None)
    sharded = _workdir(repo, tmp_path / "sharded", 1)

    _sm(["--cores", "1", RUN], whole)
    unsharded = pd.read_parquet(whole / RUN)

    # the sharded DAG, killed (the whole process group) while the second shard runs
    log = tmp_path / "killed_run.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            SNAKEMAKE + ["--cores", "1", RUN], cwd=sharded, env=env, start_new_session=True,
            stdout=fh, stderr=subprocess.STDOUT,
        )  # fmt: skip
    shard_files = [sharded / SHARDS / f"{s}.parquet" for s in ("0-of-2", "1-of-2")]

    def started(run: Path) -> bool:  # the runner's checkpoint (or events) file exists
        stem = run.name.removesuffix(".parquet")
        return any(run.with_name(stem + s).exists() for s in (".checkpoint.jsonl", ".events.jsonl"))

    def one_done_other_running() -> bool:
        # one job at a time (--cores 1): the second shard's job starts only after Snakemake
        # has recorded the first as finished, so killing now kills the second mid-run
        a, b = shard_files
        return (a.exists() and started(b) and not b.exists()) or (
            b.exists() and started(a) and not a.exists()
        )

    try:
        while proc.poll() is None and not one_done_other_running():
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = [p for p in shard_files if p.exists()]
    assert len(done) == 1, f"expected one finished shard, got {done}: {log.read_text()[-3000:]}"
    todo = next(p for p in shard_files if not p.exists())

    _sm(["--unlock"], sharded)
    res = _sm(["-n", "--cores", "1", "--rerun-incomplete", RUN], sharded)
    planned = _planned(res.stdout + res.stderr)
    assert sorted(planned) == sorted(
        [("run_system", str(todo.relative_to(sharded))), ("merge_run", RUN)]
    ), planned

    _sm(["--cores", "1", "--rerun-incomplete", RUN], sharded)
    merged = pd.read_parquet(sharded / RUN)

    # both made real calls (separate, empty caches); the finished shard was not redone
    assert unsharded["cache_hits"].sum() == 0
    kept = merged["example_id"].isin(pd.read_parquet(done[0])["example_id"])
    assert merged.loc[kept, "cache_hits"].sum() == 0  # real calls, made once
    assert (unsharded["n_model_calls"] >= 2).all()
    cols = deterministic_columns(unsharded)
    assert cols == deterministic_columns(merged)
    pd.testing.assert_frame_equal(unsharded[cols], merged[cols])
    assert read_metadata(sharded / RUN)["spec_hash"] == read_metadata(whole / RUN)["spec_hash"]
    assert [s["n"] for s in read_metadata(sharded / RUN)["shards"]] == [1, 1]
