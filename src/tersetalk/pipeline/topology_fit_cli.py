"""``tersetalk topology-signals`` and ``tersetalk topology-fit``: the fitted router's steps.

- ``topology-signals``: the router's signals of each example of a sample, from the
  Manager's brief written as a run of the routed system would write it (no Worker runs;
  no model call unless a planning Manager writes the brief):
  :func:`tersetalk.pipeline.topology_signals.write_signals`.
- ``topology-fit``: per routed system, the router's weights and θ by logistic
  regression on those signals (``results/topology/router.yaml``), and the
  leave-one-task-out fits (:mod:`tersetalk.metrics.topology_fit`).
- ``topology-selection``: selection accuracy of those signals under each variant's rule
  and the fitted router, with intervals (a larger sample measured without a run).
- ``route``: the router's signals and decision for each record of a file in any task's
  format, one JSON line per record, offline (anyone can check the router on their own
  briefs).
- ``topology-heldout``: the router on the held-out briefs and leave-one-task-out and
  leave-one-format-out (:mod:`tersetalk.metrics.topology_heldout`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import pandas as pd

from tersetalk.core.cliargs import nonnegative_int, user_error

__all__ = ["add_commands", "fit_files", "signals_spec"]

log = logging.getLogger(__name__)


def signals_spec(args: argparse.Namespace) -> dict:
    """The run spec the briefs are written under: ``--spec-json`` (what the workflow
    passes) or the topology study's config (``--config``) for ``--system``/``--variant``
    on the sample's task."""
    from tersetalk.pipeline.config import (
        ConfigError,
        load_workflow_config,
        run_spec,
        spec_from_json,
        topology_config,
    )
    from tersetalk.tasks.loading import read_sample

    if args.spec_json:
        spec = spec_from_json(args.spec_json)
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
    from tersetalk.pipeline.topology_signals import write_signals

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
    from tersetalk.core.io import read_metadata, read_parquet, write_csv_atomic
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


def _cmd_route(args: argparse.Namespace) -> None:
    from tersetalk.agents.router import decide, load_fitted
    from tersetalk.pipeline.config import (
        ConfigError,
        load_workflow_config,
        run_spec,
        topology_config,
    )
    from tersetalk.pipeline.topology_signals import brief_signals
    from tersetalk.tasks.registry import topology_labels

    formats = sorted(topology_labels())
    if args.task not in formats:
        raise ConfigError(
            f"--task {args.task}: no such format; a task with a topology label names one: "
            f"{', '.join(formats)}"
        )
    study = topology_config(load_workflow_config(args.config))
    variants = study["systems"].get(args.system, {}).get("variants", {})
    if args.variant not in variants:
        known = {name: sorted(s["variants"]) for name, s in study["systems"].items()}
        raise ConfigError(
            f"no variant {args.variant!r} of {args.system!r} in the topology study; "
            f"its systems and variants: {known}"
        )
    spec = run_spec(study, args.task, args.system, args.variant)
    fitted = load_fitted(args.router, args.system) if args.router else None
    frame = brief_signals(spec, args.records)
    out = sys.stdout
    for row in frame.to_dict("records"):
        line: dict = {"id": row["example_id"], "task": row["task"], "system": row["system"],
                      "variant": row["variant"], "features": row["features"]}  # fmt: skip
        if not pd.isna(row["error"]):
            line["error"] = row["error"]
        else:
            signals = json.loads(row["route_signals"])
            weights, theta = fitted if fitted else (json.loads(row["route_weights"]),
                                                    float(row["route_theta"]))  # fmt: skip
            route, score = decide(signals, weights, theta)
            line.update(signals=signals, weights=weights, theta=theta, score=score,
                        route=route, router="fitted" if fitted else "variant")  # fmt: skip
        line["label"] = row["label"]
        try:
            out.write(json.dumps(line, sort_keys=False) + "\n")
        except BrokenPipeError:  # the reader stopped (| head): nothing more to say
            return


def heldout_report(
    heldout: list[str | Path], calibration: list[str | Path], router_yaml: str | Path | None,
    out_dir: str | Path, *, l2: float = 1.0, seed: int = 0,
) -> dict:  # fmt: skip
    """Read the held-out and calibration signals files, write ``heldout.csv``,
    ``heldout_loto.csv``, ``heldout_lofo.csv`` and ``heldout.json`` under ``out_dir``
    and return the summary."""
    from tersetalk.core.io import read_parquet, write_csv_atomic, write_text_atomic
    from tersetalk.metrics import topology_heldout as th
    from tersetalk.metrics.topology_fit import read_router_yaml

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
    from tersetalk.core.cliargs import add_config_option

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
        description="Selection accuracy (with 95% Wilson intervals) of the routes the "
        "signals files' variants choose, and of the fitted router (--router-yaml) replayed on "
        "the same signals, per task and over all tasks. With a deterministic Manager the "
        "route depends on the brief alone, so no run is needed to measure it.",
    )
    c.add_argument("signals", nargs="+", help="signals Parquet files (topology-signals)")
    c.add_argument("--router-yaml", help="a fitted router file (topology-fit --out)")
    c.add_argument("--out", help="CSV of every row (per task and 'all')")
    c.set_defaults(func=_cmd_selection)

    r = sub.add_parser(
        "route",
        help="the router's signals and decision for each record of a file (offline)",
        description="Write each record's Manager brief as the routed system writes it and "
        "print one JSON line per record: its six signals, the weights and θ, the score and "
        "the route (star or chain), and its label when the record has one. No model is "
        "called (unless the variant's Manager plans with one). Records are JSON lines in "
        'the format of --task (the record itself or {"record": ...}; "id" names it), '
        "or a sample Parquet file from `tersetalk sample`.",
    )
    r.add_argument("records", help="JSONL file of records in --task's format, or a sample Parquet")
    r.add_argument("--task", required=True, help="the records' format: a task name (e.g. boolq)")
    r.add_argument(
        "--system",
        default="topology_tersetalk",
        help="routed system: topology_tersetalk (typed lines) or topology_freeform (prose); "
        "default topology_tersetalk",
    )
    r.add_argument("--variant", default="adaptive", help="its variant (default adaptive)")
    r.add_argument(
        "--router", help="a fitted router file (`tersetalk topology-fit`): its weights and θ "
        "for --system decide instead of the variant's"
    )  # fmt: skip
    add_config_option(r, "; the system and variant are looked up in its topology section")
    r.set_defaults(func=_cmd_route)

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
