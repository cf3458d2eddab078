"""The paper's main table as files: ``main.csv`` and ``main.tex``.

Why two forms: the CSV keeps the semantic-preservation method per row (what a reader
checks a number against), while in LaTeX that column would be too wide, so the method
goes into the caption (:func:`tersetalk.plots.figures.semantic_method_note`), together
with the models and the bootstrap seed the intervals came from.

Accuracy is a proportion (an error counts as a wrong answer), so its interval is the
continuity-corrected Wilson score interval of ``accuracy`` over ``n``
(:func:`tersetalk.core.intervals.wilson`), whatever interval the summary arrived with: a
percentile bootstrap of 0 of 10 correct is [0, 0], which looks certain; Wilson's is
(0, 0.278) and the corrected one (0, 0.345). The correction because the plain interval
covers as little as 0.90 at small n and small rates (the simulation study, ``stats_sim``),
and the corrected one at least 0.95 at every n and rate.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tersetalk.core import figmeta
from tersetalk.core.io import write_csv_atomic, write_text_atomic
from tersetalk.plots import figures as F
from tersetalk.stats.latex import to_latex

__all__ = ["model_line", "wilson_accuracy", "write_main_table"]


def wilson_accuracy(summary: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """``summary`` with ``accuracy_ci_low`` / ``accuracy_ci_high`` set to the Wilson
    interval of ``accuracy`` over ``n`` (unchanged when either column is absent)."""
    from tersetalk.core.intervals import wilson

    if "accuracy" not in summary.columns or "n" not in summary.columns:
        return summary
    bounds = [
        wilson(float(acc), int(n), confidence, continuity=True)
        if pd.notna(acc) and pd.notna(n)
        else (NAN, NAN)
        for acc, n in zip(summary["accuracy"], summary["n"], strict=True)
    ]
    out = summary.copy()
    out["accuracy_ci_low"] = [b[0] for b in bounds]
    out["accuracy_ci_high"] = [b[1] for b in bounds]
    return out


NAN = float("nan")


def write_main_table(summary: pd.DataFrame, tables: str | Path, seed: int) -> list[Path]:
    """``main.csv`` (with the semantic method per row) and ``main.tex`` (method in the caption)."""
    tables = Path(tables)
    table = F.main_table(wilson_accuracy(summary))
    tex = to_latex(
        table,
        [c for c in table.columns if c != F.SEMANTIC_METHOD_COLUMN],
        caption="Accuracy, tokens and preservation per system "
        f"({model_line(summary)}; 95% continuity-corrected Wilson intervals of accuracy, "
        f"errors counted wrong; 95% bootstrap CIs of tokens, seed {seed}). "
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
