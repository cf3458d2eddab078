"""``tersetalk stats-sim``: the simulation study of the statistics (no model, no data)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

log = logging.getLogger("tersetalk.stats.simulation")

HELP = "simulation study of the statistics: type I error, power, interval coverage"

DESCRIPTION = """\
Draw paired binary outcomes, paired continuous scores and a router's per-example
agreement from a known truth, many times per grid point, and measure how often the
non-inferiority verdict says "non-inferior" at the margin (type I error) and at no
difference (power), and how often each interval covers the truth (Wilson with and
without continuity correction, Tango and Newcombe score intervals, the t and studentized
bootstrap intervals, the paired percentile bootstrap, and over tasks the jackknife t
interval and the cluster bootstrap).
The design is in the docstring of tersetalk.stats.simulation. Writes a table (one row
per grid point and quantity, with Monte-Carlo standard errors), a summary (the worst
type I error and coverage per quantity against their thresholds) and a figure.
"""

EPILOG = """\
The grid is the config's stats_sim section (config/config.yaml: small; config/paper.yaml:
more replicates). margin and alpha left at null are the evaluation section's.

example:
  tersetalk stats-sim --config config/config.yaml --out results/<model>/stats/sim/table.parquet \\
      --csv results/<model>/stats/sim/table.csv --summary results/<model>/stats/sim/summary.csv \\
      --markdown results/<model>/stats/sim/summary.md --figure figures/<model>/stats_sim
"""


def _read_config(args: argparse.Namespace) -> dict:
    from tersetalk.core.configio import ConfigError

    if args.config_json and args.config:
        raise ConfigError("give --config-json or --config, not both")
    if args.config_json:
        try:
            config = json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--config-json is not JSON: {exc}") from None
    else:
        from tersetalk.pipeline.config import load_workflow_config

        config = load_workflow_config(args.config)
    if not isinstance(config, dict):
        raise ConfigError("the config must be a mapping with a stats_sim section")
    return config


def _cmd_stats_sim(args: argparse.Namespace) -> None:
    from tersetalk.core.configio import ConfigError
    from tersetalk.core.io import write_csv_atomic, write_text_atomic
    from tersetalk.stats.simulation import (
        run_simulation,
        settings_from_config,
        summarise,
        summary_markdown,
    )

    config = _read_config(args)
    if args.replicates is not None:
        config.setdefault("stats_sim", {})["replicates"] = args.replicates
    settings = settings_from_config(config)
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    log.info(
        "stats-sim: %d replicates per grid point, %d resamples, margin %g, alpha %g, seed %d, "
        "%d worker(s)",
        settings.replicates, settings.n_resamples, settings.margin, settings.alpha,
        settings.seed, args.workers,
    )  # fmt: skip
    table = run_simulation(settings, workers=args.workers, progress=not args.no_progress)
    summary = summarise(table)
    if args.out:
        from tersetalk.core.io import write_parquet_atomic

        write_parquet_atomic(table, args.out)
        log.info("wrote %s (%d rows)", args.out, len(table))
    if args.csv:
        write_csv_atomic(table, args.csv)
        log.info("wrote %s", args.csv)
    if args.summary:
        write_csv_atomic(summary, args.summary)
        log.info("wrote %s", args.summary)
    markdown = summary_markdown(summary, settings)
    if args.markdown:
        write_text_atomic(markdown, Path(args.markdown))
        log.info("wrote %s", args.markdown)
    if args.figure:
        from tersetalk.plots.stats_sim import plot_stats_sim

        for path in plot_stats_sim(table, args.figure):
            log.info("wrote %s", path)
    print(markdown, end="")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stats-sim",
        help=HELP,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from tersetalk.core.cliargs import add_config_option

    add_config_option(p, "; its stats_sim and evaluation sections are read")
    p.add_argument(
        "--config-json",
        metavar="JSON",
        help="the stats_sim and evaluation sections as JSON (what the workflow passes; "
        "instead of --config)",
    )
    p.add_argument(
        "--replicates", type=int, help="replicates per grid point (overrides the config's)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes running grid points at once; the table does not depend on it "
        "(default: %(default)s)",
    )
    p.add_argument("--out", help="the table as Parquet (one row per grid point and quantity)")
    p.add_argument("--csv", help="the same table as CSV")
    p.add_argument("--summary", help="the summary as CSV (worst value per quantity)")
    p.add_argument("--markdown", help="the summary as Markdown (also printed)")
    p.add_argument("--figure", metavar="STEM", help="write STEM.png and STEM.pdf")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_stats_sim)
