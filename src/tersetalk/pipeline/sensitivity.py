"""Model sensitivity: the same systems on several models, compared in one table and figure.

The workflow (``workflow/rules/models.smk``) runs every system once per entry of
``sensitivity.models`` under ``results/models/<name>/`` and aggregates each model's
own summary, paired with that model's own free-form reference. This module reads those
summaries and answers the reviewer's question "does the token saving and the accuracy
hold on other models?": per task and run, the mean per-example token reduction against
the reference (cl100k_base, as in the summary) and the accuracy, one column per model.

``tersetalk models compare --summary NAME=PATH ...`` writes the table (CSV) and the
figure (PDF and PNG).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

log = logging.getLogger("tersetalk.pipeline.sensitivity")

__all__ = ["add_commands", "comparison_table", "plot_comparison"]

#: columns of the comparison table, in order
TABLE_COLUMNS = [
    "model_name",
    "backend",
    "model",
    "task",
    "run",
    "n",
    "n_errors",
    "accuracy",
    "token_reduction",
    "tokens_total_cl100k_mean",
    "is_reference",
]


def comparison_table(summaries: dict[str, pd.DataFrame], reference: str) -> pd.DataFrame:
    """One row per (model, task, run) from each model's summary table.

    ``token_reduction`` is the summary's ``token_reduction_mean`` (per example, against
    the model's own ``reference`` run; 0 for the reference itself); a summary without
    it (no per-example metrics) is refused rather than drawn as zero.
    """
    if not summaries:
        raise ValueError("no model summaries to compare; list models in sensitivity.models")
    frames = []
    for name, df in summaries.items():
        need = {"task", "system", "variant", "accuracy", "token_reduction_mean", "n"}
        missing = sorted(need - set(df.columns))
        if missing:
            raise ValueError(
                f"summary of model {name!r} lacks columns {missing}; it must be a summary "
                "written by `tersetalk aggregate` from scores with per-example metrics"
            )
        out = pd.DataFrame(
            {
                "model_name": name,
                "backend": df.get("backend", pd.Series([""] * len(df))).astype(str).to_numpy(),
                "model": df.get("model", pd.Series([""] * len(df))).astype(str).to_numpy(),
                "task": df["task"].to_numpy(),
                "run": (df["system"] + "/" + df["variant"]).to_numpy(),
                "n": df["n"].to_numpy(),
                "n_errors": df.get("n_errors", pd.Series([0] * len(df))).to_numpy(),
                "accuracy": df["accuracy"].astype(float).to_numpy(),
                "token_reduction": df["token_reduction_mean"].astype(float).to_numpy(),
                "tokens_total_cl100k_mean": df.get(
                    "tokens_total_cl100k_mean", pd.Series([float("nan")] * len(df))
                ).to_numpy(),
            }
        )
        out["is_reference"] = out["run"] == reference
        frames.append(out)
    table = pd.concat(frames, ignore_index=True)[TABLE_COLUMNS]
    order = {name: i for i, name in enumerate(summaries)}
    table["_m"] = table["model_name"].map(order)
    table = table.sort_values(["task", "run", "_m"], kind="stable").drop(columns="_m")
    return table.reset_index(drop=True)


def plot_comparison(table: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """Per task, token reduction and accuracy of every run, one bar per model; accuracy
    with its 95% Wilson interval, n per run in the legend. The token reduction is the
    summaries' mean per example, which carries no interval (the summaries keep no spread);
    its axis says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    from tersetalk.core.plotting import wilson_errors
    from tersetalk.tasks.registry import display_name as task_display

    sns.set_theme(context="paper", style="whitegrid", font_scale=1.2)
    tasks = list(dict.fromkeys(table["task"]))
    models = list(dict.fromkeys(table["model_name"]))
    runs = sorted(set(table["run"]))
    height = max(3.0, 0.28 * len(runs) * max(1, len(models)) / 2 + 1.5)
    fig, axes = plt.subplots(
        len(tasks), 2, figsize=(12, height * len(tasks)), squeeze=False, sharey="row",
        layout="constrained",
    )  # fmt: skip
    palette = dict(zip(models, sns.color_palette("colorblind", len(models)), strict=True))
    width = 0.84 / max(len(models), 1)
    for row, task in zip(axes, tasks, strict=True):
        sub = table[table["task"] == task]
        order = sorted(set(sub["run"]))
        for j, m in enumerate(models):
            d = sub[sub["model_name"] == m]
            y = np.array([order.index(r) for r in d["run"]]) - 0.42 + width * (j + 0.5)
            acc = d["accuracy"].to_numpy(float)
            low, high = wilson_errors(acc, d["n"].to_numpy())
            red = 100 * d["token_reduction"].to_numpy(float)
            row[0].barh(y, red, height=width * 0.9, color=palette[m], alpha=0.85)
            row[0].plot(red, y, "o", ms=3, color="0.15")  # a reduction of 0 stays visible
            row[1].barh(y, 100 * acc, height=width * 0.9, color=palette[m], alpha=0.85)
            row[1].errorbar(100 * acc, y, xerr=[100 * low, 100 * high], fmt="o", ms=3,
                            capsize=2, lw=1, color="0.15")  # fmt: skip
        for ax in row:
            ax.axvline(0, color="black", linewidth=0.8)
            ax.set_yticks(range(len(order)), order)
            ax.set_ylim(len(order) - 0.5, -0.5)
        # room on both sides of the bars, so a dot at 0 is not cut in half by the frame
        reds = 100 * sub["token_reduction"].astype(float)
        lo, hi = min(0.0, float(reds.min())), max(0.0, float(reds.max()))
        pad = 0.04 * ((hi - lo) or 1.0)
        row[0].set_xlim(lo - pad, hi + pad)
        row[0].set_xlabel("token reduction vs. reference (%, mean; no interval)")
        row[1].set_xlabel("accuracy (%, 95% Wilson CI)")
        row[1].set_xlim(0, 102)
        row[0].set_ylabel(task_display(task))
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[m]) for m in models]
    labels = []
    for m in models:
        first = table[table["model_name"] == m].iloc[0]
        n = table.loc[table["model_name"] == m, "n"]
        n_text = f"n={int(n.min())}" if n.min() == n.max() else f"n={int(n.min())}-{int(n.max())}"
        labels.append(f"{m} ({first['backend']}:{first['model']}; {n_text} per run)")
    # the title rides on the legend: a suptitle and an outside legend overlap in this layout
    title = "Model sensitivity: each model against its own free-form reference"
    fig.legend(handles, labels, loc="outside upper center", ncol=min(3, len(models)),
               frameon=False, title=title)  # fmt: skip
    from tersetalk.core.plotting import save_figure

    return save_figure(fig, out_stem, data=table, model_key=", ".join(models))


