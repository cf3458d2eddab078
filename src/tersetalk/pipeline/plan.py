"""``tersetalk plan``: a workflow config's model work counted from its DAG, and the time it
would take on named machines.

Why: the paper config (``config/paper.yaml``) runs every system on 500 examples per task
with a 7B model. Whether that is a night on a GPU or months on a laptop should be a number
with its assumptions beside it, worked out before the run, not discovered during it.

What is counted: the model jobs of Snakemake's own dry run of the default target for the
same config (:func:`dry_run`: ``snakemake -n -p --forceall``, each job's rule, wildcards
and the run specs its command is given), so the plan has exactly the jobs the workflow
would run; what those jobs are:

- ``evaluation``: every run of ``all`` (task x enabled system x variant that runs on
  the task, :func:`tersetalk.pipeline.schedule.task_runs`), ``n_eval`` examples each, cut
  into ``run.shard_size`` shards; without shards, a batch's ablation-only variants on a
  task are one job (:func:`tersetalk.pipeline.schedule.ablation_batches`), and so are the
  headline variants of the systems that load a model of their own
  (:func:`tersetalk.pipeline.schedule.headline_batches`);
- ``calibration``: every grid point (:func:`tersetalk.pipeline.config.calibration_points`) of every
  calibrated system on every task it runs on, and the reference runs the grid is judged
  against (:func:`tersetalk.pipeline.calibration.options`), ``calibration_n`` examples each; a
  batch's grid points on a task are one job (a sweep: ``PlannedRun.sweep``; a batch is a
  system, or systems that share one: :func:`tersetalk.pipeline.schedule.sweep_batches`);
- ``comprehension``: the format study's questions, each answered once per encoding by the
  model. Which payloads and questions: the study's own selection
  (:func:`tersetalk.formats.experiments.comprehension`) run with a client that counts
  instead of answering, its prompt lengths counted with o200k_base (the model's own
  tokenizer is not loaded; the measured study's rows, where present, scale that count).

Per example, the model calls and prompt/completion tokens of a run come from measured run
records (the ``calls`` column of an earlier run's Parquet files, ``--measured``): the run
of the same name and settings, else a measured run with the same settings, else the
system's default variant on the task (else the evaluation reference), and the ``rates_from``
and ``rates_basis`` columns say which; ``differs`` names the spec keys (task options,
generation settings) where the measured run was not run as the planned one will be.

Time, per target (each with its assumption in a column): model seconds only, which is the
floor the workflow's own overhead (``results/<key>/tables/overhead.csv``) is measured
against. A call's seconds are ``prompt / prompt_tps + completion / gen_tps`` (times the
measured factor of schema-constrained calls on llama.cpp); calls the measured run
answered from the call cache cost nothing (the same share is assumed at the planned
scale), while a run whose rates are borrowed from another pays for every call. A
target runs ``slots`` streams at once, never more than the DAG's widest
layer of model jobs times each job's examples in flight (``models.max_concurrency``), and
never less long than the longest chain of model jobs (a task's slowest calibration job,
a sweep's points one after the other, then its slowest calibrated run). The hours are
therefore a lower bound.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tersetalk.core.cliargs import add_config_option
from tersetalk.core.io import InputFileError
from tersetalk.core.paths import BENCH_DRIVER_TABLE

__all__ = [
    "PARAMS",
    "Measured",
    "PlanError",
    "PlannedRun",
    "Rates",
    "Target",
    "Throughput",
    "add_commands",
    "count_jobs",
    "dry_run",
    "job_units",
    "main",
    "measure",
    "model_params",
    "parse_dry_run",
    "plan_runs",
    "project",
]

#: parameter counts of the models the configs name, for the throughput-per-parameter
#: scaling (``--measured-params`` / ``--target-params`` override): SmolLM2-135M's and
#: Mistral-7B's model cards (134,515,008 and 7,241,732,096 parameters)
PARAMS = {
    "smollm2-135m-instruct": 134.5e6,
    "smollm2-135m-instruct.q4_1.gguf": 134.5e6,
    "mistral:instruct": 7.24e9,
    "mistral:7b-instruct": 7.24e9,
}

#: per example, when no run has been measured (a fresh clone): stated, not measured here.
#: Rounded from the default config's runs of the embedded model planned at the paper's
#: scale (127,315 calls over 58,500 examples; 280 prompt and 37 completion tokens a call)
STATED_CALLS_PER_EXAMPLE = 2.2
STATED_PROMPT_PER_CALL = 280.0
STATED_COMPLETION_PER_CALL = 40.0

#: the driver's client CPU per model call when no driver benchmark is at hand (stated: the
#: driver benchmark's measure on 2 cores, 32 in flight, a 20 ms server, start-up included)
STATED_DRIVER_CPU_MS = 8.0
#: the model server's throughput when none is named (assumed, not measured: one 8B
#: model on vLLM with 64 requests in flight)
STATED_SERVER_CALLS_PER_S = 30.0
#: where the driver benchmark writes its table (the workflow's bench_driver rule)
DRIVER_BENCH_TABLE = Path(BENCH_DRIVER_TABLE)

#: the GPU server's defaults: assumptions, not measurements (state yours with the flags)
GPU_PROMPT_TPS = 2000.0
GPU_GEN_TPS = 60.0
GPU_STREAMS = 4
SLURM_NODES = 4

PARTS = ("evaluation", "calibration", "comprehension")


class PlanError(InputFileError):
    """The plan cannot be made from what is on disk or given; the message says how to fix."""


# ---- measured rates ------------------------------------------------------------------------


@dataclass
class Rates:
    """Model work summed over the examples of one measured run (or a planned share of one).

    ``calls``/``prompt``/``completion``: every model call, cache hits included (what the
    run asks of the model); ``cached``: the calls answered from the call cache;
    ``stream_*`` and ``struct_*``: the tokens of the calls that reached the model, split by
    free text (streamed) and schema-constrained replies (grammar), which take longer per
    token on llama.cpp; ``hit_*`` the same for the calls answered from the cache;
    ``seconds``: the measured time of the calls that reached the model.
    """

    examples: int = 0
    calls: float = 0.0
    cached: float = 0.0
    unknown_usage: float = 0.0
    prompt: float = 0.0
    completion: float = 0.0
    stream_prompt: float = 0.0
    stream_completion: float = 0.0
    struct_prompt: float = 0.0
    struct_completion: float = 0.0
    hit_stream_prompt: float = 0.0
    hit_stream_completion: float = 0.0
    hit_struct_prompt: float = 0.0
    hit_struct_completion: float = 0.0
    seconds: float = 0.0

    COUNTS = (
        "calls",
        "cached",
        "unknown_usage",
        "prompt",
        "completion",
        "stream_prompt",
        "stream_completion",
        "struct_prompt",
        "struct_completion",
        "hit_stream_prompt",
        "hit_stream_completion",
        "hit_struct_prompt",
        "hit_struct_completion",
        "seconds",
    )

    def scaled(self, examples: int) -> Rates:
        """This run's rates per example, times ``examples``."""
        if not self.examples:
            raise PlanError("a measured run with no examples has no rates")
        f = examples / self.examples
        return Rates(examples, **{k: getattr(self, k) * f for k in self.COUNTS})

    def sent(self) -> tuple[float, float]:
        """(prompt, completion) tokens of the calls that reach the model (not the cache)."""
        return (
            self.stream_prompt + self.struct_prompt,
            self.stream_completion + self.struct_completion,
        )

    def with_prompt(self, extra: float) -> Rates:
        """These rates with ``extra`` prompt tokens in all (negative: fewer), shared among
        the kinds of call in proportion to their prompt tokens."""
        r = Rates(self.examples, **{k: getattr(self, k) for k in self.COUNTS})
        kinds = ("stream_prompt", "struct_prompt", "hit_stream_prompt", "hit_struct_prompt")
        total = sum(getattr(self, k) for k in kinds)
        if total <= 0:
            return r
        f = max(0.0, 1 + extra / total)
        for k in (*kinds, "prompt"):
            setattr(r, k, getattr(self, k) * f)
        return r

    def paid(self) -> Rates:
        """These rates with every call reaching the model: for a run whose rates were
        borrowed, since which calls another run's cache answered says nothing about it."""
        r = Rates(self.examples, **{k: getattr(self, k) for k in self.COUNTS})
        for kind in ("stream_prompt", "stream_completion", "struct_prompt", "struct_completion"):
            setattr(r, kind, getattr(r, kind) + getattr(r, f"hit_{kind}"))
            setattr(r, f"hit_{kind}", 0.0)
        r.cached = 0.0
        return r


