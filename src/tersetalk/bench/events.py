"""The events pair: whole runs with progress events on and off, measured side by side.

What the dashboard promises is that publishing costs a run nothing measurable.
To make that claim as hard to pass as possible, the runs here are the runner's
cheapest real case: the model calls come from the call cache (a first, untimed
run fills it), so what is timed is the runner, the systems' text handling, the
checkpoint's fsyncs and the Parquet write, the very work the events sit beside.
With a model actually generating, each example takes seconds and the events'
share only shrinks.

The two modes alternate in a freshly shuffled order every repeat (like
:func:`tersetalk.bench.timing.measure`), so drift on a shared machine falls on
both alike; the reported ratio is median(on) / median(off), with the
interquartile range of the per-repeat paired ratios beside it. A second table
part times the hooks themselves: the engine's hook with no run publishing (what
every message pays when events are off) and one published message event.
"""

from __future__ import annotations

import logging
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from .results import finish
from .timing import measure

log = logging.getLogger("tersetalk.bench")

__all__ = ["run_events_bench"]

_MESSAGE = {
    "turn": 0,
    "sender": "M",
    "receiver": "W",
    "kind": "brief",
    "bytes": 60,
    "content": "Goal: answer.\nFacts:\n- Paris is the capital of France.\nQuestion: ?",
    "tokens_cl100k": 17,
    "tokens_o200k": 17,
    "tokens_model": 19,
}


def _timed_run(spec: dict, sample: Path, out: Path, client, limit: int | None, events: bool):
    from tersetalk.pipeline.runner import run

    c0, t0 = time.process_time(), time.perf_counter()
    df = run(spec, sample, out, limit=limit, client=client, progress=False, events=events)
    return time.perf_counter() - t0, time.process_time() - c0, len(df)


def _hook_costs(repeats: int, seed: int, workdir: Path) -> list[dict]:
    """Nanoseconds per call of the message hook, off and on (a real file sink)."""
    from tersetalk.core.events import RunPublisher, on_message_sent, publishing

    pub = RunPublisher(workdir / "hook.events.jsonl", task="t", system="s", variant="v")
    pub.run_started(n_examples=1)
    pub.example_started({"example_id": "e"})
    try:
        off = measure({"hook_off": lambda: on_message_sent(_MESSAGE)}, repeats=repeats, seed=seed)
        with publishing(pub):
            on = measure({"hook_on": lambda: on_message_sent(_MESSAGE)}, repeats=repeats, seed=seed)
    finally:
        pub.close()
    return [{"part": "hook", "mode": name, **t.as_dict()} for name, t in {**off, **on}.items()]


