"""docs/extending.md's "Adding a task" example, run as written in a copy of the checkout
with the default config: its files from the page's code blocks, its commands as they
stand (the whole study as a dry run, and its first job, the sample, for real: the data
file must hold the default config's n_eval + calibration_n examples)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from workflow_support import copy_workflow

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _section(repo) -> str:
    text = (repo / "docs" / "extending.md").read_text()
    start = text.index("### Adding a task")
    end = text.find("\n#", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(repo) -> list[tuple[str, str]]:
    return BLOCK.findall(_section(repo))


def test_the_example_names_its_files_and_has_enough_examples_for_the_default_config(repo):
    section = _section(repo)
    kinds = [kind for kind, _ in _blocks(repo)]
    assert kinds == ["json", "python", "bash", "bash"], kinds
    assert "`mytasks/capitals.jsonl`" in section and "`mytasks/capitals_task.py`" in section
    data = _blocks(repo)[0][1].splitlines()
    cfg = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    assert len(data) >= cfg["n_eval"] + cfg["calibration_n"]


@pytest.mark.integration
def test_adding_a_task_runs_as_written(repo, tmp_path):
    work = copy_workflow(repo, tmp_path / "checkout")
    (jsonl, _), (module, _), (first, _), (study, _) = ((text, kind) for kind, text in _blocks(repo))
    (work / "mytasks").mkdir()
    (work / "mytasks" / "capitals.jsonl").write_text(jsonl)
    (work / "mytasks" / "capitals_task.py").write_text(module)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TERSETALK_TASKS")}
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env['PATH']}"

    def bash(script: str) -> str:
        res = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=work, env=env, capture_output=True, text=True,
        )  # fmt: skip
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-4000:]
        return out

    bash(first)
    run = pd.read_parquet(work / "mytasks" / "freeform.parquet")
    assert len(run) == 3 and set(run["task"]) == {"capitals"}

    # the whole study: as written but dry, and its first job for real (default sizes)
    lines = study.strip().splitlines()
    assert lines[-1] == "snakemake --cores all --configfile capitals.yaml"
    setup = 'export PYTHONPATH="$PWD/mytasks" TERSETALK_TASKS=capitals_task\n'
    out = bash(setup + "\n".join(lines[:-1]) + "\n" + lines[-1] + " -n")
    assert "run_system" in out
    bash(setup + lines[-1].replace("snakemake", "snakemake results/samples/capitals.parquet", 1))
    cfg = yaml.safe_load((work / "config" / "config.yaml").read_text())
    assert len(pd.read_parquet(work / "results/samples/capitals.parquet")) == cfg["n_eval"]
