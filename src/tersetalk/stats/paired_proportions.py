"""Confidence intervals for the difference of two paired proportions.

Two systems answer the same n examples; each answer is right (1) or wrong (0). The
2x2 table of pairs has

- ``a``: both right,
- ``b``: the treatment right and the control wrong,
- ``c``: the treatment wrong and the control right,
- ``d``: both wrong,

and the difference of the two accuracies is ``d_hat = p_T - p_C = (b - c) / n``. Only the
discordant pairs (``b``, ``c``) carry information about it; the concordant ones set
its scale. Why not the percentile bootstrap: with few discordant pairs the bootstrap
distribution of ``(b - c) / n`` is too narrow (0/500 vs 5/500 gives a 95% one-sided
lower bound of about -0.018, while no reasonable exact bound is above -0.021), so a
non-inferiority test built on it rejects too often near the floor.

Two score-type intervals are implemented:

``tango``
    Tango's asymptotic score interval (T. Tango, "Equivalence test and confidence
    interval for the difference in proportions for the paired-sample design",
    Statistics in Medicine 17:891-908, 1998). For a hypothesised difference
    ``delta``, the off-diagonal probability ``p21`` (the control right, the treatment
    wrong) is estimated by restricted maximum likelihood under ``p12 - p21 = delta``
    (a closed-form root of a quadratic), and the score statistic

        Z(delta) = (b - c - n * delta) / sqrt(n * (2 * p21_tilde + delta * (1 - delta)))

    is inverted: the interval holds every ``delta`` with ``|Z(delta)| <= z``. ``Z``
    decreases in ``delta``, so each bound is the single root of ``Z(delta) = +-z``,
    found with :func:`scipy.optimize.brentq`. The interval is defined when ``b = c = 0``
    (then it is ``+-z^2 / (n + z^2)``) and never leaves [-1, 1]. The lower bound at a
    two-sided level ``1 - 2 * alpha`` is exactly the bound of Tango's one-sided score test
    of ``delta <= delta0`` at level ``alpha`` (the test the paper proposes for
    equivalence and non-inferiority), which is why the non-inferiority rule uses it.

``newcombe``
    Newcombe's hybrid score interval, method 10 of R. G. Newcombe, "Improved
    confidence intervals for the difference between binomial proportions based on
    paired data", Statistics in Medicine 17:2635-2650, 1998. The Wilson intervals
    ``(l_T, u_T)`` and ``(l_C, u_C)`` of the two marginal proportions are combined as

        lower = d_hat - sqrt((p_T - l_T)^2 - 2 phi (p_T - l_T)(u_C - p_C) + (u_C - p_C)^2)
        upper = d_hat + sqrt((u_T - p_T)^2 - 2 phi (u_T - p_T)(p_C - l_C) + (p_C - l_C)^2)

    with ``phi`` the correlation of the two outcomes, corrected as in the paper: with
    ``A = (a + b)(c + d)(a + c)(b + d)`` and ``B = a*d - b*c``, ``phi = 0`` when ``A = 0``
    (a margin of the table is empty); otherwise ``phi = max(B - n/2, 0) / sqrt(A)`` when
    ``B > 0`` and ``phi = B / sqrt(A)`` when ``B <= 0``.

Both are reproduced against the published worked examples in
``tests/test_paired_proportions.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tersetalk.stats._common import StatsError, as_pair, check_level

__all__ = [
    "METHODS",
    "PairedTable",
    "newcombe_interval",
    "paired_difference_interval",
    "paired_table",
    "tango_interval",
    "tango_score",
]

#: the interval methods :func:`paired_difference_interval` knows
METHODS = ("tango", "newcombe")


class PairedTable(tuple):
    """``(a, b, c, d)``: both right, treatment only, control only, both wrong."""

    __slots__ = ()

    def __new__(cls, a: int, b: int, c: int, d: int) -> PairedTable:
        return super().__new__(cls, (int(a), int(b), int(c), int(d)))

    a = property(lambda self: self[0])
    b = property(lambda self: self[1])
    c = property(lambda self: self[2])
    d = property(lambda self: self[3])
    n = property(lambda self: sum(self))


def paired_table(
    treatment: Sequence[float] | np.ndarray, control: Sequence[float] | np.ndarray
) -> PairedTable:
    """The 2x2 table of two aligned 0/1 arrays (element i of both is example i).

    Raises :class:`StatsError` when a value is not 0 or 1: a continuous score has no
    such table (use the paired bootstrap for it).
    """
    t, c = as_pair(treatment, control)
    for name, arr in (("treatment", t), ("control", c)):
        bad = arr[(arr != 0.0) & (arr != 1.0)]
        if bad.size:
            raise StatsError(
                f"{name} holds {bad.size} value(s) other than 0 and 1 (e.g. {bad[0]!r}): "
                "a paired-proportion interval needs binary outcomes"
            )
    tb, cb = t.astype(bool), c.astype(bool)
    return PairedTable(
        int(np.sum(tb & cb)), int(np.sum(tb & ~cb)), int(np.sum(~tb & cb)), int(np.sum(~tb & ~cb))
    )


def _z(confidence: float) -> float:
    from tersetalk.core.intervals import _z as z_of

    return z_of(float(confidence))


def _check_counts(*counts: int) -> None:
    for k in counts:
        if isinstance(k, bool) or int(k) != k or k < 0:
            raise StatsError(f"cell counts are non-negative integers, got {counts}")
    if sum(counts) == 0 and len(counts) == 4:
        raise StatsError("the paired table is empty (n = 0)")


def tango_score(b: int, c: int, n: int, delta: float, continuity: float = 0.0) -> float:
    """Tango's score statistic ``Z(delta)`` for ``H0: p12 - p21 = delta`` (module docstring).

    ``b`` and ``c`` are the discordant counts (treatment-only right, control-only right)
    and ``n`` the number of pairs. Large positive values speak for a difference above
    ``delta``. At ``delta = (b - c) / n`` it is 0 by definition (also when ``b = c = 0``,
    where the variance vanishes too). ``continuity`` (0 in Tango's paper) shrinks the
    numerator ``b - c - n * delta`` towards 0 by that many pairs (0 when it would cross).
    """
    num = b - c - n * delta
    num = math.copysign(max(abs(num) - continuity, 0.0), num)
    if num == 0:
        return 0.0
    # restricted MLE of p21 under p12 - p21 = delta: the positive root of
    # 2n p^2 + (-(b + c) + (2n - b + c) delta) p - c delta (1 - delta) = 0
    qa = 2.0 * n
    qb = -(b + c) + (2.0 * n - b + c) * delta
    qc = -c * delta * (1.0 - delta)
    disc = max(qb * qb - 4.0 * qa * qc, 0.0)
    p21 = (-qb + math.sqrt(disc)) / (2.0 * qa)
    var = n * (2.0 * p21 + delta * (1.0 - delta))
    if var <= 0.0:
        return math.copysign(math.inf, num)
    return num / math.sqrt(var)


def _tango_lower(b: int, c: int, n: int, z: float, continuity: float) -> float:
    """The lower bound: the root of ``Z(delta) = z`` on ``[-1, (b - c) / n]``."""
    from scipy.optimize import brentq

    def f(x: float) -> float:
        return tango_score(b, c, n, x, continuity) - z

    hi = (b - c) / n
    if hi <= -1.0 or f(-1.0) <= 0.0:
        return -1.0
    # Z(hi) = 0 < z <= Z(-1): a sign change, and Z decreases, so the root is unique
    return float(brentq(f, -1.0, hi, xtol=1e-12, rtol=1e-12, maxiter=500))


def tango_interval(
    b: int, c: int, n: int, confidence: float = 0.95, continuity: float = 0.0
) -> tuple[float, float]:
    """Tango's (1998) two-sided score interval of ``p_T - p_C`` from the discordant counts.

    ``continuity`` > 0 inverts the score statistic with that continuity correction
    (:func:`tango_score`); 0, the default, is the interval of the paper.
    """
    _check_counts(b, c, n)
    if n <= 0 or b + c > n:
        raise StatsError(f"need 0 <= b + c <= n and n > 0, got b={b}, c={c}, n={n}")
    confidence = check_level(confidence, "confidence")
    continuity = float(continuity)
    if not (math.isfinite(continuity) and continuity >= 0.0):
        raise StatsError(f"continuity must be a finite number >= 0, got {continuity}")
    z = _z(confidence)
    low = _tango_lower(int(b), int(c), int(n), z, continuity)
    # the upper bound is the mirror image: swap the discordant counts
    high = -_tango_lower(int(c), int(b), int(n), z, continuity)
    return low, high


def newcombe_interval(
    a: int, b: int, c: int, d: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's (1998) method 10 interval of ``p_T - p_C`` from the full paired table."""
    from tersetalk.core.intervals import wilson

    _check_counts(a, b, c, d)
    confidence = check_level(confidence, "confidence")
    n = a + b + c + d
    p_t, p_c = (a + b) / n, (a + c) / n
    l_t, u_t = wilson(p_t, n, confidence)
    l_c, u_c = wilson(p_c, n, confidence)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if margins > 0:
        cross = a * d - b * c
        num = max(cross - n / 2.0, 0.0) if cross > 0 else float(cross)
        phi = num / math.sqrt(margins)
    diff = p_t - p_c
    dl_t, du_t, dl_c, du_c = p_t - l_t, u_t - p_t, p_c - l_c, u_c - p_c
    low = diff - math.sqrt(max(dl_t**2 - 2.0 * phi * dl_t * du_c + du_c**2, 0.0))
    high = diff + math.sqrt(max(du_t**2 - 2.0 * phi * du_t * dl_c + dl_c**2, 0.0))
    return max(-1.0, low), min(1.0, high)


def paired_difference_interval(
    treatment: Sequence[float] | np.ndarray,
    control: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    method: str = "tango",
    *,
    continuity: float = 0.0,
) -> tuple[float, float]:
    """Two-sided interval of ``mean(treatment) - mean(control)`` for paired 0/1 outcomes.

    ``method``: ``"tango"`` (score interval, Tango 1998) or ``"newcombe"`` (hybrid score,
    Newcombe 1998 method 10). The one-sided lower bound at level ``1 - alpha`` is the
    lower end at ``confidence = 1 - 2 * alpha``. ``continuity`` (Tango only) is the
    continuity correction :func:`tersetalk.stats.noninferiority.noninferiority` decides
    with (:data:`tersetalk.stats.noninferiority.CONTINUITY`); 0 is the paper's interval.
    """
    if method not in METHODS:
        raise StatsError(f"unknown method {method!r}; use one of {METHODS}")
    table = paired_table(treatment, control)
    if method == "tango":
        return tango_interval(table.b, table.c, table.n, confidence, continuity)
    if continuity:
        raise StatsError("continuity applies to method 'tango' only")
    return newcombe_interval(*table, confidence=confidence)
