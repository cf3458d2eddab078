"""One-sided non-inferiority of a treatment's per-example accuracy against a control.

H0: d <= -margin (the treatment is worse by at least the margin) against
H1: d > -margin, where d = mean(T - C) over the same examples. The decision uses
the paired percentile bootstrap: the one-sided lower confidence bound at level
1 - alpha is the alpha-quantile of the bootstrap distribution of the mean
difference, and the treatment is non-inferior when that bound is above -margin.
A t-based bound and both p-values are reported alongside as checks.

The verdict has three values, because a bound above ``-margin`` is not always
evidence (issue 20):

- ``inconclusive`` when both arms score 0 on every example (a task the model cannot
  do: accuracy cannot tell the arms apart, whatever the bound says);
- ``inconclusive`` when n is too small for the margin: with scores in [0, 1],
  |mean(T - C)| is at most the share of examples on which the arms differ, and n
  examples with no difference at all bound that share only to 1 - alpha^(1/n) (the
  exact one-sided bound for zero events). While that exceeds the margin, a zero-variance
  bootstrap interval of width 0 (identical arms on 10 examples) would "pass" on no
  evidence; ``n_min`` is the smallest n for which it does not (149 at margin 0.02,
  alpha 0.05);
- otherwise ``non-inferior`` when the lower bound is above ``-margin``, ``inferior``
  when the one-sided upper bound at 1 - alpha is below ``-margin`` (worse by more than
  the margin), and ``inconclusive`` when the interval between them contains
  ``-margin``.

``non_inferior`` is True only for the ``non-inferior`` verdict;
``lower_bound_above_margin`` keeps the bare bound comparison.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

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
    non_inferior: bool  # verdict == "non-inferior"
    method: str
    mean_treatment: float
    mean_control: float
    note: str  # degenerate cases handled (zero variance, n = 1); empty otherwise
    upper_bound: float = float("nan")  # bootstrap one-sided upper bound at level 1 - alpha
    lower_bound_above_margin: bool = False  # lower_bound > -margin (the bare test)
    n_min: int = 0  # the smallest n whose zero-difference bound is within the margin
    verdict: str = "inconclusive"  # non-inferior | inferior | inconclusive
    verdict_reason: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _t_parts(diff: np.ndarray, margin: float, alpha: float) -> tuple[float, float, str]:
    """t-based lower bound and p-value, with the degenerate cases made explicit."""
    from scipy import stats  # here, not at import: a second per job that never compares

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


VERDICTS = ("non-inferior", "inferior", "inconclusive")


def min_n_for_margin(margin: float, alpha: float) -> int:
    """The smallest n with 1 - alpha^(1/n) <= margin (0 when margin is 0: no n suffices,
    and a margin-0 test is a superiority test, which zero variance cannot pass)."""
    if margin <= 0:
        return 0
    if margin >= 1:
        return 1
    return int(np.ceil(np.log(alpha) / np.log1p(-margin) - 1e-9))


def ni_verdict(
    t: np.ndarray, c: np.ndarray, lower: float, upper: float, margin: float, alpha: float
) -> tuple[str, str, int]:
    """``(verdict, reason, n_min)`` of a paired non-inferiority test (module docstring)."""
    n = int(t.size)
    n_min = min_n_for_margin(margin, alpha)
    if not np.any(t) and not np.any(c):
        return (
            "inconclusive",
            f"both arms score 0 on all {n} paired examples: accuracy cannot tell them apart",
            n_min,
        )
    if n < n_min:
        bound = 1.0 - alpha ** (1.0 / n)
        return (
            "inconclusive",
            f"n = {n} is too small for the margin {margin:g}: even with no difference at all, "
            f"{n} examples bound the share where the arms differ only to {bound:.3f} "
            f"(exact one-sided {1 - alpha:g} bound); at least {n_min} are needed",
            n_min,
        )
    if lower > -margin:
        return "non-inferior", f"lower bound {lower:.4g} > -{margin:g}", n_min
    if upper < -margin:
        return (
            "inferior",
            f"upper bound {upper:.4g} < -{margin:g}: worse by more than the margin",
            n_min,
        )
    return (
        "inconclusive",
        f"the interval [{lower:.4g}, {upper:.4g}] contains -{margin:g}: non-inferiority "
        "not shown at this n",
        n_min,
    )


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
    upper = float(np.quantile(dist, 1.0 - alpha))
    verdict, reason, n_min = ni_verdict(t, c, lower, upper, margin, alpha)
    p_boot = float(np.mean(dist <= -margin))
    lower_t, p_t, note = _t_parts(diff, margin, alpha)
    method = (
        f"paired percentile bootstrap, one-sided lower bound at {1 - alpha:.4g} "
        f"(alpha-quantile of {n_resamples} resampled mean differences, numpy PCG64 seed {seed}); "
        f"non-inferior iff lower_bound > -{margin:g}, n >= n_min and not both arms 0 "
        f"(verdict: non-inferior, inferior, inconclusive); t-based bound and one-sample "
        f"t-test of T - C against -{margin:g} (alternative 'greater') reported alongside"
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
        non_inferior=verdict == "non-inferior",
        method=method,
        mean_treatment=float(t.mean()),
        mean_control=float(c.mean()),
        note=note,
        upper_bound=upper,
        lower_bound_above_margin=bool(lower > -margin),
        n_min=n_min,
        verdict=verdict,
        verdict_reason=reason,
    )
