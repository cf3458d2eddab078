"""Figures and tables of the format study from its Parquet files
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
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.core.io import read_metadata, read_parquet, write_csv_atomic  # noqa: E402
from tersetalk.core.plotting import (  # noqa: E402
    categorical_styles,
    dodge,
    note_dodged,
    save_figure,
    shifted,
    theme,
    wilson_errors,
)
from tersetalk.formats.experiments import summary_tables  # noqa: E402

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
    # n in each shape's label: payloads of that shape (an encoder that would lose data on
    # some of them is counted on fewer; the table CSV has its own n)
    n = shapes.groupby(["tokenizer", "shape"])["n"].transform("max")
    named = [f"{sh}\n(n={int(k)})" for sh, k in zip(shapes["shape"], n, strict=True)]
    tables = shapes.assign(shape=named)
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
        "payload shape (n payloads)",
        "tokens saved vs compact JSON (%)",
    )
    for ax in g.axes.flat:
        ax.axhline(0, color="black", lw=0.8)
        ax.tick_params(axis="x", rotation=20)
    g.figure.suptitle(
        "Lossless encodings of tool payloads: saving against compact JSON\n"
        "(totals over the corpus, exact; formats that would lose data are not counted)",
        y=1.1,
    )
    return save_figure(g.figure, out_stem, data=shapes)


def knapsack_figure(df: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """Value kept against the budget, one line per method with its 95% bootstrap band
    over payloads; methods whose lines coincide (the exact solver and the greedy often
    do) are set side by side, so none hides another."""
    from tersetalk.stats import bootstrap_ci

    theme()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    methods = list(dict.fromkeys(df["method"]))
    styles = categorical_styles(methods)
    curves = {}
    for method in methods:
        rows = []
        for budget, g in df[df["method"] == method].groupby("budget_fraction", sort=True):
            values = g["value_share"].to_numpy(float)
            ci = bootstrap_ci(values, n_resamples=1000, seed=0)
            rows.append((float(budget), float(values.mean()), ci.ci_low, ci.ci_high))
        curves[method] = np.array(rows, float).reshape(-1, 4)
    budgets = df["budget_fraction"].to_numpy(float)
    pad = 0.05 * (float(budgets.max() - budgets.min()) or 1.0)
    ax.set_xlim(float(budgets.min()) - pad, float(budgets.max()) + pad)
    ax.set_ylim(0, 1.05)
    offsets = dodge(ax, [curves[m][:, :2] for m in methods], 7.0)
    for method, dx in zip(methods, offsets, strict=True):
        c = curves[method]
        color, marker = styles[method]
        ax.plot(c[:, 0], c[:, 1], marker=marker, ms=6, color=color, label=method,
                transform=shifted(ax, dx))  # fmt: skip
        ax.fill_between(c[:, 0], c[:, 2], c[:, 3], color=color, alpha=0.15, lw=0)
    ax.legend(title="method")
    ax.set_xlabel("budget (fraction of the payload's compact-JSON tokens)")
    note_dodged(ax, offsets)
    ax.set_ylabel("value kept (share of leaves, uniform)\nmean, 95% bootstrap CI")
    ax.set_title(
        f"Knapsack under a budget ({df['tokenizer'].iloc[0]}, {df['item_id'].nunique()} payloads)"
    )
    return save_figure(fig, out_stem, data=df)


def comprehension_figure(
    df: pd.DataFrame, s: pd.DataFrame, out_stem: str | Path, model: str = ""
) -> list[Path]:
    """``df``: the comprehension rows; ``s``: their ``comprehension_summary``.

    One row per encoder, cheapest payload first: accuracy with its 95% Wilson interval
    (left) and payload tokens per question with a 95% bootstrap interval (right), n in
    each row's label. Rows rather than one scatter with a text label per point: real
    runs land several encoders on nearly the same point, and their labels piled up.
    """
    from tersetalk.stats import bootstrap_ci

    theme()
    s = s.sort_values(["payload_tokens_mean", "encoder"]).reset_index(drop=True)
    y = np.arange(len(s))
    palette = dict(zip(s["encoder"], sns.color_palette("tab10", len(s)), strict=True))
    fig, (acc_ax, tok_ax) = plt.subplots(
        1, 2, figsize=(10, 1.4 + 0.42 * len(s)), sharey=True, layout="constrained"
    )
    low, high = wilson_errors(s["accuracy"], s["n_questions"])
    tok_lo, tok_hi = [], []
    for r in s.itertuples():
        tokens = df.loc[df["encoder"] == r.encoder, "payload_tokens"].to_numpy(float)
        ci = bootstrap_ci(tokens, n_resamples=1000, seed=0)
        tok_lo.append(max(0.0, r.payload_tokens_mean - ci.ci_low))
        tok_hi.append(max(0.0, ci.ci_high - r.payload_tokens_mean))
    for i, r in s.iterrows():
        color = palette[r["encoder"]]
        acc_ax.errorbar(r["accuracy"], i, xerr=[[low[i]], [high[i]]], fmt="o", ms=7,
                        capsize=3, color=color)  # fmt: skip
        tok_ax.errorbar(r["payload_tokens_mean"], i, xerr=[[tok_lo[i]], [tok_hi[i]]], fmt="s",
                        ms=6, capsize=3, color=color)  # fmt: skip
    acc_ax.set_yticks(y, [f"{e} (n={int(n)})" for e, n in zip(s["encoder"], s["n_questions"],
                                                              strict=True)])  # fmt: skip
    acc_ax.set_ylim(len(s) - 0.5, -0.5)
    acc_ax.set_xlim(-0.02, 1.02)
    acc_ax.set_xlabel("accuracy\n(gold by construction; 95% Wilson CI)")
    tok_ax.set_xlim(left=0)
    tok_ax.set_xlabel(f"payload tokens per question\n({s['tokenizer'].iloc[0]}; 95% bootstrap CI)")
    n = df["qid"].nunique()
    fig.suptitle(
        f"Answering from each encoding: {n} questions, {df['payload_id'].nunique()} payloads"
        + (f" — {model}" if model else "")
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
