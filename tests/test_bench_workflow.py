"""The `bench` target of the real Snakefile, under real Snakemake on a copy of the workflow.

The copy is taken as is (nothing patched in), so losing the Snakefile's
``include: "workflow/rules/bench.smk"`` or its helpers' ``bench_corpus_runs`` fails
here, and the fast check below fails even where the integration tests are skipped.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pandas as pd
import pytest
from workflow_support import copy_workflow

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
BENCH_INCLUDE = re.compile(r"""^include:\s*["']workflow/rules/bench\.smk["']\s*$""", re.MULTILINE)


def test_the_real_snakefile_includes_the_bench_rules(repo):
    assert BENCH_INCLUDE.search((repo / "Snakefile").read_text()), (
        'Snakefile lost `include: "workflow/rules/bench.smk"`: the bench target is gone'
    )
    rules = (repo / "workflow" / "rules" / "bench.smk").read_text()
    assert re.search(r"^rule bench:", rules, re.MULTILINE)
    assert 'include: "helpers/bench.smk"' in rules
    helpers = (repo / "workflow" / "rules" / "helpers" / "bench.smk").read_text()
    assert "def bench_corpus_runs" in helpers


def test_bench_include_pattern_is_not_fooled_by_a_comment():
    assert BENCH_INCLUDE.search('include: "workflow/rules/bench.smk"\n')
    assert not BENCH_INCLUDE.search('# include: "workflow/rules/bench.smk"\n')


@pytest.mark.integration
def test_snakemake_lists_bench_as_a_target_of_the_repository(repo):
    res = _sm(["--list-target-rules"], repo)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "bench" in res.stdout.split(), res.stdout


def _sm(args, cwd):
    return subprocess.run(SNAKEMAKE + args, cwd=cwd, capture_output=True, text=True)


@pytest.mark.integration
def test_bench_target_runs_and_is_then_up_to_date(repo, tmp_path):
    work = copy_workflow(repo, tmp_path)
    # three timed repeats, not the config's 21: what is tested is the target, not the
    # timings (the lint of the whole workflow is test_workflow.py's)
    (work / "few_repeats.yaml").write_text("bench:\n  repeats: 3\n")
    few = ["--configfile", "few_repeats.yaml"]
    res = _sm(["--cores", "2", "bench", *few], work)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for name in ("mb1", "mb2", "mb3"):
        df = pd.read_parquet(work / f"results/bench/{name}.parquet")
        assert len(df) and "speedup_vs_baseline" in df and "env_cpu" in df
        assert (work / f"results/logs/bench/{name}.log").read_text().count("MB-")
    assert "design's 10x" in (work / "results/logs/bench/mb1.log").read_text()
    assert (work / "figures/bench.png").stat().st_size > 10_000
    assert not (
        work / "results/smollm2-135m-instruct/runs"
    ).exists()  # the bench never forces the model runs
    res = _sm(["--cores", "2", "bench", *few], work)
    assert "Nothing to be done" in res.stdout + res.stderr
