"""The paper's figures and tables, drawn from the summary and per-example metrics.

Every figure is written as PDF and PNG, sized and labelled to stay legible in print,
and says in its title which model produced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.core.plotting import (  # noqa: E402
    dodge,
    note_dodged,
    save_figure,
    shifted,
    system_style,
    theme,
    wilson_errors,
)


def task_display(task: str) -> str:
    """A task's display name (:attr:`tersetalk.tasks.base.Task.display_name`), else its id."""
    from tersetalk.tasks.registry import display_name

    return display_name(task)


def task_title(task: str) -> str:
    """A panel's title: the task's display name with its metric ("GSM8K (accuracy)");
    a task the registry does not know (a plug-in not loaded here) by its name."""
    from tersetalk.tasks.registry import get

    try:
        title = get(task).title
    except KeyError:
        return task_display(task)
    metric = title.partition(" (")[2]
    return f"{task_display(task)} ({metric}" if metric else task_display(task)


ROLE_COLORS = {"manager": "#4C72B0", "worker": "#DD8452", "critic": "#55A868"}


def _model_label(summary: pd.DataFrame) -> str:
    return ", ".join(
        sorted(set(summary["backend"].astype(str) + ":" + summary["model"].astype(str)))
    )


def label(df: pd.DataFrame) -> pd.Series:
    return df["system"] + "/" + df["variant"]


