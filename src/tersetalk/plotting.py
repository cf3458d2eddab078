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

__all__ = ["save_figure", "theme"]


def theme() -> None:
    """The paper's seaborn theme: print context, white grid, legible fonts."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.25)


def save_figure(fig, out_stem: str | Path, dpi: int = 200) -> list[Path]:
    """Write ``fig`` as ``<out_stem>.pdf`` and ``.png`` (parents made) and close it."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("pdf", "png"):
        p = out_stem.with_suffix(f".{ext}")
        fig.savefig(p, dpi=dpi, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths
