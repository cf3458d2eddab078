"""``tersetalk topology``: the topology study's tables and figures from its run files.

Reads the run Parquet files of the routed systems (``topology_freeform``,
``topology_tersetalk``) and writes, under ``--tables``:

- ``policies.csv``: one row per (system, variant), every variant the runs hold (the six
  policies, θ, ablations, fitted, planned, brief layouts): policy, selection accuracy
  with its Wilson interval, accuracy, tokens, chain share, routing time, end-to-end
  latency per example, overflow rate, the router's dropped signal and scrambled tags,
  and the comparison with the system's best fixed topology (token reduction, quality
  preservation, efficiency score; paired on the same examples: the token reduction's
  bootstrap interval and the quality drop's non-inferiority verdict);
- ``six_policies.csv``: the study's six policies from that table, in order;
- ``policies_by_task.csv``: the same numbers per task (without the paired tests);
- ``ablations.csv``: the dropped-signal and scrambled-tag variants beside the full router;
- ``theta_sweep.csv`` and ``leave_one_task_out.csv``: the rule replayed on the signals
  recorded by each router's ``adaptive`` run (no model call);
- ``summary.json``: protocol advantage with its interval, every variant's selection
  accuracy with its interval, leave-one-task-out summaries, the run files' models and,
  when given, the fitted router (``--router-yaml``) and its leave-one-task-out fits
  (``--loto-fitted``, the fit step's ``leave_one_task_out_fitted.csv``);

and, under ``--figures``, ``topology_selection``, ``topology_tokens_accuracy``,
``topology_theta`` and ``topology_ablations`` (PNG and PDF).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path

import pandas as pd

from tersetalk.cliargs import nonnegative_int, user_error
from tersetalk.metrics.topology import (
    SIX_POLICIES,
    ablation_table,
    advantage_interval,
    compare_to_fixed,
    leave_one_task_out,
    loto_summary,
    paired_to_fixed,
    policy_table,
    protocol_advantage,
    six_policies,
    theta_sweep,
)

log = logging.getLogger(__name__)

__all__ = ["add_commands", "report"]

ROUTER_OF = {"topology_tersetalk": "TerseTalk (typed lines)", "topology_freeform": "free-form"}
DEFAULT_THETAS = (1.0, 3.0, 5.0, 7.0)
#: the systems whose adaptive runs the protocol advantage compares (typed over prose)
TYPED, PROSE = "topology_tersetalk", "topology_freeform"


def _json_number(x: float) -> float | None:
    """JSON has no NaN: an undefined number is written as null."""
    x = float(x)
    return x if math.isfinite(x) or math.isinf(x) else None


def variants_summary(table: pd.DataFrame) -> dict:
    """system -> variant -> its policy, n, selection accuracy and Wilson interval, accuracy
    and tokens: every variant of the report, for summary.json."""
    out: dict[str, dict] = {}
    for r in table.to_dict("records"):
        out.setdefault(r["system"], {})[r["variant"]] = {
            "policy": r["policy"],
            "n": int(r["n"]),
            "selection_accuracy": _json_number(r["selection_accuracy"]),
            "selection_ci_low": _json_number(r["selection_ci_low"]),
            "selection_ci_high": _json_number(r["selection_ci_high"]),
            "accuracy": _json_number(r["accuracy"]),
            "tokens": _json_number(r["tokens"]),
        }
    return out


def fitted_router(path: str | Path) -> dict:
    """The fitted router file (``results/topology/router.yaml``) as written, for the
    summary; a clear error when it cannot be read."""
    import yaml

    from tersetalk.io import load_yaml_text

    try:
        data = load_yaml_text(Path(path).read_text(encoding="utf-8"), f"router file {path}")
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"router file {path}: cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"router file {path}: expected a mapping, got {type(data).__name__}")
    return data


def _sweep_rows(df: pd.DataFrame, sys_name: str) -> pd.DataFrame:
    """The rows whose recorded signals the sweeps replay: the system's ``adaptive`` run."""
    rows = df[(df["system"] == sys_name) & (df["variant"] == "adaptive")]
    if rows.empty:
        raise ValueError(
            f"no {sys_name}/adaptive run among the inputs: the θ sweep and leave-one-task-out "
            "replay that run's recorded signals"
        )
    return rows


