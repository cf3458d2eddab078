"""Layout checks of a drawn figure: text that overlaps other text, markers hidden under
other markers, and axes with no data.

A reviewer rejects a figure whose labels collide or whose panel is blank; both are
easy to miss when a figure is only looked at on one machine with one data set. These
checks work on the rendered figure (``fig.canvas.draw()`` first, then every text's
``get_window_extent``), so they see what the PNG shows: tick labels after the locator
has run, legends where they were placed, annotations after their offsets.

A marker is hidden when another series' marker sits on it: their centres closer than
half the larger marker (:data:`HIDDEN_FRACTION`), as a reader of the PNG would see one
point where there are two. Markers of one series may touch (a dense line).

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
    "hidden_markers",
    "overlapping_texts",
]

#: overlaps smaller than this many pixels in either direction are ignored (antialiasing)
TOLERANCE_PX = 1.0


#: two markers of different series hide one another when their centres are closer than
#: this fraction of the larger marker's size
HIDDEN_FRACTION = 0.5


class FigureLayoutError(AssertionError):
    """A figure has overlapping text, a hidden marker or an empty axes; the message lists
    each problem."""


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


def _series_markers(ax: Axes, dpi: float) -> list[tuple[str, np.ndarray, float]]:
    """Each series' markers in ``ax``: (its name, centres in pixels, marker size in px)."""
    from matplotlib.lines import Line2D

    names, caps = {}, set()
    for container in ax.containers:  # an errorbar's marker line is named by its container
        children = getattr(container, "lines", None) or ()
        if children and isinstance(children[0], Line2D):
            names[id(children[0])] = container.get_label()
            caps |= {id(cap) for cap in (children[1] or ())}  # its caps are not points
    out = []
    for i, line in enumerate(ax.lines):
        marker = line.get_marker()
        if (not line.get_visible() or id(line) in caps or not isinstance(marker, str)
                or marker in ("None", "none", "", " ", "|", "_", ",")):  # fmt: skip
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), float),
                              np.asarray(line.get_ydata(), float)])  # fmt: skip
        xy = xy[np.isfinite(xy).all(axis=1)]
        if not len(xy):
            continue
        name = names.get(id(line), line.get_label())
        if not name or name.startswith("_"):
            name = f"line {i}"
        out.append((name, line.get_transform().transform(xy), line.get_markersize() * dpi / 72))
    for i, c in enumerate(ax.collections):
        if not isinstance(c, PathCollection) or not c.get_visible():
            continue
        xy = np.asarray(c.get_offsets(), float)
        xy = xy[np.isfinite(xy).all(axis=1)] if xy.size else xy
        if not len(xy):
            continue
        sizes = c.get_sizes()
        size = float(np.sqrt(np.max(sizes))) * dpi / 72 if len(sizes) else 6 * dpi / 72
        name = c.get_label() if not str(c.get_label()).startswith("_") else f"points {i}"
        out.append((name, c.get_offset_transform().transform(xy), size))
    return out


def hidden_markers(fig: Figure) -> list[str]:
    """Markers of one series drawn on another series' markers (module docstring)."""
    fig.canvas.draw()
    problems = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        series = _series_markers(ax, fig.dpi)
        for (a, pa, sa), (b, pb, sb) in itertools.combinations(series, 2):
            limit = HIDDEN_FRACTION * max(sa, sb)
            d = np.sqrt(((pa[:, None, :] - pb[None, :, :]) ** 2).sum(axis=2))
            hits = np.argwhere(d < limit)
            if len(hits):
                problems.append(
                    f"axes {k} ({_title(ax)}): a marker of {b!r} hides under one of {a!r} "
                    f"({len(hits)} place{'s' if len(hits) > 1 else ''})"
                )
    return problems


def figure_problems(fig: Figure) -> list[str]:
    """Every layout problem of ``fig``: overlapping texts, hidden markers, empty axes."""
    return overlapping_texts(fig) + hidden_markers(fig) + empty_axes(fig)


def check_figure(fig: Figure, name: str = "figure") -> None:
    """Raise :class:`FigureLayoutError` listing the problems of ``fig``, if any."""
    problems = figure_problems(fig)
    if problems:
        raise FigureLayoutError(f"{name}: " + "; ".join(problems))
