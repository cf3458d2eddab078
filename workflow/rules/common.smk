# Config validation, target functions and wildcard constraints.

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from tersetalk.config import ConfigError, enabled_systems, run_spec, validate_config

try:
    validate_config(config)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

# Rules call the `tersetalk` command. If it is not on PATH (Snakemake started as
# .venv/bin/snakemake without activating the venv), use the one beside this Python.
if shutil.which("tersetalk") is None:
    shell.prefix(f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH; ")

ENV = "../../envs/tersetalk.yaml"
TASKS = config["tasks"]
SYSTEMS = enabled_systems(config)


wildcard_constraints:
    task="|".join(TASKS),
    system="|".join(SYSTEMS),
    variant="[A-Za-z0-9_-]+",


def run_targets(prefix="results/runs", ext="parquet"):
    """One file per (task, enabled system, variant)."""
    return [
        f"{prefix}/{task}/{system}/{variant}.{ext}"
        for task in TASKS
        for system in SYSTEMS
        for variant in config["systems"][system]["variants"]
    ]


def score_targets():
    return run_targets(prefix="results/scores")


def all_outputs():
    return [
        "results/summary.parquet",
        "figures/accuracy_vs_tokens.pdf",
        "figures/accuracy_vs_tokens.png",
    ]


def spec_json(wildcards):
    """The run spec as JSON: a param, so a run reruns exactly when its inputs change."""
    spec = run_spec(config, wildcards.task, wildcards.system, wildcards.variant)
    return json.dumps(spec, sort_keys=True)


def sample_input(wildcards):
    if config["data"]["source"] != "local":
        return []
    from tersetalk.tasks.loading import DATASETS

    return [str(Path(config["data"]["dir"]) / DATASETS[wildcards.task].relpath)]


def run_runtime_min(wildcards):
    """A generous wall-clock budget for cluster schedulers."""
    return 10 + 2 * config["n_eval"]
