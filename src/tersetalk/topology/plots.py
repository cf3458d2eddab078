"""The topology study's figures: agreement with the outcome oracle and with the task
label per task and policy, tokens against accuracy per policy, the θ sweep, and the
router's ablations (a signal dropped, tags scrambled). Each is written as PDF and PNG
and names the model that produced the runs in its title."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.core.plotting import (  # noqa: E402
    categorical_styles,
    dodge,
    note_dodged,
    save_figure,
    shifted,
    theme,
    wilson_errors,
)

__all__ = [
    "ablations_figure",
    "selection_by_task",
    "task_name",
    "theta_sweep_figure",
    "tokens_vs_accuracy",
]


def _theme() -> None:
    theme()


def task_name(task: str) -> str:
    """A task's display name as the paper writes it ("BoolQ", "Social IQa"): its
    :attr:`~tersetalk.tasks.base.Task.display_name`, asked of the registry as every figure
    asks it (:func:`tersetalk.tasks.registry.display_name`, which loads the tasks before
    :func:`tersetalk.core.display.task_display` looks the name up); a task this
    installation does not know by its id."""
    from tersetalk.tasks.registry import display_name

    return display_name(task)


def _bars(ax, per_task: pd.DataFrame, tasks: list[str], policies: list[str], colors: dict,
          col: str, n_col: str) -> None:  # fmt: skip
    """One bar per (task, policy) at ``col`` with its 95% Wilson interval over ``n_col``
    and a dot at the estimate; NaN (nothing to measure) draws nothing."""
    width = 0.84 / max(len(policies), 1)
    for j, policy in enumerate(policies):
        sub = per_task[(per_task["policy_label"] == policy) & per_task[col].notna()]
        if sub.empty:
            continue
        x = np.array([tasks.index(t) for t in sub["task"]]) - 0.42 + width * (j + 0.5)
        y = sub[col].to_numpy(float)
        ax.bar(x, y, width=width * 0.9, color=colors[policy], alpha=0.8, label=policy)
        ax.errorbar(x, y, yerr=np.vstack(wilson_errors(y, sub[n_col].to_numpy())), fmt="o",
                    ms=3, capsize=2, lw=1, color="0.15")  # fmt: skip


def selection_by_task(per_task: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """Bars per task (x) and policy (colour), each with its 95% Wilson interval and a dot
    at the estimate (0 is a dot on the axis; a policy that did not run on a task has no
    bar and no dot): agreement with the outcome oracle over the decisive examples (top,
    when ``per_task`` has ``oracle_agreement`` and ``n_decisive``; the decisive count per
    task in its label) and agreement with the task label (bottom; n per task in its
    label). ``per_task`` has ``task``, ``policy_label``, ``label_agreement``, ``n``."""
    _theme()
    tasks = list(dict.fromkeys(per_task["task"]))
    policies = list(dict.fromkeys(per_task["policy_label"]))
    has_oracle = {"oracle_agreement", "n_decisive"} <= set(per_task.columns)
    fig, axes = plt.subplots(1 + has_oracle, 1, squeeze=False, layout="constrained",
                             figsize=(1.2 + 0.55 * len(tasks) * max(len(policies), 1),
                                      4.4 * (1 + has_oracle)))  # fmt: skip
    axes = list(axes[:, 0])
    colors = dict(zip(policies, sns.color_palette(n_colors=max(len(policies), 1)), strict=False))
    n_by_task = per_task.groupby("task")["n"].agg(["min", "max"])
    if has_oracle:
        ax = axes[0]
        _bars(ax, per_task, tasks, policies, colors, "oracle_agreement", "n_decisive")
        dec = per_task.groupby("task")["n_decisive"].agg(["min", "max"])
        ticks = [f"{task_name(t)}\ndecisive {_n(dec.loc[t])[2:]}" for t in tasks]
        ax.set_xticks(range(len(tasks)), ticks)
        ax.set(ylim=(0, 1.05), xlabel="task (decisive examples: the fixed runs differ)",
               ylabel="agreement with the outcome oracle\n(95% Wilson CI)")  # fmt: skip
        ax.set_title(f"Topology selection per task vs outcomes ({model})")
    ax = axes[-1]
    _bars(ax, per_task, tasks, policies, colors, "label_agreement", "n")
    ax.set_xticks(range(len(tasks)), [f"{task_name(t)}\n{_n(n_by_task.loc[t])}" for t in tasks])
    ax.set(ylim=(0, 1.05), xlabel="task (n = examples per policy)",
           ylabel="agreement with the task label\n(95% Wilson CI)")  # fmt: skip
    ax.set_title(f"Topology selection per task vs task labels ({model})")
    handles, labels = [], []
    for a in axes:
        for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, title="policy", loc="outside right upper", frameon=False)
    return save_figure(fig, out_stem, data=per_task, models=[model])


def _padded(values, frac: float = 0.08) -> tuple[float, float]:
    """Axis limits around ``values`` with a margin (a single value gets one too)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return (0.0, 1.0)
    lo, hi = float(v.min()), float(v.max())
    pad = frac * (hi - lo) or frac * abs(hi) or 1.0
    return (lo - pad, hi + pad)