def with_intervals(
    summary: pd.DataFrame, records: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Add bootstrap 95% intervals of accuracy and tokens per run (answered examples count 0)."""
    from tersetalk.stats import bootstrap_ci

    rows = []
    for (task, system, variant), g in records.groupby(["task", "system", "variant"], sort=True):
        acc = bootstrap_ci(g["correct"].to_numpy(float), n_resamples=n_resamples, seed=seed)
        ok = g[g["error"].isna()]
        tok = (
            bootstrap_ci(
                ok["tokens_total_cl100k"].to_numpy(float), n_resamples=n_resamples, seed=seed
            )
            if len(ok)
            else None
        )
        rows.append(
            {
                "task": task,
                "system": system,
                "variant": variant,
                "accuracy_ci_low": acc.ci_low,
                "accuracy_ci_high": acc.ci_high,
                "tokens_ci_low": tok.ci_low if tok else np.nan,
                "tokens_ci_high": tok.ci_high if tok else np.nan,
            }
        )
    return summary.merge(pd.DataFrame(rows), on=["task", "system", "variant"], how="left")


#: Prompt-only peers drawn with their own marker and legend entry (the colour stays the
#: system's), so a reader finds them whether or not they reach the frontier.
PEERS = {("freeform", "cod"): ("*", "Chain-of-Draft (freeform/cod)")}
#: marker size (points) of the quality-vs-tokens points
_MS = 8.0


def quality_vs_tokens(summary: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """Accuracy against tokens per example, with 95% CIs and the Pareto frontier. Each
    system has its own colour and marker (:func:`~tersetalk.core.plotting.system_style`); runs
    that land on one spot are set side by side (:func:`~tersetalk.core.plotting.dodge`), so
    none hides another."""
    from tersetalk.stats import pareto_frontier

    theme()
    tasks = list(dict.fromkeys(summary["task"]))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.6 * len(tasks), 4.4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = summary[summary["task"] == task].reset_index(drop=True)
        x, y = sub["tokens_total_cl100k_mean"], sub["accuracy"]
        # the limits first: where a point is set aside, and where a label lands, depend on them
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlim(0, 1.15 * float(sub["tokens_ci_high"].max() or x.max() or 1))
        offsets = dodge(ax, [[(r.tokens_total_cl100k_mean, r.accuracy)]
                             for r in sub.itertuples()], 1.25 * _MS)  # fmt: skip
        for r, dx in zip(sub.itertuples(), offsets, strict=True):
            color, marker = system_style(r.system)
            marker, name = PEERS.get((r.system, r.variant), (marker, r.system))
            ax.errorbar(
                r.tokens_total_cl100k_mean,
                r.accuracy,
                xerr=[
                    [r.tokens_total_cl100k_mean - r.tokens_ci_low],
                    [r.tokens_ci_high - r.tokens_total_cl100k_mean],
                ],
                yerr=np.vstack(wilson_errors(r.accuracy, r.n)),
                fmt=marker,
                ms=_MS,
                capsize=3,
                color=color,
                alpha=0.9,
                label=name,
                transform=shifted(ax, dx),
            )
        mask = pareto_frontier(pd.DataFrame({"tokens": x, "accuracy": y}))
        front = sub[np.asarray(mask)].sort_values("tokens_total_cl100k_mean")
        # name only the frontier's runs: labelling every point makes an unreadable pile;
        # runs tied at one point share a label, and a label that would cover one already
        # placed is left out (the legend and main.csv name every run)
        renderer = fig.canvas.get_renderer()
        placed: list = []
        ties = front.groupby(["tokens_total_cl100k_mean", "accuracy"], sort=False)
        for k, ((tokens, acc), group) in enumerate(ties):
            first = group.iloc[0]
            more = f" +{len(group) - 1}" if len(group) > 1 else ""
            dy = 6 + 9 * (k % 2)  # below the point near the top: the name stays inside
            note = ax.annotate(
                f"{first['system']}/{first['variant']}{more}",
                (tokens, acc),
                fontsize=8,
                textcoords="offset points",
                xytext=(5, -dy - 8 if acc > 0.85 else dy),
                rotation=20,
            )
            box = note.get_window_extent(renderer)
            if any(box.overlaps(other) for other in placed):
                note.remove()
            else:
                placed.append(box)
        ax.step(
            front["tokens_total_cl100k_mean"],
            front["accuracy"],
            where="post",
            color="0.3",
            ls="--",
            lw=1.2,
            label="Pareto frontier",
        )
        ax.set_title(f"{task_title(task)}, n={int(sub['n'].max())}")
        ax.set_xlabel("tokens per example (cl100k; 95% bootstrap CI)")
        note_dodged(ax, offsets)
        ax.set_ylabel("accuracy (95% Wilson CI)")
    # every panel's systems: with systems.<name>.tasks, panels need not share them
    uniq: dict = {}
    for ax in axes[0]:
        handles, labels = ax.get_legend_handles_labels()
        for handle, name in zip(handles, labels, strict=True):
            uniq.setdefault(name, handle)
    fig.legend(
        uniq.values(), uniq.keys(), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False
    )
    fig.suptitle(f"Quality vs tokens — {_model_label(summary)}", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, out_stem, data=summary)


def token_breakdown(summary: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """Tokens sent by each role per example, stacked, per system/variant and task."""
    theme()
    tasks = list(dict.fromkeys(summary["task"]))
    n_runs = summary.groupby("task").size().max()
    fig, axes = plt.subplots(
        1,
        len(tasks),
        figsize=(5.6 * len(tasks), 1.2 + 0.45 * n_runs),
        squeeze=False,
        sharey=False,
        layout="constrained",  # keeps the suptitle clear of the panel titles (tight_layout did not)
    )
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = summary[summary["task"] == task].assign(run=lambda d: label(d)).set_index("run")
        left = np.zeros(len(sub))
        for role, color in ROLE_COLORS.items():
            vals = sub[f"tokens_sent_{role}_cl100k_mean"].to_numpy(float)
            ax.barh(sub.index, vals, left=left, color=color, label=role)
            left += vals
        if "tokens_ci_low" in sub and sub["tokens_ci_low"].notna().any():
            # the interval of the total (every role) per example, at the bar's end
            total = sub["tokens_total_cl100k_mean"].to_numpy(float)
            err = np.vstack([total - sub["tokens_ci_low"].to_numpy(float),
                             sub["tokens_ci_high"].to_numpy(float) - total])  # fmt: skip
            ax.errorbar(total, np.arange(len(sub)), xerr=np.clip(err, 0, None), fmt="none",
                        ecolor="0.15", capsize=3, lw=1, label="total (95% bootstrap CI)",
                        )  # fmt: skip
        ax.set_title(f"{task_title(task)}, {_n_text(sub['n'])}")
        ax.set_xlabel("tokens sent per example (cl100k_base)")
        ax.invert_yaxis()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        title="sent by",
        loc="outside lower center",
        ncol=len(labels),
        frameon=False,
    )
    fig.suptitle(f"Token breakdown by role — {_model_label(summary)}", fontsize=11)
    return save_figure(fig, out_stem, data=summary)


def accuracy_by_length(
    records: pd.DataFrame, reference: str, out_stem: str | Path, n_bins: int = 3
) -> list[Path]:
    """Accuracy per bin of the reference (free-form) Manager message length.

    Bins come from the reference run's message lengths, so every system is
    compared on the same examples in each bin.
    """
    theme()
    rec = records.assign(run=label(records))
    ref = rec[rec["run"] == reference][["task", "example_id", "tokens_M_W_cl100k"]]
    ref = ref.rename(columns={"tokens_M_W_cl100k": "ref_len"})
    names = ["short", "medium", "long"] if n_bins == 3 else [f"q{i + 1}" for i in range(n_bins)]
    frames = []
    for _, g in ref.groupby("task"):
        # rank first so ties never leave a bin empty; labels are the same in every task
        ranks = g["ref_len"].rank(method="first")
        q = min(n_bins, len(g))
        bins = pd.qcut(ranks, q=q, labels=names[:q]) if q > 1 else names[:1] * len(g)
        frames.append(g.assign(length_bin=list(bins)))
    ref = pd.concat(frames) if frames else ref.assign(length_bin=[])
    data = rec.merge(ref[["task", "example_id", "length_bin"]], on=["task", "example_id"])
    # one bar per system (its `default` variant, and the reference): with every ablation
    # variant as well the bars become too thin to read; the ablation figures cover those
    keep = (data["variant"] == "default") | (data["run"] == reference)
    if keep.any():
        data = data[keep]
    runs = sorted(data["run"].unique())
    tasks = list(dict.fromkeys(records["task"]))
    palette = dict(zip(runs, sns.color_palette("husl", len(runs)), strict=True))
    fig, axes = plt.subplots(
        1, len(tasks), figsize=(0.5 * len(runs) * n_bins + 1.5 * len(tasks) + 3, 4.4),
        squeeze=False, sharey=True, layout="constrained",
    )  # fmt: skip
    width = 0.84 / max(len(runs), 1)
    for ax, task in zip(axes[0], tasks, strict=True):
        d = data[data["task"] == task]
        bins_n = ref[ref["task"] == task].groupby("length_bin").size()
        for j, run in enumerate(runs):
            x0 = np.arange(len(names)) - 0.42 + width * (j + 0.5)
            cell = d[d["run"] == run].groupby("length_bin")["correct"].agg(["mean", "size"])
            cell = cell.reindex(names)
            have = cell["size"].fillna(0).to_numpy() > 0
            acc, n = cell["mean"].to_numpy(float), cell["size"].fillna(0).to_numpy()
            ax.bar(x0[have], acc[have], width=width * 0.9, color=palette[run], alpha=0.8)
            # the dot marks the estimate: an accuracy of 0 is a dot on the axis with its
            # interval, never the nothing a missing bin shows
            low, high = wilson_errors(acc[have], n[have])
            ax.errorbar(x0[have], acc[have], yerr=[low, high], fmt="o", ms=3, capsize=2,
                        color="0.15", lw=1)  # fmt: skip
            # a bin without examples of this run: an empty hatched slot, no dot
            ax.bar(x0[~have], [1.0] * int((~have).sum()), width=width * 0.9, fill=False,
                   hatch="///", edgecolor="0.6", lw=0)  # fmt: skip
        ax.set_xticks(range(len(names)),
                      [f"{b}\nn={int(bins_n.get(b, 0))}" for b in names])  # fmt: skip
        ax.set_title(task_display(task))
        ax.set_ylim(0, 1.05)
    # one label under all panels: one per panel runs into its neighbour's on a wide figure
    fig.supxlabel(("free-form message length (thirds)" if n_bins == 3 else "length bin")
                  + "; n = examples per bin", fontsize=10)  # fmt: skip
    axes[0][0].set_ylabel("accuracy (95% Wilson CI)")
    handles = [matplotlib.patches.Patch(color=palette[r], alpha=0.8, label=r) for r in runs]
    handles.append(
        matplotlib.patches.Patch(fill=False, hatch="///", edgecolor="0.6", label="no examples")
    )
    fig.legend(handles=handles, title="run",
               loc="outside right upper", frameon=False)  # fmt: skip
    # per-example metrics name no model; a caller's frame that does gets it in the title
    model = f" — {_model_label(records)}" if {"backend", "model"} <= set(records) else ""
    fig.suptitle(f"Accuracy by message length{model}", fontsize=11)
    return save_figure(fig, out_stem, data=records)


def ablation(
    summary: pd.DataFrame,
    system: str,
    variants: list[str],
    setting: str,
    values: dict[str, object],
    out_stem: str | Path,
    axis_label: str | None = None,
    axis_panels: Sequence[str] = (),
    records: pd.DataFrame | None = None,
) -> list[Path]:
    """Tokens and accuracy against one setting, plus the panels the system's axis adds;
    accuracy against overflow rate when the runs overflow.

    The system declares how its setting is drawn (``systems.register(ablation=...)``):
    the x axis' label ``axis_label`` (default: the setting's name) and extra summary
    columns ``axis_panels`` (e.g. the enforcement mode's compliance). The caller passes them in
    (``tersetalk plot-ablation`` reads ``systems.ablation_axis``), so this module
    needs no system.

    Every estimate carries n (in the legend) and a 95% interval: Wilson for accuracy and
    other proportions; for tokens the bootstrap's over answered examples when
    ``records`` (per-example metrics) are given, else none (the axis says so). A
    categorical setting (on/off, a mode) is drawn as categories, a numeric one as a
    line; the overflow panel is left out when no run overflowed.
    """
    theme()
    sub = summary[(summary["system"] == system) & summary["variant"].isin(variants)].copy()
    if sub.empty:
        raise ValueError(f"no runs of {system} with variants {variants} in the summary")
    raw = [values.get(v, v) for v in variants]
    # a bool is an int to Python, but on/off is a category: never a line over 0..1
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
    shown = {v: (r if numeric else _category(r)) for v, r in zip(variants, raw, strict=True)}
    sub["value"] = sub["variant"].map(shown)
    order = list(dict.fromkeys(shown[v] for v in variants))
    sub = sub.sort_values(["task", "value"] if numeric else ["task"], kind="stable")
    sub = sub.merge(_token_intervals(records, system, variants), how="left",
                    on=["task", "variant"])  # fmt: skip
    panels = ["tokens_total_cl100k_mean", "accuracy"]
    panels += [p for p in axis_panels if p in sub and sub[p].notna().any()]
    # a panel of runs that never overflowed would be every point at 0: left out
    if "overflow_rate" in sub and (sub["overflow_rate"].fillna(0) > 0).any():
        panels.append("overflow")
    tasks = list(dict.fromkeys(sub["task"]))
    colors = dict(zip(tasks, sns.color_palette("colorblind", len(tasks)), strict=True))
    width = max(4.4, 0.55 * len(order) * len(tasks) + 1.6) if not numeric else 4.6
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels) + 2.2, 4.4),
                             squeeze=False, layout="constrained")  # fmt: skip
    has_token_ci = sub["tokens_ci_low"].notna().any()
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "overflow":
            _overflow_panel(ax, sub, tasks, colors)
            continue
        proportion = not panel.startswith("tokens")
        _setting_panel(ax, sub, panel, tasks, colors, order, numeric, proportion)
        ax.set_xlabel(axis_label or setting)
        if not proportion:
            ax.set_ylabel(
                "tokens per example, mean\n(95% bootstrap CI)"
                if has_token_ci
                else "tokens per example, mean\n(no interval: per-run scores only)"
            )
        elif panel.startswith("compliance"):
            ax.set_ylabel("replies valid at first try\n(95% Wilson CI over examples)")
        else:
            ax.set_ylabel("accuracy (95% Wilson CI)")
    names = {t: f"{task_display(t)} ({_n_text(sub[sub['task'] == t]['n'])})" for t in tasks}
    handles = [
        plt.Line2D([], [], color=colors[t], marker="o", label=names[t])
        if numeric
        else matplotlib.patches.Patch(color=colors[t], alpha=0.75, label=names[t])
        for t in tasks
    ]
    fig.legend(handles=handles, title="task (examples per run)", loc="outside right upper",
               frameon=False)  # fmt: skip
    fig.suptitle(f"{system}: {setting} ablation — {_model_label(sub)}", fontsize=11)
    return save_figure(fig, out_stem, data=sub)


def _category(value: object) -> str:
    """A setting's value as a category label: on/off for a flag, else its text."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _n_text(n: pd.Series) -> str:
    lo, hi = int(n.min()), int(n.max())
    return f"n={lo}" if lo == hi else f"n={lo}-{hi}"


def _token_intervals(records: pd.DataFrame | None, system: str, variants: list[str]):
    """Bootstrap 95% intervals of the mean tokens per answered example, per task and
    variant, from per-example metrics; empty (no interval drawn) without them."""
    cols = ["task", "variant", "tokens_ci_low", "tokens_ci_high"]
    if records is None or records.empty:
        return pd.DataFrame(columns=cols)
    from tersetalk.stats import bootstrap_ci

    rec = records[(records["system"] == system) & records["variant"].isin(variants)]
    rows = []
    for (task, variant), g in rec[rec["error"].isna()].groupby(["task", "variant"], sort=True):
        ci = bootstrap_ci(g["tokens_total_cl100k"].to_numpy(float), n_resamples=1000, seed=0)
        rows.append((task, variant, ci.ci_low, ci.ci_high))
    return pd.DataFrame(rows, columns=cols)


def _setting_panel(ax, sub, panel, tasks, colors, order, numeric, proportion) -> None:
    """One estimate against the setting: a line per task over a numeric setting, dodged
    bars per category otherwise; each with its interval (Wilson for a proportion, the
    bootstrap's for tokens when per-example metrics were given)."""
    width = 0.8 / len(tasks)
    for j, task in enumerate(tasks):
        t = sub[sub["task"] == task]
        y = t[panel].to_numpy(float)
        if proportion:
            err = np.vstack(wilson_errors(y, t["n"].to_numpy()))
        elif t["tokens_ci_low"].notna().any():
            low, high = t["tokens_ci_low"].to_numpy(float), t["tokens_ci_high"].to_numpy(float)
            err = np.clip(np.vstack([y - low, high - y]), 0, None)
        else:
            err = None
        if numeric:
            x = t["value"].to_numpy(float)
            ax.errorbar(x, y, yerr=err, fmt="o-", ms=7, capsize=3, color=colors[task])
        else:
            x = np.array([order.index(v) for v in t["value"]]) - 0.4 + width * (j + 0.5)
            ax.bar(x, y, width=width * 0.92, color=colors[task], alpha=0.75)
            # the point marks the estimate, so a value of 0 shows as a dot on the axis
            ax.errorbar(x, y, yerr=err, fmt="o", ms=4, capsize=3, color="0.15")
    if not numeric:
        ax.set_xticks(range(len(order)), order)
        if sum(len(str(o)) for o in order) > 40:
            ax.tick_params(axis="x", rotation=25)
            for lab in ax.get_xticklabels():
                lab.set_horizontalalignment("right")
    if proportion:
        ax.set_ylim(-0.05, 1.05)
    else:
        ax.set_ylim(bottom=0)


def _overflow_panel(ax, sub, tasks, colors) -> None:
    """Accuracy (95% Wilson CI) against the overflow rate, one point per run."""
    for task in tasks:
        t = sub[sub["task"] == task]
        y = t["accuracy"].to_numpy(float)
        ax.errorbar(t["overflow_rate"], y, yerr=np.vstack(wilson_errors(y, t["n"].to_numpy())),
                    fmt="o", ms=7, capsize=3, color=colors[task])  # fmt: skip
    ax.set_xlabel("overflow rate (share of lines)")
    ax.set_ylabel("accuracy (95% Wilson CI)")
    ax.set_ylim(-0.05, 1.05)


def main_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's main results table: one row per task and run."""
    cols = {
        "task": "task",
        "run": "run",
        "n": "n",
        "accuracy": "accuracy",
        "accuracy_ci_low": "acc. CI low",
        "accuracy_ci_high": "acc. CI high",
        "f1": "F1",
        "tokens_total_cl100k_mean": "tokens/ex",
        "token_reduction_mean": "reduction vs ref",
        "semantic_bertscore_f1_mean": "BERTScore F1",
        "semantic_method": SEMANTIC_METHOD_COLUMN,
        "facts_reaching_worker_mean": "facts kept",
        "overflow_rate": "overflow",
        "compliance_first_try_rate": "valid 1st try",
    }
    df = summary.assign(run=label(summary))
    present = [c for c in cols if c in df.columns]
    return df[present].rename(columns=cols).round(3)


#: the main table's provenance column for semantic preservation (CSV only: in LaTeX the
#: method goes to the caption, see :func:`semantic_method_note`)
SEMANTIC_METHOD_COLUMN = "semantic method"
_NOTE_METHOD_CHARS = 120


def semantic_method_note(summary: pd.DataFrame) -> str:
    """One sentence naming how semantic preservation was measured, for the table caption.

    The per-run ``semantic_method`` says whether BERTScore ran or why it did not
    (then the BERTScore column is NaN, printed as "--"). One method for every run is
    named once; several are listed with the runs of each, so a fallback on some runs
    is visible in the paper table, not only in the CSV.
    """
    if "semantic_method" not in summary.columns or summary.empty:
        return "Semantic preservation method: not recorded."
    methods = summary["semantic_method"].fillna("not recorded").astype(str)
    runs = summary["task"].astype(str) + " " + label(summary)
    by_method: dict[str, list[str]] = {}
    for method, run in zip(methods, runs, strict=True):
        by_method.setdefault(method, []).append(run)

    def short(method: str) -> str:
        method = " ".join(method.split())  # an exception text may span lines
        if len(method) <= _NOTE_METHOD_CHARS:
            return method
        return method[: _NOTE_METHOD_CHARS - 3].rstrip() + "..."

    if len(by_method) == 1:
        return f"Semantic preservation method: {short(next(iter(by_method)))} (every run)."
    parts = [
        f"{short(m)} for {', '.join(sorted(r))}"
        for m, r in sorted(by_method.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    return (
        "Semantic preservation methods differ between runs: "
        + "; ".join(parts)
        + " (BERTScore F1 is -- where it was unavailable)."
    )
