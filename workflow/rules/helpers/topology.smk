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


def topology_variants(task, system):
    """The variants of a routed system that run on a study task, in config order."""
    return [v for t, s, v in run_triples(topology_study()) if (t, s) == (task, system)]


def topology_batches(wildcards=None):
    """The manifest of each (study task, routed system that runs on it): its job writes
    the run file of every variant that runs on the task."""
    pairs = dict.fromkeys((t, s) for t, s, _ in run_triples(topology_study()))
    return [paths.TOPOLOGY_BATCH.format(task=t, system=s) for t, s in pairs]


def topology_batch_input(wildcards):
    """The study's sample of the task, and what any of the variants needs built first
    (the fitted router file for a variant that reads it)."""
    variants = topology_study()["systems"][wildcards.system]["variants"]
    settings = [variants[v] for v in topology_variants(wildcards.task, wildcards.system)]
    return {
        "sample": paths.TOPOLOGY_SAMPLE.format(task=wildcards.task),
        **batch_workflow_inputs({wildcards.system: settings}),
    }


def topology_batch_runs(wildcards):
    """`tersetalk run`'s arguments: a --spec-json and its --out per variant."""
    task, system = wildcards.task, wildcards.system
    variants = topology_variants(task, system)
    return runs_args(
        [run_spec(topology_study(), task, system, v) for v in variants],
        [paths.TOPOLOGY_RUN.format(task=task, system=system, variant=v) for v in variants],
    )


def topology_batch_runtime_min(wildcards):
    """The cluster budget of a batch: its variants one after the other."""
    n = len(topology_variants(wildcards.task, wildcards.system))
    return runtime_min(TOPOLOGY["n_eval"], n)


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