@dataclass
class Measured:
    """One measured run file: its rates, its spec (from the file's metadata) and its calls."""

    path: str  # relative to the measured folder, e.g. runs/hotpotqa/tersetalk/default.parquet
    kind: str  # runs | calibration
    task: str
    system: str
    name: str  # variant, or grid point / reference variant for calibration runs
    rates: Rates
    spec: dict | None
    calls: list[dict] = field(repr=False, default_factory=list)
    #: (example_id, prompt tokens of its calls) per row, for the sample-size correction
    prompts: list[tuple[str, float]] = field(repr=False, default_factory=list)

    @property
    def settings(self) -> dict | None:
        return None if self.spec is None else self.spec.get("variant_settings")


def _read_run(path: Path) -> tuple[list[list[dict]], dict | None, list[str] | None]:
    """The ``calls`` lists of a run file's rows, the spec in its metadata and the rows'
    example ids (None without that column)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        table = pf.read(columns=["calls", *(["example_id"] if "example_id" in names else [])])
    except Exception as exc:  # a truncated file, or not a run file
        raise PlanError(f"{path}: not a readable run file with a 'calls' column ({exc})") from None
    meta = (pf.schema_arrow.metadata or {}).get(b"tersetalk")
    spec = json.loads(meta).get("spec") if meta else None
    rows = [json.loads(s) if s else [] for s in table.column("calls").to_pylist()]
    ids = table.column("example_id").to_pylist() if "example_id" in names else None
    return rows, spec, ids


def _rates(rows: list[list[dict]]) -> Rates:
    r = Rates(examples=len(rows))
    for calls in rows:
        for c in calls:
            r.calls += 1
            p, n = c.get("prompt_tokens"), c.get("completion_tokens")
            known = isinstance(p, int | float) and isinstance(n, int | float) and p >= 0 and n >= 0
            if not known:
                r.unknown_usage += 1
                p = n = 0
            r.prompt += p
            r.completion += n
            kind = "struct" if c.get("response_format") else "stream"
            if c.get("cache_hit"):
                r.cached += 1
                kind = f"hit_{kind}"
            else:
                r.seconds += c.get("total_s") or 0.0
            setattr(r, f"{kind}_prompt", getattr(r, f"{kind}_prompt") + p)
            setattr(r, f"{kind}_completion", getattr(r, f"{kind}_completion") + n)
    return r


def measure(folder: str | Path) -> list[Measured]:
    """Every run file of a model's results folder (``results/<key>``): ``runs/<task>/
    <system>/<variant>.parquet`` and ``calibration/runs/<task>/<system>/<point>.parquet``
    (shards are left out: their merged run holds the same rows)."""
    root = Path(folder)
    found = []
    for kind, base in (("runs", root / "runs"), ("calibration", root / "calibration" / "runs")):
        if not base.is_dir():
            continue
        for path in sorted(base.glob("*/*/*.parquet")):
            task, system = path.parent.parent.name, path.parent.name
            if task == "shards":
                continue
            rows, spec, ids = _read_run(path)
            prompts = [
                (str(i), float(sum(max(c.get("prompt_tokens") or 0, 0) for c in calls)))
                for i, calls in zip(ids or [], rows, strict=False)
            ]
            found.append(
                Measured(
                    str(path.relative_to(root)), kind, task, system, path.stem,
                    _rates(rows), spec, [c for calls in rows for c in calls], prompts,
                )
            )  # fmt: skip
    if not found:
        raise PlanError(
            f"no run records under {root}/runs or {root}/calibration/runs: the plan takes its "
            "calls and tokens per example from an earlier run. Run the default workflow "
            "first (`snakemake --cores all`, or `snakemake --cores all --config n_eval=2 "
            "calibration_n=2` for a quick one), or name a model's results folder with "
            "--measured"
        )
    return found


@dataclass(frozen=True)
class Throughput:
    """Prompt and generation tokens per second of one model job, and how much longer a
    schema-constrained call takes than its tokens at those rates (``structured_factor``)."""

    prompt_tps: float
    gen_tps: float
    structured_factor: float = 1.0
    calls: int = 0  # the streamed calls the rates were measured on
    threads: int | None = None

    def seconds(self, r: Rates) -> float:
        stream = r.stream_prompt / self.prompt_tps + r.stream_completion / self.gen_tps
        struct = r.struct_prompt / self.prompt_tps + r.struct_completion / self.gen_tps
        return stream + self.structured_factor * struct


def measured_throughput(measured: Iterable[Measured]) -> Throughput:
    """Throughput from the streamed calls' timings: prompt tokens over time to first token,
    completion tokens over the rest of the call; then the factor that makes the
    schema-constrained calls' measured seconds equal their tokens' time at those rates."""
    measured = list(measured)
    calls = [c for m in measured for c in m.calls if not c.get("cache_hit")]

    def known(c: dict) -> bool:
        return (c.get("prompt_tokens") or -1) >= 0 and (c.get("completion_tokens") or -1) >= 0

    streamed = [
        c for c in calls
        if known(c) and c.get("ttft_s") is not None and (c.get("total_s") or 0) > c["ttft_s"] > 0
    ]  # fmt: skip
    if not streamed:
        raise PlanError(
            "the measured run records hold no streamed model call with a time to first "
            "token, so prompt and generation throughput cannot be told apart; give them "
            "with --prompt-tps and --gen-tps"
        )
    p = sum(c["prompt_tokens"] for c in streamed)
    ttft = sum(c["ttft_s"] for c in streamed)
    n = sum(c["completion_tokens"] for c in streamed)
    rest = sum(c["total_s"] - c["ttft_s"] for c in streamed)
    tp = Throughput(p / ttft, n / rest, 1.0, len(streamed))
    struct = [c for c in calls if known(c) and c.get("response_format") and c.get("total_s")]
    tokens_s = sum(
        c["prompt_tokens"] / tp.prompt_tps + c["completion_tokens"] / tp.gen_tps for c in struct
    )
    factor = sum(c["total_s"] for c in struct) / tokens_s if tokens_s > 0 else 1.0
    threads = {((m.spec or {}).get("models") or {}).get("threads") for m in measured}
    return Throughput(tp.prompt_tps, tp.gen_tps, factor, len(streamed), _one(threads))


def _one(values: set):
    values.discard(None)
    return next(iter(values)) if len(values) == 1 else None


# ---- the planned runs ----------------------------------------------------------------------


@dataclass
class PlannedRun:
    part: str  # evaluation | calibration | comprehension
    task: str
    system: str
    variant: str  # the variant, or the grid point (calibration), or "questions"
    examples: int
    jobs: int
    layer: int  # 0: needs only samples; 1: needs its task's calibration
    spec: dict | None = None
    rates: Rates | None = None
    rates_from: str = ""
    rates_basis: str = ""
    differs: str = ""
    #: the job asks one question at a time (the comprehension study), whatever
    #: models.max_concurrency says
    sequential: bool = False
    #: the runs with the same non-empty ``sweep`` share one job and run one after the
    #: other in it (a batch's calibration grids on a task: rule calibration_sweep; its
    #: headline or ablation-only variants on a task: rule run_batch)
    sweep: str = ""


#: the rules whose jobs call the model, and the part of the plan each belongs to: a job
#: holds one run (or one shard of it), or a batch or sweep of runs one after the other
MODEL_RULES = {
    "run_system": "evaluation",
    "run_batch": "evaluation",
    "calibration_run": "calibration",
    "calibration_sweep": "calibration",
}
#: the batch rules: their runs share one job (``PlannedRun.sweep``)
_BATCH_RULES = ("run_batch", "calibration_sweep")
_RULE_LINE = re.compile(r"^(?:local)?rule (\w+):$")


@dataclass
class DryRunJob:
    """One job of Snakemake's dry run: its rule, wildcards, and the run specs its
    ``tersetalk run`` is given (``--spec-json``, in order; none for other commands)."""

    rule: str
    wildcards: dict[str, str] = field(default_factory=dict)
    specs: list[dict] = field(default_factory=list)


def parse_dry_run(text: str) -> list[DryRunJob]:
    """The jobs of ``snakemake -n -p`` output: each ``rule <name>:`` block's wildcards
    and, from its ``Shell command:`` line, every ``--spec-json`` value."""
    jobs: list[DryRunJob] = []
    for line in text.splitlines():
        rule = _RULE_LINE.match(line.strip())
        if rule:
            jobs.append(DryRunJob(rule[1]))
        elif not jobs:
            continue
        elif line.strip().startswith("wildcards: "):
            pairs = line.strip().removeprefix("wildcards: ").split(", ")
            jobs[-1].wildcards = dict(p.split("=", 1) for p in pairs if "=" in p)
        elif line.startswith("Shell command: "):
            words = shlex.split(line.removeprefix("Shell command: "))
            jobs[-1].specs = [
                json.loads(words[i + 1]) for i, w in enumerate(words[:-1]) if w == "--spec-json"
            ]
    return jobs


def dry_run(configfiles: Sequence[str | Path] = ()) -> list[DryRunJob]:
    """Every job of the workflow's default target for ``configfiles`` (layered over
    the Snakefile's config as ``--configfile`` is), as Snakemake's own dry run lists it
    (``snakemake -n -p --forceall``, run in the working directory): the plan counts what
    the workflow would run, not a second model of its DAG."""
    if not Path("Snakefile").is_file():
        raise PlanError(
            f"no Snakefile under {Path.cwd()}: run tersetalk plan from the workflow's folder "
            "(the plan reads the jobs from Snakemake's dry run)"
        )
    cmd = [sys.executable, "-m", "snakemake", "-n", "-p", "--forceall", "--nocolor",
           "--cores", "1"]  # fmt: skip
    if configfiles:
        cmd += ["--configfile", *map(str, configfiles)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[-1500:]
        raise PlanError(f"snakemake's dry run of this config failed ({' '.join(cmd[1:])}):\n{said}")
    return parse_dry_run(done.stdout)


def plan_runs(config: dict, jobs: Iterable[DryRunJob]) -> list[PlannedRun]:
    """The model runs of the dry run's ``jobs`` (:func:`dry_run`) for ``config``:
    evaluation runs, then calibration runs, each by task, system and variant in the
    config's order (grid points and names it does not list after, by name). A run
    sharded over several jobs is one :class:`PlannedRun` with ``jobs`` shards; the runs
    of a batch or sweep job share its ``sweep``. A sensitivity model's jobs (a ``model``
    wildcard) are not counted."""
    runs: dict[tuple[str, str, str, str], PlannedRun] = {}
    for job in jobs:
        part = MODEL_RULES.get(job.rule)
        if part is None or "model" in job.wildcards:
            continue
        sweep = ""
        if job.rule in _BATCH_RULES:
            w = job.wildcards
            sweep = "/".join(w[k] for k in ("task", "batch", "phase") if k in w)
        for spec in job.specs:
            key = (part, spec["task"], spec["system"], spec["variant"])
            if key in runs:  # another shard of the same run
                runs[key].jobs += 1
                continue
            examples = config["n_eval"] if part == "evaluation" else config["calibration_n"]
            layer = 1 if spec["variant_settings"].get("calibrated") else 0
            runs[key] = PlannedRun(part, spec["task"], spec["system"], spec["variant"],
                                   examples, 1, layer, spec, sweep=sweep)  # fmt: skip
    tasks = list(config["tasks"])
    systems = list(config.get("systems") or {})

    def place(name: str, names: list[str]) -> tuple[int, str]:
        return (names.index(name), "") if name in names else (len(names), name)

    def order(r: PlannedRun) -> tuple:
        # as the config lists them: tasks, systems, a system's variants (grid points after)
        variants = list(((config.get("systems") or {}).get(r.system) or {}).get("variants") or {})
        return (PARTS.index(r.part), place(r.task, tasks), place(r.system, systems),
                place(r.variant, variants))  # fmt: skip

    return sorted(runs.values(), key=order)


#: spec sections whose difference changes a run's calls or tokens (the model's own are
#: the point of the projection, so they are not listed)
_COMPARED = ("task_options", "generation", "pipeline")


def _differs(planned: dict | None, measured: dict | None) -> str:
    if planned is None or measured is None:
        return "" if planned is None else "measured spec not recorded"
    out = []
    for section in _COMPARED:
        a, b = measured.get(section) or {}, planned.get(section) or {}
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{section}.{key} {a.get(key)!r}->{b.get(key)!r}")
    return "; ".join(out)


def _settings(run: PlannedRun) -> dict:
    return (run.spec or {}).get("variant_settings") or {}


def _either(by_key: dict, task: str, system: str, name: str) -> Measured | None:
    """The measured run on the evaluation sample, else on the calibration shard."""
    key = (task, system, name)
    return by_key.get(("runs", *key)) or by_key.get(("calibration", *key))


def stated_rates(examples: int) -> Rates:
    """Per-example rates stated, not measured (:data:`STATED_CALLS_PER_EXAMPLE` and the
    tokens per call), for ``examples`` examples, every call reaching the model."""
    calls = STATED_CALLS_PER_EXAMPLE * examples
    prompt, completion = calls * STATED_PROMPT_PER_CALL, calls * STATED_COMPLETION_PER_CALL
    return Rates(examples, calls=calls, prompt=prompt, completion=completion,
                 stream_prompt=prompt, stream_completion=completion)  # fmt: skip


STATED_BASIS = (
    f"stated default, no measured run: {STATED_CALLS_PER_EXAMPLE:g} calls per example, "
    f"{STATED_PROMPT_PER_CALL:g} prompt and {STATED_COMPLETION_PER_CALL:g} completion tokens "
    "per call"
)


def assign_stated_rates(runs: list[PlannedRun]) -> None:
    """Every run's rates stated (:func:`stated_rates`): the plan of a fresh clone."""
    for run in runs:
        if run.part == "comprehension":
            continue
        run.rates = stated_rates(run.examples)
        run.rates_from, run.rates_basis, run.differs = "", STATED_BASIS, ""


