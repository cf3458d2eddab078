"""One figure for the three microbenchmarks (PDF and PNG).

(a) MB-1 speedup of each extractor over the regex on free-form text, per corpus
group; (b) MB-2 speedup of each framer over sentence detection, per chunk size;
(c, d) the same methods against the limit -- raw orjson over whole messages
(MB-1), newline framing plus orjson per line (MB-2) -- where the dash-dotted line
is the protocol's target for its parsers (half the limit's speed) and the
``*_models*`` series are the floor of any parser that returns line models (the limit
plus models assembled with no check); (e) MB-3
bytes on wire and (f) encode/decode time per message, per codec, on the real
messages (or the middle synthetic size when there are none); with MB-4, (g) the
``M#`` memory store's speed against a plain dict / OrderedDict per operation and
store size and (h) its nanoseconds per operation. Ratios are of
medians with an interquartile error bar; the dashed line is the baseline (or the
limit), the dotted line the design's hoped-for ratio.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from .corpus import REAL_GROUP, group_order  # noqa: E402
from .results import LIMIT_TARGET, SEED_TARGETS  # noqa: E402


def _group_label(group: str, sub: pd.DataFrame) -> str:
    n = int(sub["n_messages"].iloc[0])
    size = sub["bytes"].iloc[0] / n
    size_txt = f"{size / 1024:.1f} KB" if size >= 1024 else f"{size:.0f} B"
    n_items = int(group.rsplit("-", 1)[1]) if group != REAL_GROUP else 0
    name = "real" if group == REAL_GROUP else f"{n_items} item{'s' if n_items != 1 else ''}"
    return f"{name}\n{size_txt}"


def _speedup_panel(ax, df: pd.DataFrame, x: list, labels: list[str], xkey: str, methods: list[str],
                   colors: dict, target: float, target_label: str,
                   cols: tuple[str, str, str] = ("speedup_vs_baseline", "speedup_lo", "speedup_hi"),
                   target_style: str = ":") -> None:  # fmt: skip
    width = 0.7 / max(len(methods), 1)
    ycol, locol, hicol = cols
    for j, method in enumerate(methods):
        sub = df[df["method"] == method].set_index(xkey).reindex(x)
        pos = np.arange(len(x)) + (j - (len(methods) - 1) / 2) * width
        y = sub[ycol].to_numpy(dtype=float)
        err = np.vstack([y - sub[locol].to_numpy(dtype=float),
                         sub[hicol].to_numpy(dtype=float) - y])  # fmt: skip
        ax.errorbar(pos, y, yerr=np.clip(err, 0, None), fmt="o-", ms=6, lw=1.4, capsize=3,
                    color=colors[method], label=method)  # fmt: skip
    ax.axhline(1.0, color="0.3", ls="--", lw=1.2)
    ax.axhline(target, color="tab:red", ls=target_style, lw=1.6, label=target_label)
    ax.set_yscale("log")
    ax.set_xticks(range(len(x)), labels)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_minor_log(ax, "y", "x")))


def _minor_log(ax, which: str = "y", suffix: str = ""):
    """Minor tick labels of a log axis: only 2 and 5 of a decade, and only when the axis
    spans little more than a decade (with all nine labelled they touch)."""

    def label(v: float, _pos) -> str:
        lo, hi = sorted(ax.get_ylim() if which == "y" else ax.get_xlim())
        if v <= 0 or lo <= 0 or np.log10(hi / lo) > 1.3:
            return ""
        mantissa = round(v / 10 ** np.floor(np.log10(v) + 1e-9), 3)
        return f"{v:g}{suffix}" if mantissa in (2.0, 5.0) else ""

    return label


def plot_bench(mb1: pd.DataFrame, mb2: pd.DataFrame, mb3: pd.DataFrame,
               out_stem: str | Path, mb4: pd.DataFrame | None = None) -> list[Path]:  # fmt: skip
    """Write ``{out_stem}.pdf`` and ``.png``; return the paths (with ``mb4``, a fourth
    row: the memory store against its baselines, and its cost per operation)."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.25)
    n_rows = 3 if mb4 is None else 4
    # constrained layout keeps the suptitle and the legends under the panels clear of
    # the panels' titles (tight_layout placed the suptitle over them)
    fig, axes = plt.subplots(n_rows, 2, figsize=(15, 17.5 * n_rows / 3), layout="constrained")
    _mb1_panels(axes[0][0], axes[1][0], mb1)
    _mb2_panels(axes[0][1], axes[1][1], mb2)
    _mb3_panels(axes[2][0], axes[2][1], mb3)
    if mb4 is not None:
        _mb4_panels(axes[3][0], axes[3][1], mb4)
    fig.suptitle(_environment_title(mb1), fontsize=12)
    fig.get_layout_engine().set(h_pad=0.12, w_pad=0.15)
    from tersetalk.core.plotting import save_figure

    return save_figure(fig, out_stem, dpi=150)


