"""The paired-proportion intervals against published worked examples and an independent
inversion of the score test.

Sources of the expected numbers:

- Newcombe's method 10: R. G. Newcombe, "Improved confidence intervals for the
  difference between binomial proportions based on paired data", Statistics in
  Medicine 17:2635-2650 (1998), the paper's worked examples (a)-(d), 95% intervals to
  four decimals (the same numbers are the expected values of the R package propint's
  test of ``ci.two.dep.props``).
- Tango's score interval: T. Tango, "Equivalence test and confidence interval for the
  difference in proportions for the paired-sample design", Statistics in Medicine
  17:891-908 (1998), the paper's example of 44 pairs (one discordant pair, 90%
  interval); A. Agresti and Y. Min, Statistics in Medicine 24:729-740 (2005), their
  example (53, 16, 8, 9); M. W. Fagerland, S. Lydersen and P. Laake, Statistics in
  Medicine 33:2850-2875 (2014), the airway hyper-responsiveness data (1, 1, 7, 12).
  The three to three decimals, as collected among the "published examples" of the R
  package ratesci's tests (tests/testthat/test3.R).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from tersetalk.stats import StatsError
from tersetalk.stats.paired_proportions import (
    newcombe_interval,
    paired_difference_interval,
    paired_table,
    tango_interval,
    tango_score,
)


def _arrays(a: int, b: int, c: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Treatment and control 0/1 arrays with the paired table (a, b, c, d), shuffled."""
    t = np.array([1] * a + [1] * b + [0] * c + [0] * d, dtype=float)
    ctl = np.array([1] * a + [0] * b + [1] * c + [0] * d, dtype=float)
    order = np.random.default_rng(a + 7 * b + 11 * c + 13 * d).permutation(t.size)
    return t[order], ctl[order]


# (a, b, c, d) = Newcombe's (e, f, g, h): both, first only, second only, neither
NEWCOMBE_1998 = [
    ((36, 12, 2, 0), (0.0569, 0.3404)),
    ((18, 12, 2, 18), (0.0562, 0.3290)),
    ((53, 0, 0, 1), (-0.0729, 0.0729)),
    ((0, 30, 0, 0), (0.8395, 1.0)),  # a + c = 0: an empty margin, phi = 0
]


@pytest.mark.parametrize(("table", "expected"), NEWCOMBE_1998)
def test_newcombe_method_10_reproduces_the_paper(table, expected):
    low, high = newcombe_interval(*table, confidence=0.95)
    assert (round(low, 4), round(high, 4)) == expected
    assert paired_difference_interval(*_arrays(*table), method="newcombe") == (low, high)


TANGO_PUBLISHED = [
    ((43, 0, 1, 0), 0.90, (-0.096, 0.037)),  # Tango 1998, n = 44
    ((53, 16, 8, 9), 0.95, (-0.020, 0.207)),  # Agresti & Min 2005
    ((1, 1, 7, 12), 0.95, (-0.517, -0.026)),  # Fagerland, Lydersen & Laake 2014
]


@pytest.mark.parametrize(("table", "confidence", "expected"), TANGO_PUBLISHED)
def test_tango_reproduces_the_published_examples(table, confidence, expected):
    a, b, c, d = table
    low, high = tango_interval(b, c, a + b + c + d, confidence)
    assert (round(low, 3), round(high, 3)) == expected
    t, ctl = _arrays(*table)
    assert paired_difference_interval(t, ctl, confidence) == (low, high)


def _score_by_likelihood(b: int, c: int, n: int, delta: float) -> float:
    """Tango's statistic with the restricted MLE found numerically (not the closed form):
    maximise the multinomial likelihood over p21 with p12 = p21 + delta."""
    lo, hi = max(0.0, -delta), (1.0 - delta) / 2.0

    def negloglik(p21: float) -> float:
        p12 = p21 + delta
        rest = 1.0 - p12 - p21
        out = 0.0
        for k, p in ((b, p12), (c, p21), (n - b - c, rest)):
            if k:
                out -= k * math.log(max(p, 1e-300))
        return out

    p21 = optimize.minimize_scalar(negloglik, bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-13}).x  # fmt: skip
    var = n * (2.0 * p21 + delta * (1.0 - delta))
    return (b - c - n * delta) / math.sqrt(var)