def _named_path(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, path


def _cmd_compare(args: argparse.Namespace) -> None:
    from tersetalk.core.io import read_parquet, write_csv_atomic

    named = list(args.summary)
    if args.others_in:  # every other model's summary there now (an earlier `models:`)
        from tersetalk.core.paths import MODEL_TEMPLATES, model_keys, model_root

        given = {name for name, _ in named}
        others = [k for k in model_keys(args.others_in) if k not in given]
        found = [(k, model_root(k, args.others_in) / MODEL_TEMPLATES["SUMMARY"]) for k in others]
        named += [(k, str(path)) for k, path in found if path.is_file()]
        log.info("models compare: %d other models with a summary in %s", len(named) - len(given),
                 args.others_in)  # fmt: skip
    summaries: dict[str, pd.DataFrame] = {}
    for name, path in named:
        if name in summaries:
            raise SystemExit(f"error: model {name!r} given twice")
        summaries[name] = read_parquet(path, f"summary of model {name!r}")
    table = comparison_table(summaries, args.reference)
    write_csv_atomic(table, args.table)
    plot_comparison(table, args.out_stem)
    log.info("compared %d models over %d runs -> %s, %s.{pdf,png}", len(summaries),
             table["run"].nunique(), args.table, args.out_stem)  # fmt: skip


def add_commands(sub: argparse._SubParsersAction) -> None:
    """``tersetalk models compare``."""
    p = sub.add_parser(
        "models",
        help="model sensitivity (sensitivity.models)",
        description="Compare the same runs across models: the workflow's sensitivity study "
        "(config key sensitivity.models) runs each listed model, then `models compare` puts "
        "their token reduction and accuracy side by side.",
    )
    msub = p.add_subparsers(dest="models_command", required=True, metavar="SUBCOMMAND")
    c = msub.add_parser(
        "compare",
        help="compare token reduction and accuracy across models",
        description="Read each model's summary (results/<model>/summary.parquet) and "
        "write a comparison table and figure: per task and run, token reduction against "
        "the model's own reference and accuracy, one bar per model.",
    )
    c.add_argument(
        "--summary", action="append", type=_named_path, required=True,
        help="NAME=PATH of one model's summary Parquet; repeat per model (order kept)",
    )  # fmt: skip
    c.add_argument(
        "--others-in", metavar="RESULTS",
        help="also every other model's summary in this results folder when the command runs "
        "(<RESULTS>/<model>/summary.parquet, after the --summary models; the workflow gives "
        "results/ so that earlier models are compared without the DAG depending on them)",
    )  # fmt: skip
    c.add_argument("--reference", required=True, help="the reference run, e.g. freeform/default")
    c.add_argument("--table", required=True, help="comparison CSV to write")
    c.add_argument("--out-stem", required=True, help="figure path without extension")
    c.set_defaults(func=_cmd_compare)