#: the columns of a ratio to the limit (median, low and high end of its error bar)
_LIMIT_COLS = ("ratio_vs_limit", "ratio_vs_limit_lo", "ratio_vs_limit_hi")


def _mb1_panels(ax_speed, ax_limit, mb1: pd.DataFrame) -> None:
    """(a) each extractor's speedup over the regex per corpus group; (c) the same
    extractors against the limit (raw orjson over whole messages)."""
    ax = ax_speed
    groups = group_order(mb1["group"])
    labels = [_group_label(g, mb1[mb1["group"] == g]) for g in groups]
    methods = [m for m in dict.fromkeys(mb1["method"]) if not _is_base(mb1, m)]
    colors = dict(zip(methods, sns.color_palette("colorblind", len(methods)), strict=True))
    _speedup_panel(ax, mb1, groups, labels, "group", methods, colors, SEED_TARGETS["mb1"],
                   f"the design's hope ({SEED_TARGETS['mb1']:g}x)")  # fmt: skip
    base = mb1["baseline"].iloc[0]
    ax.set_title(f"(a) MB-1 field extraction: speedup over {base}", loc="left")
    ax.set_xlabel("corpus group (mean free-form bytes per message)")
    ax.set_ylabel(f"speedup over {base} (median)")
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)

    # (c) against the limit
    ax = ax_limit
    limit = str(mb1["limit"].iloc[0])
    shown = [m for m in methods if m != limit]
    _speedup_panel(ax, mb1, groups, labels, "group", shown, colors, LIMIT_TARGET,
                   f"the protocol's target for the parsers ({LIMIT_TARGET:g} of the limit)",
                   _LIMIT_COLS, "-.")  # fmt: skip
    ax.set_title(f"(c) MB-1 against the limit ({limit})", loc="left")
    ax.set_xlabel("corpus group (mean free-form bytes per message)")
    ax.set_ylabel(f"{limit} median / method median")
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)


def _mb2_panels(ax_speed, ax_limit, mb2: pd.DataFrame) -> None:
    """(b) each framer's speedup over sentence detection per chunk size; (d) the same
    framers against the limit (newline framing plus orjson per line)."""
    ax = ax_speed
    sizes = sorted(mb2["chunk_size"].unique())
    methods = [m for m in dict.fromkeys(mb2["method"]) if not _is_base(mb2, m)]
    colors = dict(zip(methods, sns.color_palette("colorblind", len(methods)), strict=True))
    _speedup_panel(ax, mb2, sizes, [str(s) for s in sizes], "chunk_size", methods, colors,
                   SEED_TARGETS["mb2"],
                   f"the design's hope ({SEED_TARGETS['mb2']:g}x)")  # fmt: skip
    base = mb2["baseline"].iloc[0]
    n_bytes = int(mb2[mb2["is_baseline"]]["bytes"].iloc[0])
    ax.set_title(f"(b) MB-2 stream boundaries: speedup over {base}", loc="left")
    ax.set_xlabel(f"chunk size (bytes); stream of {n_bytes / 1024:.0f} KB")
    ax.set_ylabel(f"speedup over {base} (median)")
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)

    # (d) against the limit
    ax = ax_limit
    limit = str(mb2["limit"].iloc[0])
    shown = [m for m in methods if m != limit]
    _speedup_panel(ax, mb2, sizes, [str(s) for s in sizes], "chunk_size", shown, colors,
                   LIMIT_TARGET,
                   f"the protocol's target for the strict reader ({LIMIT_TARGET:g} of the limit)",
                   _LIMIT_COLS, "-.")  # fmt: skip
    ax.set_title(f"(d) MB-2 against the limit ({limit})", loc="left")
    ax.set_xlabel(f"chunk size (bytes); stream of {n_bytes / 1024:.0f} KB")
    ax.set_ylabel(f"{limit} median / method median")
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)


def _mb3_panels(ax_bytes, ax_time, mb3: pd.DataFrame) -> None:
    """(e) bytes on wire and (f) encode/decode time per message, per codec, on the real
    messages (or the middle synthetic size when there are none)."""
    groups3 = group_order(mb3["group"])
    group = REAL_GROUP if REAL_GROUP in groups3 else groups3[len(groups3) // 2]
    sub = mb3[mb3["group"] == group]
    codecs = list(dict.fromkeys(sub["codec"]))
    n_msgs = int(sub["n_messages"].iloc[0])
    enc = sub[sub["operation"] == "encode"].set_index("codec").reindex(codecs)
    ax = ax_bytes
    palette = sns.color_palette("colorblind", len(codecs))
    ax.barh(codecs, enc["bytes_per_message"], color=palette)
    base_bytes = float(enc.loc[mb3["baseline"].iloc[0], "bytes_per_message"])
    ax.axvline(base_bytes, color="0.3", ls="--", lw=1.2)
    for i, c in enumerate(codecs):
        ax.text(enc.loc[c, "bytes_per_message"], i, f" {enc.loc[c, 'bytes_vs_baseline']:.2f}x",
                va="center", fontsize=10)  # fmt: skip
    ax.invert_yaxis()
    ax.set_xlim(0, 1.18 * float(enc["bytes_per_message"].max()))
    ax.set_title(f"(e) MB-3 bytes on wire, {group} group ({n_msgs} messages)", loc="left")
    ax.set_xlabel("bytes per message (label: relative to free-form text)")

    ax = ax_time
    t = sub.assign(us=sub["ns_per_message"] / 1e3)
    sns.barplot(data=t, y="codec", x="us", hue="operation", order=codecs, ax=ax,
                palette=["#4C72B0", "#DD8452"], orient="h")  # fmt: skip
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_minor_log(ax, "x")))
    ax.set_title(f"(f) MB-3 time per message, {group} group (median)", loc="left")
    ax.set_xlabel("microseconds per message (log scale)")
    ax.set_ylabel("")
    ax.legend(title=None, fontsize=10, loc="lower right")


