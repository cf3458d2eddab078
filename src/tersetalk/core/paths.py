"""Where the workflow's files live: each path template written once.

Every result a model produces lives under that model's own folder, so switching
``models:`` adds results beside the old ones and never replaces them::

    results/<model key>/runs/{task}/{system}/{variant}.parquet   (and metrics/, scores/,
        summary.parquet, calibration/, stats/, tables/, topology/, formats/, logs/)
    figures/<model key>/main.png ...

The model key is ``models.key`` when set, else the model's name made path-safe
(:func:`model_key`: ``smollm2-135m-instruct`` for the embedded default). What does not
depend on the model is shared: the samples (``results/samples/``), the call cache, the
microbenchmarks, the MCP study, the LLMLingua compressor's weights and cross-model
comparisons (``results/compare/``, ``figures/compare/``).

The templates are Snakemake patterns (``{task}``, ``{system}``, ... are wildcards), so the
rules use them as their inputs and outputs as they are, and Python fills them with
:meth:`str.format`. A :class:`Layout` gives one model's paths
(``Layout("smollm2-135m-instruct").RUN``); the workflow builds the configured model's
as ``paths`` (workflow/rules/common.smk).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RESULTS = "results/"
FIGURES = "figures/"

#: folder names directly under results/ (and figures/) that hold shared files, so no
#: model key may take them
SHARED_FOLDERS = frozenset(
    {"samples", "cache", "logs", "bench", "mcp", "models", "compare", "audit", "mediator"}
)

# ---- shared: samples (data.smk, run.smk, topology.smk) --------------------------------
SAMPLE = "results/samples/{task}.parquet"
CALIBRATION_SAMPLE = "results/samples/{task}.calibration.parquet"
SAMPLE_SHARD = "results/samples/shards/{task}/{shard}.parquet"
#: the topology study's sample and its calibration split (disjoint from it)
TOPOLOGY_SAMPLE = "results/samples/topology/{task}.parquet"
TOPOLOGY_CALIBRATION = "results/samples/topology/{task}.calibration.parquet"
#: the router's held-out briefs, in each task's record format (shipped, never trained on)
TOPOLOGY_HELDOUT = "data/topology/heldout/{task}.jsonl"

# ---- shared: logs of the jobs that write shared files (a model's own: results/<key>/logs/)
LOGS = "results/logs/"


def shared_log(rel: str) -> str:
    """``results/logs/<rel>``: the log of a job that writes shared files
    (``shared_log("bench/{mb}.log")``)."""
    return f"{LOGS}{rel}"


# ---- shared: the compressor and the cross-model comparison (compressor.smk, models.smk) -
#: the LLMLingua compressor, an HF-format copy of the embedded model
COMPRESSOR_DIR = "results/models/smollm2-hf"
COMPARE_TABLE = "results/compare/models.csv"
COMPARE_PNG = "figures/compare/models.png"
COMPARE_PDF = "figures/compare/models.pdf"

# ---- shared: microbenchmarks (bench.smk, scale.smk; the targets table reads them) ------
BENCH_DIR = "results/bench"
#: the texts MB-1 to MB-3 measure on
BENCH_CORPUS = "results/bench/corpus.parquet"
#: one microbenchmark's rows and its table ({mb}: mb1 to mb4)
BENCH_RESULT = "results/bench/{mb}.parquet"
BENCH_TABLE = "results/bench/{mb}.csv"
BENCH_PNG = "figures/bench.png"
BENCH_PDF = "figures/bench.pdf"
#: the dashboard's progress events, timed on and off
BENCH_EVENTS = "results/bench/events.parquet"
#: the driver's own cost per model call (its table is read by `tersetalk plan`)
BENCH_DRIVER = "results/bench/driver.parquet"
BENCH_DRIVER_TABLE = "results/bench/driver.csv"
BENCH_DRIVER_PNG = "figures/bench_driver.png"
BENCH_DRIVER_PDF = "figures/bench_driver.pdf"
#: examples per second at several concurrency levels: the table, every run, the figure
BENCH_CONCURRENCY = "results/bench/concurrency.csv"
BENCH_CONCURRENCY_RUNS = "results/bench/concurrency_runs.csv"
BENCH_CONCURRENCY_PNG = "results/bench/concurrency.png"

# ---- shared: the MCP study (mcp.smk) --------------------------------------------------
#: a server's launch description, and the folder of the servers' installs (each beside its
#: JSON, rebuilt only when its requirements file changes; the tests keep their own under
#: $TERSETALK_MCP_ENVS)
MCP_ENV = "results/mcp/envs/{server}.json"
MCP_ENV_DIR = "results/mcp/envs"
#: what the servers serve: the database (sqlite), the repository (git, and filesystem's
#: copy), and the tuned experiment's project repository (git) and graph (memory)
MCP_DATABASE = "results/mcp/data/questions.sqlite"
MCP_REPOSITORY = "results/mcp/data/repo"
MCP_PROJECT_REPOSITORY = "results/mcp/data/project_repo"
MCP_MEMORY_GRAPH = "results/mcp/data/memory_graph.jsonl"
#: one server's sessions, direct and through the proxy; every server's summary
MCP_RUN = "results/mcp/{server}.parquet"
MCP_SUMMARY = "results/mcp/summary.csv"
MCP_PNG = "figures/mcp.png"
MCP_PDF = "figures/mcp.pdf"
#: MB-5: the proxy's session pipeline
MCP_BENCH = "results/mcp/mb5.parquet"
MCP_BENCH_TABLE = "results/mcp/mb5.csv"
#: the tuned-vs-default experiment: one server's folder (train.parquet, telemetry/,
#: tuned.yaml, evidence.csv, eval.parquet), then every server's rows and their summary
MCP_TUNED_DIR = "results/mcp/tuned/{server}"
MCP_TUNED_RUNS = "results/mcp/tuned.parquet"
MCP_TUNED_SUMMARY = "results/mcp/tuned_summary.csv"
MCP_TUNED_PNG = "figures/mcp_tuned.png"
MCP_TUNED_PDF = "figures/mcp_tuned.pdf"

# ---- one model's files, relative to results/<model key>/ ------------------------------
MODEL_TEMPLATES = {
    # runs, their metrics and scores (run.smk, score.smk)
    "RUN": "runs/{task}/{system}/{variant}.parquet",
    "RUN_SHARD": "runs/shards/{task}/{system}/{variant}/{shard}.parquet",
    "METRICS": "metrics/{task}/{system}/{variant}.parquet",
    "SCORES": "scores/{task}/{system}/{variant}.parquet",
    "SUMMARY": "summary.parquet",
    # the manifests of the jobs that write several of the files above (one job's set
    # differs by task, so a rule declares its manifest: tersetalk.core.io.write_manifest):
    # a batch of runs, a group of runs scored together, a sweep of calibration runs
    "RUN_BATCH": "runs/{task}/batches/{phase}/{batch}.json",
    "SCORE_GROUP": "scores/{task}/groups/{group}.json",
    "SWEEP": "calibration/runs/{task}/sweeps/{batch}.json",
    # calibration (calibrate.smk): a grid point's run, or a reference run whose {point} is
    # its variant, on the calibration shard; the file the runs choose by
    "CALIBRATION_RUN": "calibration/runs/{task}/{system}/{point}.parquet",
    "CALIBRATION": "calibration/{task}.yaml",
    # the topology study (topology.smk): its runs, the manifest of the job that writes a
    # routed system's runs on a task, the router signals read from its calibration briefs,
    # and the router fitted on them
    "TOPOLOGY_RUN": "topology/runs/{task}/{system}/{variant}.parquet",
    "TOPOLOGY_BATCH": "topology/batches/{task}/{system}.json",
    "TOPOLOGY_SIGNALS": "topology/calibration/{task}/{system}.parquet",
    "TOPOLOGY_HELDOUT_SIGNALS": "topology/heldout/{task}/{system}.parquet",
    "ROUTER_FILE": "topology/router.yaml",
}

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: the longest model key (a folder name under results/ and figures/)
MAX_KEY = 80


def model_key(models: dict) -> str:
    """The folder name of a ``models`` section's results: ``key`` when set, else the
    model's name (or its file's stem) with every run of other characters than letters,
    digits, ``.``, ``_`` and ``-`` made one ``-`` (``llama3.1:8b`` -> ``llama3.1-8b``)."""
    explicit = models.get("key")
    if explicit:
        key = str(explicit)
        if not KEY_PATTERN.fullmatch(key) or len(key) > MAX_KEY:
            raise ValueError(
                f"models.key {key[:MAX_KEY]!r}: use at most {MAX_KEY} letters, digits, '.', "
                "'_' and '-', starting with a letter or digit"
            )
    else:
        name = models.get("model") or Path(str(models.get("model_path") or "")).stem
        # a folder name: at most MAX_KEY characters (file systems stop at 255)
        key = _UNSAFE.sub("-", str(name)).strip("-._")[:MAX_KEY].rstrip("-._")
        if not key:
            raise ValueError(
                f"models: the model name {str(name)[:MAX_KEY]!r} has no letter or digit to "
                "name its results folder: set models.key"
            )
    if key in SHARED_FOLDERS:
        raise ValueError(
            f"model key {key!r} is the name of a shared results folder "
            f"({', '.join(sorted(SHARED_FOLDERS))}): set models.key to another name"
        )
    return key


def model_root(key: str, results: str | Path = RESULTS) -> Path:
    """The folder of model ``key``'s results."""
    return Path(results) / key


