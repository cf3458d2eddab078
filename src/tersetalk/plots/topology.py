"""The topology study's figures: selection accuracy per task and policy, tokens against
accuracy per policy, the θ sweep, and the router's ablations (a signal dropped, tags
scrambled). Each is written as PDF and PNG and names the model that produced the runs in
its title."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.plotting import save_figure, theme  # noqa: E402

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
    registry title without the metric; a task the registry does not know by its id."""
    from tersetalk.tasks.registry import get

    try:
        return get(task).title.split(" (")[0]
    except KeyError:
        return task


def selection_by_task(per_task: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """Bars: selection accuracy per task (x) and policy (hue); ``per_task`` has
    ``task``, ``policy_label``, ``selection_accuracy``."""
    _theme()
    fig, ax = plt.subplots(figsize=(10, 4))
    data = per_task.assign(task=per_task["task"].map(task_name))
    sns.barplot(data=data, x="task", y="selection_accuracy", hue="policy_label", ax=ax)
    ax.set(ylim=(0, 1.05), xlabel="task", ylabel="selection accuracy (vs task label)")
    ax.set_title(f"Topology selection per task ({model})")
    ax.legend(title="policy", bbox_to_anchor=(1.01, 1), loc="upper left")
    return save_figure(fig, out_stem, data=per_task, models=[model])


def tokens_vs_accuracy(six: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """One point per policy: mean tokens per example (x) against accuracy (y)."""
    _theme()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    # a marker per policy as well as a colour: policies that route alike (an adaptive
    # policy sending everything to the chain) land on the same point and stay visible
    sns.scatterplot(data=six, x="tokens", y="accuracy", hue="policy_label",
                    style="policy_label", s=110, alpha=0.85, ax=ax)  # fmt: skip
    ax.set(xlabel="tokens per example on the wire (cl100k_base)", ylabel="accuracy",
           ylim=(-0.05, 1.05))  # fmt: skip
    ax.set_title(f"Tokens and accuracy per policy ({model})")
    ax.legend(title="policy", bbox_to_anchor=(1.01, 1), loc="upper left")
    return save_figure(fig, out_stem, data=six, models=[model])


def theta_sweep_figure(sweep: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """Selection accuracy (and the chain share) against θ, one line per router;
    ``sweep`` has ``router``, ``theta``, ``selection_accuracy``, ``chain_share`` (task all)."""
    _theme()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    sns.lineplot(data=sweep, x="theta", y="selection_accuracy", hue="router", marker="o",
                 ax=axes[0])  # fmt: skip
    axes[0].set(ylim=(0, 1.05), xlabel="threshold θ", ylabel="selection accuracy")
    sns.lineplot(data=sweep, x="theta", y="chain_share", hue="router", marker="o", ax=axes[1])
    axes[1].set(ylim=(0, 1.05), xlabel="threshold θ", ylabel="share routed to the chain")
    fig.suptitle(f"Router threshold sweep, replayed on recorded signals ({model})")
    return save_figure(fig, out_stem, data=sweep, models=[model])


def _errorbars(ax, y: np.ndarray, sub: pd.DataFrame, color, label: str, marker: str) -> None:
    """Points at each selection accuracy with its Wilson interval, ``n`` written beside."""
    x = sub["selection_accuracy"].to_numpy(float)
    # clipped at 0: at a proportion of 0 or 1 the interval's end may differ from it by
    # a rounding error (matplotlib refuses a negative error bar)
    err = np.clip(np.vstack([x - sub["selection_ci_low"].to_numpy(float),
                             sub["selection_ci_high"].to_numpy(float) - x]), 0, None)  # fmt: skip
    ax.errorbar(x, y, xerr=err, fmt=marker, color=color, capsize=3, ms=7, label=label)
    for yi, hi, n in zip(y, sub["selection_ci_high"], sub["n"], strict=True):
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
    ax.set_xlabel("selection accuracy (95% Wilson interval)")


def ablations_figure(ablations: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """The router's ablations: selection accuracy per dropped signal beside the full
    router (left) and with and without scrambled tags (right), per protocol, each with its
    95% Wilson interval and n. ``ablations``: :func:`tersetalk.metrics.topology.ablation_table`
    rows with a ``router`` column. A panel whose ablation did not run says so."""
    _theme()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), width_ratios=[3, 2])
    from tersetalk.agents.router import SIGNALS

    routers = list(dict.fromkeys(ablations["router"])) if len(ablations) else []
    palette = sns.color_palette(n_colors=max(len(routers), 1))
    style = {r: (palette[i], "osD^v"[i % 5]) for i, r in enumerate(routers)}
    full_label = "none (full router)"

    drops = ablations[ablations["ablation"].isin(["full", "drop"])]
    drops = drops.assign(row=np.where(drops["ablation"] == "full", full_label, drops["signal"]))
    has_drops = (ablations["ablation"] == "drop").any()
    if has_drops:
        dropped = set(drops.loc[drops["ablation"] == "drop", "row"])
        signals = [s for s in SIGNALS if s in dropped] + sorted(dropped - set(SIGNALS))
        _panel(axes[0], drops, "row", [full_label, *signals], routers, style)
        for r in drops[drops["ablation"] == "full"].itertuples():  # the full router's level
            axes[0].axvline(r.selection_accuracy, color=style[r.router][0], ls="--", lw=1,
                            alpha=0.6, zorder=0)  # fmt: skip
        axes[0].set_ylabel("signal dropped from the score")
    else:
        axes[0].text(0.5, 0.5, "no dropped-signal variant run", ha="center", va="center",
                     transform=axes[0].transAxes)  # fmt: skip
        axes[0].set_axis_off()
    axes[0].set_title("Dropped signal")

    scr = ablations[ablations["ablation"].isin(["full", "scrambled"])]
    scrambled_routers = set(scr.loc[scr["ablation"] == "scrambled", "router"])
    scr = scr[scr["router"].isin(scrambled_routers)]
    scr = scr.assign(row=np.where(scr["ablation"] == "full", "tags as sent", "tags scrambled"))
    if len(scrambled_routers):
        _panel(axes[1], scr, "row", ["tags as sent", "tags scrambled"],
               [r for r in routers if r in scrambled_routers], style)  # fmt: skip
        axes[1].set_ylabel("")
    else:
        axes[1].text(0.5, 0.5, "no scrambled-tag variant run", ha="center", va="center",
                     transform=axes[1].transAxes)  # fmt: skip
        axes[1].set_axis_off()
    axes[1].set_title("Scrambled tags")

    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.suptitle(f"Router ablations: selection accuracy vs task labels ({model})")
    fig.tight_layout()
    if handles:  # below the axes' labels, after the layout (tight_layout ignores it)
        fig.legend(handles, labels, title="router", loc="upper center", ncol=len(labels),
                   bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    return save_figure(fig, out_stem, data=ablations, models=[model])
