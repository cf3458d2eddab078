"""Paired tests of token reduction: paired t-test and Wilcoxon signed-rank.

The differences are T - C per example (treatment minus control tokens), so a
reduction shows as negative differences; reductions are reported as C - T
(positive when the treatment uses fewer tokens).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tersetalk.stats._common import StatsError, as_pair

ALTERNATIVES = ("two-sided", "less", "greater")


def _degenerate_p(d: float, alternative: str) -> float:
    """p-value of a test whose statistic is +inf (d > 0) or -inf (d < 0)."""
    if alternative == "two-sided":
        return 0.0
    if alternative == "less":
        return 0.0 if d < 0 else 1.0
    return 0.0 if d > 0 else 1.0


def token_reduction_tests(
    treatment_tokens: Sequence[float] | np.ndarray,
    control_tokens: Sequence[float] | np.ndarray,
    *,
    alternative: str = "two-sided",
    zero_method: str = "wilcox",
) -> dict[str, Any]:
    """Paired t-test and Wilcoxon signed-rank test of T vs C, with the size of the reduction.

    ``alternative`` is about T - C, as in scipy: "less" means the treatment uses
    fewer tokens. ``zero_method`` is passed to ``scipy.stats.wilcoxon`` ("wilcox"
    drops zero differences). Degenerate inputs do not raise: when every
    difference is zero both p-values are NaN; when every difference is the same
    non-zero value the t statistic is infinite; ``note`` says which case applied.

    Keys: n, mean_treatment, mean_control, reduction_mean (mean of C - T),
    reduction_median (median of C - T), relative_reduction (1 - mean T / mean C),
    relative_reduction_mean and relative_reduction_median (of the per-example
    1 - T_i / C_i over examples with C_i > 0), n_relative, t_statistic, p_ttest,
    wilcoxon_statistic, p_wilcoxon, alternative, wilcoxon_zero_method, note.
    """
    from scipy import stats  # here, not at import: most jobs that import stats never test

    if alternative not in ALTERNATIVES:
        raise StatsError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    t, c = as_pair(treatment_tokens, control_tokens)
    diff = t - c
    n = int(diff.size)
    notes: list[str] = []

    mean_c = float(c.mean())
    positive = c > 0
    per_example = 1.0 - t[positive] / c[positive]
    if not positive.all():
        notes.append(f"{n - int(positive.sum())} example(s) with 0 control tokens left out of "
                     "the per-example relative reduction")  # fmt: skip
    out: dict[str, Any] = {
        "n": n,
        "mean_treatment": float(t.mean()),
        "mean_control": mean_c,
        "reduction_mean": float(np.mean(c - t)),
        "reduction_median": float(np.median(c - t)),
        "relative_reduction": 1.0 - float(t.mean()) / mean_c if mean_c != 0 else float("nan"),
        "relative_reduction_mean": float(per_example.mean()) if per_example.size else float("nan"),
        "relative_reduction_median": (
            float(np.median(per_example)) if per_example.size else float("nan")
        ),
        "n_relative": int(per_example.size),
    }

    all_zero = bool(np.all(diff == 0))
    # paired t-test
    if n < 2:
        t_stat, p_t = float("nan"), float("nan")
        notes.append("n = 1: the paired t-test is undefined")
    elif all_zero:
        t_stat, p_t = float("nan"), float("nan")
    elif np.ptp(diff) == 0.0:
        d = float(diff[0])
        t_stat, p_t = float(np.sign(d) * np.inf), _degenerate_p(d, alternative)
        notes.append("all differences equal and non-zero: infinite t statistic")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_rel(t, c, alternative=alternative)
        t_stat, p_t = float(res.statistic), float(res.pvalue)

    # Wilcoxon signed-rank
    if all_zero:
        w_stat, p_w = float("nan"), float("nan")
        notes.append("all differences are zero: no test statistic, p-values are NaN")
    else:
        with warnings.catch_warnings():
            # scipy warns when it falls back to the normal approximation (ties, zeros)
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                res = stats.wilcoxon(t, c, zero_method=zero_method, alternative=alternative)
                w_stat, p_w = float(res.statistic), float(res.pvalue)
            except ValueError as err:  # e.g. too few non-zero differences for the method
                w_stat, p_w = float("nan"), float("nan")
                notes.append(f"Wilcoxon test not computed: {err}")

    out.update(
        t_statistic=t_stat,
        p_ttest=p_t,
        wilcoxon_statistic=w_stat,
        p_wilcoxon=p_w,
        alternative=alternative,
        wilcoxon_zero_method=zero_method,
        note="; ".join(notes),
    )
    return out
