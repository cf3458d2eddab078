"""The figure of the tuned-vs-default experiment (``figures/mcp_tuned.{png,pdf}``).

One row of panels per server, one bar per arm (direct, default proxy config, tuned
file), the evaluation sessions as points over the bars: o200k tokens the client's
model reads per session, the dedup hit rate per tool call, and the hint lines' tokens
per session. Each row's title says how many values the tuner changed and how many of
them the proxy applied, so a tuner that changed nothing reads as such, and the saving of
the tuned file over the default config on the held-out sessions (the left panel's
tokens; the summary's ``tuned_saving_pct`` counts retrievals too) against the target.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.core.plotting import save_figure, theme  # noqa: E402

from .tuned import ARMS, DEFAULT, EVAL, LIST_STEP, TARGET_SAVING_PCT, TUNED  # noqa: E402

PANELS = (
    ("tokens", "o200k tokens read per session"),
    ("dedup_hit_rate", "dedup hits per tool call"),
    ("hint_tokens", "hint tokens per session"),
)


def per_session(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (server, arm, evaluation session): what the panels draw."""
    ev = df[df["split"] == EVAL]
    keys = ["server", "arm", "seed"]
    rate = ev[ev["tool"] != LIST_STEP].groupby(keys, sort=False)["dedup_hit"].mean()
    out = ev.groupby(keys, sort=False).agg(
        tokens=("tokens", "sum"), hint_tokens=("hint_tokens", "sum"),
        n_changes=("n_changes", "first"), n_applied=("n_applied", "first"),
    )  # fmt: skip
    return out.join(rate.rename("dedup_hit_rate").astype(float)).reset_index()


def figure(df: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    theme()
    sess = per_session(df)
    servers = list(dict.fromkeys(sess["server"]))
    arms = [a for a in ARMS if a in set(sess["arm"])]
    palette = dict(zip(arms, sns.color_palette("tab10", len(arms)), strict=True))
    fig, axes = plt.subplots(len(servers), len(PANELS), figsize=(13, 3.8 * len(servers)),
                             squeeze=False)  # fmt: skip
    for row, server in enumerate(servers):
        d = sess[sess["server"] == server]
        changes, applied = int(d["n_changes"].iloc[0]), int(d["n_applied"].iloc[0])
        read = d.groupby("arm")["tokens"].mean()
        saving = ""
        if TUNED in read and DEFAULT in read and read[DEFAULT]:
            pct = 100 * (1 - read[TUNED] / read[DEFAULT])
            target = TARGET_SAVING_PCT
            saving = f"\ntuned: {pct:.1f}% fewer tokens than default (target {target:g}%)"
        for col, (value, label) in enumerate(PANELS):
            ax = axes[row][col]
            sns.barplot(data=d, x="arm", y=value, order=arms, hue="arm", hue_order=arms,
                        palette=palette, errorbar=None, alpha=0.6, ax=ax, legend=False)  # fmt: skip
            sns.stripplot(data=d, x="arm", y=value, order=arms, color="black", size=4,
                          jitter=0.15, ax=ax)  # fmt: skip
            ax.set_xlabel("")
            ax.set_ylabel(label)
            if value == "dedup_hit_rate":
                ax.set_ylim(0, 1)
            ax.set_title(f"{server}: {label}" + (
                f"\ntuner: {changes} change(s), {applied} applied{saving}"
                if col == 0 else ""), fontsize="medium")  # fmt: skip
    fig.tight_layout()
    return save_figure(fig, out_stem, data=df)
