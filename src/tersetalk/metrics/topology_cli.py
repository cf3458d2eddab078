"""``tersetalk topology``: the topology study's tables and figures from its run files.

Reads the run Parquet files of the routed systems (``topology_freeform``,
``topology_tersetalk``) and writes, under ``--tables``:

- ``policies.csv``: one row per (system, variant): policy, selection accuracy,
  accuracy, tokens, chain share, routing time, and the comparison with the system's
  best fixed topology (token reduction, quality preservation, efficiency score);
- ``six_policies.csv``: the study's six policies from that table, in order;
- ``policies_by_task.csv``: the same numbers per task;
- ``theta_sweep.csv`` and ``leave_one_task_out.csv``: the rule replayed on the signals
  recorded by each router's ``adaptive`` run (no model call);
- ``summary.json``: protocol advantage and the run files' models;

and, under ``--figures``, ``topology_selection``, ``topology_tokens_accuracy`` and
``topology_theta`` (PNG and PDF).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pandas as pd

from tersetalk.metrics.topology import (
    SIX_POLICIES,
    compare_to_fixed,
    leave_one_task_out,
    policy_table,
    protocol_advantage,
    six_policies,
    theta_sweep,
)

log = logging.getLogger(__name__)

__all__ = ["add_commands", "report"]

ROUTER_OF = {"topology_tersetalk": "TerseTalk (typed lines)", "topology_freeform": "free-form"}
DEFAULT_THETAS = (1.0, 3.0, 5.0, 7.0)


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
) -> dict:
    """Write the study's tables and figures; return the summary written to summary.json."""
    from tersetalk.plots.topology import selection_by_task, theta_sweep_figure, tokens_vs_accuracy

    if not runs:
        raise ValueError("no run files given")
    df = pd.concat([pd.read_parquet(p) for p in runs], ignore_index=True)
    unknown = sorted(set(df["system"]) - set(ROUTER_OF))
    if unknown:
        raise ValueError(f"not routed systems: {unknown}; expected runs of {sorted(ROUTER_OF)}")
    tables, figures = Path(tables), Path(figures)
    tables.mkdir(parents=True, exist_ok=True)
    model = ", ".join(sorted(set(df["backend"].astype(str) + ":" + df["model"].astype(str))))

    table = compare_to_fixed(policy_table(df))
    table.to_csv(tables / "policies.csv", index=False)
    six = six_policies(table)
    six.to_csv(tables / "six_policies.csv", index=False)
    by_task = policy_table(df, by=("system", "variant", "task"))
    by_task.to_csv(tables / "policies_by_task.csv", index=False)

    sweeps, lotos = [], []
    for sys_name in sorted(set(df["system"])):
        rows = _sweep_rows(df, sys_name)
        sweeps.append(theta_sweep(rows, thetas).assign(system=sys_name, router=ROUTER_OF[sys_name]))
        lotos.append(leave_one_task_out(rows, thetas).assign(system=sys_name))
    sweep = pd.concat(sweeps, ignore_index=True)
    sweep.to_csv(tables / "theta_sweep.csv", index=False)
    pd.concat(lotos, ignore_index=True).to_csv(tables / "leave_one_task_out.csv", index=False)

    adaptive = table[table["variant"] == "adaptive"].set_index("system")["selection_accuracy"]
    summary = {
        "model": model,
        "n_rows": len(df),
        "errors": int(df["error"].notna().sum()),
        "protocol_advantage": protocol_advantage(
            adaptive.get("topology_tersetalk", float("nan")),
            adaptive.get("topology_freeform", float("nan")),
        ),
        "selection_accuracy_adaptive": {k: float(v) for k, v in adaptive.items()},
        "thetas": list(thetas),
    }
    (tables / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")

    labels = {(s, v): label for label, s, v in SIX_POLICIES}
    per_task = by_task.assign(
        policy_label=[
            labels.get((s, v)) for s, v in zip(by_task["system"], by_task["variant"], strict=True)
        ]  # fmt: skip
    ).dropna(subset=["policy_label"])
    selection_by_task(per_task, model, figures / "topology_selection")
    tokens_vs_accuracy(six, model, figures / "topology_tokens_accuracy")
    theta_sweep_figure(sweep[sweep["task"] == "all"], model, figures / "topology_theta")
    log.info("topology report: %d rows from %d runs -> %s, %s", len(df), len(runs), tables,
             figures)  # fmt: skip
    return summary


def _cmd(args: argparse.Namespace) -> None:
    try:
        report(args.runs, args.tables, args.figures, tuple(args.thetas))
    except ValueError as exc:
        raise SystemExit(f"tersetalk topology: error: {exc}") from None


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
