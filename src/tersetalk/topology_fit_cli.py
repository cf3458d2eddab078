"""``tersetalk topology-signals`` and ``tersetalk topology-fit``: the fitted router's steps.

- ``topology-signals``: the router's signals of each example of a sample, from the
  Manager's brief written as a run of the routed system would write it (no Worker runs;
  no model call unless a planning Manager writes the brief):
  :func:`tersetalk.topology_signals.write_signals`.
- ``topology-fit``: per routed system, the router's weights and θ by logistic
  regression on those signals (``results/topology/router.yaml``), and the
  leave-one-task-out fits (:mod:`tersetalk.metrics.topology_fit`).
- ``topology-selection``: selection accuracy of those signals under each variant's rule
  and the fitted router, with intervals (a larger sample measured without a run).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pandas as pd

from tersetalk.cliargs import nonnegative_int, user_error

__all__ = ["add_commands", "fit_files", "signals_spec"]

log = logging.getLogger(__name__)


def signals_spec(args: argparse.Namespace) -> dict:
    """The run spec the briefs are written under: ``--spec-json`` (what the workflow
    passes) or the topology study's config (``--config``) for ``--system``/``--variant``
    on the sample's task."""
    from tersetalk.cli import _spec_from_json, load_workflow_config
    from tersetalk.config import ConfigError, run_spec, topology_config
    from tersetalk.tasks.loading import read_sample

    if args.spec_json:
        spec = _spec_from_json(args.spec_json)
    else:
        if not args.system:
            raise ConfigError("give --system and --variant (or --spec-json)")
        task = args.task or str(read_sample(args.sample)[0]["task"])
        study = topology_config(load_workflow_config(args.config))
        variant = args.variant or study["topology"].get("fit", {}).get("variant", "adaptive")
        known = {name: sorted(sys_["variants"]) for name, sys_ in study["systems"].items()}
        if variant not in known.get(args.system, []):
            raise ConfigError(
                f"config key 'topology.systems.{args.system}.variants.{variant}' does not "
                f"exist; the topology study's systems and variants: {known}"
            )
        spec = run_spec(study, task, args.system, variant)
    for key in ("task", "system", "variant"):
        given = getattr(args, key)
        if given and given != spec[key]:
            raise ConfigError(f"--{key} {given} disagrees with the spec ({spec[key]})")
    return spec


def _cmd_signals(args: argparse.Namespace) -> None:
    from tersetalk.topology_signals import write_signals

    spec = signals_spec(args)
    df = write_signals(spec, args.sample, args.out)
    ok = df[df["error"].isna()]
    agree = float((ok["route_rule"] == ok["label"]).mean()) if len(ok) else float("nan")
    log.info(
        "%s/%s/%s: %d briefs (%d errors, %d model calls); the variant's rule agrees with the "
        "label on %.2f -> %s",
        spec["task"], spec["system"], spec["variant"], len(df), len(df) - len(ok),
        int(df["model_calls"].sum()), agree, args.out,
    )  # fmt: skip


def fit_files(
    paths: list[str | Path], out: str | Path, loto_out: str | Path | None = None, *,
    l2: float = 1.0, seed: int = 0,
) -> dict:  # fmt: skip
    """Fit each routed system found in the signals files; write the router file (and the
    leave-one-task-out table); return the fits by system."""
    from tersetalk.io import read_metadata, read_parquet, write_csv_atomic
    from tersetalk.metrics.topology_fit import (
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
    from tersetalk.metrics.topology_fit import read_router_yaml, selection_from_signals

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


def add_commands(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "topology-signals",
        help="the router's signals of a sample's briefs (no Worker runs)",
        description="Write each example's Manager brief as a run of the routed system "
        "writes it (its codec, the variant's settings) and record the router's six signals "
        "as the run reads them, the label, the variant's rule and the brief's wire size. "
        "No model is called unless a planning Manager writes the brief.",
    )
    s.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    s.add_argument("--system", help="routed system: topology_tersetalk or topology_freeform")
    s.add_argument(
        "--variant",
        default=None,
        help="variant under topology.systems.<system> (default: topology.fit.variant)",
    )
    s.add_argument("--task", help="the sample's task (default: read from the sample)")
    from tersetalk.cliargs import add_config_option

    add_config_option(s, "; the variant is looked up in its topology section")
    s.add_argument("--spec-json", help="a complete run spec as JSON (overrides --config)")
    s.add_argument("--out", required=True, help="signals Parquet to write")
    s.set_defaults(func=_cmd_signals)

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
        description="Selection accuracy (with 95%% Wilson intervals) of the routes the "
        "signals files' variants choose, and of the fitted router (--router-yaml) replayed on "
        "the same signals, per task and over all tasks. With a deterministic Manager the "
        "route depends on the brief alone, so no run is needed to measure it.",
    )
    c.add_argument("signals", nargs="+", help="signals Parquet files (topology-signals)")
    c.add_argument("--router-yaml", help="a fitted router file (topology-fit --out)")
    c.add_argument("--out", help="CSV of every row (per task and 'all')")
    c.set_defaults(func=_cmd_selection)
