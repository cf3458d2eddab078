"""Which system runs on which task: the config's per-system ``tasks`` list.

Why a list per system: some systems only make sense on some tasks (``formats``
re-encodes a tool payload, which only ``toolqa`` has; TerseTalk's typed lines and
LLMLingua's question-aware compression are built for facts and word problems), and a
run that cannot mean anything costs model time. ``systems.<name>.tasks`` names the
tasks a system runs on; without it, a system runs on every task in ``tasks``. A task
named there but absent from ``tasks`` simply does not run (``--config tasks=[gsm8k]``
narrows the whole workflow as before). A variant may narrow its system's tasks further
with its own ``tasks`` key (``systems.freeform.variants.cod.tasks``: Chain-of-Draft has
no prompt for toolqa, where ``freeform/default`` still runs as the format study's
reference).

The Snakemake target functions, calibration, the statistics and the figures all ask
here, so no rule or module branches on a system's or a task's name. Pure functions
of the config dict; errors are ValueErrors naming the config key (tersetalk.pipeline.config
turns them into ConfigErrors).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "SCORE_GROUPS",
    "ablation_batches",
    "ablation_only",
    "calibration_tasks",
    "calibration_systems",
    "check_schedule",
    "planned_runs",
    "runs_on",
    "score_groups",
    "sweep_batches",
    "system_tasks",
    "task_runs",
    "variant_runs_on",
    "variant_tasks",
]


def system_tasks(config: dict, system: str) -> list[str]:
    """The tasks ``system`` runs on, in the order of ``tasks``."""
    allowed = config["systems"][system].get("tasks")
    return [t for t in config["tasks"] if allowed is None or t in allowed]


def runs_on(config: dict, system: str, task: str) -> bool:
    return task in system_tasks(config, system)


def variant_tasks(config: dict, system: str, variant: str) -> list[str]:
    """The tasks one variant runs on: its system's, narrowed by the variant's ``tasks``."""
    allowed = (config["systems"][system]["variants"][variant] or {}).get("tasks")
    return [t for t in system_tasks(config, system) if allowed is None or t in allowed]


def variant_runs_on(config: dict, system: str, variant: str, task: str) -> bool:
    return task in variant_tasks(config, system, variant)


def task_runs(config: dict, task: str) -> list[str]:
    """The enabled ``system/variant`` labels that run on ``task``, in config order."""
    return [
        f"{name}/{variant}"
        for name, spec in config["systems"].items()
        if spec.get("enabled", True) and runs_on(config, name, task)
        for variant in spec["variants"]
        if variant_runs_on(config, name, variant, task)
    ]


def planned_runs(config: dict) -> dict[str, list[str]]:
    """task -> the runs scheduled on it (what the statistics compare)."""
    return {task: task_runs(config, task) for task in config["tasks"]}


#: the groups a task's runs are scored in, in reading order: ``headline`` (every run a
#: reader meets first: each system's default, the baselines, the format study's
#: encoders) and ``ablations`` (the runs that exist only for an ablation's figure)
SCORE_GROUPS = ("headline", "ablations")


def ablation_only(config: dict, system: str, variant: str) -> bool:
    """Whether ``system/variant`` runs only for the ablation figures: some ablation of
    ``system`` lists it, and it is neither the system's ``default`` nor
    ``evaluation.reference`` (which every run is paired with)."""
    if variant == "default" or f"{system}/{variant}" == config["evaluation"]["reference"]:
        return False
    return any(
        spec["system"] == system and variant in spec["variants"]
        for spec in (config.get("ablations") or {}).values()
    )


#: Systems each of whose runs loads a model of its own in its process (LLMLingua's
#: compressor for LLMLingua and the hybrid, the MiniLM judge for the mediator and MSP:
#: 5-10 s a process): all their runs are in batches, their headline variants on a task in
#: one job too (:func:`headline_variants`), so the model loads once per task and batch.
WHOLE_SYSTEMS_BATCHED = ("llmlingua", "hybrid", "mediator", "msp")


def _variants(config: dict) -> dict[str, list[str]]:
    """Each enabled system's variants; none when runs are sharded (``run.shard_size``):
    then every shard is a job of its own and nothing is batched."""
    if (config.get("run") or {}).get("shard_size"):
        return {}
    return {
        s: list(spec.get("variants") or {})
        for s, spec in config["systems"].items()
        if spec.get("enabled", True)
    }


def whole_batched(config: dict) -> list[str]:
    """The enabled systems of :data:`WHOLE_SYSTEMS_BATCHED` (none when sharded): the
    Snakefile's ``run_system`` never runs them; the batches run every run of theirs."""
    return [s for s in _variants(config) if s in WHOLE_SYSTEMS_BATCHED]


