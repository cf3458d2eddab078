"""The non-inferiority table of ``tersetalk stats``: every requested comparison, per task.

Why a table of every *requested* comparison: a comparison whose runs are missing
among the inputs (a system switched off, a task not run) must still show up, as a
row that says why it was not computed, so a reader never mistakes a missing row for
a passed test. Rows are per task in the order the comparisons were asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from tersetalk.stats._common import StatsError
from tersetalk.stats.compare import compare_runs
from tersetalk.stats.latex import to_latex

__all__ = ["TEX_COLUMNS", "noninferiority_table", "noninferiority_tex"]

log = logging.getLogger(__name__)

#: columns of the LaTeX table (those present), in this order
TEX_COLUMNS = (
    "task",
    "treatment",
    "control",
    "n",
    "mean_diff",
    "lower_bound",
    "verdict",
    "tokens_relative_reduction",
    "tokens_p_wilcoxon",
)


def noninferiority_table(
    frames: Iterable[pd.DataFrame],
    comparisons: Sequence[tuple[str, str]],
    *,
    margin: float,
    alpha: float,
    n_resamples: int,
    seed: int,
    planned: Mapping[str, Iterable[str]] | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """Compare ``(treatment, control)`` labels (``system/variant``) on every task present.

    ``frames`` are per-example metrics, one run each. Returns the table (one row per
    task and requested comparison; ``not_computed`` is empty or says what is missing)
    and the skipped comparisons. ``planned`` (task -> the runs the workflow schedules
    on it) limits each task to the comparisons whose two runs are both planned there:
    a comparison of systems that do not run on a task is not asked, so it is not
    reported missing either. Raises :class:`StatsError` when no comparison has both
    of its runs among the inputs.
    """
    frames = list(frames)
    comparisons = [tuple(pair) for pair in comparisons]
    tables = []
    skipped = []
    for task in sorted({f["task"].iloc[0] for f in frames if len(f)}):
        by_run = {
            f"{f['system'].iloc[0]}/{f['variant'].iloc[0]}": f
            for f in frames
            if len(f) and f["task"].iloc[0] == task
        }
        asked = comparisons
        if planned is not None:
            runs = set(planned.get(task, ()))
            asked = [c for c in comparisons if c[0] in runs and c[1] in runs]
        wanted = [c for c in asked if c[0] in by_run and c[1] in by_run]
        for treatment, control in asked:
            if (treatment, control) in wanted:
                continue
            missing = [label for label in (treatment, control) if label not in by_run]
            why = f"no {task} records of {' and '.join(missing)} among the inputs"
            log.warning("%s vs %s on %s not computed: %s", treatment, control, task, why)
            skipped.append(
                {"task": task, "treatment": treatment, "control": control, "not_computed": why}
            )
        if not wanted:
            continue
        table = compare_runs(
            by_run, wanted, margin=margin, alpha=alpha, n_resamples=n_resamples, seed=seed
        )
        table.insert(0, "task", task)
        table["not_computed"] = ""
        tables.append(table)
    if not tables:
        raise StatsError("none of the comparisons has both runs among the inputs")
    df = pd.concat(tables, ignore_index=True)
    if skipped:
        # one row per requested comparison, computed or not, in the order they were asked for
        gap = pd.DataFrame(skipped).assign(
            margin=margin, alpha=alpha, n_resamples=n_resamples, seed=seed
        )
        df = pd.concat([df, gap.astype({"not_computed": str})], ignore_index=True)
        rank = {pair: i for i, pair in enumerate(comparisons)}
        df["_order"] = [rank[(t, c)] for t, c in zip(df["treatment"], df["control"], strict=True)]
        df = df.sort_values(["task", "_order"], kind="stable").drop(columns="_order")
        df = df.reset_index(drop=True)
    return df, skipped


def noninferiority_tex(
    df: pd.DataFrame,
    skipped: list[dict],
    *,
    margin: float,
    alpha: float,
    n_resamples: int,
    seed: int,
) -> str:
    """The computed rows as a booktabs table; the caption names what was not computed."""
    cols = [c for c in TEX_COLUMNS if c in df.columns]
    computed = df[df["not_computed"] == ""]
    caption = (
        f"Non-inferiority of accuracy (margin {margin}, alpha {alpha}; binary accuracy: "
        "Tango's score bound with a continuity correction of 1/2, continuous scores: "
        f"{n_resamples} paired bootstrap resamples, seed {seed}; inconclusive while the "
        "control is not shown above the margin; errors count as wrong answers) and paired "
        "tests of token reduction."
    )
    if skipped:
        caption += (
            " Not computed: "
            + "; ".join(
                f"{r['treatment']} vs {r['control']} on {r['task']} ({r['not_computed']})"
                for r in skipped
            )
            + "."
        )
    return to_latex(computed, cols, caption=caption, label="tab:noninferiority")
