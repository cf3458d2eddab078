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

log = logging.getLogger("tersetalk.sensitivity")

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
    "tokens_total_cl100k",
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
                "tokens_total_cl100k": df.get(
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
    """Per task, token reduction and accuracy of every run, one bar per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

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
    for row, task in zip(axes, tasks, strict=True):
        sub = table[table["task"] == task].copy()
        sub["token_reduction_pct"] = 100 * sub["token_reduction"]
        sub["accuracy_pct"] = 100 * sub["accuracy"]
        order = sorted(set(sub["run"]))
        for ax, col, label in (
            (row[0], "token_reduction_pct", "token reduction vs. reference (%)"),
            (row[1], "accuracy_pct", "accuracy (%)"),
        ):
            sns.barplot(
                data=sub, y="run", x=col, hue="model_name", order=order, hue_order=models,
                palette=palette, ax=ax, orient="h",
            )  # fmt: skip
            ax.axvline(0, color="black", linewidth=0.8)
            ax.set_xlabel(label)
            ax.set_ylabel(task)
            if ax.get_legend() is not None:
                ax.get_legend().remove()
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[m]) for m in models]
    labels = []
    for m in models:
        first = table[table["model_name"] == m].iloc[0]
        labels.append(f"{m} ({first['backend']}:{first['model']})")
    # the title rides on the legend: a suptitle and an outside legend overlap in this layout
    title = "Model sensitivity: each model against its own free-form reference"
    fig.legend(handles, labels, loc="outside upper center", ncol=min(3, len(models)),
               frameon=False, title=title)  # fmt: skip
    from tersetalk.plotting import save_figure

    return save_figure(fig, out_stem, data=table, model_key=", ".join(models))


def _named_path(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, path


def _cmd_compare(args: argparse.Namespace) -> None:
    from tersetalk.io import read_parquet, write_csv_atomic

    summaries: dict[str, pd.DataFrame] = {}
    for name, path in args.summary:
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
    c.add_argument("--reference", required=True, help="the reference run, e.g. freeform/default")
    c.add_argument("--table", required=True, help="comparison CSV to write")
    c.add_argument("--out-stem", required=True, help="figure path without extension")
    c.set_defaults(func=_cmd_compare)
