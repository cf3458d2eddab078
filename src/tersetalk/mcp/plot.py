"""The figure of the MCP experiment (``figures/mcp.{png,pdf}``).

Left: o200k tokens the client's model reads per tool over the whole scripted session,
directly and through the proxy (lossless and under each budget), one row of panels per
server. Right: the latency the proxy adds per call as the client sees it (the round trip
through the proxy less the direct round trip of the same step, ms), one point per call,
with the median and p95 bounds of the TerseTalk design (20 and 50 ms) drawn.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tersetalk.core.plotting import save_figure, theme  # noqa: E402


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
        ax.tick_params(axis="x", rotation=75, labelsize="small")
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        ax.legend(title="", fontsize="small")
        ax = axes[row][1]
        added = d[d["arm"] != "direct"].dropna(subset=["t_added_ms"])
        if len(added):
            sns.stripplot(data=added, x="arm", y="t_added_ms", hue="kind", order=arms[1:],
                          ax=ax, jitter=0.25, size=5)  # fmt: skip
            ax.set_yscale("symlog", linthresh=10)
            for bound, style in ((20, "--"), (50, ":")):
                ax.axhline(bound, color="grey", lw=1, ls=style)
            ax.legend(title="kind", fontsize="small")
        ax.set_title(f"{server}: latency added per call")
        ax.set_xlabel("")
        ax.set_ylabel("ms, proxied - direct")
    fig.tight_layout()
    return save_figure(fig, out_stem, data=df)
