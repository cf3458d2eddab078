"""The paper's main table as files: ``main.csv`` and ``main.tex``.

Why two forms: the CSV keeps the semantic-preservation method per row (what a reader
checks a number against), while in LaTeX that column would be too wide, so the method
goes into the caption (:func:`tersetalk.plots.figures.semantic_method_note`), together
with the models and the bootstrap seed the intervals came from.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tersetalk import figmeta
from tersetalk.io import write_csv_atomic, write_text_atomic
from tersetalk.plots import figures as F
from tersetalk.stats.latex import to_latex

__all__ = ["model_line", "write_main_table"]


def write_main_table(summary: pd.DataFrame, tables: str | Path, seed: int) -> list[Path]:
    """``main.csv`` (with the semantic method per row) and ``main.tex`` (method in the caption)."""
    tables = Path(tables)
    table = F.main_table(summary)
    tex = to_latex(
        table,
        [c for c in table.columns if c != F.SEMANTIC_METHOD_COLUMN],
        caption="Accuracy, tokens and preservation per system "
        f"({model_line(summary)}; 95% bootstrap CIs, seed {seed}). "
        + F.semantic_method_note(summary),
        label="tab:main",
    )
    paths = [
        write_csv_atomic(table, tables / "main.csv"),
        write_text_atomic(tex, tables / "main.tex"),
    ]
    recorded = figmeta.describe(summary, out=paths[0], bootstrap_seed=seed)
    for path in paths:
        figmeta.write(path, recorded)
    return paths


def model_line(summary: pd.DataFrame) -> str:
    """``backend:model, ..., n=N`` of the runs in the summary (sorted, N the largest n)."""
    models = sorted(set(summary["backend"].astype(str) + ":" + summary["model"].astype(str)))
    return ", ".join(models) + f", n={int(summary['n'].max())}"
