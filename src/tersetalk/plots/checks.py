"""Layout checks of a drawn figure: text that overlaps other text, and axes with no data.

A reviewer rejects a figure whose labels collide or whose panel is blank; both are
easy to miss when a figure is only looked at on one machine with one data set. These
checks work on the rendered figure (``fig.canvas.draw()`` first, then every text's
``get_window_extent``), so they see what the PNG shows: tick labels after the locator
has run, legends where they were placed, annotations after their offsets.

``figure_problems(fig)`` returns a list of sentences (empty when the figure is fine);
``check_figure(fig)`` raises :class:`FigureLayoutError` with them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

__all__ = [
    "FigureLayoutError",
    "check_figure",
    "empty_axes",
    "figure_problems",
    "overlapping_texts",
]

#: overlaps smaller than this many pixels in either direction are ignored (antialiasing)
TOLERANCE_PX = 1.0


class FigureLayoutError(AssertionError):
    """A figure has overlapping text or an empty axes; the message lists each problem."""


@dataclass(frozen=True)
class _Label:
    text: Text
    where: str  # e.g. "axes 0 x tick label", "suptitle"
    group: str  # labels of one group are also checked among themselves


def _shown(t: Text) -> bool:
    return bool(t.get_visible() and t.get_text().strip())


def _tick_labels(axis, ax_name: str, which: str) -> list[_Label]:
    """The tick labels matplotlib draws: ticks whose location lies in the view.

    In view as matplotlib decides it: in the axis's scale (log units on a log axis), to a
    tolerance relative to the view's span there. Decided in data units instead, a decade
    tick just below a log view that spans several decades counted as in view: its label,
    never drawn, was reported overlapping the axis label (the bench figure, whose
    timings sometimes make such a view)."""
    scale = axis.get_transform()
    lo, hi = sorted(scale.transform(np.asarray(axis.get_view_interval(), dtype=float)))
    span = abs(hi - lo) or 1.0
    out = []
    for kind, ticks, locs in (
        ("major", axis.get_major_ticks(), axis.get_majorticklocs()),
        ("minor", axis.get_minor_ticks(), axis.get_minorticklocs()),
    ):
        with np.errstate(divide="ignore", invalid="ignore"):  # log of 0: not in view
            places = scale.transform(np.asarray(locs, dtype=float))
        for tick, place in zip(ticks, places, strict=False):
            if not (lo - 1e-10 * span <= place <= hi + 1e-10 * span):
                continue
            for lab in (tick.label1, tick.label2):
                if _shown(lab):
                    out.append(_Label(lab, f"{ax_name} {which} {kind} tick label", ax_name + which))
    return out


def _legend_labels(legend, where: str) -> list[_Label]:
    if legend is None or not legend.get_visible():
        return []
    texts = [t for t in [*legend.get_texts(), legend.get_title()] if _shown(t)]
    return [_Label(t, f"{where} legend", where + " legend") for t in texts]


def _axes_labels(ax: Axes, name: str) -> list[_Label]:
    if not ax.get_visible():
        return []
    out = []
    for title in (ax.title, ax._left_title, ax._right_title):  # noqa: SLF001
        if _shown(title):
            out.append(_Label(title, f"{name} title", name + " title"))
    if ax.axison:
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if _shown(axis.label):
                out.append(_Label(axis.label, f"{name} {which} label", name + which + "label"))
            out += _tick_labels(axis, name, which)
    out += _legend_labels(ax.get_legend(), name)
    for t in ax.texts:
        if _shown(t):
            out.append(_Label(t, f"{name} text", name + " text"))
    return out


def _all_labels(fig: Figure) -> list[_Label]:
    out = []
    for t in fig.texts:  # suptitle, supxlabel, fig.text
        if _shown(t):
            out.append(_Label(t, "figure text", "figure text"))
    for i, legend in enumerate(fig.legends):
        out += _legend_labels(legend, f"figure legend {i}")
    for i, ax in enumerate(fig.axes):
        out += _axes_labels(ax, f"axes {i} ({_title(ax)})")
    return out


def _title(ax: Axes) -> str:
    titles = [ax.get_title(loc) for loc in ("left", "center", "right")]
    return next((t for t in titles if t), "untitled")


def _overlap(a, b) -> bool:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > TOLERANCE_PX and h > TOLERANCE_PX


def overlapping_texts(fig: Figure) -> list[str]:
    """Pairs of drawn texts whose boxes overlap: titles, the suptitle, axis labels, tick
    labels, legend entries, annotations and bar labels, each against every other."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = _all_labels(fig)
    boxes = [lab.text.get_window_extent(renderer) for lab in labels]
    problems = []
    for (a, ba), (b, bb) in itertools.combinations(zip(labels, boxes, strict=True), 2):
        if a.text is b.text or not _overlap(ba, bb):
            continue
        problems.append(f"{a.where} {a.text.get_text()!r} overlaps {b.where} {b.text.get_text()!r}")
    return problems


def _has_data(ax: Axes) -> bool:
    reference = {id(ax.get_xaxis_transform("grid")), id(ax.get_yaxis_transform("grid"))}
    for line in ax.lines:
        if id(line.get_transform()) in reference:  # axhline / axvline: a reference, not data
            continue
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        if np.isfinite(x).any() and np.isfinite(y).any():
            return True
    if any(p.get_visible() for p in ax.patches):
        return True
    for c in ax.collections:
        offsets = np.asarray(c.get_offsets(), dtype=float)
        if offsets.size and np.isfinite(offsets).any():
            return True
        # a scatter's path is its marker: only its offsets are data
        if not isinstance(c, PathCollection) and any(len(p.vertices) for p in c.get_paths()):
            return True
    return bool(ax.images)


def empty_axes(fig: Figure) -> list[str]:
    """Visible axes with nothing drawn from data (no line, patch, collection or image;
    reference lines and texts alone do not count)."""
    return [
        f"axes {i} ({_title(ax)}) shows no data"
        for i, ax in enumerate(fig.axes)
        if ax.get_visible() and not _has_data(ax)
    ]


def figure_problems(fig: Figure) -> list[str]:
    """Every layout problem of ``fig``: overlapping texts, then empty axes."""
    return overlapping_texts(fig) + empty_axes(fig)


def check_figure(fig: Figure, name: str = "figure") -> None:
    """Raise :class:`FigureLayoutError` listing the problems of ``fig``, if any."""
    problems = figure_problems(fig)
    if problems:
        raise FigureLayoutError(f"{name}: " + "; ".join(problems))
