# The helpers of run.smk's rules: target lists, input and param functions.

from tersetalk.pipeline.config import calibration_points

#: phase -> (system -> its variants that run in batches, batch -> its systems): one job
#: per task and batch (rules run_<phase>_<task>_<batch>): the headline variants of the
#: systems that load a model of their own (schedule.headline_variants), and the
#: ablation-only variants (schedule.batched_variants); none with run.shard_size
PHASES = {
    "headline": (headline_variants(config), headline_batches(config)),
    "ablations": (batched_variants(config), ablation_batches(config)),
}
BATCHED, BATCHES = PHASES["ablations"]


def _any_name_but(names):
    """A wildcard's pattern: any name but one of ``names``."""
    if not names:
        return "[A-Za-z0-9_-]+"
    return "(?!(?:" + "|".join(map(re.escape, names)) + ")(?![A-Za-z0-9_-]))[A-Za-z0-9_-]+"


#: run_system's {variant}: any name but a batched one
RUN_VARIANT = _any_name_but(sorted({v for names in BATCHED.values() for v in names}))
#: run_system's {system}: any but those whose every run is in a batch
RUN_SYSTEM = _any_name_but(whole_batched(config))


def batch_variants(task, system, phase="ablations"):
    """The variants of ``system`` batched in ``phase`` that run on ``task``, in config
    order."""
    variants = PHASES[phase][0].get(system, [])
    return [v for v in variants if variant_runs_on(config, system, v, task)]


def batch_runs_of(task, batch, phase="ablations"):
    """(system, variant) of each run of ``batch`` on ``task``, system by system."""
    return [(s, v) for s in PHASES[phase][1][batch] for v in batch_variants(task, s, phase)]


#: (task, batch) -> its priority. Longest first: the batches ranked by estimated seconds
#: (tasks.schedule.batch_cost: their runs, by system and task), the costliest just below
#: FILL_PRIORITY (under every headline job, so the reading order holds), the next one
#: lower, none at or under ABLATION_PRIORITY (over the format study's model-free jobs).
#: Started first, the long batches no longer run alone at the end while the other core
#: idles; the short ones, and the scoring and figures after them, fill in beside them.
BATCH_PRIORITIES = rank_priorities(
    {
        (t, b): batch_cost(
            t,
            {s: len(batch_variants(t, s)) for s in BATCHES[b]},
            config["schedule"]["run_seconds"],
            config["schedule"]["run_seconds_other"],
        )
        for t in TASKS
        for b in BATCHES
        if batch_runs_of(t, b)
    },
    low=ABLATION_PRIORITY + 1,
    high=FILL_PRIORITY - 1,
)


def batch_priority(task, batch, phase):
    """A headline batch runs with the headline jobs; an ablation batch by its rank."""
    return HEADLINE_PRIORITY if phase == "headline" else BATCH_PRIORITIES[(task, batch)]


def batch_outputs(task, batch, phase, model=None):
    template = paths.for_model(paths.RUN, model)
    return [
        template.format(task=task, system=system, variant=v, model="{model}")
        for system, v in batch_runs_of(task, batch, phase)
    ]


def batch_input(wildcards, task, batch, phase):
    """The sample, the calibration file if a batched variant takes calibrated settings,
    and what any of the variants needs built first."""
    inputs = {"sample": paths.SAMPLE.format(task=task)}
    settings = {}
    for system, variant in batch_runs_of(task, batch, phase):
        one = config["systems"][system]["variants"][variant]
        if one.get("calibrated"):
            inputs["calibration"] = paths.calibration_file(task, _model_key(wildcards))
            settings.setdefault(system, []).extend(calibration_points(config, system).values())
        else:
            settings.setdefault(system, []).append(one)
    inputs.update(batch_workflow_inputs(settings))
    return inputs


def batch_runs(wildcards, output, task, batch, phase):
    """`tersetalk run`'s arguments: a --spec-json and its --out per batched variant, in the
    order of the rule's outputs."""
    specs = [
        run_spec(config, task, system, variant, _model(wildcards))
        for system, variant in batch_runs_of(task, batch, phase)
    ]
    return runs_args(specs, output)


def run_output():
    """What one run_system job writes: a shard's run file when runs are sharded."""
    return paths.RUN_SHARD if SHARD_SIZE else paths.RUN


def run_log():
    if SHARD_SIZE:
        return paths.results("logs/run/{task}/{system}/{variant}/{shard}.log")
    return paths.results("logs/run/{task}/{system}/{variant}.log")


def run_shards(wildcards):
    """The shard run files a run is merged from, in shard order (run.shard_size)."""
    template = paths.for_model(paths.RUN_SHARD, _model_key(wildcards))
    return [
        template.format(
            task=wildcards.task,
            system=wildcards.system,
            variant=wildcards.variant,
            shard=shard,
        )
        for shard in SHARDS
    ]


def run_input(wildcards):
    """The sample (a shard's, when sharded), and the calibration file when the variant takes
    calibrated settings (the model's own, for a sensitivity model)."""
    if wildcards.get("shard"):
        sample = paths.SAMPLE_SHARD.format(task=wildcards.task, shard=wildcards.shard)
    else:
        sample = paths.SAMPLE.format(task=wildcards.task)
    inputs = {"sample": sample}
    settings = config["systems"][wildcards.system]["variants"][wildcards.variant]
    if settings.get("calibrated"):
        inputs["calibration"] = paths.calibration_file(wildcards.task, _model_key(wildcards))
        grid = calibration_points(config, wildcards.system).values()
        inputs.update(workflow_inputs(wildcards.system, *grid))
    else:
        inputs.update(workflow_inputs(wildcards.system, settings))
    return inputs


def run_spec_json(wildcards):
    return spec_json(
        run_spec(config, wildcards.task, wildcards.system, wildcards.variant, _model(wildcards))
    )
