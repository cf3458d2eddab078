# The helpers of run.smk's rules: target lists, input and param functions.

from tersetalk.pipeline.config import calibration_points

#: phase -> (system -> its variants that run in batches, batch -> its systems): one job
#: per task and batch (run_batch), for the headline variants of the systems that load a
#: model of their own (schedule.headline_variants), and the
#: ablation-only variants (schedule.batched_variants); none with run.shard_size
PHASES = {
    "headline": (headline_variants(config), headline_batches(config)),
    "ablations": (batched_variants(config), ablation_batches(config)),
}
BATCHES = PHASES["ablations"][1]


def batch_variants(task, system, phase="ablations"):
    """The variants of ``system`` batched in ``phase`` that run on ``task``, in config
    order."""
    variants = PHASES[phase][0].get(system, [])
    return [v for v in variants if variant_runs_on(config, system, v, task)]


def batch_runs_of(task, batch, phase="ablations"):
    """(system, variant) of each run of ``batch`` on ``task``, system by system."""
    systems = PHASES[phase][1].get(batch, [])
    return [(s, v) for s in systems for v in batch_variants(task, s, phase)]


#: (task, batch) -> its priority. Longest first: the batches ranked by estimated seconds
#: (pipeline.schedule.batch_cost: their runs, by system and task), the costliest just below
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


def batch_priority(wildcards):
    """A headline batch runs with the headline jobs; an ablation batch by its rank."""
    if wildcards.phase == "headline":
        return HEADLINE_PRIORITY
    return BATCH_PRIORITIES.get((wildcards.task, wildcards.batch), ABLATION_PRIORITY + 1)


def batch_runtime_min(wildcards):
    """The cluster budget of a batch: its runs one after the other."""
    runs = batch_runs_of(wildcards.task, wildcards.batch, wildcards.phase)
    return runtime_min(config["n_eval"], len(runs))


def batch_outputs(task, batch, phase, model=None):
    """The run files a batch writes, in its order (``model``: a sensitivity model's key)."""
    template = paths.for_model(paths.RUN, model)
    return [
        template.format(task=task, system=system, variant=v)
        for system, v in batch_runs_of(task, batch, phase)
    ]


#: (task, system, variant) -> (phase, batch) of every run a batch job makes
BATCH_OF = {
    (task, system, variant): (phase, batch)
    for phase, (_, batches) in PHASES.items()
    for task in TASKS
    for batch in batches
    for system, variant in batch_runs_of(task, batch, phase)
}


def run_file_input(task, system, variant, model=None):
    """What a job that reads the run file of (task, system, variant) depends on: the
    manifest of the batch that writes it, else the run file itself (rule run_system)."""
    if (task, system, variant) in BATCH_OF:
        phase, batch = BATCH_OF[(task, system, variant)]
        return paths.for_model(paths.RUN_BATCH, model).format(task=task, phase=phase, batch=batch)
    return paths.for_model(paths.RUN, model).format(task=task, system=system, variant=variant)


def batch_input(wildcards):
    """The sample, the calibration file if a batched variant takes calibrated settings,
    and what any of the variants needs built first."""
    task, batch, phase = wildcards.task, wildcards.batch, wildcards.phase
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


def batch_runs(wildcards):
    """`tersetalk run`'s arguments: a --spec-json and its --out per batched variant."""
    task, batch, phase = wildcards.task, wildcards.batch, wildcards.phase
    specs = [
        run_spec(config, task, system, variant, _model(wildcards))
        for system, variant in batch_runs_of(task, batch, phase)
    ]
    return runs_args(specs, batch_outputs(task, batch, phase, _model_key(wildcards)))


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
