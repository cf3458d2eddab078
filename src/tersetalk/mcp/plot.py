"""The figure of the MCP experiment (``figures/mcp.{png,pdf}``).

Left: o200k tokens the client's model reads per tool over the whole scripted session,
directly and through the proxy (lossless and under each budget), one row of panels per
server. Right: the proxy's own processing time per call over the downstream call's
time (log scale; 1 means the proxy doubles the call), one point per call.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.plotting import save_figure, theme  # noqa: E402


def _arm_order(arms: list[str]) -> list[str]:
    budgets = sorted((a for a in arms if a.startswith("budget_")),
                     key=lambda a: int(a.split("_")[1]), reverse=True)  # fmt: skip
    return [a for a in ("direct", "lossless") if a in arms] + budgets


def figure(df: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    theme()
    servers = list(dict.fromkeys(df["server"]))
    arms = _arm_order(list(dict.fromkeys(df["arm"])))
    fig, axes = plt.subplots(len(servers), 2, figsize=(13, 4.2 * len(servers)), squeeze=False,
                             gridspec_kw={"width_ratios": [2.2, 1]})  # fmt: skip
    palette = dict(zip(arms, sns.color_palette("tab10", len(arms)), strict=True))
    for row, server in enumerate(servers):
        d = df[df["server"] == server]
        tokens = d.groupby(["tool", "arm"], sort=False)["tokens"].sum().reset_index()
        ax = axes[row][0]
        sns.barplot(data=tokens, x="tool", y="tokens", hue="arm", hue_order=arms,
                    palette=palette, ax=ax)  # fmt: skip
        ax.set_yscale("log")
        ax.set_title(f"{server}: o200k tokens per tool over the session")
        ax.set_xlabel("")
        ax.set_ylabel("tokens read by the model")
        ax.tick_params(axis="x", rotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        ax.legend(title="", fontsize="small")
        ax = axes[row][1]
        ratio = d[d["arm"] != "direct"].dropna(subset=["t_pipeline_ratio"])
        ratio = ratio[ratio["t_pipeline_ratio"] > 0]
        if len(ratio):
            sns.stripplot(data=ratio, x="arm", y="t_pipeline_ratio", hue="kind", order=arms[1:],
                          ax=ax, jitter=0.25, size=5)  # fmt: skip
            ax.set_yscale("log")
            ax.axhline(1.0, color="grey", lw=1, ls="--")
            ax.legend(title="kind", fontsize="small")
        ax.set_title(f"{server}: proxy time / downstream time")
        ax.set_xlabel("")
        ax.set_ylabel("ratio per call")
    fig.tight_layout()
    return save_figure(fig, out_stem, data=df)
