"""The `bench` target under real Snakemake, on a copy of the workflow (no runs present)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _copy_with_bench(repo: Path, dest: Path) -> Path:
    for name in ("Snakefile", "workflow", "config", "data", "envs"):
        src = repo / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    snakefile = dest / "Snakefile"
    if "rules/bench.smk" not in snakefile.read_text():
        with open(snakefile, "a") as fh:
            fh.write('\n\ninclude: "workflow/rules/bench.smk"\n')
    common = dest / "workflow" / "rules" / "common.smk"
    if "def bench_corpus_inputs" not in common.read_text():
        with open(common, "a") as fh:
            fh.write(
                "\n\ndef bench_corpus_inputs():\n"
                "    return [p for p in run_targets() if os.path.exists(p)]\n"
            )
    return dest


def _sm(args, cwd):
    return subprocess.run(SNAKEMAKE + args, cwd=cwd, capture_output=True, text=True)


@pytest.mark.integration
def test_bench_target_runs_and_is_then_up_to_date(repo, tmp_path):
    work = _copy_with_bench(repo, tmp_path)
    res = _sm(["--lint"], work)
    assert res.returncode == 0 and "Lints for" not in res.stdout + res.stderr, res.stdout
    res = _sm(["--cores", "2", "bench"], work)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for name in ("mb1", "mb2", "mb3"):
        df = pd.read_parquet(work / f"results/bench/{name}.parquet")
        assert len(df) and "speedup_vs_baseline" in df and "env_cpu" in df
        assert (work / f"results/logs/bench/{name}.log").read_text().count("MB-")
    assert "seed's 10x" in (work / "results/logs/bench/mb1.log").read_text()
    assert (work / "figures/bench.png").stat().st_size > 10_000
    assert not (work / "results/runs").exists()  # the bench never forces the model runs
    res = _sm(["--cores", "2", "bench"], work)
    assert "Nothing to be done" in res.stdout + res.stderr