def _n(row) -> str:
    lo, hi = int(row["min"]), int(row["max"])
    return f"n={lo}" if lo == hi else f"n={lo}-{hi}"


def tokens_vs_accuracy(six: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """One point per policy: mean tokens per example (x) against accuracy (y) with its
    95% Wilson interval; n in the legend."""
    _theme()
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    # a colour and a marker per policy, and policies that route alike (an adaptive policy
    # sending everything to the chain) set side by side, so none hides another
    styles = categorical_styles(six["policy_label"])
    ax.set(ylim=(-0.05, 1.05), xlim=_padded(six["tokens"]))
    offsets = dodge(ax, [[(r.tokens, r.accuracy)] for r in six.itertuples()], 11.0)
    for r, dx in zip(six.itertuples(), offsets, strict=True):
        low, high = wilson_errors(r.accuracy, r.n)
        color, marker = styles[r.policy_label]
        ax.errorbar(r.tokens, r.accuracy, yerr=[low, high], fmt=marker, ms=9, capsize=3,
                    alpha=0.85, color=color, label=f"{r.policy_label}, n={int(r.n)}",
                    transform=shifted(ax, dx))  # fmt: skip
    ax.set(xlabel="tokens per example on the wire (cl100k_base, mean)",
           ylabel="accuracy (95% Wilson CI)")  # fmt: skip
    note_dodged(ax, offsets)
    ax.set_title(f"Tokens and accuracy per policy ({model})")
    fig.legend(title="policy", loc="outside right upper", frameon=False)
    return save_figure(fig, out_stem, data=six, models=[model])


def theta_sweep_figure(sweep: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """Label agreement (and the chain share) against θ, one line per router, each with
    its 95% Wilson band; ``sweep`` has ``router``, ``theta``, ``n``,
    ``label_agreement``, ``chain_share`` (task all)."""
    _theme()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    routers = list(dict.fromkeys(sweep["router"]))
    styles = categorical_styles(routers)
    subs = {r: sweep[sweep["router"] == r].sort_values("theta") for r in routers}
    dodged = []
    for ax, col in zip(axes, ("label_agreement", "chain_share"), strict=True):
        ax.set(ylim=(0, 1.05), xlim=_padded(sweep["theta"]))
        # routers with the same curve are set side by side: none hides another
        offsets = dodge(ax, [subs[r][["theta", col]].to_numpy(float) for r in routers], 6.0)
        dodged.append(offsets)
        for router, dx in zip(routers, offsets, strict=True):
            sub = subs[router]
            n = sub["n"].to_numpy()
            y = sub[col].to_numpy(float)
            low, high = wilson_errors(y, n)
            color, marker = styles[router]
            ax.plot(sub["theta"], y, marker=marker, ls="-", color=color, ms=5,
                    transform=shifted(ax, dx),
                    label=f"{router}, {_n({'min': n.min(), 'max': n.max()})}")  # fmt: skip
            ax.fill_between(sub["theta"], y - low, y + high, color=color, alpha=0.15, lw=0)
    axes[0].set(ylim=(0, 1.05), xlabel="threshold θ",
                ylabel="agreement with the task label\n(95% Wilson CI)")  # fmt: skip
    axes[1].set(ylim=(0, 1.05), xlabel="threshold θ",
                ylabel="share routed to the chain\n(95% Wilson CI)")  # fmt: skip
    for ax, offsets in zip(axes, dodged, strict=True):
        note_dodged(ax, offsets)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="router", loc="outside right upper", frameon=False)
    fig.suptitle(f"Router threshold sweep, replayed on recorded signals ({model})")
    return save_figure(fig, out_stem, data=sweep, models=[model])


def _errorbars(ax, y: np.ndarray, sub: pd.DataFrame, color, label: str, marker: str) -> None:
    """Points at each label agreement with its Wilson interval, ``n`` written beside."""
    x = sub["label_agreement"].to_numpy(float)
    # clipped at 0: at a proportion of 0 or 1 the interval's end may differ from it by
    # a rounding error (matplotlib refuses a negative error bar)
    low = sub["label_agreement_ci_low"].to_numpy(float)
    high = sub["label_agreement_ci_high"].to_numpy(float)
    err = np.clip(np.vstack([x - low, high - x]), 0, None)
    ax.errorbar(x, y, xerr=err, fmt=marker, color=color, capsize=3, ms=7, label=label)
    for yi, hi, n in zip(y, sub["label_agreement_ci_high"], sub["n"], strict=True):
        ax.annotate(f"n={int(n)}", (min(float(hi), 1.0), yi), xytext=(9, 0),
                    textcoords="offset points", va="center", fontsize=8, color=color)  # fmt: skip


def _panel(ax, data: pd.DataFrame, key: str, order: list[str], routers: list[str],
           style: dict) -> None:  # fmt: skip
    """One row per ``order`` entry of ``key``, one dodged point per router; ``style``:
    router -> (colour, marker), the same in every panel."""
    step = 0.8 / max(len(routers), 1)
    for j, router in enumerate(routers):
        sub = data[data["router"] == router]
        pos = {k: i for i, k in enumerate(order)}
        sub = sub[sub[key].isin(pos)]
        if sub.empty:
            continue
        y = np.array([pos[k] for k in sub[key]], float) - 0.4 + step * (j + 0.5)
        _errorbars(ax, y, sub, style[router][0], router, style[router][1])
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_xlim(0, 1.18)  # room for the n labels right of an interval that reaches 1
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("agreement with the task label (95% Wilson interval)")


def ablations_figure(ablations: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """The router's ablations: label agreement per dropped signal beside the full
    router (left) and with and without scrambled tags (right), per protocol, each with its
    95% Wilson interval and n. ``ablations``: :func:`tersetalk.topology.metrics.ablation_table`
    rows with a ``router`` column. A panel whose ablation did not run is left out (the
    title names it); with neither, the full routers alone are drawn."""
    _theme()
    from tersetalk.topology.rule import SIGNALS

    routers = list(dict.fromkeys(ablations["router"])) if len(ablations) else []
    palette = sns.color_palette(n_colors=max(len(routers), 1))
    style = {r: (palette[i], "osD^v"[i % 5]) for i, r in enumerate(routers)}
    full_label = "none (full router)"

    drops = ablations[ablations["ablation"].isin(["full", "drop"])]
    drops = drops.assign(row=np.where(drops["ablation"] == "full", full_label, drops["signal"]))
    has_drops = bool((ablations["ablation"] == "drop").any())
    scr = ablations[ablations["ablation"].isin(["full", "scrambled"])]
    scrambled_routers = set(scr.loc[scr["ablation"] == "scrambled", "router"])
    scr = scr[scr["router"].isin(scrambled_routers)]
    scr = scr.assign(row=np.where(scr["ablation"] == "full", "tags as sent", "tags scrambled"))
    has_scr = bool(scrambled_routers)
    ratios = [3] * (has_drops or not has_scr) + [2] * has_scr
    fig, axes = plt.subplots(1, len(ratios), figsize=(2 + 5 * len(ratios), 4.8),
                             width_ratios=ratios, squeeze=False)  # fmt: skip
    axes = list(axes[0])
    missing = []
    if has_drops or not has_scr:
        ax = axes[0]
        dropped = set(drops.loc[drops["ablation"] == "drop", "row"])
        signals = [s for s in SIGNALS if s in dropped] + sorted(dropped - set(SIGNALS))
        _panel(ax, drops, "row", [full_label, *signals], routers, style)
        for r in drops[drops["ablation"] == "full"].itertuples():  # the full router's level
            ax.axvline(r.label_agreement, color=style[r.router][0], ls="--", lw=1,
                       alpha=0.6, zorder=0)  # fmt: skip
        ax.set_ylabel("signal dropped from the score")
        ax.set_title("Dropped signal" if has_drops else "Full router")
    if not has_drops:
        missing.append("dropped signal")
    if has_scr:
        ax = axes[-1]
        _panel(ax, scr, "row", ["tags as sent", "tags scrambled"],
               [r for r in routers if r in scrambled_routers], style)  # fmt: skip
        ax.set_ylabel("")
        ax.set_title("Scrambled tags")
    else:
        missing.append("scrambled tags")

    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    not_run = f"\nnot run: {', '.join(missing)}" if missing else ""
    fig.suptitle(f"Router ablations: agreement with the task labels ({model}){not_run}")
    fig.tight_layout()
    if handles:  # below the axes' labels, after the layout (tight_layout ignores it)
        fig.legend(handles, labels, title="router", loc="upper center", ncol=len(labels),
                   bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    return save_figure(fig, out_stem, data=ablations, models=[model])