def headline_variants(config: dict) -> dict[str, list[str]]:
    """system -> its headline variants (not ablation-only) that run in batches: those of
    :func:`whole_batched` systems, one job per task and batch (Snakemake's ``run_batch``,
    phase ``headline``: :func:`headline_batches`)."""
    out = {}
    for system in whole_batched(config):
        names = [v for v in _variants(config)[system] if not ablation_only(config, system, v)]
        if names:
            out[system] = names
    return out


def batched_variants(config: dict) -> dict[str, list[str]]:
    """system -> its ablation-only variants that run in batches: one job per task and
    batch runs them one after the other (Snakemake's ``run_batch``, phase ``ablations``,
    the batch a system's or shared: :func:`ablation_batches`).

    Which: every ablation-only variant (:func:`ablation_only`) of a :func:`whole_batched`
    system; of the other systems, those whose name is not also a variant of another such
    system that is not ablation-only (the Snakefile tells their batched runs from the
    single ones by variant name). None when runs are sharded (``run.shard_size``).
    """
    systems = _variants(config)
    whole = whole_batched(config)
    single = {
        v
        for s, names in systems.items()
        if s not in whole
        for v in names
        if not ablation_only(config, s, v)
    }
    out = {}
    for system, names in systems.items():
        batched = [
            v
            for v in names
            if ablation_only(config, system, v) and (system in whole or v not in single)
        ]
        if batched:
            out[system] = batched
    return out


#: Systems whose jobs on a task are another system's: one job runs both systems' runs
#: (headline variants: :func:`headline_batches`; ablation-only ones:
#: :func:`ablation_batches`; calibration grids: :func:`sweep_batches`), so what both load
#: once per process (LLMLingua's compressor: about 5 s of imports and weights; the MiniLM
#: judge) loads once. Named, not derived from the compressor
#: input: TerseTalk's LLMLingua-touchpoint variants need it too, and would pull
#: TerseTalk's 21 variants in.
BATCH_WITH = {"hybrid": "llmlingua", "msp": "mediator"}


def batch_host(system: str) -> str:
    """The system whose batch runs ``system``'s (:data:`BATCH_WITH`): itself, or its host."""
    return BATCH_WITH.get(system, system)


def group_batches(systems) -> dict[str, list[str]]:
    """batch name -> its systems: ``systems`` grouped by :func:`batch_host`, each group
    named by its systems joined by ``_``, the host first (``llmlingua_hybrid``), then in
    the order given."""
    groups: dict[str, list[str]] = {}
    for system in systems:
        groups.setdefault(batch_host(system), []).append(system)
    out = {}
    for host, members in groups.items():
        members.sort(key=lambda s: s != host)  # stable: the host first
        out["_".join(members)] = members
    return out


def ablation_batches(config: dict) -> dict[str, list[str]]:
    """batch name -> the systems whose ablation-only variants (:func:`batched_variants`)
    one job per task runs (``run_batch``, phase ``ablations``): :func:`group_batches`."""
    return group_batches(batched_variants(config))


def headline_batches(config: dict) -> dict[str, list[str]]:
    """batch name -> the systems whose headline variants (:func:`headline_variants`) one
    job per task runs (``run_batch``, phase ``headline``): :func:`group_batches`."""
    return group_batches(headline_variants(config))


def sweep_batches(config: dict, task: str) -> dict[str, list[str]]:
    """batch name -> the calibrated systems on ``task`` (:func:`calibration_systems`)
    whose grids one job runs (``calibration_sweep``): :func:`group_batches`."""
    return group_batches(calibration_systems(config, task))


