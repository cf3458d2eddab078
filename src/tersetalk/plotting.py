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

from tersetalk.display import TASK_NAMES, task_display  # noqa: E402

__all__ = ["TASK_NAMES", "save_figure", "task_display", "theme", "wilson_errors"]


def wilson_errors(proportion, n) -> tuple:
    """Error-bar lengths (below, above) of each proportion's 95% Wilson interval.

    Arrays in, arrays out, ready for ``errorbar(yerr=...)``; ``n`` of 0 gives the whole
    unit interval. Why Wilson: at 0 or 1 of a few examples it still has width.
    """
    import numpy as np

    from tersetalk.stats.intervals import wilson

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

    Each file records what it was drawn from (:func:`tersetalk.figmeta.describe` of
    ``data``, the rows the figure draws, and ``meta``): in its own metadata and in a
    ``<file>.meta.json`` sidecar, which the report's captions read."""
    from tersetalk import figmeta

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    recorded = figmeta.describe(data, out=out_stem, **meta)
    paths = []
    for ext in ("pdf", "png"):
        p = out_stem.with_suffix(f".{ext}")
        fig.savefig(p, dpi=dpi, bbox_inches="tight", metadata=figmeta.savefig_metadata(p, recorded))
        figmeta.write(p, recorded)
        paths.append(p)
    plt.close(fig)
    return paths
