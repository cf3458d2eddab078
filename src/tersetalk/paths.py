"""Where the workflow's files live: each path template written once.

The templates are Snakemake patterns (``{task}``, ``{system}``, ... are wildcards), so
the rules use them as their inputs and outputs as they are, and Python fills them
with :meth:`str.format` (``RUN.format(task="gsm8k", system="freeform",
variant="default")``). A sensitivity model's files are the same templates under
``results/models/<name>/`` (:func:`for_model`).

Logs and the files one rule alone names stay in that rule.
"""

from __future__ import annotations

#: the default model's results; a sensitivity model's are under results/models/<name>/
RESULTS = "results/"

# ---- samples (data.smk, run.smk, topology.smk) ----------------------------------------
SAMPLE = "results/samples/{task}.parquet"
CALIBRATION_SAMPLE = "results/samples/{task}.calibration.parquet"
SAMPLE_SHARD = "results/samples/shards/{task}/{shard}.parquet"

# ---- runs, their metrics and scores (run.smk, score.smk) ------------------------------
RUN = "results/runs/{task}/{system}/{variant}.parquet"
RUN_SHARD = "results/runs/shards/{task}/{system}/{variant}/{shard}.parquet"
METRICS = "results/metrics/{task}/{system}/{variant}.parquet"
SCORES = "results/scores/{task}/{system}/{variant}.parquet"
SUMMARY = "results/summary.parquet"

# ---- calibration (calibrate.smk): a grid point's run, or a reference run whose
# {point} is its variant, on the calibration shard; the file the runs choose by ---------
CALIBRATION_RUN = "results/calibration/runs/{task}/{system}/{point}.parquet"
CALIBRATION = "results/calibration/{task}.yaml"

# ---- the topology study (topology.smk) ------------------------------------------------
TOPOLOGY_SAMPLE = "results/topology/samples/{task}.parquet"
TOPOLOGY_RUN = "results/topology/runs/{task}/{system}/{variant}.parquet"
#: the study's calibration split (disjoint from its sample) and the router signals read
#: from its briefs, on which the fitted router (ROUTER_FILE) learns
TOPOLOGY_CALIBRATION = "results/topology/samples/{task}.calibration.parquet"
TOPOLOGY_SIGNALS = "results/topology/calibration/{task}/{system}.parquet"
ROUTER_FILE = "results/topology/router.yaml"


def results_prefix(model: str | None = None) -> str:
    """Where a model's results live: ``results/`` (default model) or ``results/models/<name>/``."""
    return RESULTS if model is None else f"{RESULTS}models/{model}/"


def for_model(template: str, model: str | None = None) -> str:
    """``template`` (a ``results/...`` path) for ``model``'s results; ``model="{model}"``
    gives the Snakemake pattern with a ``{model}`` wildcard."""
    if not template.startswith(RESULTS):
        raise ValueError(f"{template!r} is not under {RESULTS}")
    return results_prefix(model) + template.removeprefix(RESULTS)


def calibration_file(task: str, model: str | None = None) -> str:
    """The calibration file of ``task`` (for a sensitivity ``model``: its own)."""
    return for_model(CALIBRATION, model).format(task=task)


def calibration_reference_run(task: str, label: str, model: str | None = None) -> str:
    """A reference run (``system/variant`` label) on the calibration shard of ``task``."""
    system, _, variant = label.partition("/")
    return for_model(CALIBRATION_RUN, model).format(task=task, system=system, point=variant)