def assign_rates(
    runs: list[PlannedRun], measured: list[Measured], config: dict, *, pay_cached: bool = False
) -> None:
    """Each planned run's rates: the measured run of the same name and settings (a calibrated
    variant: of the same name, its settings being chosen at run time); else a measured run
    of the same task, system and settings; else the system's ``default`` variant on the
    task, else its first measured variant there, else ``evaluation.reference`` on the task.
    A run none of these cover is an error naming it. ``pay_cached``: every call reaches the
    model, even those the measured run answered from the call cache (a cold cache)."""
    by_key = {(m.kind, m.task, m.system, m.name): m for m in measured}
    reference = config["evaluation"]["reference"]
    for run in runs:
        if run.part == "comprehension":
            continue
        kind = "runs" if run.part == "evaluation" else "calibration"
        own = by_key.get((kind, run.task, run.system, run.variant))
        want = _settings(run)
        same = [
            m for m in measured
            if m.task == run.task and m.system == run.system and m.settings == want
        ]  # fmt: skip
        if own is not None and (own.settings in (None, want) or want.get("calibrated")):
            found, basis = own, "measured"
        elif same:
            found, basis = same[0], "same settings"
        else:
            sys_runs = [m for m in measured if (m.task, m.system) == (run.task, run.system)]
            sys_runs.sort(key=lambda m: m.kind != "runs")
            default = _either(by_key, run.task, run.system, "default")
            ref = _either(by_key, run.task, *reference.split("/"))
            if default is not None:
                found, basis = default, "fallback: the system's default variant"
            elif sys_runs:
                found, basis = sys_runs[0], "fallback: a measured variant of the system"
            elif ref is not None:
                found, basis = ref, "fallback: evaluation.reference"
            else:
                raise PlanError(
                    f"no measured run for {run.part} run {run.task}/{run.system}/{run.variant}, "
                    f"nor for {run.system}'s default variant or {reference} on {run.task}: "
                    "run them at a small n (e.g. `snakemake --cores all --config n_eval=2 "
                    "calibration_n=2`) or point --measured at results that hold them"
                )
            if own is not None:
                basis += " (the run of this name was measured with other settings)"
        run.rates = found.rates.scaled(run.examples)
        if basis != "measured" or pay_cached:
            run.rates = run.rates.paid()
        run.rates_from = found.path
        run.rates_basis = basis
        run.differs = _differs(run.spec, found.spec)


