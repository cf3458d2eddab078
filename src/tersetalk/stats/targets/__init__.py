"""The targets table: every quantitative target of the designs, measured.

``results/tables/targets.{csv,tex}`` answers "which of the targets we set ourselves did
we meet?". One row per target (and task or run where it applies): the design it
comes from, the target as the design states it, the measured value, where the value comes
from, and a status that is ``met``, ``not met`` or ``inconclusive``, with the reason.

How a status is decided, so that a small or degenerate sample is never "met":

- a rate or a ratio with an interval (a Wilson interval for a count, a paired bootstrap
  interval for a token reduction, the IQR of a microbenchmark's timing ratio): ``met``
  when the whole interval is on the target's side, ``not met`` when it is wholly on the
  other side, ``inconclusive`` when it straddles the threshold;
- accuracy non-inferiority: the verdict of ``results/stats/noninferiority.*``
  (:mod:`tersetalk.stats.noninferiority`: both arms 0, or n too small for the margin,
  is inconclusive there too);
- a design bound that every message must respect (the mediator's budget, the hint
  cost, losslessness): ``not met`` by the first counter-example;
- a target whose experiment has not run, or does not exist yet: ``inconclusive``,
  with the command that runs it.

Each study's rows come from its own provider (:class:`._base.Provider`, one module per
study: :mod:`.protocol`, :mod:`.bench`, :mod:`.msp`, :mod:`.mediator`, :mod:`.formats`,
:mod:`.topology`); :data:`PROVIDERS` lists them in table order, and :func:`build_targets`
only concatenates their rows and adds one inconclusive row for each target a provider
expected but no row measured. A new study is a module with its provider, added there.

Everything is a pure function of the files read, so the table is deterministic.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tersetalk.core.paths import BENCH_DIR
from tersetalk.stats.latex import to_latex

from . import bench, formats, mediator, msp, protocol, topology
from ._base import COLUMNS, STATUSES, Provider, Results, index_metrics, interval_status, row
from .bench import BENCH_HINT, bench_rows
from .formats import formats_rows
from .mediator import mediator_rows
from .msp import msp_rows
from .protocol import (
    compliance_rows,
    noninferiority_rows,
    scale_rows,
    token_reduction_rows,
    ttft_rows,
)
from .topology import topology_rows

__all__ = [
    "BENCH_HINT",
    "COLUMNS",
    "EXPECTED",
    "PROVIDERS",
    "STATUSES",
    "Provider",
    "Results",
    "add_commands",
    "bench_rows",
    "build_targets",
    "compliance_rows",
    "formats_rows",
    "interval_status",
    "missing_rows",
    "mediator_rows",
    "msp_rows",
    "noninferiority_rows",
    "scale_rows",
    "targets_config",
    "targets_tex",
    "token_reduction_rows",
    "topology_rows",
    "ttft_rows",
]

#: every study's row provider, in the order of the table's rows
PROVIDERS: tuple[Provider, ...] = (
    *protocol.PROVIDERS,
    *bench.PROVIDERS,
    *msp.PROVIDERS,
    *mediator.PROVIDERS,
    *formats.PROVIDERS,
    *topology.PROVIDERS,
)

#: (id, run, target) of the targets measured on workflow runs: a target whose run is not
#: part of this workflow still gets a row, so a reader never mistakes absence for success
EXPECTED = tuple(expected for p in PROVIDERS for expected in p.expected)


def targets_config(config: Mapping[str, Any]) -> dict:
    """The few config values the table reads (what the rule passes to ``tersetalk targets``):
    the evaluation's reference, margin and bootstrap, the mediator's default budget and
    recursion limit, and the token budget of each formats variant."""
    systems = config.get("systems", {})
    mediator = systems.get("mediator", {}).get("variants", {}).get("default") or {}
    formats = systems.get("formats", {}).get("variants", {})
    ev = config.get("evaluation", {})
    return {
        "evaluation": {k: ev[k] for k in ("reference", "margin", "n_resamples", "seed") if k in ev},
        "systems": {
            "mediator": {"variants": {"default": {k: mediator[k] for k in
                         ("budget", "recursion_limit") if k in mediator}}},
            "formats": {"variants": {v: {"budget": (s or {}).get("budget")}
                        for v, s in formats.items()}},
        },
    }  # fmt: skip


def build_targets(
    *,
    summary: pd.DataFrame,
    metrics: Iterable[pd.DataFrame],
    stats_table: pd.DataFrame | None,
    config: Mapping[str, Any],
    bench_dir: str | Path = BENCH_DIR,
    formats_dir: str | Path = "results/formats",
    topology_dir: str | Path = "results/topology",
) -> pd.DataFrame:
    """Every target row, in the order of :data:`COLUMNS`: each provider's rows, in the
    order of :data:`PROVIDERS`, then the expected targets none of them measured."""
    results = Results(
        summary=summary,
        metrics=index_metrics(metrics),
        stats_table=stats_table,
        config=config,
        bench_dir=Path(bench_dir),
        formats_dir=Path(formats_dir),
        topology_dir=Path(topology_dir),
    )
    rows = [r for provider in PROVIDERS for r in provider.rows(results)]
    rows += missing_rows(rows)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def missing_rows(rows: list[dict]) -> list[dict]:
    """An inconclusive row for each expected target no row measured (its run absent)."""
    seen = {(r["id"], str(r["run"]).split(" vs ")[0]) for r in rows}
    return [
        row(id=tid, seed=p.seed, target=text, run=run,
            status="inconclusive", source="results/metrics/",
            reason=f"not measured: {run} (or its reference) is not among this workflow's runs")
        for p in PROVIDERS
        for tid, run, text in p.expected
        if (tid, run) not in seen
    ]  # fmt: skip


def targets_tex(df: pd.DataFrame) -> str:
    cols = ["seed", "target", "task", "run", "measured", "status", "reason"]
    counts = df["status"].value_counts()
    caption = (
        "The designs' quantitative targets: "
        + ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)
        + ". Inconclusive rows say why (an interval straddling the threshold, n too small "
        "for the margin, both arms at accuracy 0, or an experiment not run)."
    )
    return to_latex(df, cols, caption=caption, label="tab:targets")


# -- CLI -------------------------------------------------------------------------------------


def _cmd_targets(args: argparse.Namespace) -> None:
    from tersetalk.core.io import read_parquet, write_csv_atomic, write_text_atomic

    summary = read_parquet(args.summary, "summary")
    frames = [read_parquet(p, "per-example metrics") for p in args.records]
    stats_table = read_parquet(args.stats, "non-inferiority table") if args.stats else None
    config = json.loads(args.config_json) if args.config_json else {}
    df = build_targets(summary=summary, metrics=frames, stats_table=stats_table, config=config,
                       bench_dir=args.bench_dir, formats_dir=args.formats_dir,
                       topology_dir=args.topology_dir)  # fmt: skip
    write_csv_atomic(df, args.csv)
    if args.tex:
        write_text_atomic(targets_tex(df), args.tex)
    from tersetalk.core import figmeta  # n, model, seed, commit beside each table

    recorded = figmeta.describe(summary, out=args.csv)
    for path in filter(None, (args.csv, args.tex)):
        figmeta.write(path, recorded)
    print(df[["id", "task", "run", "measured", "status"]].to_string(index=False))


def add_commands(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser(
        "targets",
        help="the TerseTalk design's targets: measured, met / not met / inconclusive",
        description="Write results/<key>/tables/targets.{csv,tex} from the summary, the "
        "per-example metrics, the non-inferiority table, and the bench, formats and topology "
        "results that exist.",
    )
    t.add_argument("records", nargs="*", help="per-example metrics (results/<key>/metrics/...)")
    t.add_argument("--summary", required=True, help="results/<key>/summary.parquet")
    t.add_argument("--stats", help="results/<key>/stats/noninferiority.parquet")
    t.add_argument(
        "--config-json", metavar="JSON", help="the config's evaluation and systems sections"
    )
    from tersetalk.core.cliargs import add_renamed_option

    add_renamed_option(t, "--config", "--config-json")
    t.add_argument("--bench-dir", default=BENCH_DIR)
    t.add_argument("--formats-dir", default="results/formats")
    t.add_argument("--topology-dir", default="results/topology")
    t.add_argument("--csv", required=True, help="output CSV")
    t.add_argument("--tex", help="output LaTeX table")
    t.set_defaults(func=_cmd_targets)
