"""``tersetalk``: one subcommand per workflow step.

Every Snakemake rule calls one of these, and each works alone, so a user can
rerun a single step or point a step at their own files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path

DEFAULT_CONFIG = "config/config.yaml"

#: modules that add their own subcommands with ``add_commands(subparsers)``
PLUGIN_COMMANDS = (
    "tersetalk.encoders.cli",  # prepare-compressor
    "tersetalk.mediator.cli",  # mediator demo
    "tersetalk.msp.cli",
    "tersetalk.bench.cli",  # bench
)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _cmd_sample(args: argparse.Namespace) -> None:
    from tersetalk.config import load_config
    from tersetalk.runner import write_parquet_atomic
    from tersetalk.tasks.loading import load_records, sample

    cfg = load_config(args.config) if args.config else {}
    n = args.n if args.n is not None else cfg.get("n_eval")
    cal_n = args.calibration_n if args.calibration_n is not None else cfg.get("calibration_n", 50)
    seed = args.seed if args.seed is not None else cfg.get("seed", 0)
    source = args.source or cfg.get("data", {}).get("source", "local")
    data_dir = args.data_dir or cfg.get("data", {}).get("dir", "data")
    if n is None:
        raise SystemExit("error: give --n or a --config that sets n_eval")
    records = load_records(args.task, source=source, data_dir=data_dir)
    ev, cal = sample(args.task, records, n=n, calibration_n=cal_n, seed=seed)
    meta = {"task": args.task, "n": n, "calibration_n": cal_n, "seed": seed, "source": source}
    write_parquet_atomic(ev, Path(args.out), meta)
    if args.calibration_out:
        write_parquet_atomic(cal, Path(args.calibration_out), meta)
    logging.info("sampled %d eval + %d calibration examples of %s (seed %d, %s)",
                 len(ev), len(cal), args.task, seed, source)  # fmt: skip


def _cmd_run(args: argparse.Namespace) -> None:
    from tersetalk.config import load_config, run_spec
    from tersetalk.runner import run

    if args.spec_json:
        spec = json.loads(args.spec_json)
    else:
        spec = run_spec(load_config(args.config), args.task, args.system, args.variant)
    for key in ("task", "system", "variant"):
        given = getattr(args, key)
        if given and given != spec[key]:
            raise SystemExit(f"error: --{key} {given} disagrees with the spec ({spec[key]})")
    df = run(spec, args.sample, args.out, limit=args.limit, progress=not args.no_progress)
    logging.info("wrote %s (%d rows, %d errors)", args.out, len(df), int(df["error"].notna().sum()))


def _cmd_score(args: argparse.Namespace) -> None:
    import pandas as pd

    from tersetalk.metrics.summary import run_metrics
    from tersetalk.runner import write_parquet_atomic

    metrics = run_metrics(pd.read_parquet(args.run))
    write_parquet_atomic(metrics, Path(args.out))
    logging.info("%s", metrics.iloc[0][["task", "system", "variant", "n", "accuracy"]].to_dict())


def _cmd_aggregate(args: argparse.Namespace) -> None:
    from tersetalk.metrics.summary import aggregate
    from tersetalk.runner import write_parquet_atomic

    df = aggregate(args.scores)
    write_parquet_atomic(df, Path(args.out))
    if args.csv:
        df.to_csv(args.csv, index=False)
    cols = ["task", "system", "variant", "n", "n_errors", "accuracy", "tokens_total_cl100k_mean"]
    print(df[cols].to_string(index=False))


def _cmd_plot(args: argparse.Namespace) -> None:
    import pandas as pd

    from tersetalk.plots.tradeoff import plot_accuracy_vs_tokens

    paths = plot_accuracy_vs_tokens(pd.read_parquet(args.summary), args.out_stem)
    logging.info("wrote %s", ", ".join(map(str, paths)))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tersetalk",
        description="Measure token-efficient message protocols between LLM agents. "
        "Each subcommand is one step of the Snakemake workflow.",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="logging verbosity (default: INFO)")  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("sample", help="draw the seeded evaluation sample and calibration shard",
                       description="Load a task's dataset (checksummed local files or the hub) "
                       "and write a seeded evaluation sample and a disjoint calibration shard.")  # fmt: skip
    s.add_argument("--task", required=True, choices=["hotpotqa", "gsm8k"], help="which dataset")
    s.add_argument("--config", help="config YAML for defaults of the options below")
    s.add_argument("--n", type=int, help="evaluation examples (default: config n_eval)")
    s.add_argument("--calibration-n", type=int,
                   help="calibration examples, disjoint from the evaluation ones (default: config)")  # fmt: skip
    s.add_argument("--seed", type=int, help="sampling seed (default: config seed)")
    s.add_argument("--source", choices=["local", "hub"], help="local shipped files or the HF hub")
    s.add_argument("--data-dir", help="folder with the shipped data (default: data)")
    s.add_argument("--out", required=True, help="evaluation sample Parquet to write")
    s.add_argument("--calibration-out", help="calibration shard Parquet to write")
    s.set_defaults(func=_cmd_sample)

    r = sub.add_parser("run", help="run one system variant on a sample (resumable)",
                       description="Run one (task, system, variant) over a sample file. Finished "
                       "examples are checkpointed, so an interrupted run resumes; model calls are "
                       "cached, so a rerun makes no calls.")  # fmt: skip
    r.add_argument("--task", help="task name (must match the sample)")
    r.add_argument("--system", help="registered system name, e.g. freeform")
    r.add_argument("--variant", default="default", help="variant name under systems.<system>.variants")
    r.add_argument("--config", default=DEFAULT_CONFIG, help=f"config YAML (default: {DEFAULT_CONFIG})")
    r.add_argument("--spec-json", help="a complete run spec as JSON (what Snakemake passes); "
                   "overrides --config")  # fmt: skip
    r.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    r.add_argument("--out", required=True, help="run Parquet to write (one row per example)")
    r.add_argument("--limit", type=int, help="only the first N examples of the sample")
    r.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    r.set_defaults(func=_cmd_run)

    c = sub.add_parser("score", help="metrics of one run, recomputed with the official scorers",
                       description="Compute one row of metrics for a run Parquet file.")
    c.add_argument("--run", required=True, help="run Parquet from `tersetalk run`")
    c.add_argument("--out", required=True, help="metrics Parquet to write (one row)")
    c.set_defaults(func=_cmd_score)

    a = sub.add_parser("aggregate", help="combine per-run metrics into the summary table",
                       description="Concatenate per-run metric files into one summary table.")
    a.add_argument("scores", nargs="+", help="metrics Parquet files from `tersetalk score`")
    a.add_argument("--out", required=True, help="summary Parquet to write")
    a.add_argument("--csv", help="also write the summary as CSV here")
    a.set_defaults(func=_cmd_aggregate)

    f = sub.add_parser("plot", help="accuracy vs tokens figure (PDF and PNG)",
                       description="Draw accuracy against tokens exchanged per example.")
    f.add_argument("--summary", required=True, help="summary Parquet from `tersetalk aggregate`")
    f.add_argument("--out-stem", required=True, help="output path without extension")
    f.set_defaults(func=_cmd_plot)
    for module in PLUGIN_COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    from tersetalk.config import ConfigError
    from tersetalk.models import ModelError
    from tersetalk.tasks.loading import TaskDataError

    try:
        args.func(args)
    except (ConfigError, ModelError, TaskDataError, FileNotFoundError) as exc:
        print(f"tersetalk {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