# ---- samples drawn otherwise ---------------------------------------------------------------


def _record_tokens(sample) -> dict[str, int]:
    """example_id -> o200k_base tokens of its record (the question with its context,
    facts or payload): the size of what the example puts into prompts."""
    enc = _o200k()
    return {
        str(i): len(enc.encode(r, disallowed_special=()))
        for i, r in zip(sample["example_id"], sample["record"], strict=True)
    }


def _o200k():
    from tersetalk.core.tokens import ensure_offline_tiktoken

    ensure_offline_tiktoken()
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y on x, None when x does not vary."""
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def _points(m: Measured, sizes: dict[str, dict[str, int]]) -> list[tuple[float, float]]:
    """(record tokens, prompt tokens) of each of a measured run's examples in its sample."""
    own = sizes[m.kind]
    return [(own[i], p) for i, p in m.prompts if i in own]


def correct_for_samples(
    runs: list[PlannedRun], measured: list[Measured], config: dict, folder: str | Path
) -> None:
    """Where a task's sample is drawn with other options than the measured one (toolqa's
    ``max_payload_tokens``: bigger payloads), move each run's prompt tokens per example by
    ``slope x (planned - measured mean record tokens)``: the slope of the measured run's
    prompt tokens per example on its examples' record tokens (at least 3 examples that
    differ in size; else the slope within all measured runs of the task), the planned
    mean from the sample the workflow would draw (same loader, seed and options). The
    change is written into ``differs``. Tasks sampled alike are left as measured."""
    import pandas as pd
    import pyarrow.parquet as pq

    from tersetalk.pipeline.schedule import calibration_tasks
    from tersetalk.tasks.loading import dataset_of, load_records, sample

    samples = Path(folder).parent / "samples"
    by_path = {m.path: m for m in measured}
    for task in config["tasks"]:
        section = config.get(task) or {}
        planned_opts = {k: section[k] for k in dataset_of(task).options if k in section}
        path = samples / f"{task}.parquet"
        if not path.is_file():
            continue
        meta = json.loads(
            (pq.ParquetFile(path).schema_arrow.metadata or {}).get(b"tersetalk", b"{}")
        )
        measured_opts = meta.get("task_options") or {}
        if measured_opts == planned_opts:
            continue
        sizes = {"runs": _record_tokens(pd.read_parquet(path))}
        cal_path = samples / f"{task}.calibration.parquet"
        sizes["calibration"] = (
            _record_tokens(pd.read_parquet(cal_path)) if cal_path.is_file() else {}
        )
        data = config.get("data") or {}
        records = load_records(
            task, source=data.get("source", "local"), data_dir=data.get("dir", "data"),
            options=planned_opts,
        )  # fmt: skip
        cal_n = config["calibration_n"] if task in calibration_tasks(config) else 0
        ev, cal = sample(
            task, records, n=config["n_eval"], calibration_n=cal_n, seed=config["seed"]
        )
        planned = {}
        for part, df in (("evaluation", ev), ("calibration", cal)):
            tokens = list(_record_tokens(df).values())
            planned[part] = sum(tokens) / len(tokens) if tokens else None

        mine = [m for m in measured if m.task == task]
        within = [  # each run's points about its own means: one slope for the task
            (x - sum(a for a, _ in pts) / len(pts), y - sum(b for _, b in pts) / len(pts))
            for pts in (_points(m, sizes) for m in mine) if pts
            for x, y in pts
        ]  # fmt: skip
        pooled = _slope(within)
        for run in runs:
            if run.task != task or run.part not in planned or planned[run.part] is None:
                continue
            m = by_path.get(run.rates_from)
            pts = _points(m, sizes) if m is not None else []
            if not pts:
                note = f"sample {measured_opts}->{planned_opts}: not corrected (examples unmatched)"
                run.differs = "; ".join(filter(None, [run.differs, note]))
                continue
            slope, how = _slope(pts) if len(pts) >= 3 else None, "this run's"
            if slope is None:
                slope, how = pooled, "the task's runs'"
            if slope is None:
                note = f"sample {measured_opts}->{planned_opts}: not corrected (sizes do not vary)"
                run.differs = "; ".join(filter(None, [run.differs, note]))
                continue
            mean = sum(x for x, _ in pts) / len(pts)
            extra = slope * (planned[run.part] - mean)
            run.rates = run.rates.with_prompt(extra * run.examples)
            note = (
                f"sample {measured_opts}->{planned_opts}: record tokens per example "
                f"{mean:.0f}->{planned[run.part]:.0f} (o200k), prompt tokens per example "
                f"{extra:+.0f} ({how} slope {slope:.2f})"
            )
            run.differs = "; ".join(filter(None, [run.differs, note]))