@pytest.mark.parametrize(("b", "c", "n"), [(9, 3, 32), (0, 5, 500), (10, 10, 500), (3, 0, 20)])
def test_tango_bounds_match_a_brute_force_inversion_on_a_grid(b, c, n):
    """The interval is the set of differences whose score statistic stays within z: scan
    a grid of step 1e-4 with the numerically maximised likelihood and compare the ends."""
    z = sps.norm.ppf(0.975)
    d_hat = (b - c) / n
    grid = np.arange(-0.9999, 0.9999, 1e-4)
    grid = grid[np.abs(grid - d_hat) > 1e-9]
    inside = [x for x in grid if abs(_score_by_likelihood(b, c, n, float(x))) <= z]
    low, high = tango_interval(b, c, n, 0.95)
    assert low == pytest.approx(min(inside), abs=1.5e-4)
    assert high == pytest.approx(max(inside), abs=1.5e-4)


def test_no_discordant_pair_gives_the_closed_form():
    z = sps.norm.ppf(0.95)
    low, high = tango_interval(0, 0, 500, 0.90)
    assert low == pytest.approx(-(z**2) / (500 + z**2), rel=1e-9)
    assert high == pytest.approx(-low, rel=1e-12)
    assert tango_score(0, 0, 500, 0.0) == 0.0


def test_continuity_correction_widens_and_stays_ordered():
    plain = tango_interval(5, 12, 300, 0.9)
    corrected = tango_interval(5, 12, 300, 0.9, continuity=0.5)
    assert corrected[0] < plain[0] < (5 - 12) / 300 < plain[1] < corrected[1]
    # the correction removes half a pair from the numerator b - c - n * delta = 8
    plain_z = tango_score(5, 12, 300, -0.05)
    assert tango_score(5, 12, 300, -0.05, continuity=0.5) == pytest.approx(plain_z * 7.5 / 8)


def test_paired_table_counts_and_rejects_non_binary_input():
    t, ctl = _arrays(4, 9, 3, 16)
    assert paired_table(t, ctl) == (4, 9, 3, 16)
    with pytest.raises(StatsError, match="other than 0 and 1"):
        paired_difference_interval([1.0, 0.5], [1.0, 0.0])
    with pytest.raises(StatsError, match="unknown method"):
        paired_difference_interval([1.0, 0.0], [1.0, 0.0], method="wald")
    with pytest.raises(StatsError, match="differ in length"):
        paired_difference_interval([1.0, 0.0], [1.0])
    with pytest.raises(StatsError, match="continuity"):
        tango_interval(1, 2, 10, continuity=-1.0)


def _exact_tango_coverage(p_c: float, n: int, level: float, d: float, continuity: float) -> float:
    """Coverage of the 95% Tango interval summed over the trinomial of the discordant
    counts (b ~ Bin(n, p_b), c | b ~ Bin(n - b, p_c' / (1 - p_b))): no simulation."""
    from tersetalk.stats.simulation import binary_cells

    (_, p_b, p_only_c, _), _ = binary_cells(p_c, d, level)
    total = 0.0
    b_all = np.arange(n + 1)
    pb = sps.binom.pmf(b_all, n, p_b)
    for b in b_all[pb > 1e-10]:
        c_all = np.arange(n - b + 1)
        pc = sps.binom.pmf(c_all, n - b, p_only_c / (1.0 - p_b)) * pb[b]
        for c in c_all[pc > 1e-12]:
            low, high = tango_interval(int(b), int(c), n, 0.95, continuity)
            total += pc[c] * (low - 1e-12 <= d <= high + 1e-12)
    return total


def test_the_verdicts_corrected_tango_interval_covers_where_the_plain_one_falls_short():
    # p_C = 0.5, 100 examples, few discordant pairs, at the margin: the plain interval
    # covers 0.940 (below 0.94 in the fourth decimal), the corrected one 0.970
    from tersetalk.stats.simulation import run_simulation, settings_from_config

    plain = _exact_tango_coverage(0.5, 100, 0.1, -0.02, 0.0)
    corrected = _exact_tango_coverage(0.5, 100, 0.1, -0.02, 0.5)
    assert plain < 0.94 <= 0.95 <= corrected
    assert corrected == pytest.approx(0.9700, abs=5e-4)
    # the simulation study measures the verdict's interval, and agrees with the exact sum
    s = settings_from_config({"stats_sim": {
        "replicates": 300, "n_resamples": 20,
        "binary": {"base_rates": [0.5], "n": [100], "discordance": [0.1]},
        "continuous": {"means": [0.5], "n": [10], "correlations": [0.5]},
        "router": {"n_tasks": [3], "examples_per_task": [5], "agreement": [0.6],
                   "task_sd": [0.0]},
    }})  # fmt: skip
    from dataclasses import replace

    table = run_simulation(replace(s, studies=("binary",)))
    row = table[(table["quantity"] == "coverage_tango_cc") & (table["scenario"] == "at_margin")]
    est = float(row["estimate"].iloc[0])
    assert abs(est - corrected) <= 3 * math.sqrt(corrected * (1 - corrected) / 300)
