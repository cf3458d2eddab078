# The helpers of topology.smk's rules: target lists, input and param functions.

from tersetalk.pipeline.config import topology_config
from tersetalk.tasks.registry import topology_labels

TOPOLOGY = config["topology"]
TOPOLOGY_FIT = TOPOLOGY["fit"]
TOPOLOGY_SYSTEMS = [
    name for name, spec in (TOPOLOGY.get("systems") or {}).items() if spec.get("enabled", True)
]


def topology_study():
    """The config the study's jobs see (tersetalk.pipeline.config.topology_config); a clear error
    when the config has no topology systems."""
    try:
        return topology_config(config)
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None


def topology_runs(wildcards=None):
    """One run file per (study task, routed system that runs on it, variant that runs on it)."""
    return run_targets(paths.TOPOLOGY_RUN, study=topology_study())


def topology_run_input(wildcards):
    settings = topology_study()["systems"][wildcards.system]["variants"][wildcards.variant]
    return {
        "sample": paths.TOPOLOGY_SAMPLE.format(task=wildcards.task),
        **workflow_inputs(wildcards.system, settings),
    }


def topology_spec_json(wildcards):
    return spec_json(
        run_spec(topology_study(), wildcards.task, wildcards.system, wildcards.variant)
    )


def topology_signal_files(wildcards=None):
    """The calibration signals of every (study task, routed system that runs on it)."""
    study = topology_study()
    return [
        paths.TOPOLOGY_SIGNALS.format(task=task, system=system)
        for task in study["tasks"]
        for system in enabled_systems(study)
        if runs_on(study, system, task)
    ]


def topology_heldout_files(wildcards=None):
    """The held-out signals of every (study task with a held-out file, routed system)."""
    study = topology_study()
    return [
        paths.TOPOLOGY_HELDOUT_SIGNALS.format(task=task, system=system)
        for task in study["tasks"]
        for system in enabled_systems(study)
        if runs_on(study, system, task) and os.path.exists(paths.TOPOLOGY_HELDOUT.format(task=task))
    ]
