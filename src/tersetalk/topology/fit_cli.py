"""``tersetalk topology-fit``, ``topology-selection`` and ``topology-heldout``: the fitted
router's steps, from the signals files ``tersetalk topology-signals`` writes
(:mod:`tersetalk.pipeline.topology_signals_cli`).

- ``topology-fit``: per routed system, the router's weights and θ by logistic
  regression on those signals (``results/topology/router.yaml``), and the
  leave-one-task-out fits (:mod:`tersetalk.topology.fit`).
- ``topology-selection``: selection accuracy of those signals under each variant's rule
  and the fitted router, with intervals (a larger sample measured without a run).
- ``topology-heldout``: the router on the held-out briefs and leave-one-task-out and
  leave-one-format-out (:mod:`tersetalk.topology.heldout`).

They read signals and router files only: no config, no system, no model.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pandas as pd

from tersetalk.core.cliargs import nonnegative_int, user_error

__all__ = ["add_commands", "fit_files", "heldout_report"]

log = logging.getLogger(__name__)


def fit_files(
    paths: list[str | Path], out: str | Path, loto_out: str | Path | None = None, *,
    l2: float = 1.0, seed: int = 0,
) -> dict:  # fmt: skip
    """Fit each routed system found in the signals files; write the router file (and the
    leave-one-task-out table); return the fits by system."""
    from tersetalk.core.io import read_metadata, read_parquet, write_csv_atomic
    from tersetalk.topology.fit import (
        fit_frame,
        leave_one_task_out_fitted,
        write_router_yaml,
    )

    if not paths:
        raise ValueError("no signals files given (`tersetalk topology-signals` writes them)")
    frames, variants = [], {}
    for p in paths:
        frames.append(read_parquet(p, "router signals"))
        spec = read_metadata(p, "router signals").get("spec", {})
        if spec:
            variants.setdefault(spec["system"], set()).add(spec["variant"])
    df = pd.concat(frames, ignore_index=True)
    if df.empty:
        raise ValueError(f"the signals files {[str(p) for p in paths]} hold no rows")
    fits, lotos = {}, []
    for name in sorted(df["system"].astype(str).unique()):
        rows = df[df["system"] == name]
        try:
            fits[name] = fit_frame(rows, l2=l2, seed=seed)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if loto_out is not None:
            lotos.append(leave_one_task_out_fitted(rows, l2=l2, seed=seed).assign(system=name))
        fit = fits[name]
        log.info("%s: n=%d %s, training selection accuracy %.3f, theta %.4g, weights %s",
                 name, fit.n, fit.n_per_label, fit.train_selection_accuracy, fit.theta,
                 json.dumps(fit.weights))  # fmt: skip
    meta = {
        "command": "tersetalk topology-fit",
        "signals_files": sorted(str(p) for p in paths),
        "variants": {k: sorted(v) for k, v in sorted(variants.items())},
        "rows_with_error": int(df["error"].notna().sum()) if "error" in df.columns else 0,
    }
    write_router_yaml(out, fits, meta)
    if loto_out is not None:
        write_csv_atomic(pd.concat(lotos, ignore_index=True), loto_out)
    return fits


def _cmd_fit(args: argparse.Namespace) -> None:
    try:
        fit_files(args.signals, args.out, args.loto_out, l2=args.l2, seed=args.seed)
    except ValueError as exc:
        raise user_error(f"tersetalk topology-fit: error: {exc}") from None


def _cmd_selection(args: argparse.Namespace) -> None:
    from tersetalk.topology.fit import read_router_yaml, selection_from_signals

    try:
        frame = pd.concat([pd.read_parquet(p) for p in args.signals], ignore_index=True)
        fits = read_router_yaml(args.router_yaml)[0] if args.router_yaml else None
        table = selection_from_signals(frame, fits)
    except (OSError, ValueError) as exc:
        raise user_error(f"tersetalk topology-selection: error: {exc}") from None
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    overall = table[table["task"] == "all"]
    print(overall.drop(columns="task").to_string(index=False, float_format="%.3f"))


def heldout_report(
    heldout: list[str | Path], calibration: list[str | Path], router_yaml: str | Path | None,
    out_dir: str | Path, *, l2: float = 1.0, seed: int = 0,
) -> dict:  # fmt: skip
    """Read the held-out and calibration signals files, write ``heldout.csv``,
    ``heldout_loto.csv``, ``heldout_lofo.csv`` and ``heldout.json`` under ``out_dir``
    and return the summary."""
    from tersetalk.core.io import read_parquet, write_csv_atomic, write_text_atomic
    from tersetalk.topology import heldout as th
    from tersetalk.topology.fit import read_router_yaml

    held = pd.concat([read_parquet(p, "held-out signals") for p in heldout], ignore_index=True)
    cal = pd.concat([read_parquet(p, "router signals") for p in calibration], ignore_index=True)
    fitted = read_router_yaml(router_yaml)[0] if router_yaml else None
    agreement = th.agreement_table(held, fitted)
    loto = th.leave_one_task_out(cal, l2=l2, seed=seed)
    lofo = th.leave_one_format_out(cal, held, l2=l2, seed=seed)
    out = Path(out_dir)
    write_csv_atomic(agreement, out / "heldout.csv")
    write_csv_atomic(loto, out / "heldout_loto.csv")
    write_csv_atomic(lofo, out / "heldout_lofo.csv")
    summary = th.summary(agreement, loto, lofo)
    doc = {"summary": summary, "n_heldout": int(held["example_id"].nunique()),
           "l2": l2, "seed": seed, "thetas": list(th.DEFAULT_THETAS)}  # fmt: skip
    write_text_atomic(json.dumps(doc, indent=2, sort_keys=True, allow_nan=True) + "\n",
                      out / "heldout.json")  # fmt: skip
    for system, routers in summary.items():
        for router, e in routers.items():
            log.info("%s/%s: held-out agreement %.3f (crossing %.3f); chain tasks' "
                     "leave-one-task-out mean %.3f (lowest %.3f)", system, router,
                     e.get("all", {}).get("agreement", float("nan")),
                     e.get("crossing", {}).get("agreement", float("nan")),
                     e["loto_chain_mean"], e["loto_chain_min"])  # fmt: skip
    return summary


def _cmd_heldout(args: argparse.Namespace) -> None:
    try:
        heldout_report(args.heldout, args.calibration, args.router_yaml, args.out_dir,
                       l2=args.l2, seed=args.seed)  # fmt: skip
    except ValueError as exc:
        raise user_error(f"tersetalk topology-heldout: error: {exc}") from None


def add_commands(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser(
        "topology-fit",
        help="fit the router's weights and θ on briefs' signals (logistic regression)",
        description="Per routed system in the signals files: L2-regularised logistic "
        "regression of the task's label (chain vs star) on the six signals, written as the "
        "router's weights and θ (chain iff Σ weight·signal >= θ), and leave-one-task-out.",
    )
    f.add_argument("signals", nargs="+", help="signals Parquet files (topology-signals)")
    f.add_argument("--l2", type=float, default=1.0, help="L2 penalty (default 1.0)")
    f.add_argument(
        "--seed", type=nonnegative_int, default=0, help="recorded with the fit (default 0)"
    )
    f.add_argument("--out", required=True, help="router YAML to write")
    f.add_argument("--loto-out", help="leave-one-task-out CSV to write")
    f.set_defaults(func=_cmd_fit)

    c = sub.add_parser(
        "topology-selection",
        help="selection accuracy of briefs' signals, by the variant's rule and the fitted one",
        description="Selection accuracy (with 95% Wilson intervals) of the routes the "
        "signals files' variants choose, and of the fitted router (--router-yaml) replayed on "
        "the same signals, per task and over all tasks. With a deterministic Manager the "
        "route depends on the brief alone, so no run is needed to measure it.",
    )
    c.add_argument("signals", nargs="+", help="signals Parquet files (topology-signals)")
    c.add_argument("--router-yaml", help="a fitted router file (topology-fit --out)")
    c.add_argument("--out", help="CSV of every row (per task and 'all')")
    c.set_defaults(func=_cmd_selection)

    h = sub.add_parser(
        "topology-heldout",
        help="the router on held-out briefs, leave-one-task-out and leave-one-format-out",
        description="Agreement of each routed system's rule (design) and fitted router with "
        "the labels of held-out briefs (with 95% Wilson intervals), overall, on the items "
        "that cross their format's label group and per format; leave-one-task-out on the "
        "calibration briefs (θ chosen, or the router fitted, on the other tasks); and "
        "leave-one-format-out (fitted without a task, scored on held-out items in its "
        "format). Writes heldout.csv, heldout_loto.csv, heldout_lofo.csv, heldout.json.",
    )
    h.add_argument("heldout", nargs="+", help="held-out signals Parquet files (topology-signals)")
    h.add_argument("--calibration", nargs="+", required=True,
                   help="the study's calibration signals files (topology-signals)")  # fmt: skip
    h.add_argument("--router-yaml", help="the fitted router file (topology-fit --out)")
    h.add_argument("--l2", type=float, default=1.0, help="L2 penalty of the fits (default 1.0)")
    h.add_argument("--seed", type=nonnegative_int, default=0, help="recorded with the fits")
    h.add_argument("--out-dir", required=True, help="folder for the tables")
    h.set_defaults(func=_cmd_heldout)
