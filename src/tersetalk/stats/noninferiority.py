"""One-sided non-inferiority of a treatment's per-example accuracy against a control.

H0: d <= -margin (the treatment is worse by at least the margin) against
H1: d > -margin, where d = mean(T - C) over the same examples. The decision uses
the paired percentile bootstrap: the one-sided lower confidence bound at level
1 - alpha is the alpha-quantile of the bootstrap distribution of the mean
difference, and the treatment is non-inferior when that bound is above -margin.
A t-based bound and both p-values are reported alongside as checks.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from tersetalk.stats._common import (
    StatsError,
    as_pair,
    check_level,
    check_resamples,
    check_seed,
)
from tersetalk.stats.bootstrap import PAIRED_STATISTICS, bootstrap_distribution


@dataclass(frozen=True)
class NIResult:
    """Non-inferiority of treatment vs control on paired per-example scores."""

    mean_diff: float  # mean(T - C)
    lower_bound: float  # bootstrap one-sided lower bound at level 1 - alpha (decides)
    lower_bound_t: float  # mean_diff - t_{1-alpha, n-1} * SE(diff)
    p_bootstrap: float  # share of resamples with mean difference <= -margin
    p_t: float  # one-sample t-test of diff against -margin, alternative "greater"
    margin: float
    alpha: float
    n: int
    n_resamples: int
    seed: int
    non_inferior: bool  # lower_bound > -margin
    method: str
    mean_treatment: float
    mean_control: float
    note: str  # degenerate cases handled (zero variance, n = 1); empty otherwise

    def as_dict(self) -> dict:
        return asdict(self)


def _t_parts(diff: np.ndarray, margin: float, alpha: float) -> tuple[float, float, str]:
    """t-based lower bound and p-value, with the degenerate cases made explicit."""
    n = diff.size
    d = float(diff.mean())
    if n < 2:
        return float("nan"), float("nan"), "n = 1: the t-based bound and p-value are undefined"
    if np.ptp(diff) == 0.0:
        # zero variance: every example moved by exactly d, so the bound is d itself and
        # the t statistic (d + margin) / 0 is +inf or -inf (or undefined when d = -margin)
        p = 0.0 if d > -margin else 1.0
        return d, p, "all paired differences are equal (zero variance): lower_bound_t = mean_diff"
    se = float(diff.std(ddof=1)) / np.sqrt(n)
    lower = float(d - stats.t.ppf(1.0 - alpha, df=n - 1) * se)
    with warnings.catch_warnings():
        # near-constant data trigger scipy's precision-loss warning; the result is still used
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_1samp(diff, -margin, alternative="greater").pvalue)
    return lower, p, ""


def noninferiority(
    treatment: Sequence[float] | np.ndarray,
    control: Sequence[float] | np.ndarray,
    *,
    margin: float = 0.02,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    seed: int = 0,
) -> NIResult:
    """Paired one-sided non-inferiority test of mean(T - C) against ``-margin``.

    ``treatment[i]`` and ``control[i]`` are the scores of the same example i
    (binary correctness or a continuous score). The resamples are exactly those
    of ``paired_bootstrap(..., statistic="mean_diff", seed=seed)``, so
    ``lower_bound`` equals that call's ``ci_low`` at ``confidence = 1 - 2 * alpha``.
    """
    t, c = as_pair(treatment, control)
    margin = float(margin)
    if not np.isfinite(margin) or margin < 0:
        raise StatsError(f"margin must be a finite non-negative number, got {margin}")
    alpha = check_level(alpha, "alpha", upper=0.5)
    n_resamples = check_resamples(n_resamples)
    seed = check_seed(seed)

    diff = t - c
    reducer, _ = PAIRED_STATISTICS["mean_diff"]
    dist = bootstrap_distribution([diff], reducer, n_resamples=n_resamples, seed=seed)
    lower = float(np.quantile(dist, alpha))
    p_boot = float(np.mean(dist <= -margin))
    lower_t, p_t, note = _t_parts(diff, margin, alpha)
    method = (
        f"paired percentile bootstrap, one-sided lower bound at {1 - alpha:.4g} "
        f"(alpha-quantile of {n_resamples} resampled mean differences, numpy PCG64 seed {seed}); "
        f"non-inferior iff lower_bound > -{margin:g}; t-based bound and one-sample t-test "
        f"of T - C against -{margin:g} (alternative 'greater') reported alongside"
    )
    return NIResult(
        mean_diff=float(diff.mean()),
        lower_bound=lower,
        lower_bound_t=lower_t,
        p_bootstrap=p_boot,
        p_t=p_t,
        margin=margin,
        alpha=alpha,
        n=int(diff.size),
        n_resamples=n_resamples,
        seed=seed,
        non_inferior=bool(lower > -margin),
        method=method,
        mean_treatment=float(t.mean()),
        mean_control=float(c.mean()),
        note=note,
    )