def report(
    runs: list[str | Path],
    tables: str | Path,
    figures: str | Path,
    thetas: tuple[float, ...] = DEFAULT_THETAS,
    *,
    router_yaml: str | Path | None = None,
    loto_fitted: str | Path | pd.DataFrame | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    margin: float = 0.02,
) -> dict:
    """Write the study's tables and figures; return the summary written to summary.json.

    ``router_yaml``: the fitted router file, copied into the summary (``fitted_router``).
    ``loto_fitted``: the fitted router's leave-one-task-out frame (or its CSV), computed
    by the fit step; summarised into ``leave_one_task_out_fitted``
    (:func:`tersetalk.metrics.topology.loto_summary`). ``n_resamples``, ``seed`` and
    ``margin``: the paired bootstrap and non-inferiority test against the best fixed
    topology, and the protocol advantage's interval.
    """
    from tersetalk.plots.topology import (
        ablations_figure,
        selection_by_task,
        theta_sweep_figure,
        tokens_vs_accuracy,
    )

    if not runs:
        raise ValueError("no run files given")
    df = pd.concat([pd.read_parquet(p) for p in runs], ignore_index=True)
    unknown = sorted(set(df["system"]) - set(ROUTER_OF))
    if unknown:
        raise ValueError(f"not routed systems: {unknown}; expected runs of {sorted(ROUTER_OF)}")
    tables, figures = Path(tables), Path(figures)
    tables.mkdir(parents=True, exist_ok=True)
    model = ", ".join(sorted(set(df["backend"].astype(str) + ":" + df["model"].astype(str))))
    boot = dict(n_resamples=n_resamples, seed=seed)

    table = paired_to_fixed(df, compare_to_fixed(policy_table(df)), margin=margin, **boot)
    table.to_csv(tables / "policies.csv", index=False)
    six = six_policies(table)
    six.to_csv(tables / "six_policies.csv", index=False)
    by_task = policy_table(df, by=("system", "variant", "task"))
    by_task.to_csv(tables / "policies_by_task.csv", index=False)
    ablations = ablation_table(table)
    ablations = ablations.assign(router=ablations["system"].map(ROUTER_OF))
    ablations.to_csv(tables / "ablations.csv", index=False)

    sweeps, lotos = [], []
    for sys_name in sorted(set(df["system"])):
        rows = _sweep_rows(df, sys_name)
        sweeps.append(theta_sweep(rows, thetas).assign(system=sys_name, router=ROUTER_OF[sys_name]))
        lotos.append(leave_one_task_out(rows, thetas).assign(system=sys_name))
    sweep = pd.concat(sweeps, ignore_index=True)
    sweep.to_csv(tables / "theta_sweep.csv", index=False)
    loto = pd.concat(lotos, ignore_index=True)
    loto.to_csv(tables / "leave_one_task_out.csv", index=False)

    adaptive = table[table["variant"] == "adaptive"].set_index("system")["selection_accuracy"]
    adv = {"estimate": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0}
    if {TYPED, PROSE} <= set(adaptive.index):
        pick = {s: df[(df["system"] == s) & (df["variant"] == "adaptive")] for s in (TYPED, PROSE)}
        adv = advantage_interval(pick[TYPED], pick[PROSE], **boot)
    summary = {
        "model": model,
        "n_rows": len(df),
        "errors": int(df["error"].notna().sum()),
        "protocol_advantage": protocol_advantage(
            adaptive.get(TYPED, float("nan")), adaptive.get(PROSE, float("nan"))
        ),
        "protocol_advantage_ci_low": _json_number(adv["ci_low"]),
        "protocol_advantage_ci_high": _json_number(adv["ci_high"]),
        "protocol_advantage_n": int(adv["n"]),
        "selection_accuracy_adaptive": {k: float(v) for k, v in adaptive.items()},
        "variants": variants_summary(table),
        "leave_one_task_out": loto_summary(loto),
        "thetas": list(thetas),
        "bootstrap": {**boot, "margin": margin},
    }
    if router_yaml is not None:
        summary["fitted_router"] = fitted_router(router_yaml)
    if loto_fitted is not None:
        frame = loto_fitted if isinstance(loto_fitted, pd.DataFrame) else pd.read_csv(loto_fitted)
        summary["leave_one_task_out_fitted"] = loto_summary(frame)
    text = json.dumps(summary, indent=2, sort_keys=True, allow_nan=True)
    (tables / "summary.json").write_text(text + "\n")

    labels = {(s, v): label for label, s, v in SIX_POLICIES}
    per_task = by_task.assign(
        policy_label=[
            labels.get((s, v)) for s, v in zip(by_task["system"], by_task["variant"], strict=True)
        ]  # fmt: skip
    ).dropna(subset=["policy_label"])
    selection_by_task(per_task, model, figures / "topology_selection")
    tokens_vs_accuracy(six, model, figures / "topology_tokens_accuracy")
    theta_sweep_figure(sweep[sweep["task"] == "all"], model, figures / "topology_theta")
    ablations_figure(ablations, model, figures / "topology_ablations")
    log.info("topology report: %d rows from %d runs -> %s, %s", len(df), len(runs), tables,
             figures)  # fmt: skip
    return summary


def _cmd(args: argparse.Namespace) -> None:
    try:
        report(args.runs, args.tables, args.figures, tuple(args.thetas),
               router_yaml=args.router_yaml, loto_fitted=args.loto_fitted,
               n_resamples=args.n_resamples, seed=args.seed, margin=args.margin)  # fmt: skip
    except ValueError as exc:
        raise user_error(f"tersetalk topology: error: {exc}") from None


def add_commands(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser(
        "topology",
        help="the topology study's tables and figures from routed runs",
        description="Selection accuracy, accuracy, tokens and routing time per policy; "
        "comparison with the best fixed topology; protocol advantage; the θ sweep and "
        "leave-one-task-out replayed on the recorded router signals.",
    )
    t.add_argument("runs", nargs="+", help="run Parquet files of topology_* systems")
    t.add_argument("--tables", required=True, help="folder for the CSV tables and summary.json")
    t.add_argument("--figures", required=True, help="folder for the figures")
    t.add_argument(
        "--thetas",
        type=float,
        nargs="+",
        default=list(DEFAULT_THETAS),
        help="thresholds of the sweep (default: 1 3 5 7)",
    )
    t.add_argument(
        "--router-yaml",
        default=None,
        help="the fitted router (results/topology/router.yaml): into summary.json",
    )
    t.add_argument(
        "--loto-fitted",
        default=None,
        help="the fitted router's leave-one-task-out CSV (leave_one_task_out_fitted"
        ".csv, written by the fit step): summarised into summary.json",
    )
    t.add_argument(
        "--n-resamples",
        type=int,
        default=2000,
        help="bootstrap resamples of the paired tests (default 2000)",
    )
    t.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default 0)")
    t.add_argument(
        "--margin",
        type=float,
        default=0.02,
        help="non-inferiority margin of the quality drop (default 0.02)",
    )
    t.set_defaults(func=_cmd)


def main(argv: list[str] | None = None) -> int:
    """``python -m tersetalk.metrics.topology_cli``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="tersetalk")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