def _environment_title(mb1: pd.DataFrame) -> str:
    """The figure's title: the machine, repeats, load and library versions the timings
    were taken with (from MB-1's environment columns)."""
    env = mb1.iloc[0]
    return (
        f"TerseTalk microbenchmarks — {env['env_cpu']}, {env['env_cpus_usable']} CPUs, "
        f"{int(env['repeats'])} repeats, load avg {env['env_loadavg_1m']}\n"
        f"{env['env_python']}, orjson {env['env_orjson']}, msgspec {env.get('env_msgspec', '?')}, "
        f"msgpack {env['env_msgpack']}, "
        f"protobuf {env['env_protobuf']} ({env['env_protobuf_backend']})"
    )


def _mb4_panels(ax_ratio, ax_ns, mb4: pd.DataFrame) -> None:
    """(g) the store's speed as a share of its baseline's, per operation and size;
    (h) nanoseconds per operation of the store and of each baseline."""
    sizes = sorted(mb4["size"].unique())
    ops = list(dict.fromkeys(mb4["operation"]))
    colors = dict(zip(ops, sns.color_palette("colorblind", len(ops)), strict=True))
    store = mb4[~mb4["is_baseline"]].rename(columns={"method": "store", "operation": "method"})
    _speedup_panel(ax_ratio, store, sizes, [f"{s:,}" for s in sizes], "size", ops, colors, 1.0,
                   "baseline's speed")  # fmt: skip
    bases = ", ".join(f"{op}: {b}" for op, b in
                      mb4.groupby("operation", sort=False)["baseline"].first().items())  # fmt: skip
    ax_ratio.set_title("(g) MB-4 M# memory: speed against plain structures", loc="left")
    ax_ratio.set_xlabel(f"entries in the store (baselines: {bases})")
    ax_ratio.set_ylabel("baseline median / store median")
    ax_ratio.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
                    frameon=False)  # fmt: skip
    from tersetalk.core.plotting import dodge, shifted

    curves = []
    for op in ops:
        for is_base, style in ((False, "o-"), (True, "s--")):
            sub = mb4[(mb4["operation"] == op) & (mb4["is_baseline"] == is_base)]
            sub = sub.set_index("size").reindex(sizes)
            curves.append((op, style, sub["method"].dropna().iloc[0], sub["ns_per_op"]))
    # the view first, then curves that meet (a store as fast as its baseline) side by side
    ax_ns.set_yscale("log")
    ns = mb4["ns_per_op"].to_numpy(float)
    ns = ns[np.isfinite(ns) & (ns > 0)]
    if len(ns):
        ax_ns.set_ylim(float(ns.min()) / 1.6, float(ns.max()) * 1.6)
    ax_ns.set_xlim(-0.5, len(sizes) - 0.5)
    xy = [np.column_stack([np.arange(len(sizes)), c[3].to_numpy(float)]) for c in curves]
    offsets = dodge(ax_ns, xy, 7.0)
    for (op, style, name, y), dx in zip(curves, offsets, strict=True):
        ax_ns.plot(range(len(sizes)), y, style, color=colors[op], ms=6, label=f"{op}: {name}",
                   transform=shifted(ax_ns, dx))  # fmt: skip
    ax_ns.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_minor_log(ax_ns, "y")))
    ax_ns.set_xticks(range(len(sizes)), [f"{s:,}" for s in sizes])
    ax_ns.set_title("(h) MB-4 cost per operation (median)", loc="left")
    ax_ns.set_xlabel("entries in the store" + ("; points that meet set apart" if any(offsets)
                                               else ""))  # fmt: skip
    ax_ns.set_ylabel("nanoseconds per operation (log scale)")
    ax_ns.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
                 frameon=False)  # fmt: skip


def _is_base(df: pd.DataFrame, method: str) -> bool:
    return bool(df.loc[df["method"] == method, "is_baseline"].iloc[0])
