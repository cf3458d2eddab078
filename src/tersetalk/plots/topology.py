"""The topology study's figures: selection accuracy per task and policy, tokens against
accuracy per policy, and the θ sweep. Each is written as PDF and PNG and names the
model that produced the runs in its title."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.plotting import save_figure  # noqa: E402

__all__ = ["selection_by_task", "theta_sweep_figure", "tokens_vs_accuracy"]


def _theme() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.2)


def selection_by_task(per_task: pd.DataFrame, model: str, out_stem: str | Path) -> list[Path]:
    """Bars: selection accuracy per task (x) and policy (hue); ``per_task`` has
    ``task``, ``policy_label``, ``selection_accuracy``."""
    _theme()
    fig, ax = plt.subplots(figsize=(9, 4))
    sns.barplot(data=per_task, x="task", y="selection_accuracy", hue="policy_label", ax=ax)
    ax.set(ylim=(0, 1.05), xlabel="task", ylabel="selection accuracy (vs task label)")
    ax.set_title(f"Topology selection per task ({model})")
    ax.legend(title="policy", bbox_to_anchor=(1.01, 1), loc="upper left")
    return save_figure(fig, out_stem)


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
    return save_figure(fig, out_stem)


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
    return save_figure(fig, out_stem)
