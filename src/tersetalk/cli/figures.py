"""The paper's figures and tables as subcommands: ``plot``, ``plot-ablation`` and
``plot-ablations``."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path
from typing import Any

from tersetalk.core.cliargs import nonnegative_int

__all__ = ["add_commands"]


def add_commands(sub: Any) -> None:
    """Add the figure subcommands to ``sub``, in the order ``--help`` lists them."""
    _add_plot(sub)
    _add_ablation(sub)
    _add_ablations(sub)


def _add_plot(sub: Any) -> None:
    """``tersetalk plot``."""
    f = sub.add_parser(
        "plot",
        help="the paper's figures and main table",
        description="Quality vs tokens (Pareto frontier, 95% CIs), token "
        "breakdown by role, accuracy by message length; main table as CSV "
        "and LaTeX.",
    )
    f.add_argument("--summary", required=True, help="summary Parquet from `tersetalk aggregate`")
    f.add_argument(
        "--records",
        nargs="+",
        required=True,
        help="per-example metrics Parquet files (tersetalk score --out-records)",
    )
    f.add_argument(
        "--reference",
        default="freeform/default",
        help="system/variant whose message lengths define the length bins",
    )
    f.add_argument("--out-dir", default="figures", help="folder for the figures (figures)")
    f.add_argument("--tables-dir", default="results/tables", help="folder for the tables")
    f.add_argument(
        "--seed", type=nonnegative_int, default=0, help="bootstrap seed for the intervals (0)"
    )
    f.set_defaults(func=_cmd_plot)


def _add_ablation(sub: Any) -> None:
    """``tersetalk plot-ablation``."""
    g = sub.add_parser(
        "plot-ablation",
        help="one ablation figure (tokens/accuracy vs a setting)",
        description="Tokens and accuracy against one variant setting of a "
        "system; for caps also accuracy against overflow rate.",
    )
    g.add_argument("scores", nargs="+", help="per-run metrics Parquet files of the ablation")
    g.add_argument("--system", required=True, help="system whose variants are compared")
    g.add_argument("--variants", required=True, help="comma-separated variant names, in order")
    g.add_argument("--setting", required=True, help="name of the varied setting (axis label)")
    g.add_argument("--values", default="{}", help="JSON {variant: x value}; default: the names")
    g.add_argument("--out-stem", required=True, help="output path without extension")
    _add_records_option(g)
    g.set_defaults(func=_cmd_plot_ablation)


def _add_ablations(sub: Any) -> None:
    """``tersetalk plot-ablations``."""
    g = sub.add_parser(
        "plot-ablations",
        help="every ablation's figure in one process (what the workflow runs)",
        description="The figures of plot-ablation for several ablations at once, from "
        "one read of the score files: writes OUT_DIR/ablation_<name>.{png,pdf} for each "
        "ablation named in --ablations-json.",
    )
    g.add_argument("scores", nargs="+", help="per-run metrics Parquet files of the ablations")
    g.add_argument(
        "--ablations-json",
        required=True,
        help="JSON {name: {system, setting, variants: [...], values: {variant: x}}}, "
        "e.g. " + _ABLATIONS_EXAMPLE,
    )
    g.add_argument("--out-dir", required=True, help="folder for ablation_<name>.{png,pdf}")
    _add_records_option(g)
    g.set_defaults(func=_cmd_plot_ablations)


def _add_records_option(parser: argparse.ArgumentParser) -> None:
    """plot-ablation's and plot-ablations' ``--records``."""
    parser.add_argument(
        "--records",
        nargs="*",
        default=[],
        help="the runs' per-example metrics Parquet files (token intervals); default: none",
    )


def _cmd_plot(args: argparse.Namespace) -> None:
    import pandas as pd

    from tersetalk.core.io import read_parquet
    from tersetalk.plots import figures as F
    from tersetalk.plots.tables import write_main_table

    records = pd.concat(
        [read_parquet(p, "per-example metrics") for p in args.records], ignore_index=True
    )
    summary = F.with_intervals(read_parquet(args.summary, "summary"), records, seed=args.seed)
    out = Path(args.out_dir)
    paths = F.quality_vs_tokens(summary, out / "quality_vs_tokens")
    paths += F.token_breakdown(summary, out / "token_breakdown")
    paths += F.accuracy_by_length(records, args.reference, out / "accuracy_by_length")
    tables = write_main_table(summary, args.tables_dir, args.seed)
    logging.info("wrote %s", ", ".join(map(str, paths + tables)))


def _ablation_inputs(scores: list[str], records: list[str]):
    """The summary of the score files and the concatenated per-example metrics (None
    without ``--records``: the token panel then has no intervals, and says so)."""
    from tersetalk.metrics.summary import aggregate

    summary = aggregate(scores)
    if not records:
        return summary, None
    import pandas as pd

    from tersetalk.core.io import read_parquet

    frames = [read_parquet(p, "per-example metrics") for p in records]
    return summary, pd.concat(frames, ignore_index=True)


def _draw_ablation(summary, records, system, variants, setting, values, out_stem) -> list:
    from tersetalk.plots.figures import ablation
    from tersetalk.systems import ablation_axis

    axis = ablation_axis(system, setting)  # how the system draws this setting
    return ablation(
        summary, system, variants, setting, values, out_stem,
        axis_label=axis.label, axis_panels=axis.panels, records=records,
    )  # fmt: skip


def _cmd_plot_ablation(args: argparse.Namespace) -> None:
    from tersetalk.pipeline.config import json_option

    values = json_option(args.values, "--values", dict, "'{\"caps_small\": 16}'")
    summary, records = _ablation_inputs(args.scores, args.records)
    paths = _draw_ablation(
        summary, records, args.system, args.variants.split(","), args.setting, values,
        args.out_stem,
    )  # fmt: skip
    logging.info("wrote %s", ", ".join(map(str, paths)))


_ABLATIONS_EXAMPLE = (
    '\'{"caps": {"system": "tersetalk", "setting": "caps", "variants": ["caps_small"], '
    '"values": {"caps_small": 16}}}\''
)


def _cmd_plot_ablations(args: argparse.Namespace) -> None:
    """Every ablation's figure from one read of the score files: one process, one import
    of pandas and matplotlib for all of them (one job in the workflow, not one each)."""
    from tersetalk.pipeline.config import ConfigError, json_kind, json_option

    specs = json_option(args.ablations_json, "--ablations-json", dict, _ABLATIONS_EXAMPLE)
    for name, spec in specs.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):  # it names a file in --out-dir
            raise ConfigError(
                f"--ablations-json: ablation name {name!r} must be letters, digits, _ and - "
                "(it names the file ablation_<name>.png)"
            )
        missing = {"system", "setting", "variants"} - set(spec if isinstance(spec, dict) else ())
        if missing or not isinstance(spec.get("variants"), list):
            raise ConfigError(
                f"--ablations-json: ablation {name!r} needs 'system', 'setting' and a list "
                f"of 'variants' (missing: {', '.join(sorted(missing)) or 'a list'}); "
                f"pass {_ABLATIONS_EXAMPLE}"
            )
        if not isinstance(spec.get("values") or {}, dict):
            raise ConfigError(
                f"--ablations-json: ablation {name!r}: 'values' must be an object "
                f"{{variant: x value}}, got {json_kind(spec['values'])}; pass {_ABLATIONS_EXAMPLE}"
            )
    summary, records = _ablation_inputs(args.scores, args.records)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        paths = _draw_ablation(
            summary, records, spec["system"], spec["variants"], spec["setting"],
            spec.get("values") or {}, out / f"ablation_{name}",
        )  # fmt: skip
        logging.info("wrote %s", ", ".join(map(str, paths)))
