# The helpers of calibrate.smk's rules: target lists, input and param functions.

from tersetalk.pipeline import calibration
from tersetalk.pipeline.config import calibration_points, calibration_spec
from tersetalk.tasks.schedule import calibration_systems, calibration_tasks, sweep_batches

#: a grid point's name (calibration_points: g00, g01, ...); a {point} that is not one is a
#: reference run's variant, which rule calibration_run makes (the sweeps make the points)
REFERENCE_POINT = r"(?!g[0-9][0-9]+(?![A-Za-z0-9_-]))[A-Za-z0-9_-]+"
#: task -> batch -> the calibrated systems whose grids on the task one job runs, rule
#: calibration_sweep_<task>_<batch> (a system alone, or systems that share a batch:
#: tersetalk.tasks.schedule.sweep_batches)
SWEEPS = {task: sweep_batches(config, task) for task in calibration_tasks(config)}


def calibration_targets():
    """One calibration file per task that a calibrated system runs on."""
    return [paths.calibration_file(task) for task in calibration_tasks(config)]


def calibration_spec_json(wildcards):
    """A grid point's run spec, or a reference's (its {point} is its variant)."""
    task, system, point = wildcards.task, wildcards.system, wildcards.point
    if system in config["calibration"] and point in calibration_points(config, system):
        spec = calibration_spec(config, task, system, point, _model(wildcards))
    else:  # the reference run on the calibration shard
        spec = run_spec(config, task, system, point, _model(wildcards))
    return spec_json(spec)


def calibration_run_input(wildcards):
    inputs = {"sample": paths.CALIBRATION_SAMPLE.format(task=wildcards.task)}
    spec = json.loads(calibration_spec_json(wildcards))
    inputs.update(workflow_inputs(wildcards.system, spec["variant_settings"]))
    return inputs


def calibration_run_targets(wildcards):
    template = paths.for_model(paths.CALIBRATION_RUN, _model_key(wildcards))
    return [
        template.format(task=wildcards.task, system=system, point=point)
        for system in calibration_systems(config, wildcards.task)
        for point in calibration_points(config, system)
    ]


def calibration_reference_inputs(wildcards):
    """The reference runs on the calibration shard: evaluation.reference's (the model's
    own), then the systems' own references (calibration.<system>.reference), once each."""
    opts = calibration.options(config, wildcards.task)
    own = {e["reference"] for e in opts["systems"].values() if "reference" in e}
    return {
        "reference": paths.calibration_reference_run(
            wildcards.task, opts["reference"], _model_key(wildcards)
        ),
        "system_references": [
            paths.calibration_reference_run(wildcards.task, label, _model_key(wildcards))
            for label in sorted(own)
        ],
    }


def calibration_options_json(wildcards):
    """The task's calibration options (reference, margin, each system's objective,
    preservation margin and own reference) as one JSON param."""
    return json.dumps(calibration.options(config, wildcards.task), sort_keys=True)


def sweep_points(task, batch):
    """(system, grid point) of each run of ``batch``'s sweep on ``task``, system by system."""
    return [(s, p) for s in SWEEPS[task][batch] for p in calibration_points(config, s)]


def calibration_sweep_outputs(task, batch, model=None):
    """The grid points' run files of the sweep, in its order (with a {model} wildcard for a
    sensitivity model's sweep: ``model="{model}"``)."""
    template = paths.for_model(paths.CALIBRATION_RUN, model)
    return [
        template.format(task=task, system=system, point=point, model="{model}")
        for system, point in sweep_points(task, batch)
    ]


def calibration_sweep_input(wildcards, task, batch):
    """The calibration shard, and what any grid point of the sweep needs built first."""
    settings = {s: list(calibration_points(config, s).values()) for s in SWEEPS[task][batch]}
    return {
        "sample": paths.CALIBRATION_SAMPLE.format(task=task),
        **batch_workflow_inputs(settings),
    }


def calibration_sweep_runs(wildcards, output, task, batch):
    """`tersetalk run`'s arguments for the sweep: a --spec-json and its --out per grid
    point, in the order of the rule's outputs."""
    specs = [
        calibration_spec(config, task, system, point, _model(wildcards))
        for system, point in sweep_points(task, batch)
    ]
    return runs_args(specs, output)


def calibration_sweep_runtime_min(task, batch):
    """The cluster budget of a sweep: its points one after the other."""
    return len(sweep_points(task, batch)) * (10 + 2 * config["calibration_n"])
