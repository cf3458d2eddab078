"""Figures and tables of the format study (issue 15) from its Parquet files.

- ``formats_savings``: saving against compact JSON per shape and encoder, per tokenizer;
- ``formats_knapsack``: value kept against the budget for exact, greedy and binary;
- ``formats_comprehension``: accuracy against payload tokens per encoder (the frontier).

Tables (CSV, every number labelled with its baseline and tokenizer): savings by shape,
the knapsack summary with the greedy's optimality gap, the dedup replay's savings, and
comprehension accuracy per encoder with the paired difference to compact JSON.
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

from tersetalk.formats.experiments import BASELINES, savings_by_shape  # noqa: E402
from tersetalk.io import read_metadata, read_parquet, write_csv_atomic  # noqa: E402
from tersetalk.plots.figures import _theme, save_figure  # noqa: E402

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


def savings_figure(df: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    _theme()
    tables = pd.concat([savings_by_shape(df, t) for t in sorted(df["tokenizer"].unique())])
    tables = tables[tables["encoder"] != "json_compact"]
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
    return save_figure(g.figure, out_stem)


def knapsack_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean value kept and tokens per (budget, method); the greedy's gap to exact."""
    s = df.groupby(["tokenizer", "budget_fraction", "method"], as_index=False).agg(
        n=("item_id", "size"),
        value_share=("value_share", "mean"),
        tokens=("tokens", "mean"),
        infeasible=("error", lambda e: int(e.notna().sum())),
        t_solve_s_median=("t_solve_s", "median"),
    )
    exact = df[df["method"] == "exact"].set_index(["item_id", "budget_fraction"])["value_share"]
    gaps = []
    for m in ("greedy", "binary"):
        other = df[df["method"] == m].set_index(["item_id", "budget_fraction"])["value_share"]
        gap = (exact - other).groupby(level="budget_fraction").agg(["mean", "max"])
        gap["method"] = m
        gaps.append(gap.reset_index())
    g = pd.concat(gaps).rename(columns={"mean": "gap_to_exact_mean", "max": "gap_to_exact_max"})
    return s.merge(g, on=["budget_fraction", "method"], how="left")


def knapsack_figure(df: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    _theme()
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
    return save_figure(fig, out_stem)


def dedup_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per encoder and baseline: hit rate and the dedup / encoder / combined savings (%).

    ``dedup_savings_pct``: tokens the reference hints saved, over the baseline's tokens
    for every call; ``encoder_savings_pct``: the encoder against the baseline on the
    calls that missed the cache; ``combined_savings_pct``: everything the encoder with
    L0 dedup sent, against the baseline sending every call in full.
    """
    rows = []
    for base in BASELINES:
        b = df[df["encoder"] == base].set_index(["session", "call"])
        for enc, e in df.groupby("encoder"):
            e = e.set_index(["session", "call"])
            base_all = b["tokens_full"].sum()
            miss = ~e["hit"]
            rows.append(
                {
                    "encoder": enc,
                    "baseline": base,
                    "tokenizer": e["tokenizer"].iloc[0],
                    "calls": len(e),
                    "hit_rate": e["hit"].mean(),
                    "dedup_savings_pct": 100
                    * (e.loc[~miss, "tokens_full"] - e.loc[~miss, "tokens_sent"]).sum()
                    / e["tokens_full"].sum(),
                    "encoder_savings_pct": 100
                    * (1 - e.loc[miss, "tokens_full"].sum() / b.loc[miss, "tokens_full"].sum()),
                    "combined_savings_pct": 100 * (1 - e["tokens_sent"].sum() / base_all),
                }
            )
    return pd.DataFrame(rows)


def comprehension_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Accuracy and mean payload tokens per encoder; paired difference to compact JSON."""
    s = df.groupby("encoder", as_index=False).agg(
        n_questions=("qid", "size"),
        accuracy=("correct", "mean"),
        payload_tokens_mean=("payload_tokens", "mean"),
        errors=("error", lambda e: int(e.notna().sum())),
    )
    s["tokenizer"] = df["tokenizer"].iloc[0]
    ref = df[df["encoder"] == "json_compact"].set_index("qid")["correct"].astype(float)
    diffs = {}
    for enc, g in df.groupby("encoder"):
        d = g.set_index("qid")["correct"].astype(float) - ref
        diffs[enc] = 100 * d.mean()
    s["accuracy_minus_json_compact_pts"] = s["encoder"].map(diffs)
    return s


def comprehension_figure(df: pd.DataFrame, out_stem: str | Path, model: str = "") -> list[Path]:
    _theme()
    s = comprehension_summary(df)
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
    return save_figure(fig, out_stem)


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
    shapes = pd.concat([savings_by_shape(sav, t) for t in sorted(sav["tokenizer"].unique())])
    write_csv_atomic(shapes, tab / "savings_by_shape.csv")
    write_csv_atomic(knapsack_summary(kn), tab / "knapsack_summary.csv")
    write_csv_atomic(dedup_summary(dd), tab / "dedup_summary.csv")
    write_csv_atomic(comprehension_summary(co), tab / "comprehension_summary.csv")
    savings_figure(sav, fig / "formats_savings")
    knapsack_figure(kn, fig / "formats_knapsack")
    model = read_metadata(args.comprehension).get("model", {})
    label = " ".join(str(model.get(k, "")) for k in ("backend", "model")).strip()
    comprehension_figure(co, fig / "formats_comprehension", model=label)
    print("formats figures and tables written", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tersetalk formats plot", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