def model_keys(results: str | Path = RESULTS) -> list[str]:
    """The models with results under ``results``, sorted: folders holding a summary, runs,
    the format study or the topology study."""
    root = Path(results)
    if not root.is_dir():
        return []
    marks = ("summary.parquet", "runs", "formats", "topology")
    return sorted(
        d.name
        for d in root.iterdir()
        if d.is_dir()
        and d.name not in SHARED_FOLDERS
        and any((d / mark).exists() for mark in marks)
    )


def calibration_file(task: str, key: str) -> str:
    """The calibration file of ``task`` for model ``key``."""
    return Layout(key).CALIBRATION.format(task=task)


@dataclass(frozen=True)
class Layout:
    """One model's paths: ``RUN``, ``SCORES``, ... (:data:`MODEL_TEMPLATES` under
    ``results/<key>/``) and the shared ``SAMPLE``-like templates, as attributes."""

    key: str

    SAMPLE = SAMPLE
    CALIBRATION_SAMPLE = CALIBRATION_SAMPLE
    SAMPLE_SHARD = SAMPLE_SHARD
    TOPOLOGY_SAMPLE = TOPOLOGY_SAMPLE
    TOPOLOGY_CALIBRATION = TOPOLOGY_CALIBRATION
    TOPOLOGY_HELDOUT = TOPOLOGY_HELDOUT

    def __getattr__(self, name: str) -> str:
        try:
            return self.results(MODEL_TEMPLATES[name])
        except KeyError:
            raise AttributeError(name) from None

    def results(self, rel: str = "") -> str:
        """``results/<key>/<rel>``."""
        return f"{RESULTS}{self.key}/{rel}"

    def figure(self, rel: str) -> str:
        """``figures/<key>/<rel>``."""
        return f"{FIGURES}{self.key}/{rel}"

    def for_model(self, path: str, model: str | None) -> str:
        """``path`` (one of this model's) as model ``model``'s; itself for ``None``.
        ``model="{model}"`` gives the Snakemake pattern with a ``{model}`` wildcard."""
        if model is None:
            return path
        for mine, theirs in ((self.results(), RESULTS), (f"{FIGURES}{self.key}/", FIGURES)):
            if path.startswith(mine):
                return f"{theirs}{model}/{path.removeprefix(mine)}"
        raise ValueError(f"{path!r} is not one of model {self.key!r}'s paths")

    def calibration_file(self, task: str, model: str | None = None) -> str:
        """The calibration file of ``task`` (for another ``model``: its own)."""
        return calibration_file(task, model or self.key)

    def calibration_reference_run(self, task: str, label: str, model: str | None = None) -> str:
        """A reference run (``system/variant`` label) on the calibration shard of ``task``."""
        system, _, variant = label.partition("/")
        return self.for_model(self.CALIBRATION_RUN, model).format(
            task=task, system=system, point=variant
        )