# ---- the format study's comprehension ------------------------------------------------------


class _CountingClient:
    """A stand-in model client for the comprehension study's selection: it counts prompt
    tokens (o200k_base) and answers nothing, so the study's own code lists its calls."""

    def __init__(self):
        self._enc = _o200k()

    def count_tokens(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def chat(self, messages, gen):
        n = sum(self.count_tokens(m["content"]) for m in messages)
        return types.SimpleNamespace(text="", prompt_tokens=n)


def comprehension_options(config: dict) -> dict:
    """The comprehension job's options, as its rule passes them (n_payloads null: n_eval)."""
    opts = dict(config["formats"]["comprehension"])
    if opts.get("n_payloads") is None:
        opts["n_payloads"] = config["n_eval"]
    return opts


def plan_comprehension(config: dict, measured_folder: str | Path) -> PlannedRun:
    """The comprehension job: one call per (question, encoding), from the study's own
    selection. Prompt tokens: the measured study's where the same (payload, question,
    encoding) was asked (``formats/comprehension.parquet``), the others counted with
    o200k_base and scaled by the measured / o200k ratio on the asked ones (unscaled when
    none was). Completion tokens: the study's ``max_tokens`` (32), an upper bound, since
    its rows record no completion length."""
    import inspect

    import pandas as pd

    from tersetalk.formats.experiments import comprehension

    opts = comprehension_options(config)
    data_dir = config["formats"]["data_dir"]
    with contextlib.redirect_stderr(io.StringIO()):  # the study's progress bar
        rows = comprehension(data_dir, _CountingClient(), seed=config["seed"], **opts)
    max_tokens = (
        opts.get("max_tokens") or inspect.signature(comprehension).parameters["max_tokens"].default
    )
    source = Path(measured_folder) / "formats" / "comprehension.parquet"
    basis = "counted: o200k_base prompts (model tokenizer not loaded)"
    prompt = float(rows["prompt_tokens"].sum())
    if source.is_file():
        done = pd.read_parquet(source, columns=["payload_id", "qid", "encoder", "prompt_tokens"])
        done = done[done["prompt_tokens"] >= 0]
        keys = ["payload_id", "qid", "encoder"]
        both = rows.merge(done, on=keys, suffixes=("_o200k", ""))
        if len(both) and both["prompt_tokens_o200k"].sum() > 0:
            ratio = both["prompt_tokens"].sum() / both["prompt_tokens_o200k"].sum()
            new = rows.merge(done[keys], on=keys, how="left", indicator=True)
            unasked = new.loc[new["_merge"] == "left_only", "prompt_tokens"].sum()
            prompt = float(both["prompt_tokens"].sum() + ratio * unasked)
            basis = (
                f"measured prompts for {len(both)} of {len(rows)} calls, the rest o200k_base "
                f"x {ratio:.2f}"
            )
    calls = float(len(rows))
    completion = calls * max_tokens
    rates = Rates(
        examples=int(rows["qid"].nunique()) if len(rows) else 0,
        calls=calls, prompt=prompt, completion=completion,
        stream_prompt=prompt, stream_completion=completion,
    )  # fmt: skip
    return PlannedRun(
        "comprehension", "toolresponses", "formats", "questions", rates.examples, 1, 0,
        None, rates, str(source.relative_to(Path(measured_folder))) if source.is_file() else "",
        f"{basis}; completion: max_tokens {max_tokens} per call (an upper bound)",
        sequential=True,
    )  # fmt: skip


# ---- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where the plan runs: one model stream's throughput, how many streams run at once
    (``slots``), and how many examples one job keeps in flight (``per_job``)."""

    name: str
    throughput: Throughput
    slots: int
    per_job: int
    assumption: str


def model_params(name: str | None, given: float | None = None) -> float | None:
    """A model's parameter count: ``given``, else :data:`PARAMS`, else a size in its name
    (``llama3.1:8b`` -> 8e9, ``...-135m`` -> 1.35e8); None when none says."""
    if given:
        return given
    if not name:
        return None
    key = str(name).lower()
    if key in PARAMS:
        return PARAMS[key]
    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)([bm])(?![a-z])", key)
    if m:
        return float(m.group(1)) * (1e9 if m.group(2) == "b" else 1e6)
    return None


def _hours(seconds: float) -> float:
    return seconds / 3600


@dataclass
class Projection:
    target: Target
    part_hours: dict[str, float]
    parallel: dict[str, int]
    total_hours: float
    critical_hours: float


def project(runs: list[PlannedRun], target: Target) -> Projection:
    """Hours of model time for each part and in total on ``target`` (a lower bound)."""
    per_run = [(r, target.throughput.seconds(r.rates)) for r in runs]
    part_hours, parallel = {}, {}
    for part in [*PARTS, "total"]:
        mine = [(r, s) for r, s in per_run if part in (r.part, "total")]
        if not mine:
            continue
        layers: dict[int, int] = {}
        for unit in job_units([r for r, _ in mine]):
            r = unit[0]  # a sweep's runs share their job and examples in flight
            jobs = 1 if r.sweep else r.jobs
            layer = max(x.layer for x in unit)  # a job waits for what any of its runs needs
            layers[layer] = layers.get(layer, 0) + jobs * min(target.per_job, _per_job_examples(r))
        streams = max(1, min(target.slots, max(layers.values())))
        parallel[part] = streams
        part_hours[part] = _hours(sum(s for _, s in mine) / streams)
    # the longest chain: a task's slowest calibration job (a sweep: its runs in turn),
    # then its slowest calibrated run
    job_s = {
        id(r): s / r.jobs / max(1, min(target.per_job, target.slots, _per_job_examples(r)))
        for r, s in per_run
    }
    unit_s = [(unit[0], sum(job_s[id(r)] for r in unit)) for unit in job_units(runs)]
    chain = max((s for _, s in unit_s), default=0.0)
    for task in {r.task for r in runs}:
        cal = max((s for r, s in unit_s if r.task == task and r.part == "calibration"), default=0.0)
        late = max((job_s[id(r)] for r in runs if r.task == task and r.layer == 1), default=0.0)
        chain = max(chain, cal + late)
    critical = _hours(chain)
    total = max(part_hours.get("total", 0.0), critical)
    return Projection(target, part_hours, parallel, total, critical)


def job_units(runs: Iterable[PlannedRun]) -> list[list[PlannedRun]]:
    """The runs grouped by the job that runs them: a sweep's runs together, every other
    run on its own (its ``jobs`` shards are parallel jobs of one run), in first-seen order."""
    units: dict[object, list[PlannedRun]] = {}
    for r in runs:
        units.setdefault(r.sweep or id(r), []).append(r)
    return list(units.values())


def count_jobs(runs: Iterable[PlannedRun]) -> int:
    """The Snakemake jobs that run ``runs``: one per sweep, ``jobs`` (shards) per other run."""
    return sum(1 if unit[0].sweep else unit[0].jobs for unit in job_units(runs))


def _per_job_examples(run: PlannedRun) -> int:
    """Examples one job of ``run`` can keep in flight at most."""
    return 1 if run.sequential else max(1, math.ceil(run.examples / run.jobs))


def _cpu_layout(args: argparse.Namespace, config: dict) -> tuple[int, int, int]:
    """These cores (``--cores``, else the machine's), the threads of one model job
    (models.threads, else half the cores) and how many model jobs then run at once."""
    cores = args.cores or os.cpu_count() or 1
    threads = config["models"].get("threads") or max(1, cores // 2)
    return cores, threads, max(1, cores // threads)


def _measured_rates(measured: list[Measured], needed: bool) -> Throughput | None:
    """The measured machine's throughput; when it cannot be told from the run records and
    is not ``needed`` (the planned model's own rates are given), None instead of the error."""
    try:
        return measured_throughput(measured)
    except PlanError:
        if needed:
            raise
        return None


def _measured_cpu_target(
    tp: Throughput, model: str, backend: str, cores: int, threads: int, slots: int
) -> Target:
    """The measured machine as it ran: these cores, with the measured model's rates."""
    return Target(
        f"cpu:{model}",
        tp,
        slots,
        1,
        f"{cores} cores, {slots} model jobs at once ({threads} thread(s) each; "
        f"models.threads or half the cores), one call at a time per job; "
        f"{model} ({backend}) as measured: {tp.prompt_tps:.0f} prompt tok/s, "
        f"{tp.gen_tps:.0f} generated tok/s per job (time to first token and the rest "
        f"of {tp.calls} streamed calls), schema-constrained calls "
        f"x{tp.structured_factor:.2f} (their measured seconds over their tokens' time)",
    )


def _planned_cpu_rates(
    args: argparse.Namespace, tp: Throughput | None, measured_model: str, planned_model: str
) -> tuple[Throughput, str]:
    """The configured model's throughput on these cores and how it was found: the given
    tok/s, else the measured rates scaled by the ratio of the two models' parameters."""
    if args.prompt_tps is not None and args.gen_tps is not None:
        factor = tp.structured_factor if tp else 1.0
        how = f"given: {args.prompt_tps:g} prompt tok/s, {args.gen_tps:g} generated tok/s per job"
        return Throughput(args.prompt_tps, args.gen_tps, factor), how
    mine = model_params(measured_model, args.measured_params)
    theirs = model_params(planned_model, args.target_params)
    if not mine or not theirs:
        raise PlanError(
            f"the parameter count of {measured_model if not mine else planned_model!r} "
            "is not known: give --measured-params and --target-params (e.g. 135e6 "
            "and 7.24e9), or the planned model's --prompt-tps and --gen-tps"
        )
    ratio = mine / theirs
    scaled = Throughput(tp.prompt_tps * ratio, tp.gen_tps * ratio, tp.structured_factor)
    how = (
        f"throughput inversely proportional to parameters ({mine / 1e9:.3g}B measured, "
        f"{theirs / 1e9:.3g}B planned): {scaled.prompt_tps:.2f} prompt tok/s, "
        f"{scaled.gen_tps:.2f} generated tok/s per job"
    )
    return scaled, how


def _gpu_targets(args: argparse.Namespace, config: dict) -> list[Target]:
    """One GPU model server and a SLURM cluster of such nodes, at the given (or assumed)
    GPU rates, each job keeping models.max_concurrency examples in flight."""
    per_job = config["models"].get("max_concurrency") or 1
    streams = args.gpu_streams or per_job
    gpu = Throughput(args.gpu_prompt_tps, args.gpu_gen_tps)
    given = (
        "given"
        if args.gpu_given
        else (
            "assumed, not measured: a 7B model on one data-centre GPU; give yours with "
            "--gpu-prompt-tps, --gpu-gen-tps, --gpu-streams"
        )
    )
    gpu_how = (
        f"{args.gpu_prompt_tps:g} prompt tok/s and {args.gpu_gen_tps:g} generated tok/s per "
        f"stream at {streams} streams ({given}); "
        f"each job keeps models.max_concurrency={per_job} examples in flight; "
        "schema-constrained calls at the same rates"
    )
    return [
        Target("gpu-server", gpu, streams, per_job, f"one model server, {gpu_how}"),
        Target(
            f"slurm:{args.nodes}-nodes",
            gpu,
            streams * args.nodes,
            per_job,
            f"{args.nodes} GPU nodes, each a model server as gpu-server, behind one base_url "
            f"(a least-busy proxy); jobs spread over the nodes; {gpu_how}",
        ),
    ]


def targets(args: argparse.Namespace, config: dict, measured: list[Measured]) -> list[Target]:
    """The named targets: the measured machine (these cores, with the measured model), the
    configured model on these cores (scaled by parameters, or the given tok/s), one GPU
    server, and a SLURM cluster of GPU nodes."""
    cores, threads, cpu_slots = _cpu_layout(args, config)
    specs = [m.spec for m in measured if m.spec]
    measured_model = _one({(s.get("models") or {}).get("model") for s in specs}) or "measured"
    backend = _one({(s.get("models") or {}).get("backend") for s in specs}) or "backend unrecorded"
    planned_model = config["models"].get("model")
    given_tps = args.prompt_tps is not None and args.gen_tps is not None
    out = []
    if not measured and not given_tps:  # a fresh clone: no CPU rates to project with
        tp = None
        planned_model = measured_model
    else:
        tp = _measured_rates(measured, needed=not given_tps or planned_model == measured_model)
    if tp is not None:
        out.append(_measured_cpu_target(tp, measured_model, backend, cores, threads, cpu_slots))
    if planned_model != measured_model:
        scaled, how = _planned_cpu_rates(args, tp, measured_model, planned_model)
        out.append(
            Target(
                f"cpu:{planned_model}",
                scaled,
                cpu_slots,
                1,
                f"{cores} cores, {cpu_slots} model jobs at once ({threads} thread(s) each), "
                f"{planned_model} on CPU; {how}; schema-constrained calls "
                f"x{scaled.structured_factor:.2f} as measured",
            )
        )
    return out + _gpu_targets(args, config)


# ---- output --------------------------------------------------------------------------------


def runs_table(runs: list[PlannedRun]):
    """One row per planned run: its counts and where its rates came from."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "part": r.part, "task": r.task, "system": r.system, "variant": r.variant,
                "examples": r.examples, "jobs": r.jobs, "sweep": r.sweep, "layer": r.layer,
                "calls": r.rates.calls, "cached_calls": r.rates.cached,
                "prompt_tokens": r.rates.prompt, "completion_tokens": r.rates.completion,
                "uncached_prompt_tokens": r.rates.sent()[0],
                "uncached_completion_tokens": r.rates.sent()[1],
                "rates_from": r.rates_from, "rates_basis": r.rates_basis, "differs": r.differs,
            }
            for r in runs
        ]
    )  # fmt: skip


def summary_table(runs: list[PlannedRun], projections: list[Projection]):
    """One row per (part, target): the part's runs, jobs, calls and tokens, and its hours."""
    import pandas as pd

    rows = []
    for part in [*PARTS, "total"]:
        mine = [r for r in runs if part in (r.part, "total")]
        if not mine:
            continue
        counts = {
            "runs": len(mine),
            "jobs": count_jobs(mine),
            "examples": sum(r.examples for r in mine),
            "calls": round(sum(r.rates.calls for r in mine)),
            "cached_calls": round(sum(r.rates.cached for r in mine)),
            "prompt_tokens": round(sum(r.rates.prompt for r in mine)),
            "completion_tokens": round(sum(r.rates.completion for r in mine)),
            "uncached_prompt_tokens": round(sum(r.rates.sent()[0] for r in mine)),
            "uncached_completion_tokens": round(sum(r.rates.sent()[1] for r in mine)),
            "fallback_runs": sum(r.rates_basis.startswith("fallback") for r in mine),
        }
        for p in projections:
            rows.append(
                {
                    "part": part, **counts, "target": p.target.name,
                    "parallel_streams": p.parallel[part],
                    "hours": p.total_hours if part == "total" else p.part_hours[part],
                    "assumption": p.target.assumption,
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def _fmt_hours(h: float) -> str:
    if h >= 48:
        return f"{h / 24:,.1f} d"
    return f"{h:,.1f} h" if h >= 1 else f"{h * 60:,.1f} min"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Plain-text columns: the first left-aligned, the others right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    out = []
    for row in [header, *rows]:
        cells = [
            str(x).ljust(w) if i == 0 else str(x).rjust(w)
            for i, (x, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return out


def render(runs: list[PlannedRun], summary, projections: list[Projection], header: str) -> str:
    """The plan as text: counts per part, hours per target and part, the assumptions, and
    every run whose rates were not measured as planned."""
    counts = summary.drop_duplicates("part")
    cols = ["runs", "jobs", "calls", "cached_calls", "prompt_tokens", "completion_tokens",
            "uncached_prompt_tokens", "uncached_completion_tokens"]  # fmt: skip
    lines = [header, ""]
    lines += _table(
        ["part", *(c.replace("uncached_", "uncached ") for c in cols)],
        [[row.part, *(f"{int(getattr(row, c)):,}" for c in cols)] for row in counts.itertuples()],
    )
    lines.append("")
    parts = list(counts["part"])
    hours = summary.pivot(index="target", columns="part", values="hours")
    lines += _table(
        ["target", *(f"{p} h" for p in parts), "streams"],
        [
            [
                p.target.name,
                *(_fmt_hours(hours.loc[p.target.name, part]) for part in parts),
                str(p.parallel["total"]),
            ]
            for p in projections
        ],
    )
    lines.append("")
    lines.append(
        "tokens: of every call; uncached: of the calls that reach the model (the measured "
        "runs' share of call-cache hits kept), which the hours count"
    )
    lines.append(
        "hours: model time only, a lower bound (the workflow's own overhead comes on top); "
        "parts overlap, so the total is not their sum; streams: calls at once (the DAG's "
        "widest layer of model jobs bounds them)"
    )
    for p in projections:
        lines.append(
            f"- {p.target.name}: {p.target.assumption}; longest chain of jobs "
            f"{_fmt_hours(p.critical_hours)}"
        )
    compared = [r for r in runs if r.spec is not None]
    items = [set(filter(None, r.differs.split("; "))) for r in compared]
    common = set.intersection(*items) if items else set()
    if common:
        lines.append("")
        lines.append(
            f"every measured run was run otherwise than planned in: {'; '.join(sorted(common))}"
        )
    notable = []
    for r in runs:
        own = [d for d in filter(None, r.differs.split("; ")) if d not in common]
        if r.rates_basis != "measured" or own:
            notable.append((r, own))
    if notable:
        lines.append("")
        lines.append(
            f"{len(notable)} of {len(runs)} runs not measured as planned (rates_from, "
            "rates_basis, differs; a borrowed rate pays for every call):"
        )
        for r, own in notable:
            extra = f"; differs: {'; '.join(own)}" if own else ""
            lines.append(
                f"  {r.part} {r.task}/{r.system}/{r.variant}: {r.rates_from} "
                f"({r.rates_basis}){extra}"
            )
    return "\n".join(lines)


# ---- command line --------------------------------------------------------------------------


def make_plan(args: argparse.Namespace):
    """(runs, projections, summary, header) for the parsed arguments."""
    from tersetalk.pipeline.config import load_workflow_config, results_key

    config = load_workflow_config(args.config)
    if args.measured:
        folder = Path(args.measured)
    else:
        default = load_workflow_config([])
        folder = Path("results") / results_key(default)
    try:
        measured = measure(folder)
    except PlanError as exc:
        if args.measured:  # a folder named on purpose must hold runs
            raise
        log_note = f"{exc}".split(":")[0]
        print(f"tersetalk plan: {log_note}; using stated rates per example", file=sys.stderr)
        measured = []
    jobs = dry_run(args.config)
    runs = plan_runs(config, jobs)
    if measured:
        assign_rates(runs, measured, config, pay_cached=args.pay_cached)
        correct_for_samples(runs, measured, config, folder)
    else:
        assign_stated_rates(runs)
    # the format study's questions, when the default target holds the study
    if not args.no_comprehension and any(j.rule == "formats_comprehension" for j in jobs):
        runs.append(plan_comprehension(config, folder))
    projections = [project(runs, t) for t in targets(args, config, measured)]
    summary = summary_table(runs, projections)
    sens = (config.get("sensitivity") or {}).get("models") or []
    header = (
        f"plan for {' + '.join(map(str, args.config)) or 'the default config'}: model "
        f"{config['models'].get('model')} ({config['models'].get('backend')}), n_eval "
        f"{config['n_eval']}, calibration_n {config['calibration_n']}; rates per example from "
        + (f"{len(measured)} run files under {folder}" if measured else f"none ({STATED_BASIS})")
        + (
            f"; not counted: sensitivity.models {sens} (each runs every system again)"
            if sens
            else ""
        )
        + "; not counted: the topology study (not in `all`) and LLMLingua's own compression "
        "(a local model, not a model call)"
    )
    header += "\n" + driver_line(runs, config, args)
    return runs, projections, summary, header


def driver_rate(table: Path, in_flight: int) -> tuple[float, str] | None:
    """The driver's client CPU ms per model call from the driver benchmark's table
    (``tersetalk`` rows; the 20 ms server's, else the slowest measured; the in-flight
    level nearest ``in_flight``), and where it comes from; None without a table."""
    import pandas as pd

    if not table.is_file():
        return None
    try:
        df = pd.read_csv(table)
        df = df[(df["side"] == "tersetalk") & df["ok"].astype(bool)]
    except (ValueError, KeyError, OSError) as exc:
        raise PlanError(f"{table}: not a driver benchmark table ({exc})") from None
    if df.empty:
        return None
    latency = 20.0 if (df["latency_ms"] == 20.0).any() else float(df["latency_ms"].max())
    df = df[df["latency_ms"] == latency]
    row = df.iloc[(df["in_flight"] - in_flight).abs().argsort().iloc[0]]
    return float(row["cpu_ms_per_call"]), (
        f"measured by the driver benchmark ({table}: {int(row['in_flight'])} in flight, "
        f"{latency:g} ms server, {int(row['examples'])} examples)"
    )


def driver_line(runs: list[PlannedRun], config: dict, args: argparse.Namespace) -> str:
    """The driver's time beside the server's: every model call costs the client some CPU
    (the driver benchmark's measure, else :data:`STATED_DRIVER_CPU_MS`), spread over
    this machine's cores; the server answers ``--server-calls-per-s`` calls a second."""
    calls = sum(r.rates.calls for r in runs if r.rates is not None)
    cores = args.cores or os.cpu_count() or 1
    in_flight = config["models"].get("max_concurrency") or 1
    found = driver_rate(Path(args.driver_table), in_flight) if args.driver_table else None
    cpu_ms, source = found or (STATED_DRIVER_CPU_MS, "stated (no driver benchmark table)")
    server = args.server_calls_per_s or STATED_SERVER_CALLS_PER_S
    server_how = "named" if args.server_calls_per_s else "assumed, not measured"
    driver_h = calls * cpu_ms / 1000 / cores / 3600
    server_h = calls / server / 3600
    return (
        f"driver and server: {calls:,.0f} model calls; driver {cpu_ms:.1f} ms of client CPU "
        f"per call ({source}) on {cores} cores: {_fmt_hours(driver_h)}; server at "
        f"{server:g} calls/s ({server_how}): {_fmt_hours(server_h)}; the run takes at "
        "least the longer of the two"
    )


def _cmd_plan(args: argparse.Namespace) -> None:
    args.gpu_given = any(
        x is not None for x in (args.gpu_prompt_tps, args.gpu_gen_tps, args.gpu_streams)
    )
    args.gpu_prompt_tps = args.gpu_prompt_tps or GPU_PROMPT_TPS
    args.gpu_gen_tps = args.gpu_gen_tps or GPU_GEN_TPS
    if (args.prompt_tps is None) != (args.gen_tps is None):
        raise PlanError("give both --prompt-tps and --gen-tps (the planned model's, per job)")
    runs, projections, summary, header = make_plan(args)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        summary.to_csv(args.out, index=False)
    if args.runs_out:
        Path(args.runs_out).parent.mkdir(parents=True, exist_ok=True)
        runs_table(runs).to_csv(args.runs_out, index=False)
    print(render(runs, summary, projections, header))


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="a config's model calls and tokens counted from its DAG, and the hours they take",
        description="Count the model work of a workflow config's DAG (evaluation runs, "
        "calibration grids and references, the format study's comprehension questions) with "
        "calls and tokens per example from measured run records, and project model hours on "
        "these cores, on one GPU server and on a SLURM cluster, each with its assumption. "
        "Example: tersetalk plan --config config/paper.yaml --out results/plan/paper.csv",
    )
    add_config_option(p, " (default: config/config.yaml alone)")
    p.add_argument(
        "--measured",
        help="a model's results folder whose run records give the rates "
        "(default: results/<key> of the default config's model; when it holds none, "
        "stated rates per example are used and said)",
    )
    p.add_argument("--out", help="the summary CSV: one row per (part, target)")
    p.add_argument("--runs-out", help="the per-run CSV: counts, rates_from, rates_basis, differs")
    p.add_argument("--cores", type=int, help="cores of the CPU targets (default: this machine's)")
    p.add_argument(
        "--prompt-tps",
        type=float,
        help="the planned model's prompt tok/s per job on these cores (default: the measured "
        "model's, scaled by parameter count)",
    )
    p.add_argument("--gen-tps", type=float, help="the same for generated tokens")
    p.add_argument("--measured-params", type=float, help="the measured model's parameters")
    p.add_argument("--target-params", type=float, help="the planned model's parameters")
    p.add_argument(
        "--gpu-prompt-tps",
        type=float,
        help=f"GPU server: prompt tok/s per stream (default {GPU_PROMPT_TPS:g}, assumed)",
    )
    p.add_argument(
        "--gpu-gen-tps",
        type=float,
        help=f"GPU server: generated tok/s per stream (default {GPU_GEN_TPS:g}, assumed)",
    )
    p.add_argument(
        "--gpu-streams",
        type=int,
        help="GPU server: requests served at once (default models.max_concurrency, else 1)",
    )
    p.add_argument(
        "--nodes", type=int, default=SLURM_NODES, help=f"SLURM: GPU nodes (default {SLURM_NODES})"
    )
    p.add_argument(
        "--server-calls-per-s",
        type=float,
        help="the model server's throughput in calls per second, for the server's time "
        f"beside the driver's (default {STATED_SERVER_CALLS_PER_S:g}, assumed)",
    )
    p.add_argument(
        "--driver-table",
        default=str(DRIVER_BENCH_TABLE),
        help="the driver benchmark's table (`snakemake bench_driver`), for the driver's CPU "
        f"per call (default {DRIVER_BENCH_TABLE}; without it {STATED_DRIVER_CPU_MS:g} ms, stated)",
    )
    p.add_argument(
        "--pay-cached",
        action="store_true",
        help="every call reaches the model, also those the measured runs answered from the "
        "call cache (default: the measured runs' share of cache hits is kept)",
    )
    p.add_argument(
        "--no-comprehension",
        action="store_true",
        help="leave out the format study's comprehension questions (their count takes a while)",
    )
    p.set_defaults(func=_cmd_plan)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tersetalk.pipeline.plan ...``: the ``plan`` subcommand on its own."""
    parser = argparse.ArgumentParser(prog="tersetalk")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    args = parser.parse_args(["plan", *(sys.argv[1:] if argv is None else argv)])
    try:
        args.func(args)
    except (InputFileError, FileNotFoundError, ValueError) as exc:
        print(f"tersetalk plan: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
