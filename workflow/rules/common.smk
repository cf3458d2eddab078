# Config validation, target functions and wildcard constraints.

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from tersetalk.systems import workflow_inputs
from tersetalk.tasks.loading import DATASETS
from tersetalk.tasks.schedule import (
    calibration_systems,
    calibration_tasks,
    planned_runs,
    runs_on,
    system_tasks,
    variant_runs_on,
)
from tersetalk.config import (
    ConfigError,
    ablation_values,
    calibration_file,
    calibration_points,
    calibration_reference_runs,
    calibration_spec,
    enabled_systems,
    results_prefix,
    run_spec,
    sensitivity_models,
    topology_config,
    validate_config,
)
from tersetalk.shards import shard_names

try:
    validate_config(config)
    # sensitivity.models: name -> model settings; each runs every system (models.smk)
    SENSITIVITY = sensitivity_models(config)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

# Rules call the `tersetalk` command. If it is not on PATH (Snakemake started as
# .venv/bin/snakemake without activating the venv), use the one beside this Python.
if shutil.which("tersetalk") is None:
    shell.prefix(f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH; ")

ENV = "../../envs/tersetalk.yaml"
TASKS = config["tasks"]
SYSTEMS = enabled_systems(config)
# run.shard_size: examples per run job (0: one job per run; see tersetalk.shards)
SHARD_SIZE = config["run"]["shard_size"] or 0
SHARDS = shard_names(config["n_eval"], SHARD_SIZE)


wildcard_constraints:
    task="|".join(TASKS),
    system="|".join(SYSTEMS),
    variant="[A-Za-z0-9_-]+",
    ablation="[A-Za-z0-9_-]+",
    point="[A-Za-z0-9_-]+",
    shard="[0-9]+-of-[0-9]+",
    model="[A-Za-z0-9][A-Za-z0-9._-]*",


def _model(wildcards):
    """The sensitivity model a job belongs to (its {model} wildcard), None for the default."""
    return wildcards.get("model")


def _results(wildcards):
    """results/ for the default model, results/models/<name>/ for a sensitivity model."""
    return results_prefix(_model(wildcards))


def run_targets(prefix="results/runs", ext="parquet", study=None):
    """One file per (task, enabled system that runs on it, variant that runs on it):
    systems.<name>.tasks, narrowed by systems.<name>.variants.<variant>.tasks. ``study``:
    another study's config (the topology study's), else the main one."""
    study = study or config
    return [
        f"{prefix}/{task}/{system}/{variant}.{ext}"
        for task in study["tasks"]
        for system in enabled_systems(study)
        if runs_on(study, system, task)
        for variant in study["systems"][system]["variants"]
        if variant_runs_on(study, system, variant, task)
    ]


def score_targets():
    return run_targets(prefix="results/scores")


def metric_targets():
    return run_targets(prefix="results/metrics")


def bench_corpus_inputs():
    """Run files for the microbenchmark corpus: those that exist (bench never forces runs)."""
    return [p for p in run_targets() if os.path.exists(p)]


def reference_run(wildcards):
    """The free-form run of the same task (and model) that every run is paired with."""
    return f"{_results(wildcards)}runs/{wildcards.task}/{config['evaluation']['reference']}.parquet"


def run_shards(wildcards):
    """The shard run files a run is merged from, in shard order (run.shard_size)."""
    base = (
        f"{_results(wildcards)}runs/shards/{wildcards.task}/{wildcards.system}/{wildcards.variant}"
    )
    return [f"{base}/{shard}.parquet" for shard in SHARDS]


def run_output():
    """What one run_system job writes: a shard's run file when runs are sharded."""
    if SHARD_SIZE:
        return "results/runs/shards/{task}/{system}/{variant}/{shard}.parquet"
    return "results/runs/{task}/{system}/{variant}.parquet"


def run_log():
    if SHARD_SIZE:
        return "results/logs/run/{task}/{system}/{variant}/{shard}.log"
    return "results/logs/run/{task}/{system}/{variant}.log"


MAIN_FIGURES = ["quality_vs_tokens", "token_breakdown", "accuracy_by_length"]


def all_outputs():
    """What `snakemake` with no target builds: every figure, table, statistic, calibration,
    and the format study."""
    return [
        "results/summary.parquet",
        *stats_targets(),
        *table_targets(),
        *figure_targets(),
        *calibration_targets(),
        *formats_targets(),  # formats.smk: the format study over data/toolresponses
        *sensitivity_targets(),  # models.smk: only when sensitivity.models lists models
    ]


def sensitivity_targets():
    """The model comparison (figure and table) when sensitivity.models lists models."""
    if not SENSITIVITY:
        return []
    figs = [f"figures/model_sensitivity.{ext}" for ext in ("png", "pdf")]
    return figs + ["results/tables/models.csv"]


def model_path(path):
    """A default-model results path (results/...) as the {model} level's (results/models/...)."""
    rest = path.removeprefix("results/")
    return f"results/models/{{model}}/{rest}"


def model_score_targets(wildcards):
    """One model's score files: the default run targets under results/models/<name>/."""
    return run_targets(prefix=f"results/models/{wildcards.model}/scores")


def model_summaries():
    return {name: f"results/models/{name}/summary.parquet" for name in SENSITIVITY}


FORMATS_FIGURES = ["formats_savings", "formats_knapsack", "formats_comprehension"]
FORMATS_TABLES = ["savings_by_shape", "knapsack_summary", "dedup_summary", "comprehension_summary"]


def formats_targets():
    """The format study's figures (PNG and PDF) and CSV tables (formats.smk)."""
    figs = [f"figures/{f}.{ext}" for f in FORMATS_FIGURES for ext in ("png", "pdf")]
    return figs + [f"results/formats/{t}.csv" for t in FORMATS_TABLES]


def formats_comprehension_options():
    """The comprehension experiment's options; n_payloads null means n_eval."""
    opts = dict(config["formats"]["comprehension"])
    if opts.get("n_payloads") is None:
        opts["n_payloads"] = config["n_eval"]
    return opts


def ablation_target(name):
    """The figure (PNG and PDF) of one ablation; nothing when the config does not define it
    or its system runs on none of the tasks."""
    if name not in config["ablations"]:
        return []
    if not system_tasks(config, config["ablations"][name]["system"]):
        return []
    return [f"figures/ablation_{name}.{ext}" for ext in ("png", "pdf")]


def ablation_targets():
    return [path for name in config["ablations"] for path in ablation_target(name)]


def figure_targets():
    """Every figure of the paper: the main ones and one per configured ablation."""
    main = [f"figures/{fig}.{ext}" for fig in MAIN_FIGURES for ext in ("png", "pdf")]
    return main + ablation_targets()


def stats_targets():
    return [f"results/stats/noninferiority.{ext}" for ext in ("parquet", "csv", "tex")]


def table_targets():
    """The paper's tables (CSV and LaTeX) and the summary as CSV."""
    return [
        "results/tables/main.csv",
        "results/tables/main.tex",
        "results/stats/noninferiority.csv",
        "results/stats/noninferiority.tex",
        "results/tables/targets.csv",
        "results/tables/targets.tex",
        "results/summary.csv",
    ]


def ablation_scores(wildcards):
    spec = config["ablations"][wildcards.ablation]
    return [
        f"results/scores/{task}/{spec['system']}/{variant}.parquet"
        for task in system_tasks(config, spec["system"])
        for variant in spec["variants"]
    ]


def spec_json(wildcards):
    """The run spec as JSON: a param, so a run reruns exactly when its inputs change."""
    spec = run_spec(config, wildcards.task, wildcards.system, wildcards.variant, _model(wildcards))
    return json.dumps(spec, sort_keys=True)


def sample_input(wildcards):
    spec = DATASETS[wildcards.task]
    if config["data"]["source"] != "local" and spec.hub_path is not None:
        return []
    return [str(Path(config["data"]["dir"]) / spec.relpath)]


def sample_calibration_n(wildcards):
    """calibration_n, or 0 for a task no calibrated system runs on (nothing to calibrate)."""
    return config["calibration_n"] if wildcards.task in calibration_tasks(config) else 0


def sample_task_options(wildcards):
    """The task's config keys that decide which examples exist (DatasetFile.options), as JSON."""
    section = config.get(wildcards.task, {})
    return json.dumps({k: section[k] for k in DATASETS[wildcards.task].options if k in section})


def run_input(wildcards):
    """The sample (a shard's, when sharded), and the calibration file when the variant takes
    calibrated settings (the model's own, for a sensitivity model)."""
    if wildcards.get("shard"):
        inputs = {"sample": f"results/samples/shards/{wildcards.task}/{wildcards.shard}.parquet"}
    else:
        inputs = {"sample": f"results/samples/{wildcards.task}.parquet"}
    settings = config["systems"][wildcards.system]["variants"][wildcards.variant]
    if settings.get("calibrated"):
        inputs["calibration"] = calibration_file(wildcards.task, _model(wildcards))
        grid = calibration_points(config, wildcards.system).values()
        inputs.update(workflow_inputs(wildcards.system, *grid))
    else:
        inputs.update(workflow_inputs(wildcards.system, settings))
    return inputs


def calibration_run_input(wildcards):
    inputs = {"sample": f"results/samples/{wildcards.task}.calibration.parquet"}
    spec = json.loads(calibration_spec_json(wildcards))
    inputs.update(workflow_inputs(wildcards.system, spec["variant_settings"]))
    return inputs


def calibration_spec_json(wildcards):
    if wildcards.system in config["calibration"] and wildcards.point in calibration_points(
        config, wildcards.system
    ):
        spec = calibration_spec(
            config, wildcards.task, wildcards.system, wildcards.point, _model(wildcards)
        )
    else:  # the reference run on the calibration shard
        spec = run_spec(
            config, wildcards.task, wildcards.system, wildcards.point, _model(wildcards)
        )
    return json.dumps(spec, sort_keys=True)


def calibration_run_targets(wildcards):
    return [
        f"{_results(wildcards)}calibration/runs/{wildcards.task}/{system}/{point}.parquet"
        for system in calibration_systems(config, wildcards.task)
        for point in calibration_points(config, system)
    ]


def calibration_reference_run(task, label, model=None):
    """A reference `system/variant` run on the calibration shard (see calibration_spec_json)."""
    return f"{results_prefix(model)}calibration/runs/{task}/{label}.parquet"


def calibration_main_reference(wildcards):
    """evaluation.reference's run on the calibration shard (the model's own)."""
    return calibration_reference_run(
        wildcards.task, config["evaluation"]["reference"], _model(wildcards)
    )


def task_calibration_references(task):
    """system -> its own reference label, for the calibrated systems that run on ``task``."""
    return {
        system: label
        for system, label in calibration_reference_runs(config).items()
        if runs_on(config, system, task)
    }


def calibration_reference_inputs(wildcards):
    """The runs of the systems' own references (calibration.<system>.reference), once each."""
    labels = sorted(set(task_calibration_references(wildcards.task).values()))
    return [calibration_reference_run(wildcards.task, label, _model(wildcards)) for label in labels]


def calibration_reference_args(wildcards):
    """`--system-reference SYSTEM=RUN` for each system that names its own reference."""
    return " ".join(
        "--system-reference "
        + shlex.quote(
            f"{system}={calibration_reference_run(wildcards.task, label, _model(wildcards))}"
        )
        for system, label in task_calibration_references(wildcards.task).items()
    )


def calibration_targets():
    """One calibration file per task that a calibrated system runs on."""
    return [calibration_file(task) for task in calibration_tasks(config)]


def planned_runs_json():
    """task -> the runs scheduled on it: the statistics compare only what was planned."""
    return json.dumps(planned_runs(config), sort_keys=True)


def calibration_objective_args(wildcards):
    """`--objective SYSTEM=NAME` for each calibrated system of the task (schema default)."""
    pairs = [
        f"{system}={config['calibration'][system]['objective']}"
        for system in calibration_systems(config, wildcards.task)
    ]
    return " ".join(f"--objective {shlex.quote(pair)}" for pair in sorted(pairs))


def calibration_preservation_margin_args(wildcards):
    """`--preservation-margin SYSTEM=RATE` for each calibrated system of the task (default 0.05)."""
    pairs = [
        f"{system}={config['calibration'][system]['preservation_margin']}"
        for system in calibration_systems(config, wildcards.task)
    ]
    return " ".join(f"--preservation-margin {shlex.quote(pair)}" for pair in sorted(pairs))


def run_runtime_min(wildcards):
    """A generous wall-clock budget for cluster schedulers (a shard's job: its examples)."""
    n = min(SHARD_SIZE, config["n_eval"]) if wildcards.get("shard") else config["n_eval"]
    return 10 + 2 * n


# The topology study (topology.smk): its own samples and runs under results/topology/.
TOPOLOGY = config["topology"]
TOPOLOGY_SYSTEMS = [
    name for name, spec in (TOPOLOGY.get("systems") or {}).items() if spec.get("enabled", True)
]


def topology_study():
    """The config the study's jobs see (tersetalk.config.topology_config); a clear error
    when the config has no topology systems."""
    try:
        return topology_config(config)
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None


def topology_runs(wildcards=None):
    """One run file per (study task, routed system that runs on it, variant that runs on it)."""
    return run_targets("results/topology/runs", study=topology_study())


def topology_run_input(wildcards):
    settings = TOPOLOGY["systems"][wildcards.system]["variants"][wildcards.variant]
    return {
        "sample": f"results/topology/samples/{wildcards.task}.parquet",
        **workflow_inputs(wildcards.system, settings),
    }


def topology_spec_json(wildcards):
    spec = run_spec(topology_study(), wildcards.task, wildcards.system, wildcards.variant)
    return json.dumps(spec, sort_keys=True)
