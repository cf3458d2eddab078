"""The simulation study's figures: type I error, power and interval coverage over the
control's base rate and the number of examples (:mod:`tersetalk.stats.simulation`).

``<stem>.{png,pdf}``: the paired binary study, one column per discordance level, one row
per quantity, lines per n, the nominal value dashed, the acceptance threshold dotted and
each point's Monte-Carlo 95% band shaded. ``<stem>_more.{png,pdf}``: the continuous study
(type I error, coverage of the verdict's t / bootstrap-t interval and of the
percentile bootstrap) and the router study (coverage of
the agreement's intervals against the number of tasks).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.core.plotting import MARKERS, OKABE_ITO, dodge, save_figure, shifted, theme  # noqa: E402

__all__ = ["plot_stats_sim"]

#: the binary study's rows, top to bottom: quantity -> y-axis label
BINARY_ROWS = {
    "type1_error": "type I error\n(non-inferior at d = -margin)",
    "power": "power\n(non-inferior at d = 0)",
    "coverage_tango_cc": "coverage: Tango, cc 1/2\n(the verdict's)",
    "coverage_tango": "coverage: Tango\n(paired difference)",
    "coverage_newcombe": "coverage: Newcombe\n(paired difference)",
    "coverage_wilson_cc_control": "coverage: Wilson, cc\n(control accuracy)",
    "coverage_wilson_control": "coverage: Wilson\n(control accuracy)",
    "coverage_bootstrap": "coverage: percentile\nbootstrap (difference)",
}


def _level_name(level: float) -> str:
    from tersetalk.stats.simulation import LEVEL_NAMES

    name = LEVEL_NAMES.get(level)
    return f"discordance {level:g}" + (f": {name}" if name else "")


def _agg(rows: pd.DataFrame, keys: list[str], how: str) -> pd.DataFrame:
    """``rows`` reduced to one per ``keys``: the estimate by ``how`` (mean, min, max), the
    largest Monte-Carlo SE, and the target and threshold."""
    return rows.groupby(keys, as_index=False).agg(
        estimate=("estimate", how),
        mcse=("mcse", "max"),
        target=("target", "first"),
        threshold=("threshold", "first"),
    )


def _reference(ax, quantity: str, rows: pd.DataFrame) -> None:
    """Dashed: the nominal value; dotted: the acceptance threshold (type I error and
    coverage only)."""
    target = rows["target"].dropna()
    if target.empty:
        return
    ax.axhline(float(target.iloc[0]), color="0.25", ls="--", lw=1.0, zorder=1)
    thr = rows["threshold"].dropna()
    if not thr.empty:
        ax.axhline(float(thr.max()), color="firebrick", ls=":", lw=1.2, zorder=1)


def _lines(ax, rows: pd.DataFrame, x: str, positions: dict, hue: str, palette: dict,
           ylim: tuple[float, float]) -> None:  # fmt: skip
    """One line per ``hue`` value with its Monte-Carlo band; a marker each, and lines
    that meet (two n at a type I error of 0) set side by side, so none hides another."""
    ax.set_xlim(-0.5, len(positions) - 0.5)
    ax.set_ylim(*ylim)
    series = []
    for value, sub in rows.groupby(hue, sort=True):
        sub = sub.sort_values(x)
        xs = np.array([positions[v] for v in sub[x]], dtype=float)
        series.append((value, xs, sub["estimate"].to_numpy(float), sub["mcse"].to_numpy(float)))
    offsets = dodge(ax, [np.column_stack([xs, est]) for _, xs, est, _ in series], 4.5)
    for k, ((value, xs, est, mcse), dx) in enumerate(zip(series, offsets, strict=True)):
        band = 1.96 * mcse
        ax.plot(xs, est, marker=MARKERS[k % len(MARKERS)], ms=3.5, lw=1.3,
                color=palette[value], label=str(value), transform=shifted(ax, dx))  # fmt: skip
        ax.fill_between(xs, np.clip(est - band, 0, 1), np.clip(est + band, 0, 1),
                        color=palette[value], alpha=0.12, lw=0)  # fmt: skip


def _binary_figure(table: pd.DataFrame, out_stem: Path) -> list[Path]:
    df = table[(table["study"] == "binary") & table["quantity"].isin(list(BINARY_ROWS))]
    df = df[df["trials"] > 0]
    if df.empty:
        return []
    levels = sorted(df["discordance_level"].unique())
    rates = sorted(df["base_rate"].unique())
    ns = sorted(df["n"].unique())
    quantities = [q for q in BINARY_ROWS if q in set(df["quantity"])]
    positions = {r: i for i, r in enumerate(rates)}
    palette = dict(zip(ns, sns.color_palette("viridis", n_colors=len(ns)), strict=True))
    fig, axes = plt.subplots(len(quantities), len(levels), sharex=True, squeeze=False,
                             figsize=(3.6 * len(levels) + 1.2, 2.2 * len(quantities) + 0.8),
                             layout="constrained")  # fmt: skip
    for i, q in enumerate(quantities):
        per_level = {}
        for lv in levels:
            rows = df[(df["quantity"] == q) & (df["discordance_level"] == lv)]
            # coverage is drawn at both true differences: their mean per point
            if q.startswith("coverage"):
                rows = _agg(rows, ["n", "base_rate"], "mean")
            per_level[lv] = rows
        every = pd.concat(per_level.values())
        if q.startswith("coverage"):  # one scale per row, so the columns compare
            ylim = (max(0.0, min(0.85, float(np.nanmin(every["estimate"])) - 0.03)), 1.005)
        elif q == "power":
            ylim = (-0.02, 1.02)
        else:
            ylim = (-0.01, max(0.2, float(np.nanmax(every["estimate"])) + 0.05))
        for j, lv in enumerate(levels):
            ax = axes[i][j]
            rows = per_level[lv]
            _lines(ax, rows, "base_rate", positions, "n", palette, ylim)
            _reference(ax, q, rows)
            if i == 0:
                ax.set_title(_level_name(float(lv)), fontsize="medium")
            if j == 0:
                ax.set_ylabel(BINARY_ROWS[q], fontsize="small")
            if i == len(quantities) - 1:
                ax.set_xticks(range(len(rates)), [f"{r:g}" for r in rates])
                ax.set_xlabel("control accuracy $p_C$")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, [f"n = {lb}" for lb in labels], loc="outside lower center",
               ncol=len(labels), title="examples per replicate")  # fmt: skip
    s = df.iloc[0]
    fig.suptitle(
        f"Paired binary outcomes: {int(s['replicates'])} replicates per point, margin "
        f"{s['margin']:g}, alpha {s['alpha']:g}\ndashed: nominal; dotted: acceptance; band: "
        "±1.96 Monte-Carlo SE; coverage: mean over d = -margin and d = 0; lines that meet\n"
        "are set side by side",
        fontsize="medium",
    )
    return save_figure(fig, out_stem, data=df, seed=int(s["seed"]))


def _more_figure(table: pd.DataFrame, out_stem: Path) -> list[Path]:
    cont = table[(table["study"] == "continuous") & (table["trials"] > 0)]
    router = table[(table["study"] == "router") & (table["trials"] > 0)]
    panels = []
    if not cont.empty:
        panels += [
            ("continuous", "type1_error"),
            ("continuous", "coverage_t_studentized"),
            ("continuous", "coverage_bootstrap"),
        ]
    if not router.empty:
        panels += [("router", None)]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels) + 1.0, 3.8),
                             squeeze=False, layout="constrained")  # fmt: skip
    for ax, (study, q) in zip(axes[0], panels, strict=True):
        if study == "continuous":
            rows = cont[cont["quantity"] == q]
            if q.startswith("coverage"):
                rows = _agg(rows, ["n", "base_rate", "correlation"], "min")
            worst = _agg(rows, ["n", "base_rate"], "min" if q.startswith("coverage") else "max")
            rates = sorted(worst["base_rate"].unique())
            ns = sorted(worst["n"].unique())
            palette = dict(zip(ns, sns.color_palette("viridis", n_colors=len(ns)), strict=True))
            est = worst["estimate"].to_numpy(float)
            ylim = ((max(0.0, min(0.85, float(np.nanmin(est)) - 0.03)), 1.005)
                    if q.startswith("coverage")
                    else (-0.01, max(0.2, float(np.nanmax(est)) + 0.05)))  # fmt: skip
            _lines(ax, worst, "base_rate", {r: i for i, r in enumerate(rates)}, "n", palette,
                   ylim)  # fmt: skip
            _reference(ax, q, worst)
            ax.set_xticks(range(len(rates)), [f"{r:g}" for r in rates])
            ax.set_xlabel("control mean score")
            what = {
                "type1_error": "type I error\n(max over ρ)",
                "coverage_t_studentized": "t / bootstrap-t coverage\n(min over ρ, d)",
            }.get(q, "percentile bootstrap coverage\n(min over ρ, d)")
            ax.set_title(f"continuous scores: {what}", fontsize="medium")
            ax.legend(title="n", fontsize="x-small", title_fontsize="small")
        else:
            colours = dict(zip(["coverage_cluster_t", "coverage_cluster_bootstrap",
                                "coverage_wilson_task", "coverage_wilson_pooled"],
                               OKABE_ITO[:4], strict=True))  # fmt: skip
            names = {"coverage_cluster_t": "jackknife t over tasks (k - 1 df)",
                     "coverage_cluster_bootstrap": "cluster bootstrap (mean over tasks)",
                     "coverage_wilson_task": "Wilson per task",
                     "coverage_wilson_pooled": "Wilson, examples pooled"}  # fmt: skip
            worst = _agg(router, ["quantity", "n_tasks"], "min")
            tasks = sorted(worst["n_tasks"].astype(int).unique())
            pos = {t: i for i, t in enumerate(tasks)}
            lo = float(np.nanmin(worst["estimate"].to_numpy(float)))
            ax.set(xlim=(-0.5, len(tasks) - 0.5), ylim=(max(0.0, min(0.85, lo - 0.03)), 1.005))
            curves = [(quantity, sub.sort_values("n_tasks"))
                      for quantity, sub in worst.groupby("quantity", sort=False)]  # fmt: skip
            xy = [np.column_stack([[pos[int(t)] for t in sub["n_tasks"]], sub["estimate"]])
                  for _, sub in curves]  # fmt: skip
            for k, ((quantity, sub), dx) in enumerate(zip(curves, dodge(ax, xy, 4.5), strict=True)):
                xs = np.array([pos[int(t)] for t in sub["n_tasks"]], float)
                est, band = sub["estimate"].to_numpy(float), 1.96 * sub["mcse"].to_numpy(float)
                ax.plot(xs, est, marker=MARKERS[k % len(MARKERS)], ms=3.5,
                        color=colours[quantity], label=names[quantity],
                        transform=shifted(ax, dx))  # fmt: skip
                ax.fill_between(xs, np.clip(est - band, 0, 1), np.clip(est + band, 0, 1),
                                color=colours[quantity], alpha=0.12, lw=0)  # fmt: skip
            _reference(ax, "coverage", worst)
            ax.set_xticks(range(len(tasks)), [str(t) for t in tasks])
            ax.set_xlabel("tasks (clusters)")
            ax.set_title("router agreement: coverage\n(min over grid)", fontsize="medium")
            ax.legend(fontsize="x-small")
        ax.set_ylabel("share of replicates")
    data = pd.concat([cont, router])
    fig.suptitle(f"{int(data['replicates'].max())} replicates per point; dashed: nominal; "
                 "dotted: acceptance; band: ±1.96 Monte-Carlo SE;\nlines that meet are set side by "
                 "side", fontsize="medium")  # fmt: skip
    return save_figure(fig, out_stem, data=data, seed=int(data["seed"].iloc[0]))


def plot_stats_sim(table: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """Both figures of the study's ``table`` (:func:`tersetalk.stats.simulation.run_simulation`):
    ``<out_stem>.{png,pdf}`` and ``<out_stem>_more.{png,pdf}``. A study the table does not
    hold leaves its panels out; a figure with no panel is not written."""
    theme()
    out_stem = Path(out_stem)
    written = _binary_figure(table, out_stem)
    written += _more_figure(table, out_stem.with_name(out_stem.name + "_more"))
    return written
