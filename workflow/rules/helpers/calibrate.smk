# The helpers of calibrate.smk's rules: target lists, input and param functions.

from tersetalk import calibration
from tersetalk.config import calibration_points, calibration_spec
from tersetalk.tasks.schedule import calibration_systems, calibration_tasks

#: a grid point's name (calibration_points: g00, g01, ...); a {point} that is not one is a
#: reference run's variant, which rule calibration_run makes (the sweeps make the points)
REFERENCE_POINT = r"(?!g[0-9][0-9]+(?![A-Za-z0-9_-]))[A-Za-z0-9_-]+"
#: the calibrated systems, each swept by its own rule calibration_sweep_<system>
SWEPT_SYSTEMS = [s for s in config.get("calibration", {}) if s in SYSTEMS]


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


def calibration_sweep_outputs(system, model=None):
    """The grid points' run files of ``system`` in grid order, with a {task} wildcard (and
    {model}, for a sensitivity model's sweep: ``model="{model}"``)."""
    template = paths.for_model(paths.CALIBRATION_RUN, model)
    return [
        template.replace("{system}", system).replace("{point}", point)
        for point in calibration_points(config, system)
    ]


def calibration_sweep_input(wildcards, system):
    """The calibration shard, and what any grid point of ``system`` needs built first."""
    return {
        "sample": paths.CALIBRATION_SAMPLE.format(task=wildcards.task),
        **workflow_inputs(system, *calibration_points(config, system).values()),
    }


def calibration_sweep_runs(wildcards, output, system):
    """`tersetalk run`'s arguments for the sweep: a --spec-json and its --out per grid
    point, in the order of the rule's outputs."""
    specs = [
        calibration_spec(config, wildcards.task, system, point, _model(wildcards))
        for point in calibration_points(config, system)
    ]
    return runs_args(specs, output)


def calibration_sweep_runtime_min(wildcards, system):
    """The cluster budget of a sweep: its points one after the other."""
    return len(calibration_points(config, system)) * (10 + 2 * config["calibration_n"])
