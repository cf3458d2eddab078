"""The house style and the file writing every figure shares.

Used by the format study's figures (:mod:`tersetalk.formats.plot`); the paper's
figures (:mod:`tersetalk.plots.figures`) draw in the same style. A module of its own
so a study can draw without importing the paper's figure code (``plots`` imports the
task registry, and a task imports the format study's corpus: a package cycle).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

__all__ = [
    "OKABE_ITO",
    "categorical_styles",
    "dodge",
    "note_dodged",
    "shifted",
    "save_figure",
    "system_style",
    "theme",
    "wilson_errors",
]

#: Okabe and Ito's eight colours, told apart under every common colour-vision deficiency
#: (yellow last: it is faint on white)
OKABE_ITO: tuple[str, ...] = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
)  # fmt: skip
#: filled markers, each a different shape, for a second cue beside the colour
MARKERS: tuple[str, ...] = ("o", "s", "D", "^", "v", "P", "X", "h", "<", ">", "p", "*")
#: every registered system's colour and marker, the same in every figure
_SYSTEMS: dict[str, tuple[str, str]] = {
    "freeform": (OKABE_ITO[6], "o"),
    "llmlingua": (OKABE_ITO[1], "s"),
    "tersetalk": (OKABE_ITO[0], "D"),
    "hybrid": (OKABE_ITO[2], "^"),
    "mediator": (OKABE_ITO[3], "v"),
    "msp": (OKABE_ITO[4], "P"),
    "formats": (OKABE_ITO[5], "X"),
    "topology_tersetalk": (OKABE_ITO[0], "h"),
    "topology_freeform": (OKABE_ITO[6], "p"),
}


def system_style(system: str) -> tuple[str, str]:
    """A system's colour and marker: fixed for the registered systems, so a system looks
    alike in every figure; any other name gets a pair chosen from its name (stable across
    runs and machines)."""
    if system in _SYSTEMS:
        return _SYSTEMS[system]
    import zlib

    h = zlib.crc32(system.encode("utf-8"))
    return OKABE_ITO[h % 7], MARKERS[(h // 7) % len(MARKERS)]


def categorical_styles(names) -> dict[str, tuple[str, str]]:
    """A colour and a marker for each of ``names`` (in order): the first eight differ in
    colour (Okabe and Ito), and every one differs from its neighbours in marker."""
    return {
        name: (OKABE_ITO[i % len(OKABE_ITO)], MARKERS[i % len(MARKERS)])
        for i, name in enumerate(dict.fromkeys(names))
    }


def dodge(ax, series, size_pt: float) -> list[float]:
    """Horizontal offsets in points, one per series, that keep every marker off the
    markers of the series before it: a series whose points land within ``size_pt`` of an
    earlier series' points moves right, then left, by whole marker widths, until none
    does. ``series``: one array of data points (x, y) per series, drawn in this order on
    ``ax`` with its limits set. Coinciding results stay readable; the shift is in points,
    so it never changes what the axes say."""
    import numpy as np

    scale = 72.0 / ax.figure.dpi
    placed = np.empty((0, 2))
    offsets = []
    for xy in series:
        pts = ax.transData.transform(np.atleast_2d(np.asarray(xy, float))) * scale
        pts = pts[np.isfinite(pts).all(axis=1)]
        for k in range(64):
            dx = size_pt * ((k + 1) // 2) * (1 if k % 2 else -1)
            moved = pts + [dx, 0.0]
            if not len(placed) or not len(moved):
                break
            d = np.sqrt(((moved[:, None, :] - placed[None, :, :]) ** 2).sum(axis=2))
            if d.min() >= size_pt:
                break
        offsets.append(float(dx))
        placed = np.vstack([placed, moved]) if len(moved) else placed
    return offsets


def note_dodged(ax, offsets) -> None:
    """Say under ``ax``'s x label that some points were set aside (:func:`dodge`)."""
    if any(offsets):
        ax.set_xlabel(f"{ax.get_xlabel()}\n(points that coincide are set side by side)")


def shifted(ax, dx_pt: float):
    """``ax``'s data transform moved right by ``dx_pt`` points (for :func:`dodge`)."""
    from matplotlib.transforms import offset_copy

    return offset_copy(ax.transData, fig=ax.figure, x=dx_pt, y=0.0, units="points")


def wilson_errors(proportion, n) -> tuple:
    """Error-bar lengths (below, above) of each proportion's 95% Wilson interval.

    Arrays in, arrays out, ready for ``errorbar(yerr=...)``; ``n`` of 0 gives the whole
    unit interval. Why Wilson: at 0 or 1 of a few examples it still has width.
    """
    import numpy as np

    from tersetalk.core.intervals import wilson

    p = np.atleast_1d(np.asarray(proportion, float))
    k = np.atleast_1d(np.asarray(n, float))
    bounds = np.array(
        [
            wilson(float(pi), int(ki), continuity=True) if np.isfinite(pi) else (np.nan, np.nan)
            for pi, ki in zip(p, k, strict=True)
        ]  # fmt: skip
    ).reshape(-1, 2)
    return np.clip(p - bounds[:, 0], 0, None), np.clip(bounds[:, 1] - p, 0, None)


def theme() -> None:
    """The paper's seaborn theme: print context, white grid, legible fonts."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.25)


def save_figure(fig, out_stem: str | Path, dpi: int = 200, *, data=None, **meta) -> list[Path]:
    """Write ``fig`` as ``<out_stem>.pdf`` and ``.png`` (parents made) and close it.

    Each file records what it was drawn from (:func:`tersetalk.core.figmeta.describe` of
    ``data``, the rows the figure draws, and ``meta``): in its own metadata and in a
    ``<file>.meta.json`` sidecar, which the report's captions read.

    Every figure is checked as drawn (:func:`tersetalk.core.figcheck.figure_problems`:
    overlapping text, a marker hidden under another, an empty panel); what the check
    finds is logged as a warning and recorded as ``layout_problems`` (empty when none)."""
    import logging

    from tersetalk.core import figmeta
    from tersetalk.core.figcheck import figure_problems

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    problems = figure_problems(fig)
    if problems:
        logging.getLogger(__name__).warning("figure %s: %s", out_stem.name, "; ".join(problems))
    recorded = figmeta.describe(data, out=out_stem, layout_problems=problems, **meta)
    paths = []
    for ext in ("pdf", "png"):
        p = out_stem.with_suffix(f".{ext}")
        fig.savefig(p, dpi=dpi, bbox_inches="tight", metadata=figmeta.savefig_metadata(p, recorded))
        figmeta.write(p, recorded)
        paths.append(p)
    plt.close(fig)
    return paths
