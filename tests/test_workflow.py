"""Real Snakemake: lint, dry runs, a wrong config, and a one-example run on the real model."""

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_support import copy_workflow

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _sm(args, cwd):
    return subprocess.run(SNAKEMAKE + args, cwd=cwd, capture_output=True, text=True)


def test_lint_is_clean(repo):
    res = _sm(["--lint"], repo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Lints for" not in res.stdout + res.stderr


def test_rules_are_snakefmt_formatted(repo):
    files = [
        "Snakefile",
        *sorted(str(p.relative_to(repo)) for p in repo.glob("workflow/rules/*.smk")),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", *files],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_rules_take_every_path_from_tersetalk_paths(repo):
    """Path templates are written once, in tersetalk.core.paths: a rule file that quotes a
    results/ or figures/ path keeps a second copy that can drift from it."""
    quoted = re.compile(r"""["'](?:results|figures)/""")
    found = [
        f"{smk.relative_to(repo)}:{n}: {line.strip()}"
        for smk in [repo / "Snakefile", *sorted(repo.glob("workflow/rules/**/*.smk"))]
        for n, line in enumerate(smk.read_text().splitlines(), 1)
        if quoted.search(line.split("#", 1)[0])
    ]
    assert not found, found


@pytest.mark.parametrize("cfg", ["config/config.yaml", "config/paper.yaml"])
def test_dry_run(repo, cfg):
    res = _sm(["-n", "--cores", "2", "--configfile", cfg], repo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "run_system" in res.stdout + res.stderr


def _rules(repo, *args):
    res = _sm(["--list", *args], repo)
    assert res.returncode == 0, res.stdout + res.stderr
    return [line for line in res.stdout.splitlines() if line and " " not in line]


def test_the_rules_are_the_same_for_every_config_and_none_is_named_after_a_task(repo, tmp_path):
    """One workflow shape: a task, batch, group or model is a wildcard's value, never a
    rule of its own, so a config (the paper's ablations, fewer tasks, sharded runs,
    sensitivity models) changes the jobs, not the rules."""
    from tersetalk.tasks.registry import names

    extra = {
        "sharded.yaml": {"run": {"shard_size": 2}},
        "sensitivity.yaml": {"sensitivity": {"models": [
            {"name": "other", "models": {"backend": "llamacpp", "model_path": "/x/o.gguf"}}
        ]}},
    }  # fmt: skip
    for name, overlay in extra.items():
        (tmp_path / name).write_text(yaml.safe_dump(overlay))
    default = _rules(repo)
    assert {"run_batch", "score", "calibration_sweep", "merge_run"} <= set(default)
    for other in (
        ["--configfile", "config/paper.yaml"],
        ["--config", "tasks=[gsm8k]"],
        *(["--configfile", "config/config.yaml", str(tmp_path / n)] for n in extra),
    ):
        assert _rules(repo, *other) == default, other
    tasks = set(names())
    assert not [r for r in default if set(r.split("_")) & tasks], default


def test_the_default_target_holds_the_format_study_only_when_tasks_lists_toolqa(repo):
    # with the default tasks (toolqa among them) the study is there: test_plan's dry runs
    res = _sm(["-n", "--forceall", "--cores", "1", "--config", "tasks=['hotpotqa']"], repo)
    mine = res.stdout + res.stderr  # a study of one's own tasks
    assert res.returncode == 0, mine
    assert "rule run_system:" in mine and "formats_" not in mine


def test_wrong_config_stops_at_startup_naming_the_key(repo):
    res = _sm(["-n", "--cores", "1", "--config", "models={'backend': 'gpt5'}"], repo)
    assert res.returncode != 0
    assert "config key 'models.backend'" in res.stdout + res.stderr


def _small_config(work: Path) -> None:
    """The default config cut to free-form and calibrated TerseTalk, to keep the test short."""
    path = work / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["systems"] = {
        "freeform": cfg["systems"]["freeform"],
        "tersetalk": {"variants": {"default": {"calibrated": True}}},
    }
    cfg["calibration"] = {"tersetalk": {"grid": {"caps": ["aggressive", "relaxed"]}}}
    cfg["ablations"] = {}
    cfg["evaluation"]["comparisons"] = [["tersetalk/default", "freeform/default"]]
    path.write_text(yaml.safe_dump(cfg))


def test_calibration_without_a_shard_is_a_config_error(repo):
    res = _sm(["-n", "--cores", "1", "--config", "calibration_n=0"], repo)
    assert res.returncode != 0
    assert "config key 'calibration_n'" in res.stdout + res.stderr


@pytest.mark.integration
@pytest.mark.whole_dag
def test_one_example_through_the_whole_dag(repo, tmp_path):
    work = copy_workflow(repo, tmp_path)
    _small_config(work)
    args = ["--cores", "2", "--config", "n_eval=1", "calibration_n=1", "tasks=[gsm8k]"]
    res = _sm(args, work)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run = pd.read_parquet(
        work / "results/smollm2-135m-instruct/runs/gsm8k/freeform/default.parquet"
    )
    assert len(run) == 1 and run["n_model_calls"].iloc[0] >= 2
    assert run["backend"].iloc[0] == "llamacpp"
    summary = pd.read_parquet(work / "results/smollm2-135m-instruct/summary.parquet")
    # freeform/default, freeform/cod (Chain-of-Draft) and tersetalk/default
    assert summary["n"].tolist() == [1, 1, 1]
    assert (work / "results/smollm2-135m-instruct/tables/targets.csv").exists()
    assert (work / "figures/smollm2-135m-instruct/quality_vs_tokens.png").stat().st_size > 10_000
    assert (work / "results/smollm2-135m-instruct/calibration/gsm8k.yaml").exists()
    assert (work / "results/smollm2-135m-instruct/stats/noninferiority.csv").exists()
    # the same run again, as its job ran it (its spec, its sample, the workflow's cache):
    # every call comes from the cache the DAG filled (a whole --forceall rerun of the DAG
    # would check the same at twice the test's cost)
    import json

    from tersetalk.core.io import read_run_spec

    done = work / "results/smollm2-135m-instruct/runs/gsm8k/freeform/default.parquet"
    res = subprocess.run(
        [sys.executable, "-m", "tersetalk", "run", "--spec-json",
         json.dumps(read_run_spec(done)), "--sample", "results/samples/gsm8k.parquet",
         "--out", str(tmp_path / "again.parquet")],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    again = pd.read_parquet(tmp_path / "again.parquet")
    assert again["cache_hits"].iloc[0] == again["n_model_calls"].iloc[0] >= 2
    assert again["prediction"].equals(run["prediction"])
