# The helpers of run.smk's rules: target lists, input and param functions.

from tersetalk.config import calibration_points


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