def batch_cost(task: str, runs: Mapping[str, int], seconds: Mapping[str, Mapping[str, float]],
               other: float) -> float:  # fmt: skip
    """The estimated seconds of a batch on ``task`` of ``runs`` (system -> its number of
    runs): each run's ``seconds[system][task]`` (the config's ``schedule.run_seconds``,
    measured on the default run), ``other`` for a pair it does not name.

    The Snakefile starts the costliest batch first, so the short ones end the run,
    beside the scoring and figures, rather than a long one alone while the other cores
    idle. By task, not by system alone: TerseTalk's runs take longer on HotpotQA (its
    long passages), LLMLingua's and the hybrid's on GSM8K (the model writes long answers
    to compressed questions), and the last batch to start is the one that can end the
    run alone (at 7ed09c9 a tie between the two tasks' LLMLingua batches left a core
    idle for 104 core-s). Only the order counts: another model may order them
    otherwise, which costs time, never a result."""
    return sum(n * seconds.get(system, {}).get(task, other) for system, n in runs.items())


def rank_priorities(costs: dict, low: int, high: int) -> dict:
    """key -> priority: the keys ranked by ``costs`` (the costliest gets ``high``, the
    next ``high - 1``, ...), none under ``low`` (the cheapest share it when there are
    more keys than priorities); equal costs keep the order given, the first higher."""
    order = sorted(costs, key=lambda k: -costs[k])  # stable: ties in the order given
    return {k: max(low, high - i) for i, k in enumerate(order)}


def score_groups(config: dict, task: str) -> dict[str, list[str]]:
    """group -> the ``system/variant`` runs of ``task`` scored together in one job.

    Why groups: scoring loads a sentence encoder (BERTScore), seconds per process, so one
    job scores many runs; and two groups, not one, so the headline comparison is scored
    (and drawn) without waiting for the ablation runs. Empty groups are left out.
    """
    groups: dict[str, list[str]] = {g: [] for g in SCORE_GROUPS}
    for label in task_runs(config, task):
        system, _, variant = label.partition("/")
        groups["ablations" if ablation_only(config, system, variant) else "headline"].append(label)
    return {g: runs for g, runs in groups.items() if runs}


def calibration_systems(config: dict, task: str) -> list[str]:
    """The enabled calibrated systems (``calibration``) that run on ``task``."""
    systems = config["systems"]
    return [
        s
        for s in config.get("calibration", {})
        if s in systems and systems[s].get("enabled", True) and runs_on(config, s, task)
    ]


def calibration_tasks(config: dict) -> list[str]:
    """Tasks with at least one calibrated system: each gets a calibration shard and file.

    A task without one (toolqa by default) samples no calibration shard, so its
    examples all stay available for evaluation.
    """
    return [t for t in config["tasks"] if calibration_systems(config, t)]


def check_schedule(config: dict) -> None:
    """The references every run is paired with must run wherever they are needed.

    - ``evaluation.reference`` on every task any enabled system runs on (each run is
      paired with it on the same examples);
    - a calibrated system's own ``calibration.<system>.reference`` on every task that
      system runs on (its grid points are judged against it).
    """
    ref = config["evaluation"]["reference"]
    ref_system, _, ref_variant = ref.partition("/")
    if ref_system in config["systems"]:
        for task in config["tasks"]:
            others = [r for r in task_runs(config, task) if r != ref]
            if others and not runs_on(config, ref_system, task):
                raise ValueError(
                    f"config key 'systems.{ref_system}.tasks': evaluation.reference {ref!r} "
                    f"must run on every task the other systems run on, and {others[0]!r} "
                    f"runs on {task}; add {task} to systems.{ref_system}.tasks"
                )
            variants = config["systems"][ref_system]["variants"]
            if others and ref_variant in variants:
                if not variant_runs_on(config, ref_system, ref_variant, task):
                    raise ValueError(
                        f"config key 'systems.{ref_system}.variants.{ref_variant}.tasks': "
                        f"evaluation.reference {ref!r} must run on every task the other "
                        f"systems run on, and {others[0]!r} runs on {task}; add {task} to it"
                    )
    for system, spec in config.get("calibration", {}).items():
        label = spec.get("reference")
        if not label or system not in config["systems"]:
            continue
        own = label.split("/")[0]
        missing = [t for t in system_tasks(config, system) if not runs_on(config, own, t)]
        if own in config["systems"] and missing:
            raise ValueError(
                f"config key 'calibration.{system}.reference': {label!r} does not run on "
                f"{', '.join(missing)}, where {system} runs and is calibrated against it; "
                f"add {', '.join(missing)} to systems.{own}.tasks"
            )
