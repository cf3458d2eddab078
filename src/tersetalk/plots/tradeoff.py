"""Accuracy against total tokens per example, one point per system and variant."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

TASK_LABEL = {"hotpotqa": "HotpotQA (exact match)", "gsm8k": "GSM8K (accuracy)"}


def plot_accuracy_vs_tokens(summary: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """Write ``{out_stem}.pdf`` and ``.png``; return the paths."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.3)
    tasks = list(dict.fromkeys(summary["task"]))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.2), squeeze=False)
    data = summary.assign(label=summary["system"] + "/" + summary["variant"])
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = data[data["task"] == task]
        sns.scatterplot(data=sub, x="tokens_total_cl100k_mean", y="accuracy", hue="system",
                        style="system", s=120, ax=ax, legend=ax is axes[0][-1])  # fmt: skip
        # name the variant only where a system has several (the legend names systems)
        several = sub.groupby("system")["variant"].transform("nunique") > 1
        for r in sub[several].itertuples():
            ax.annotate(r.variant, (r.tokens_total_cl100k_mean, r.accuracy),
                        textcoords="offset points", xytext=(6, 4), fontsize=9)  # fmt: skip
        n = int(sub["n"].max())
        ax.set_title(f"{TASK_LABEL.get(task, task)}, n={n}")
        ax.set_xlabel("tokens exchanged per example (cl100k_base)")
        ax.set_ylabel("accuracy")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlim(0, 1.15 * float(sub["tokens_total_cl100k_mean"].max() or 1))
    if axes[0][-1].get_legend():
        sns.move_legend(axes[0][-1], "upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    model = ", ".join(sorted(set(summary["backend"] + ":" + summary["model"])))
    fig.suptitle(f"Accuracy vs tokens — {model}", fontsize=11)
    fig.tight_layout()
    paths = []
    for ext in ("pdf", "png"):
        p = out_stem.with_suffix(f".{ext}")
        fig.savefig(p, dpi=200, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths
