# The helpers of data.smk's rules: target lists, input and param functions.

from tersetalk.tasks.loading import dataset_of
from tersetalk.pipeline.schedule import calibration_tasks


def sample_input(wildcards):
    """The task's dataset file, unless it is read from the Hub (data.source)."""
    spec = dataset_of(wildcards.task)
    if config["data"]["source"] != "local" and spec.hub_path is not None:
        return []
    return [str(Path(config["data"]["dir"]) / spec.relpath)]


def sample_calibration_n(wildcards):
    """calibration_n, or 0 for a task no calibrated system runs on (nothing to calibrate)."""
    return config["calibration_n"] if wildcards.task in calibration_tasks(config) else 0


def sample_task_options(wildcards):
    """The task's config keys that decide which examples exist (DatasetFile.options), as JSON."""
    section = config.get(wildcards.task, {})
    return json.dumps({k: section[k] for k in dataset_of(wildcards.task).options if k in section})
