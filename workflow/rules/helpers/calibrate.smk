# The helpers of calibrate.smk's rules: target lists, input and param functions.

from tersetalk.pipeline import calibration
from tersetalk.pipeline.config import calibration_points, calibration_spec
from tersetalk.pipeline.schedule import calibration_systems, calibration_tasks, sweep_batches

#: a grid point's name (calibration_points: g00, g01, ...); a {point} that is not one is a
#: reference run's variant, which rule calibration_run makes (the sweeps make the points)
REFERENCE_POINT = r"(?!g[0-9][0-9]+(?![A-Za-z0-9_-]))[A-Za-z0-9_-]+"
#: task -> batch -> the calibrated systems whose grids on the task one job runs, rule
#: calibration_sweep (a system alone, or systems that share a batch:
#: tersetalk.pipeline.schedule.sweep_batches)
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


def calibration_sweep_targets(wildcards):
    """The manifests of the sweeps that write the task's grid points."""
    template = paths.for_model(paths.SWEEP, _model_key(wildcards))
    return [template.format(task=wildcards.task, batch=b) for b in SWEEPS.get(wildcards.task, {})]


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
    systems = SWEEPS.get(task, {}).get(batch, [])
    return [(s, p) for s in systems for p in calibration_points(config, s)]


def calibration_sweep_input(wildcards):
    """The calibration shard, and what any grid point of the sweep needs built first."""
    systems = SWEEPS.get(wildcards.task, {}).get(wildcards.batch, [])
    settings = {s: list(calibration_points(config, s).values()) for s in systems}
    return {
        "sample": paths.CALIBRATION_SAMPLE.format(task=wildcards.task),
        **batch_workflow_inputs(settings),
    }


def calibration_sweep_runs(wildcards):
    """`tersetalk run`'s arguments for the sweep: a --spec-json and its --out per grid
    point, system by system."""
    task, batch = wildcards.task, wildcards.batch
    template = paths.for_model(paths.CALIBRATION_RUN, _model_key(wildcards))
    points = sweep_points(task, batch)
    specs = [calibration_spec(config, task, s, p, _model(wildcards)) for s, p in points]
    outs = [template.format(task=task, system=s, point=p) for s, p in points]
    return runs_args(specs, outs)


def calibration_sweep_runtime_min(wildcards):
    """The cluster budget of a sweep: its points one after the other."""
    points = sweep_points(wildcards.task, wildcards.batch)
    return runtime_min(config["calibration_n"], len(points))
