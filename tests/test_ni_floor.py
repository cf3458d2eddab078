"""Non-inferiority near the floor: comparisons that cannot be told apart from a score of
0 read ``inconclusive``, and the score bound keeps its size where the bootstrap did not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from tersetalk.stats import noninferiority

MARGIN, ALPHA = 0.02, 0.05


def _arm(n: int, right: range | list[int]) -> np.ndarray:
    x = np.zeros(n)
    x[list(right)] = 1.0
    return x


def _floor(treatment: np.ndarray, control: np.ndarray):
    res = noninferiority(treatment, control, margin=MARGIN, alpha=ALPHA)
    assert res.verdict == "inconclusive" and not res.non_inferior
    assert res.decided_by == "floor rule" and res.verdict_reason.startswith("floor rule")
    assert res.floor == MARGIN and res.control_lower <= MARGIN
    return res


def test_zero_of_500_vs_five_of_500_is_inconclusive():
    res = _floor(_arm(500, []), _arm(500, range(5)))
    # the bootstrap bound passed here; the corrected score bound does not
    assert res.lower_bound_bootstrap > -MARGIN > res.lower_bound
    assert res.lower_bound == pytest.approx(-0.0217, abs=5e-4)
    _floor(_arm(500, range(5)), _arm(500, []))  # the other order: the control scores 0


def test_one_of_500_vs_one_of_500_is_inconclusive():
    _floor(_arm(500, [0]), _arm(500, [0]))  # the same example
    res = _floor(_arm(500, [0]), _arm(500, [1]))  # different examples
    assert res.n_treatment_better == res.n_control_better == 1


def test_ten_of_500_vs_ten_of_500_on_disjoint_examples_is_inconclusive():
    res = _floor(_arm(500, range(10)), _arm(500, range(10, 20)))
    # the interval alone would have passed: the floor rule decides
    assert res.lower_bound > -MARGIN and res.lower_bound_newcombe > -MARGIN


def test_zero_of_200_vs_one_of_200_is_inconclusive():
    _floor(_arm(200, []), _arm(200, [0]))
    _floor(_arm(200, [0]), _arm(200, []))


def test_continuous_scores_near_zero_meet_the_floor_rule_too():
    rng = np.random.default_rng(3)
    control = rng.uniform(0.0, 0.02, 500)  # an F1 that is almost always 0
    res = _floor(control + 0.001, control)
    assert res.outcome == "continuous" and res.lower_bound > -MARGIN


def test_close_accuracies_with_few_discordant_pairs_are_non_inferior():
    # 450 vs 452 of 500: 449 both right, the arms differ on 3 examples
    t = _arm(500, [*range(449), 460])
    c = _arm(500, [*range(451), 461])
    res = noninferiority(t, c, margin=MARGIN, alpha=ALPHA)
    assert (res.mean_treatment, res.mean_control) == (0.9, 0.904)
    assert res.verdict == "non-inferior" and res.decided_by == "score interval"
    assert res.outcome == "binary" and res.control_lower > 0.85
    assert "score interval" in res.verdict_reason and res.p_score < ALPHA


def test_clearly_lower_accuracy_is_inferior():
    t = np.random.default_rng(1).permutation(_arm(500, range(400)))
    c = np.random.default_rng(2).permutation(_arm(500, range(450)))
    res = noninferiority(t, c, margin=MARGIN, alpha=ALPHA)
    assert res.verdict == "inferior" and res.decided_by == "score interval"
    assert res.upper_bound < -MARGIN and res.interval_method.startswith("Tango")


@pytest.mark.parametrize("n", [133, 300])
def test_size_at_the_margin_with_no_pair_favouring_the_treatment(n):
    """The treatment is never right where the control is wrong and wrong on 2% of the
    examples the control gets right: exactly at the margin, H0 true. The exact chance of
    a "non-inferior" verdict (over the binomial count of those 2%) must stay within
    alpha; Tango's bound without correction gives 0.068 at n = 133 and 0.060 at 300."""
    control = _arm(n, range(n // 2))  # well above the floor
    size = plain = 0.0
    for c in range(n // 2 + 1):
        t = control.copy()
        t[:c] = 0.0
        prob = sps.binom.pmf(c, n, MARGIN)
        res = noninferiority(t, control, margin=MARGIN, alpha=ALPHA, n_resamples=20)
        size += prob * res.non_inferior
        plain += prob * (res.lower_bound_tango > -MARGIN)
    assert plain > ALPHA + 0.009  # the uncorrected score bound is too liberal here
    assert size <= ALPHA


def test_the_floor_rule_uses_the_continuity_corrected_wilson_bound():
    # 5 of 110: the uncorrected Wilson bound (0.0223) is above the floor 0.02, the
    # corrected one (Newcombe's method 4, 0.0193) is not, and the corrected one decides
    from tersetalk.core.intervals import wilson

    control = _arm(110, range(5))
    res = _floor(control.copy(), control)
    assert res.control_lower == wilson(5 / 110, 110, 1 - 2 * ALPHA, continuity=True)[0]
    assert res.control_lower_wilson == wilson(5 / 110, 110, 1 - 2 * ALPHA)[0] > MARGIN
    assert "continuity-corrected Wilson" in res.verdict_reason