def run_events_bench(
    spec: dict,
    sample: str | Path,
    *,
    repeats: int | None = None,
    limit: int | None = None,
    seed: int = 0,
    client=None,
    hook_repeats: int | None = None,
    workdir: str | Path | None = None,
) -> pd.DataFrame:
    """Rows ``part=run`` (one per timed run) and ``part=hook``; the summary is logged.

    The timed runs write under ``workdir`` (a fresh folder inside it, removed after):
    give the results folder, so the fsyncs hit the disk real runs write to.
    """
    from .defaults import default_repeats

    # None: the config schema's bench.repeats default (for the hook's costs too)
    repeats = default_repeats() if repeats is None else repeats
    hook_repeats = default_repeats() if hook_repeats is None else hook_repeats
    from tersetalk.pipeline.runner import client_from_spec

    sample = Path(sample)
    client = client or client_from_spec(spec)
    # one INFO line per run would bury the result; the runner's warnings still show
    logging.getLogger("tersetalk.pipeline.runner").setLevel(logging.WARNING)
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="events-bench-", dir=workdir))
    rows: list[dict] = []
    try:
        wall, _, n = _timed_run(spec, sample, workdir / "warm.parquet", client, limit, False)
        log.info("untimed first run (fills the call cache): %d examples in %.2f s", n, wall)
        rng = random.Random(seed)
        for i in range(repeats):
            modes = ["off", "on"]
            rng.shuffle(modes)
            for mode in modes:
                out = workdir / f"{mode}-{i}.parquet"
                wall, cpu, n = _timed_run(spec, sample, out, client, limit, mode == "on")
                rows.append(
                    {
                        "part": "run",
                        "mode": mode,
                        "repeat": i,
                        "wall_s": wall,
                        "cpu_s": cpu,
                        "n_examples": n,
                        "order": modes.index(mode),
                    }
                )
                out.unlink(missing_ok=True)
                out.with_name(out.stem + ".events.jsonl").unlink(missing_ok=True)
        rows.extend(_hook_costs(hook_repeats, seed, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    df = finish(
        rows,
        "events",
        {
            "task": spec["task"],
            "system": spec["system"],
            "variant": spec["variant"],
            "repeats": repeats,
            "limit": limit,
            "seed": seed,
        },
    )
    summary = summarize(df)
    for key, value in summary.items():
        df[key] = value
    n = int(df.loc[df["part"] == "run", "n_examples"].iloc[0])
    for clock, label in (("", "wall"), ("cpu_", "CPU")):
        log.info(
            "events on vs off, %s time, %d paired runs of %d examples: median %.4f s vs "
            "%.4f s, ratio %.4f (paired ratios IQR %.4f-%.4f)",
            label,
            repeats,
            n,
            summary[f"{clock}median_on_s"],
            summary[f"{clock}median_off_s"],
            summary[f"{clock}ratio_on_off"],
            summary[f"{clock}paired_ratio_q1"],
            summary[f"{clock}paired_ratio_q3"],
        )
    log.info(
        "the message hook: %.0f ns per message with events off, %.0f ns on",
        summary["hook_off_ns"],
        summary["hook_on_ns"],
    )
    return df


def summarize(df: pd.DataFrame) -> dict[str, float]:
    """Medians of both modes, their ratio, and the spread of the paired ratios, for wall
    time and for the process's CPU time. CPU time is the steadier of the two on a shared
    machine (a run that waits for a core is not charged for it), and the events' cost is
    all CPU (no fsync); wall time also counts the checkpoint's fsyncs and other jobs."""
    runs = df[df["part"] == "run"]
    out: dict[str, float] = {}
    for clock, col in (("", "wall_s"), ("cpu_", "cpu_s")):
        on = runs[runs["mode"] == "on"].set_index("repeat")[col]
        off = runs[runs["mode"] == "off"].set_index("repeat")[col]
        paired = sorted((on / off).dropna())
        q = statistics.quantiles(paired, n=4) if len(paired) >= 2 else [paired[0]] * 3
        out[f"{clock}median_on_s"] = float(on.median())
        out[f"{clock}median_off_s"] = float(off.median())
        out[f"{clock}ratio_on_off"] = float(on.median() / off.median())
        out[f"{clock}paired_ratio_q1"] = float(q[0])
        out[f"{clock}paired_ratio_q3"] = float(q[2])
    hooks = df[df["part"] == "hook"].set_index("mode")["median_ns"]
    out["hook_off_ns"] = float(hooks.get("hook_off", float("nan")))
    out["hook_on_ns"] = float(hooks.get("hook_on", float("nan")))
    return out


def add_parser(sub) -> None:
    """``tersetalk bench events`` (registered by :mod:`tersetalk.bench.cli`)."""
    e = sub.add_parser(
        "events",
        help="runs with progress events on vs off, side by side",
        description="Time whole runs (call cache warm) with the dashboard's "
        "progress events on and off, alternating, and the per-message hook; "
        "report median(on) / median(off).",
    )
    e.add_argument("--spec-json", required=True, help="the run spec (what `tersetalk run` takes)")
    e.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    e.add_argument("--limit", type=int, default=None, help="only the first N examples")
    e.add_argument(
        "--repeats",
        type=int,
        help="timed runs per mode (default: the config schema's bench.repeats)",
    )
    e.add_argument("--seed", type=int, default=0, help="seed of the alternation order")
    e.add_argument("--out", required=True, help="result Parquet to write")
    e.set_defaults(func=_cmd_events)


def _cmd_events(args) -> None:
    import json

    from tersetalk.core.io import write_parquet_atomic

    from .defaults import default_repeats
    from .results import log_environment

    if args.repeats is None:
        args.repeats = default_repeats()
    if args.repeats < 1:
        raise SystemExit("tersetalk bench events: --repeats must be at least 1")
    log_environment()
    spec = json.loads(args.spec_json)
    df = run_events_bench(
        spec,
        args.sample,
        repeats=args.repeats,
        limit=args.limit,
        seed=args.seed,
        workdir=Path(args.out).parent,
    )
    write_parquet_atomic(df, args.out, {"which": "events", "repeats": args.repeats})
    log.info("wrote %s (%d rows)", args.out, len(df))
