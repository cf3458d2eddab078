# What every study shares: config validation, the run targets, wildcard constraints and
# `all`'s target list. Each study's helpers live beside its rules (data.smk, run.smk, ...);
# path templates are written once, in tersetalk.core.paths: `paths` is the configured model's
# layout (results/<key>/..., figures/<key>/...; tersetalk.core.paths.Layout).

import functools
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import tersetalk.core.paths as paths_module
from tersetalk.pipeline.config import (
    ConfigError,
    enabled_systems,
    results_key,
    run_spec,
    sensitivity_models,
    validate_config,
)
from tersetalk.pipeline.shards import shard_names
from tersetalk.tasks.registry import TaskPluginError
from tersetalk.systems import workflow_inputs
from tersetalk.pipeline.schedule import (
    ablation_only,
    ablation_batches,
    batch_cost,
    batched_variants,
    headline_batches,
    headline_variants,
    rank_priorities,
    runs_on,
    score_groups,
    variant_runs_on,
)

try:
    validate_config(config)
    # sensitivity.models: name -> model settings; each runs every system (models.smk)
    SENSITIVITY = sensitivity_models(config)
    # the folder of the configured model's results: models.key, else its name made path-safe
    MODEL_KEY = results_key(config)
except (ConfigError, TaskPluginError) as exc:  # one line naming the key or the plug-in
    raise WorkflowError(str(exc)) from None

# the configured model's paths (results/<MODEL_KEY>/..., figures/<MODEL_KEY>/...)
paths = paths_module.Layout(MODEL_KEY)
# a sensitivity model's results key (its {model} wildcard) -> its sensitivity.models name
SENSITIVITY_BY_KEY = {settings["key"]: name for name, settings in SENSITIVITY.items()}

