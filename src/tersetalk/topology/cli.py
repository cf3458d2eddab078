"""``tersetalk topology``: the topology study's tables and figures from its run files.

Reads the run Parquet files of the routed systems (``topology_freeform``,
``topology_tersetalk``) and writes, under ``--tables``:

- ``policies.csv``: one row per (system, variant), every variant the runs hold (the six
  policies, θ, ablations, fitted, planned, brief layouts): policy, accuracy (an error row
  counts 0), tokens, chain share, routing time, end-to-end latency per example, overflow
  rate, the router's dropped signal and scrambled tags; agreement with the **outcome
  oracle** (the cheapest fixed topology that answered the example correctly, from the
  same system's Fixed-Star and Fixed-Chain runs) over the decisive examples, with tie
  counts, accuracy and token regret against it, each with a jackknife t interval over tasks
  over tasks, and the floor verdict (``oracle_verdict``, ``oracle_note``); the label
  agreement (secondary) with its Wilson interval; and the comparison with the fixed
  topologies: the best fixed one only on a significant exact McNemar test (else ``none
  (tie: p = ...)``), against each fixed run the token reduction, quality preservation
  and, paired on the same examples, the token reduction's bootstrap interval and the
  quality drop's non-inferiority verdict (see :mod:`tersetalk.topology.metrics`);
- ``six_policies.csv``: the study's six policies from that table, in order, and the
  virtual Outcome-Oracle row;
- ``policies_by_task.csv``: the same numbers per task (agreement intervals: Wilson; no
  paired tests);
- ``outcome_oracle.csv``: the outcome oracle of every example, per system;
- ``ablations.csv``: the dropped-signal and scrambled-tag variants beside the full router;
- ``theta_sweep.csv`` and ``leave_one_task_out.csv``: the rule replayed on the signals
  recorded by each router's ``adaptive`` run (no model call);
- ``summary.json``: the outcome oracle's counts per system, the fixed topologies' McNemar
  test, the protocol advantage (the fitted routers' outcome-oracle agreement, difference
  and ratio, jackknife t interval over tasks; label agreement secondary), every variant's
  agreements with their intervals, leave-one-task-out summaries, the run files' models
  and, when given, the fitted router (``--router-yaml``) and its leave-one-task-out fits
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

from tersetalk.core.cliargs import nonnegative_int, user_error
from tersetalk.core.io import read_parquet, run_task_options
from tersetalk.metrics.summary import example_scores
from tersetalk.topology.metrics import (
    FIXED,
    MIN_DECISIVE,
    MIN_DECISIVE_TASKS,
    SIX_POLICIES,
    ablation_table,
    compare_to_fixed,
    fixed_comparison,
    fixed_variants,
    leave_one_task_out,
    loto_summary,
    oracle_counts,
    outcome_oracles,
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
#: the systems whose fitted routers the protocol advantage compares (typed over prose)
TYPED, PROSE = "topology_tersetalk", "topology_freeform"
#: the variant of both systems the protocol advantage compares
ADVANTAGE_VARIANT = "fitted"
ERROR_POLICY = (
    "an error row counts as a wrong answer (correct 0) and a wrong route in every "
    "comparison; it stays paired, never dropped"
)


def _json_number(x: float) -> float | None:
    """JSON has no NaN: an undefined number is written as null."""
    x = float(x)
    return x if math.isfinite(x) or math.isinf(x) else None


def _clean(obj):
    """A JSON-ready copy: NaN floats (numpy's too) become null, numpy scalars Python's."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str):
        obj = obj.item()
    if isinstance(obj, float):
        return _json_number(obj)
    return obj


#: the numbers of a variant that summary.json keeps
VARIANT_KEYS = (
    "label_agreement", "label_agreement_ci_low", "label_agreement_ci_high", "accuracy",
    "tokens", "oracle_agreement", "oracle_agreement_ci_low", "oracle_agreement_ci_high",
    "n_decisive", "n_ties", "n_all_wrong", "accuracy_regret", "accuracy_regret_ci_low",
    "accuracy_regret_ci_high", "token_regret", "token_regret_ci_low", "token_regret_ci_high",
    "oracle_verdict", "oracle_note",
)  # fmt: skip


def variants_summary(table: pd.DataFrame) -> dict:
    """system -> variant -> its policy, n, label and outcome-oracle agreement with their
    intervals, regrets, accuracy and tokens: every variant of the report, for
    summary.json."""
    out: dict[str, dict] = {}
    for r in table.to_dict("records"):
        entry = {"policy": r["policy"], "n": int(r["n"])}
        entry.update({k: r[k] for k in VARIANT_KEYS if k in r})
        out.setdefault(r["system"], {})[r["variant"]] = _clean(entry)
    return out


def advantage_summary(df: pd.DataFrame, oracles: dict, **boot) -> dict:
    """The protocol advantage block of summary.json: the fitted routers of both systems
    (:func:`tersetalk.topology.metrics.protocol_advantage`), or a block that says why it
    is missing."""
    pick = {s: df[(df["system"] == s) & (df["variant"] == ADVANTAGE_VARIANT)]
            for s in (TYPED, PROSE)}  # fmt: skip
    base = {"variant": ADVANTAGE_VARIANT, "typed": TYPED, "prose": PROSE}
    missing = [s for s, rows in pick.items() if rows.empty]
    if missing:
        return {**base, "verdict": "inconclusive",
                "note": f"no {ADVANTAGE_VARIANT} run of {', '.join(missing)}: the protocol "
                "advantage compares both systems' fitted routers"}  # fmt: skip
    adv = protocol_advantage(pick[TYPED], pick[PROSE], oracles.get(TYPED), oracles.get(PROSE),
                             **boot)  # fmt: skip
    return _clean({**base, **adv, "verdict": adv["oracle"]["verdict"],
                   "note": adv["oracle"]["note"]})  # fmt: skip


def fitted_router(path: str | Path) -> dict:
    """The fitted router file (``results/topology/router.yaml``) as written, for the
    summary; a clear error when it cannot be read."""
    import yaml

    from tersetalk.core.io import load_yaml_text

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
    (:func:`tersetalk.topology.metrics.loto_summary`). ``n_resamples`` and ``seed``: every
    bootstrap (paired against the fixed runs, the jackknife t interval over tasks of the
    outcome columns and of the protocol advantage); ``margin``: the non-inferiority test
    against the fixed runs. Error rows count as wrong answers throughout.
    """
    df = _read_runs(runs)
    tables, figures = Path(tables), Path(figures)
    tables.mkdir(parents=True, exist_ok=True)
    model = ", ".join(sorted(set(df["backend"].astype(str) + ":" + df["model"].astype(str))))
    boot = dict(n_resamples=n_resamples, seed=seed)

    oracles = outcome_oracles(df)
    table, six, by_task, ablations = _policy_tables(df, oracles, tables, margin=margin, **boot)
    sweep, loto = _sweep_tables(df, thetas, oracles, tables)
    summary = _summary(df, table, oracles, loto, model, thetas, margin=margin, **boot)
    if router_yaml is not None:
        summary["fitted_router"] = fitted_router(router_yaml)
    if loto_fitted is not None:
        frame = loto_fitted if isinstance(loto_fitted, pd.DataFrame) else pd.read_csv(loto_fitted)
        summary["leave_one_task_out_fitted"] = loto_summary(frame)
    summary = _clean(summary)
    text = json.dumps(summary, indent=2, sort_keys=True, allow_nan=True)
    (tables / "summary.json").write_text(text + "\n")

    _draw_figures(by_task, six, sweep, ablations, model, figures)
    log.info("topology report: %d rows from %d inputs -> %s, %s", len(df), len(runs), tables,
             figures)  # fmt: skip
    return summary


def run_files(runs: list[str | Path]) -> list[str | Path]:
    """The run files ``runs`` names: each run file itself, and for a batch's manifest
    (``.json``: the workflow's topology_batch) the run files it lists, once each is
    checked to be the file the batch wrote (:func:`tersetalk.core.io.check_manifest`)."""
    from tersetalk.core.io import check_manifest

    files: list[str | Path] = []
    for run in runs:
        files += check_manifest(run) if str(run).endswith(".json") else [run]
    return files


def scored_run(path: str | Path) -> pd.DataFrame:
    """One run file, its ``correct`` as the score step computes it: the task's scorer on
    each prediction and gold, with the task's options as the run had them (its spec's),
    or the verdict the run recorded for a task whose scorer runs the prediction
    (:func:`tersetalk.metrics.summary.example_scores`). The run's own column was its
    live check; a scorer changed since the run is applied here, as ``tersetalk score``
    applies it to the study's other runs."""
    run = read_parquet(path, "run")
    missing = [c for c in ("task", "prediction", "gold", "error") if c not in run.columns]
    if missing:
        raise ValueError(f"run file {path} has no column {', '.join(missing)}: not a run of "
                         "`tersetalk run`, or from an older version; rerun it")  # fmt: skip
    options = run_task_options(path)
    correct = pd.Series(0.0, index=run.index)
    for _, part in run.groupby("task", sort=False):  # a run is one task's; read any
        correct[part.index] = [s["correct"] for s in example_scores(part, options)]
    return run.assign(correct=correct)


def _read_runs(runs: list[str | Path]) -> pd.DataFrame:
    """The run files as one frame (manifests read as :func:`run_files` reads them, each
    rescored by :func:`scored_run`); every system in them must be a routed one."""
    runs = run_files(runs)
    if not runs:
        raise ValueError("no run files given")
    df = pd.concat([scored_run(p) for p in runs], ignore_index=True)
    if df.empty:
        raise ValueError(f"the {len(runs)} run file(s) hold no example; rerun the study's runs")
    unknown = sorted(set(df["system"]) - set(ROUTER_OF))
    if unknown:
        raise ValueError(f"not routed systems: {unknown}; expected runs of {sorted(ROUTER_OF)}")
    return df


def _policy_tables(
    df: pd.DataFrame, oracles: dict, tables: Path, *, margin: float, **boot
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Write and return the policy table (compared with the fixed runs), the six
    policies, the per-task table and the ablations; write the outcome oracle."""
    table = policy_table(df, oracles=oracles, **boot)
    table = paired_to_fixed(df, compare_to_fixed(table, df), margin=margin, **boot)
    table.to_csv(tables / "policies.csv", index=False)
    six = six_policies(table, oracles)
    six.to_csv(tables / "six_policies.csv", index=False)
    by_task = policy_table(df, by=("system", "variant", "task"), oracles=oracles, **boot)
    by_task.to_csv(tables / "policies_by_task.csv", index=False)
    oracle_frames = [o for _, o in sorted(oracles.items())]
    if oracle_frames:
        pd.concat(oracle_frames, ignore_index=True).to_csv(tables / "outcome_oracle.csv",
                                                           index=False)  # fmt: skip
    ablations = ablation_table(table)
    ablations = ablations.assign(router=ablations["system"].map(ROUTER_OF))
    ablations.to_csv(tables / "ablations.csv", index=False)
    return table, six, by_task, ablations


def _sweep_tables(
    df: pd.DataFrame, thetas: tuple[float, ...], oracles: dict, tables: Path
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write and return the θ sweep and the leave-one-task-out replay of every system's
    ``adaptive`` run (its recorded signals; no model call)."""
    sweeps, lotos = [], []
    for sys_name in sorted(set(df["system"])):
        rows = _sweep_rows(df, sys_name)
        sweeps.append(theta_sweep(rows, thetas, oracle=oracles.get(sys_name))
                      .assign(system=sys_name, router=ROUTER_OF[sys_name]))  # fmt: skip
        lotos.append(leave_one_task_out(rows, thetas).assign(system=sys_name))
    sweep = pd.concat(sweeps, ignore_index=True)
    sweep.to_csv(tables / "theta_sweep.csv", index=False)
    loto = pd.concat(lotos, ignore_index=True)
    loto.to_csv(tables / "leave_one_task_out.csv", index=False)
    return sweep, loto


def _summary(
    df: pd.DataFrame,
    table: pd.DataFrame,
    oracles: dict,
    loto: pd.DataFrame,
    model: str,
    thetas: tuple[float, ...],
    *,
    margin: float,
    **boot,
) -> dict:
    """summary.json's blocks that the runs alone decide (the fitted router's blocks are
    added by the caller when given)."""
    adaptive = table[table["variant"] == "adaptive"].set_index("system")
    best = {}
    for sys_name in sorted(set(df["system"])):
        if set(fixed_variants(df, sys_name)) == set(FIXED):
            best[sys_name] = fixed_comparison(df, sys_name)
    return {
        "model": model,
        "n_rows": len(df),
        "errors": int(table["errors"].sum()),
        "error_policy": ERROR_POLICY,
        "outcome_oracle": {s: oracle_counts(o) for s, o in sorted(oracles.items())},
        "outcome_floor": {"min_decisive": MIN_DECISIVE, "min_decisive_tasks": MIN_DECISIVE_TASKS},
        "best_fixed": best,
        "protocol_advantage": advantage_summary(df, oracles, **boot),
        "label_agreement_adaptive": dict(adaptive["label_agreement"].items()),
        "oracle_agreement_adaptive": dict(adaptive["oracle_agreement"].items()),
        "variants": variants_summary(table),
        "leave_one_task_out": loto_summary(loto),
        "thetas": list(thetas),
        "bootstrap": {**boot, "margin": margin},
    }


def _draw_figures(
    by_task: pd.DataFrame,
    six: pd.DataFrame,
    sweep: pd.DataFrame,
    ablations: pd.DataFrame,
    model: str,
    figures: Path,
) -> None:
    """The study's four figures: selection by task (the six policies only), tokens
    against accuracy, the θ sweep over all tasks, and the ablations."""
    from tersetalk.topology.plots import (
        ablations_figure,
        selection_by_task,
        theta_sweep_figure,
        tokens_vs_accuracy,
    )

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
        description="Per policy: agreement with the outcome oracle (the cheapest fixed "
        "topology that answered each example correctly) and regret against it, label "
        "agreement, accuracy, tokens and routing time; comparison with the fixed "
        "topologies (best one only on a significant McNemar test); protocol advantage of "
        "the fitted routers; the θ sweep and leave-one-task-out replayed on the recorded "
        "router signals.",
    )
    t.add_argument(
        "runs",
        nargs="+",
        help="run Parquet files of topology_* systems, or the manifests of the jobs that "
        "wrote them (.json: each lists its run files, checked to be the ones it wrote)",
    )
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
    """``python -m tersetalk.topology.cli``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="tersetalk")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
