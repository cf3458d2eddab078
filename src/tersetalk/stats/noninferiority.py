"""One-sided non-inferiority of a treatment's per-example accuracy against a control.

H0: d <= -margin (the treatment is worse by at least the margin) against
H1: d > -margin, where d = mean(T - C) over the same examples. The verdict has three
values (``non-inferior``, ``inferior``, ``inconclusive``) and is decided by these rules,
in this order; ``decided_by`` and ``verdict_reason`` name the one that decided.

1. **The floor rule** (both kinds of outcome). The control must be shown to score
   above a floor equal to the margin: its one-sided lower confidence bound at
   ``1 - alpha`` (``control_lower``: the continuity-corrected Wilson bound, Newcombe's
   method 4, for binary outcomes; for continuous ones the more conservative of the t
   and the studentized bootstrap bound of its mean, as in rule 3) must exceed
   ``floor = margin``; when it
   does not, the verdict is ``inconclusive``. Why the margin: when the control's
   accuracy is at most the margin, H0 (``p_T <= p_C - margin <= 0``) is empty or holds
   only for a treatment that never scores, so "non-inferior" would be true of every
   treatment, including one that never answers right, and would say nothing. A
   comparison near the floor (0/500 vs 5/500, 1/500 vs 1/500, 10/500 vs 10/500 on
   disjoint examples, 0/200 vs 1/200) therefore cannot be called non-inferior
   however narrow its interval looks. The rule is an extra condition on top of the
   interval test (an intersection-union test), so it never raises the type I error.
2. **Binary outcomes** (every value 0 or 1: correct or not) decide with a score
   interval for the difference of paired proportions
   (:mod:`tersetalk.stats.paired_proportions`), not the bootstrap: with few discordant
   pairs the percentile bootstrap is too narrow (0/500 vs 5/500: bootstrap bound
   -0.018 "passes", an exact one-sided bound is -0.021). The decision uses Tango's
   score interval (Tango 1998) at two-sided level ``1 - 2 * alpha``, whose lower end is
   the bound of Tango's one-sided score test for non-inferiority, with a continuity
   correction of half a pair (:data:`CONTINUITY`). Tango rather than Newcombe's method
   10: it is the inversion of a test of exactly this null (restricted maximum
   likelihood under ``d = -margin``), it depends only on the discordant counts and n,
   and it stays defined with no discordant pair. The correction: exact computation of
   the size over the trinomial of the discordant counts at ``d = -margin`` (margin
   0.02, alpha 0.05, every n from 10 to 300 and n to 1000 in steps of 5, discordance
   from 0.02 to 0.96) gives at most 0.068 without it (n = 133, no pair where the
   treatment alone is right: it passes whenever the arms never differ) and at most
   0.049 with it. Newcombe's interval (``lower_bound_newcombe``), the uncorrected Tango
   interval (``lower_bound_tango``) and the paired bootstrap
   (``lower_bound_bootstrap``) are reported beside it.
3. **Continuous scores** (F1 and the like) decide with the more conservative of two
   bounds of the mean difference: the t bound (``mean - t_{1-alpha, n-1} SE``) and the
   studentized (bootstrap-t) bound ``mean - q SE``, where ``q`` is the larger of the
   ``1 - alpha`` quantile of ``t* = (mean* - mean) / SE*`` over the paired bootstrap
   resamples (the same resamples as the percentile bootstrap) and the ``1 - 2 alpha``
   quantile of ``|t*|`` (the symmetric bootstrap-t); each is the conservative order
   statistic, so an infinite ``t*`` from a constant resample stays usable. The
   symmetric form is there for small n: on 10 skewed scores the equal-tailed
   bootstrap-t covers only about 0.88 and the t interval 0.92, their union 0.93, and
   with the symmetric form 0.97 (two-sided 95%, 3000 replicates). The lower bound is the smaller
   of the two, the upper bound the larger, so the decision is never less conservative
   than the t test. Why not the percentile bootstrap, which decided before: on skewed
   scores (Beta means 0.1 and 0.9, n = 300, strongly correlated arms) its type I error at
   the margin measured 0.070 (SE 0.008) over 1000 replicates, above 0.05 plus its
   Monte-Carlo error; the percentile interval is too narrow by the factor
   ``sqrt((n - 1) / n)`` and ignores skewness, which the studentized bound corrects to
   second order, and the t bound backs it where the resamples are too few for a stable
   quantile. The percentile bounds stay reported (``lower_bound_bootstrap``); the
   studentized ones alone are ``lower_bound_studentized`` / ``upper_bound_studentized``.
   Because an interval of zero-variance data has width 0, n must also reach
   ``n_min``: with scores in [0, 1], |mean(T - C)| is at most the share of examples
   on which the arms differ, and n examples with no difference at all bound that
   share only to ``1 - alpha^(1/n)`` (the exact one-sided bound for zero events);
   ``n_min`` is the smallest n for which that is within the margin (149 at margin
   0.02, alpha 0.05); below it the verdict is ``inconclusive``.
4. Then ``non-inferior`` when the lower bound is above ``-margin``, ``inferior`` when
   the one-sided upper bound at ``1 - alpha`` is below ``-margin`` (worse by more than
   the margin), and ``inconclusive`` when the interval contains ``-margin``.

``non_inferior`` is True only for the ``non-inferior`` verdict;
``lower_bound_above_margin`` keeps the bare comparison of the deciding bound. A t-based
bound and both p-values of the mean difference are reported alongside as checks.
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

#: the continuity correction (in pairs) of the Tango score bound that decides binary outcomes
CONTINUITY = 0.5
#: the interval that decides each kind of outcome
BINARY_METHOD = f"Tango score interval, continuity correction {CONTINUITY:g}"
CONTINUOUS_METHOD = "the more conservative of the t and the studentized bootstrap bound"
NAN = float("nan")


@dataclass(frozen=True)
class NIResult:
    """Non-inferiority of treatment vs control on paired per-example scores."""

    mean_diff: float  # mean(T - C)
    lower_bound: float  # the deciding one-sided lower bound at level 1 - alpha
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
    upper_bound: float = NAN  # the deciding one-sided upper bound at level 1 - alpha
    lower_bound_above_margin: bool = False  # lower_bound > -margin (the bare test)
    n_min: int = 0  # the smallest n whose zero-difference bound is within the margin
    verdict: str = "inconclusive"  # non-inferior | inferior | inconclusive
    verdict_reason: str = ""
    outcome: str = ""  # binary | continuous
    interval_method: str = ""  # the interval that gave lower_bound / upper_bound
    decided_by: str = ""  # floor rule | n_min rule | score interval | studentized interval
    floor: float = NAN  # the control must be shown above this (the margin)
    control_lower: float = NAN  # one-sided 1 - alpha lower bound of the control's mean
    n_treatment_better: int = 0  # examples where T > C (binary: T right, C wrong)
    n_control_better: int = 0  # examples where C > T
    p_score: float = NAN  # one-sided p of Tango's corrected score test at -margin (binary)
    lower_bound_tango: float = NAN  # Tango's interval without correction (binary)
    upper_bound_tango: float = NAN
    lower_bound_newcombe: float = NAN  # Newcombe's method 10 (binary)
    upper_bound_newcombe: float = NAN
    lower_bound_bootstrap: float = NAN  # the paired percentile bootstrap (always)
    upper_bound_bootstrap: float = NAN
    upper_bound_t: float = NAN  # mean_diff + t_{1-alpha, n-1} * SE(diff)
    lower_bound_studentized: float = NAN  # the bootstrap-t bound alone (continuous)
    upper_bound_studentized: float = NAN
    control_lower_wilson: float = NAN  # the control's Wilson bound without correction (binary)

    def as_dict(self) -> dict:
        return asdict(self)


def _t_parts(diff: np.ndarray, margin: float, alpha: float) -> tuple[float, float, str, float]:
    """t-based lower bound, p-value, note and upper bound, with the degenerate cases
    made explicit."""
    from scipy import stats  # here, not at import: a second per job that never compares

    n = diff.size
    d = float(diff.mean())
    if n < 2:
        nan = float("nan")
        return nan, nan, "n = 1: the t-based bound and p-value are undefined", nan
    if np.ptp(diff) == 0.0:
        # zero variance: every example moved by exactly d, so the bound is d itself and
        # the t statistic (d + margin) / 0 is +inf or -inf (or undefined when d = -margin)
        p = 0.0 if d > -margin else 1.0
        return (
            d,
            p,
            "all paired differences are equal (zero variance): lower_bound_t = mean_diff",
            d,
        )
    se = float(diff.std(ddof=1)) / np.sqrt(n)
    half = float(stats.t.ppf(1.0 - alpha, df=n - 1) * se)
    lower, upper = d - half, d + half
    with warnings.catch_warnings():
        # near-constant data trigger scipy's precision-loss warning; the result is still used
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_1samp(diff, -margin, alternative="greater").pvalue)
    return lower, p, "", upper


def conservative_mean_interval(
    x: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Two-sided interval of ``mean(x)`` by rule 3 of the module docstring: at each end
    the more conservative of the t bound and the studentized bootstrap bound, each at
    one-sided level ``(1 + confidence) / 2``. For paired scores pass ``T - C``; the
    verdict's one-sided bounds are its ends at ``confidence = 1 - 2 * alpha``."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise StatsError("x must be a non-empty 1-D array of finite numbers")
    confidence = check_level(confidence, "confidence")
    n_resamples = check_resamples(n_resamples)
    seed = check_seed(seed)
    tail = (1.0 - confidence) / 2.0
    low_t, _, _, high_t = _t_parts(arr, 0.0, tail)
    return _conservative(
        (low_t, high_t), studentized_bounds(arr, tail, n_resamples=n_resamples, seed=seed)
    )


def studentized_bounds(
    x: np.ndarray, alpha: float, *, n_resamples: int, seed: int
) -> tuple[float, float]:
    """One-sided ``1 - alpha`` lower and upper bootstrap-t bounds of ``mean(x)``.

    The resamples are those of :func:`tersetalk.stats.bootstrap.bootstrap_distribution`
    with the same ``seed`` (one index matrix, the same stream). ``t* = (mean* - mean) /
    SE*``; a constant resample has ``SE* = 0`` and ``t*`` infinite (0 when its mean is
    the sample's). The lower bound is ``mean - q SE`` with ``q`` the larger of the
    ``1 - alpha`` quantile of ``t*`` and the ``1 - 2 alpha`` quantile of ``|t*|``, the
    upper one ``mean + q' SE`` with ``q'`` the larger of minus the ``alpha`` quantile of
    ``t*`` and the same ``|t*|`` quantile (the wider of the equal-tailed and the
    symmetric bootstrap-t). Quantiles are order statistics at or beyond them (never an
    interpolation, so never less conservative, and infinite values stay usable). Data
    with no variance have no width: both bounds are the mean; one value gives NaN.
    """
    from tersetalk.stats.bootstrap import _index_blocks

    x = np.asarray(x, dtype=float)
    n = int(x.size)
    m = float(x.mean()) if n else float("nan")
    if n < 2:
        return float("nan"), float("nan")
    se = float(x.std(ddof=1)) / np.sqrt(n)
    if se == 0.0:
        return m, m
    ts = np.empty(n_resamples, dtype=float)
    done = 0
    for idx in _index_blocks(n, n_resamples, seed):
        xs = x[idx]
        ms = xs.mean(axis=1)
        ses = xs.std(axis=1, ddof=1) / np.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (ms - m) / ses
        t[np.isnan(t)] = 0.0  # 0 / 0: a constant resample at the sample's own mean
        ts[done : done + idx.shape[0]] = t
        done += idx.shape[0]
    q_sym = float(np.quantile(np.abs(ts), 1.0 - 2.0 * alpha, method="higher"))
    q_hi = max(float(np.quantile(ts, 1.0 - alpha, method="higher")), q_sym)
    q_lo = min(float(np.quantile(ts, alpha, method="lower")), -q_sym)
    return float(m - q_hi * se), float(m - q_lo * se)


VERDICTS = ("non-inferior", "inferior", "inconclusive")


def _conservative(first: tuple[float, float], second: tuple[float, float]) -> tuple[float, float]:
    """The lower of two lower bounds and the higher of two upper bounds; a NaN bound
    (n = 1) leaves the verdict's bound NaN, which no rule passes."""
    low = min(first[0], second[0]) if not np.isnan(first[0] + second[0]) else float("nan")
    high = max(first[1], second[1]) if not np.isnan(first[1] + second[1]) else float("nan")
    return float(low), float(high)


def min_n_for_margin(margin: float, alpha: float) -> int:
    """The smallest n with 1 - alpha^(1/n) <= margin (0 when margin is 0: no n suffices,
    and a margin-0 test is a superiority test, which zero variance cannot pass)."""
    if margin <= 0:
        return 0
    if margin >= 1:
        return 1
    return int(np.ceil(np.log(alpha) / np.log1p(-margin) - 1e-9))


def is_binary(*arrays: np.ndarray) -> bool:
    """Every value 0 or 1 (correct or not): the paired-proportion intervals apply."""
    return all(bool(np.all((a == 0.0) | (a == 1.0))) for a in arrays)


def ni_verdict(
    *,
    lower: float,
    upper: float,
    margin: float,
    alpha: float,
    n: int,
    binary: bool,
    control_lower: float,
    floor: float,
) -> tuple[str, str, str, int]:
    """``(verdict, reason, decided_by, n_min)`` of a paired non-inferiority test by the
    rules of the module docstring, in their order."""
    n_min = min_n_for_margin(margin, alpha)
    level = f"{1 - alpha:g}"
    if not control_lower > floor:
        how = "continuity-corrected Wilson" if binary else "t / studentized bootstrap"
        return (
            "inconclusive",
            f"floor rule: the control is not shown above the floor {floor:g} (its one-sided "
            f"{level} {how} lower bound is {control_lower:.4g}); near the floor a "
            "treatment that never answers right would pass too",
            "floor rule",
            n_min,
        )
    if not binary and n < n_min:
        bound = 1.0 - alpha ** (1.0 / n)
        return (
            "inconclusive",
            f"n_min rule: n = {n} is too small for the margin {margin:g}: even with no "
            f"difference at all, {n} examples bound the share where the arms differ only to "
            f"{bound:.3f} (exact one-sided {level} bound); at least {n_min} are needed",
            "n_min rule",
            n_min,
        )
    rule = "score interval" if binary else "studentized interval"
    what = f"{rule} ({BINARY_METHOD if binary else CONTINUOUS_METHOD})"
    if lower > -margin:
        return "non-inferior", f"{what}: lower bound {lower:.4g} > -{margin:g}", rule, n_min
    if upper < -margin:
        return (
            "inferior",
            f"{what}: upper bound {upper:.4g} < -{margin:g}: worse by more than the margin",
            rule,
            n_min,
        )
    return (
        "inconclusive",
        f"{what}: [{lower:.4g}, {upper:.4g}] contains -{margin:g}: non-inferiority not shown "
        "at this n",
        rule,
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

    ``treatment[i]`` and ``control[i]`` are the scores of the same example i (binary
    correctness or a continuous score); the rules are the module docstring's. The
    bootstrap resamples are exactly those of ``paired_bootstrap(..., statistic="mean_diff",
    seed=seed)``, so ``lower_bound_bootstrap`` equals that call's ``ci_low`` at
    ``confidence = 1 - 2 * alpha`` (reported beside the deciding bound).
    """
    t, c = as_pair(treatment, control)
    margin = float(margin)
    if not np.isfinite(margin) or margin < 0:
        raise StatsError(f"margin must be a finite non-negative number, got {margin}")
    alpha = check_level(alpha, "alpha", upper=0.5)
    n_resamples = check_resamples(n_resamples)
    seed = check_seed(seed)

    diff = t - c
    n = int(diff.size)
    reducer, _ = PAIRED_STATISTICS["mean_diff"]
    dist = bootstrap_distribution([diff], reducer, n_resamples=n_resamples, seed=seed)
    boot_lower = float(np.quantile(dist, alpha))
    boot_upper = float(np.quantile(dist, 1.0 - alpha))
    p_boot = float(np.mean(dist <= -margin))
    lower_t, p_t, note, upper_t = _t_parts(diff, margin, alpha)
    binary = is_binary(t, c)
    if binary:
        bounds = _binary_bounds(t, c, margin, alpha, n_resamples=n_resamples, seed=seed)
    else:
        bounds = _continuous_bounds(
            diff, c, (lower_t, upper_t), margin, alpha, n_resamples=n_resamples, seed=seed
        )
    lower, upper, control_lower = bounds.lower, bounds.upper, bounds.control_lower
    verdict, reason, decided_by, n_min = ni_verdict(
        lower=lower, upper=upper, margin=margin, alpha=alpha, n=n, binary=binary,
        control_lower=control_lower, floor=margin,
    )  # fmt: skip
    return NIResult(
        mean_diff=float(diff.mean()),
        lower_bound=float(lower),
        lower_bound_t=lower_t,
        p_bootstrap=p_boot,
        p_t=p_t,
        margin=margin,
        alpha=alpha,
        n=n,
        n_resamples=n_resamples,
        seed=seed,
        non_inferior=verdict == "non-inferior",
        method=bounds.method,
        mean_treatment=float(t.mean()),
        mean_control=float(c.mean()),
        note=note,
        upper_bound=float(upper),
        lower_bound_above_margin=bool(lower > -margin),
        n_min=n_min,
        verdict=verdict,
        verdict_reason=reason,
        outcome="binary" if binary else "continuous",
        interval_method=BINARY_METHOD if binary else CONTINUOUS_METHOD,
        decided_by=decided_by,
        floor=margin,
        control_lower=float(control_lower),
        n_treatment_better=int(np.sum(diff > 0)),
        n_control_better=int(np.sum(diff < 0)),
        lower_bound_bootstrap=boot_lower,
        upper_bound_bootstrap=boot_upper,
        upper_bound_t=upper_t,
        **bounds.extra,
    )


@dataclass(frozen=True)
class _Bounds:
    """What decides a verdict: the one-sided bounds of the mean difference, the control's
    lower bound for the floor rule, the method's description, and the NIResult fields
    only this kind of outcome reports (``extra``)."""

    lower: float
    upper: float
    control_lower: float
    method: str
    extra: dict


def _binary_bounds(
    t: np.ndarray, c: np.ndarray, margin: float, alpha: float, *, n_resamples: int, seed: int
) -> _Bounds:
    """Rule 2 of the module docstring: Tango's corrected score interval decides, the
    control's continuity-corrected Wilson bound meets the floor, and Newcombe's and the
    uncorrected Tango interval are reported beside them."""
    from scipy import stats as sps

    from tersetalk.core.intervals import wilson
    from tersetalk.stats.paired_proportions import (
        newcombe_interval,
        paired_table,
        tango_interval,
        tango_score,
    )

    n = int(t.size)
    two_sided = 1.0 - 2.0 * alpha
    table = paired_table(t, c)
    lower, upper = tango_interval(table.b, table.c, n, two_sided, CONTINUITY)
    tango = tango_interval(table.b, table.c, n, two_sided)
    newcombe = newcombe_interval(*table, confidence=two_sided)
    z_ni = tango_score(table.b, table.c, n, -margin, CONTINUITY)
    control_lower = wilson(float(c.mean()), n, two_sided, continuity=True)[0]
    extra = dict(
        control_lower_wilson=wilson(float(c.mean()), n, two_sided)[0],
        p_score=float(sps.norm.sf(z_ni)),
        lower_bound_tango=tango[0],
        upper_bound_tango=tango[1],
        lower_bound_newcombe=newcombe[0],
        upper_bound_newcombe=newcombe[1],
    )
    method = (
        f"{BINARY_METHOD} (Tango 1998), one-sided bounds at {1 - alpha:.4g} (two-sided "
        f"{two_sided:.4g} interval); floor rule: the control's one-sided continuity-"
        f"corrected Wilson lower bound must exceed {margin:g}; Newcombe's method 10, "
        f"Tango without correction, "
        f"the paired percentile bootstrap ({n_resamples} resamples, numpy PCG64 seed "
        f"{seed}) and a one-sample t-test of T - C against -{margin:g} reported alongside"
    )
    return _Bounds(lower, upper, control_lower, method, extra)


def _continuous_bounds(
    diff: np.ndarray,
    c: np.ndarray,
    t_bounds: tuple[float, float],
    margin: float,
    alpha: float,
    *,
    n_resamples: int,
    seed: int,
) -> _Bounds:
    """Rule 3 of the module docstring: the more conservative of the t bounds
    (``t_bounds``, of ``diff``) and the studentized bootstrap bounds decides, and the
    control's mean is held to the floor by the same rule."""
    stud = studentized_bounds(diff, alpha, n_resamples=n_resamples, seed=seed)
    lower, upper = _conservative(t_bounds, stud)
    c_t = _t_parts(c, margin, alpha)
    c_stud = studentized_bounds(c, alpha, n_resamples=n_resamples, seed=seed)
    control_lower = _conservative((c_t[0], c_t[3]), c_stud)[0]
    extra = dict(lower_bound_studentized=stud[0], upper_bound_studentized=stud[1])
    method = (
        f"{CONTINUOUS_METHOD}, one-sided bounds at {1 - alpha:.4g} (the lower bound the "
        f"smaller, the upper the larger of the t bound with n - 1 degrees of freedom and "
        f"the equal-tailed and symmetric bootstrap-t bounds over {n_resamples} paired "
        f"resamples, numpy PCG64 seed "
        f"{seed}); floor rule: the control mean's lower bound by the same rule must "
        f"exceed {margin:g}; n >= n_min; the paired percentile bootstrap and a one-sample "
        f"t-test of T - C against -{margin:g} (alternative 'greater') reported alongside"
    )
    return _Bounds(lower, upper, control_lower, method, extra)
