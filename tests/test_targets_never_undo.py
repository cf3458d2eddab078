"""Targets never undo each other: after another target, the default target finds nothing
to do, and the overhead table of the invocation that built the default target stays.

The default DAG is made up to date without running it (its outputs created empty, then
``snakemake --touch``, which records them as built in job order), so the test costs a
few Snakemake start-ups and the cheapest microbenchmark, not the 40-minute run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_support import copy_workflow

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--cores", "1"]
KEY = "smollm2-135m-instruct"
NOTHING = "Nothing to be done"


def _sm(work: Path, *args: str) -> str:
    res = subprocess.run([*SNAKEMAKE, *args], cwd=work, capture_output=True, text=True)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    return out


def _jobs(out: str) -> set[str]:
    """The rules of a dry run's job stats."""
    table = out.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+\s*$", table, re.MULTILINE)}


@pytest.fixture
def built(repo, tmp_path):
    """A copy of the workflow (one example per task) whose default target is up to date."""
    work = copy_workflow(repo, tmp_path / "w")
    path = work / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg.update(n_eval=1, calibration_n=1)
    path.write_text(yaml.safe_dump(cfg))
    summary = _sm(work, "-n", "--summary")
    for line in summary.splitlines()[1:]:
        name = line.split("\t")[0]
        if "\t" in line and not name.endswith("/"):
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).touch()
    _sm(work, "--touch")
    return work


@pytest.mark.integration
def test_the_default_target_has_nothing_to_do_after_bench_and_keeps_its_overhead(built):
    overhead = built / f"results/{KEY}/tables/overhead.csv"
    overhead.write_text("metric,rule,value,unit,source\nwall_s,,2640.0,s,the default run\n")
    kept = overhead.read_text()

    # bench's cheapest part: its results are what the targets table reads when present
    _sm(built, "results/bench/mb4.csv")
    out = _sm(built, "-n")
    assert NOTHING in out, _jobs(out)

    # another target rewrote a file the overhead report reads (here: RESULTS.md): the
    # report of the invocation that built the default target stays
    doc = built / f"results/{KEY}/RESULTS.md"
    later = overhead.stat().st_mtime + 60
    os.utime(doc, (later, later))
    out = _sm(built, "-n")
    assert NOTHING in out, _jobs(out)
    assert overhead.read_text() == kept

    # a missing report is written again, alone (nothing else is made to run)
    overhead.unlink()
    assert _jobs(_sm(built, "-n")) == {"overhead", "all"}
