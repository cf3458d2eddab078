"""Figures and tables of the format study (issue 15) from its Parquet files
(``tersetalk formats plot``).

- ``formats_savings``: saving against compact JSON per shape and encoder, per tokenizer;
- ``formats_knapsack``: value kept against the budget for exact, greedy and binary;
- ``formats_comprehension``: accuracy against payload tokens per encoder (the frontier).

Tables (CSV, every number labelled with its baseline and tokenizer): savings by shape,
the knapsack summary with the greedy's optimality gap, the dedup replay's savings, and
comprehension accuracy per encoder with the paired difference to compact JSON. They
are computed beside the experiments (:func:`tersetalk.formats.experiments.summary_tables`),
once; this module writes them and draws the figures from them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.formats.experiments import summary_tables  # noqa: E402
from tersetalk.io import read_metadata, read_parquet, write_csv_atomic  # noqa: E402
from tersetalk.plotting import save_figure, theme  # noqa: E402

ENCODER_ORDER = [
    "json_pretty",
    "json_compact",
    "toon",
    "csv",
    "markdown_table",
    "kv",
    "best_single",
    "mckp_plain",
    "mckp",
]


def savings_figure(shapes: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """``shapes``: the savings-by-shape table of every tokenizer (``summary_tables``)."""
    theme()
    tables = shapes[shapes["encoder"] != "json_compact"]
    order = [e for e in ENCODER_ORDER if e in set(tables["encoder"])]
    g = sns.catplot(
        data=tables,
        kind="bar",
        x="shape",
        y="savings_vs_json_compact_pct",
        hue="encoder",
        hue_order=order,
        col="tokenizer",
        height=4.2,
        aspect=1.5,
        palette="tab10",
    )
    g.set_axis_labels(
        "payload shape (n payloads in the table CSV)", "tokens saved vs compact JSON (%)"
    )
    for ax in g.axes.flat:
        ax.axhline(0, color="black", lw=0.8)
        ax.tick_params(axis="x", rotation=20)
    g.figure.suptitle(
        "Lossless encodings of tool payloads: saving against compact JSON "
        "(formats that would lose data are not counted)",
        y=1.04,
    )
    return save_figure(g.figure, out_stem, data=shapes)


def knapsack_figure(df: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    theme()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    sns.lineplot(
        data=df,
        x="budget_fraction",
        y="value_share",
        hue="method",
        style="method",
        markers=True,
        errorbar=("ci", 95),
        ax=ax,
    )
    ax.set_xlabel("budget (fraction of the payload's compact-JSON tokens)")
    ax.set_ylabel("value kept (share of leaves, uniform)")
    ax.set_ylim(0, 1.05)
    ax.set_title(
        f"Knapsack under a budget ({df['tokenizer'].iloc[0]}, {df['item_id'].nunique()} payloads)"
    )
    return save_figure(fig, out_stem, data=df)


def comprehension_figure(
    df: pd.DataFrame, s: pd.DataFrame, out_stem: str | Path, model: str = ""
) -> list[Path]:
    """``df``: the comprehension rows; ``s``: their ``comprehension_summary``."""
    theme()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    # 95% Wilson intervals: a few dozen questions leave wide ones, and the figure says so
    from scipy.stats import norm

    z = norm.ppf(0.975)
    n, p = s["n_questions"], s["accuracy"]
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * ((p * (1 - p) / n + z**2 / (4 * n**2)) ** 0.5) / (1 + z**2 / n)
    palette = dict(zip(s["encoder"], sns.color_palette("tab10", len(s)), strict=True))
    for i, r in enumerate(s.sort_values("payload_tokens_mean").itertuples()):
        lo = min(r.accuracy, max(0.0, centre[r.Index] - half[r.Index]))
        hi = max(r.accuracy, min(1.0, centre[r.Index] + half[r.Index]))
        ax.errorbar(
            r.payload_tokens_mean,
            r.accuracy,
            yerr=[[r.accuracy - lo], [hi - r.accuracy]],
            fmt="o",
            ms=8,
            color=palette[r.encoder],
            capsize=4,
        )
        ax.annotate(
            r.encoder,
            (r.payload_tokens_mean, r.accuracy),
            textcoords="offset points",
            xytext=(6, 8 if i % 2 == 0 else -14),
            fontsize=9,
        )
    ax.set_xlabel(f"payload tokens per question ({s['tokenizer'].iloc[0]})")
    ax.set_ylabel("accuracy (gold by construction), 95% CI")
    ax.set_ylim(-0.02, 1.02)
    n = df["qid"].nunique()
    ax.set_title(
        f"Answering from each encoding: {n} questions, {df['payload_id'].nunique()} payloads"
        + (f"\n{model}" if model else "")
    )
    return save_figure(fig, out_stem, data=df, models=[model] if model else None)


DESCRIPTION = "Draw the format study's figures and write its CSV tables."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--savings", required=True, help="results/formats/savings.parquet")
    ap.add_argument("--knapsack", required=True, help="results/formats/knapsack.parquet")
    ap.add_argument("--dedup", required=True, help="results/formats/dedup.parquet")
    ap.add_argument("--comprehension", required=True, help="results/formats/comprehension.parquet")
    ap.add_argument("--figures", default="figures", help="folder for the figures")
    ap.add_argument("--tables", default="results/formats", help="folder for the CSV tables")


def run(args: argparse.Namespace) -> int:
    fig, tab = Path(args.figures), Path(args.tables)
    sav = read_parquet(args.savings)
    kn = read_parquet(args.knapsack)
    dd = read_parquet(args.dedup)
    co = read_parquet(args.comprehension)
    tables = summary_tables(sav, kn, dd, co)
    for name, table in tables.items():
        write_csv_atomic(table, tab / f"{name}.csv")
    savings_figure(tables["savings_by_shape"], fig / "formats_savings")
    knapsack_figure(kn, fig / "formats_knapsack")
    model = read_metadata(args.comprehension).get("model", {})
    label = " ".join(str(model.get(k, "")) for k in ("backend", "model")).strip()
    comprehension_figure(
        co, tables["comprehension_summary"], fig / "formats_comprehension", model=label
    )
    print("formats figures and tables written", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tersetalk formats plot", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