# Rules call the `tersetalk` command. If it is not on PATH (Snakemake started as
# .venv/bin/snakemake without activating the venv), use the one beside this Python.
if shutil.which("tersetalk") is None:
    shell.prefix(f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH; ")

ENV = "../../envs/tersetalk.yaml"
TASKS = config["tasks"]
SYSTEMS = enabled_systems(config)
# run.shard_size: examples per run job (0: one job per run; see tersetalk.pipeline.shards)
SHARD_SIZE = config["run"]["shard_size"] or 0
SHARDS = shard_names(config["n_eval"], SHARD_SIZE)
# threads of a job that runs the model (run_system, the batches and sweeps, topology_batch)
MODEL_THREADS = config["models"]["threads"] or max(1, (os.cpu_count() or 2) // 2)
# Results in reading order: Snakemake starts ready jobs highest priority first, so the
# jobs the main figure needs (samples, compressor, calibration, each system's headline
# runs, their scores, rule plot) carry this priority and run before the ablation runs
# (their batches: ABLATION_PRIORITY + 1 to FILL_PRIORITY - 1, longest first) and their
# scores and figures (ABLATION_PRIORITY). The format study shares no job with them: its model job
# (comprehension) runs beside the headline ones (FILL_PRIORITY), and its model-free jobs
# (experiments and figures, under every other job, the longest first: FORMATS_FILL)
# wait for a core with nothing else to do, which the end of the run has, while the last
# batch runs and the last scores and figures follow it one after the other.
# (The numbers are the config's `schedule` section.)
HEADLINE_PRIORITY = config["schedule"]["headline_priority"]
FILL_PRIORITY = config["schedule"]["fill_priority"]
#: the format study's model-free jobs' priorities, longest first
FORMATS_FILL = config["schedule"]["formats_fill"]
ABLATION_PRIORITY = max(FORMATS_FILL.values()) + 1
if not HEADLINE_PRIORITY > FILL_PRIORITY > ABLATION_PRIORITY + 1:
    raise ValueError(
        f"config schedule: the priorities must keep the reading order, headline_priority "
        f"({HEADLINE_PRIORITY}) > fill_priority ({FILL_PRIORITY}) > the highest "
        f"formats_fill + 2 ({ABLATION_PRIORITY + 1}): the ablation batches are ranked "
        "between the last two; fix the schedule section"
    )


wildcard_constraints:
    task="|".join(TASKS),
    system="|".join(SYSTEMS),
    variant="[A-Za-z0-9_-]+",
    ablation="[A-Za-z0-9_-]+",
    point="[A-Za-z0-9_-]+",
    batch="[A-Za-z0-9_-]+",
    shard="[0-9]+-of-[0-9]+",
    # only the sensitivity models' keys: the configured model's paths are literal
    model="|".join(map(re.escape, SENSITIVITY_BY_KEY)) or "(?!)",


def _model_key(wildcards):
    """The results key of the sensitivity model a job belongs to (its {model} wildcard),
    None for the configured model."""
    return wildcards.get("model")


def _model(wildcards):
    """The sensitivity.models name of the model a job belongs to, None for the configured
    model."""
    key = _model_key(wildcards)
    return None if key is None else SENSITIVITY_BY_KEY[key]


def run_triples(study=None):
    """(task, system, variant) of each run: every enabled system that runs on a task, with
    each of its variants that runs on it (systems.<name>.tasks, narrowed by
    systems.<name>.variants.<variant>.tasks). ``study``: another study's config (the
    topology study's), else the main one."""
    study = study or config
    return [
        (task, system, variant)
        for task in study["tasks"]
        for system in enabled_systems(study)
        if runs_on(study, system, task)
        for variant in study["systems"][system]["variants"]
        if variant_runs_on(study, system, variant, task)
    ]


def run_targets(template=paths.RUN, study=None):
    """``template`` (a path of tersetalk.core.paths with {task}/{system}/{variant}) for each
    run of :func:`run_triples`."""
    return [template.format(task=t, system=s, variant=v) for t, s, v in run_triples(study)]


def run_priority(wildcards):
    """A run's priority: an ablation's own runs wait for the headline ones."""
    return 0 if ablation_only(config, wildcards.system, wildcards.variant) else HEADLINE_PRIORITY


def runtime_min(n_examples, n_runs=1):
    """A generous wall-clock budget for cluster schedulers, in minutes: ``n_runs`` runs
    of ``n_examples`` each, one after the other."""
    return max(1, n_runs) * (10 + 2 * n_examples)


def run_runtime_min(wildcards):
    """A run's budget (a shard's job: its examples)."""
    n = min(SHARD_SIZE, config["n_eval"]) if wildcards.get("shard") else config["n_eval"]
    return runtime_min(n)


def spec_json(spec):
    """A run spec as JSON: a param, so a run reruns exactly when its inputs change."""
    return json.dumps(spec, sort_keys=True)


def runs_args(specs, outs):
    """`tersetalk run`'s arguments for several runs in one job (a batch or a sweep): a
    --spec-json and its --out per run, paired in order, quoted for the shell."""
    args = []
    for spec, out in zip(specs, outs, strict=True):
        args += ["--spec-json", spec_json(spec), "--out", out]
    return " ".join(shlex.quote(a) for a in args)


def batch_workflow_inputs(settings):
    """What any run of a batch or sweep needs built first: each system's workflow_inputs
    for its variant settings (``settings``: system -> a list of them), merged key by key,
    each list sorted and without duplicates."""
    needs = {}
    for system, ones in settings.items():
        for key, files in workflow_inputs(system, *ones).items():
            needs.setdefault(key, set()).update(files)
    return {key: sorted(files) for key, files in needs.items()}


#: whether the default target holds the format study: `tasks` lists its task, toolqa
#: (`snakemake formats` builds it in any case); a study of one's own tasks leaves it out
FORMATS_STUDIED = "toolqa" in config["tasks"]


def all_outputs():
    """What `snakemake` with no target builds: every figure, table, statistic, calibration,
    and the format study when `tasks` lists toolqa (each study's target functions live
    beside its rules; `snakemake formats` builds the format study in any case)."""
    return [
        paths.SUMMARY,
        *stats_targets(),  # stats.smk
        *table_targets(),  # figures.smk
        *figure_targets(),  # figures.smk
        *calibration_targets(),  # calibrate.smk
        # formats.smk: the format study over data/toolresponses, when its task is studied
        *(formats_targets() if FORMATS_STUDIED else []),
        *sensitivity_targets(),  # models.smk: only when sensitivity.models lists models
        paths.results("RESULTS.md"),  # docs.smk: the tables above as one dated document
    ]
