"""tersetalk.stats on synthetic data where the right answer is known."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from tersetalk.stats import (
    BootstrapResult,
    NIResult,
    StatsError,
    bootstrap_ci,
    bootstrap_distribution,
    compare_runs,
    noninferiority,
    paired_bootstrap,
    pareto_frontier,
    run_intervals,
    to_latex,
    token_reduction_tests,
)

MARGIN, ALPHA = 0.02, 0.05


def _binary(n: int, ones: int, seed: int) -> np.ndarray:
    """Exactly ``ones`` ones among ``n``, in a seeded random order."""
    x = np.zeros(n)
    x[:ones] = 1.0
    return np.random.default_rng(seed).permutation(x)


@pytest.fixture(scope="module")
def equal_large() -> tuple[np.ndarray, np.ndarray]:
    """n = 5000, both at accuracy 0.8 exactly, disagreeing on many examples."""
    control = _binary(5000, 4000, seed=1)
    treatment = _binary(5000, 4000, seed=2)
    return treatment, control


# --- non-inferiority: known answers ------------------------------------------------------


def test_clearly_inferior_treatment_fails():
    control = _binary(400, 320, seed=1)  # accuracy 0.8
    treatment = _binary(400, 240, seed=2)  # accuracy 0.6
    res = noninferiority(treatment, control, margin=MARGIN, alpha=ALPHA, seed=0)
    assert isinstance(res, NIResult)
    assert res.mean_diff == pytest.approx(-0.2)
    assert res.mean_treatment == pytest.approx(0.6) and res.mean_control == pytest.approx(0.8)
    assert not res.non_inferior
    assert res.lower_bound < -MARGIN and res.lower_bound_t < -MARGIN
    assert res.p_bootstrap > 0.99 and res.p_t > 0.99
    assert (res.n, res.n_resamples, res.seed, res.margin, res.alpha) == (400, 2000, 0, 0.02, 0.05)


def test_random_inferior_treatment_fails():
    rng = np.random.default_rng(7)
    control = rng.binomial(1, 0.8, 400)
    treatment = rng.binomial(1, 0.6, 400)
    assert not noninferiority(treatment, control).non_inferior


def test_identical_arrays_pass_with_zero_variance_handled():
    control = _binary(300, 210, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = noninferiority(control, control.copy())
    assert res.non_inferior and res.decided_by == "score interval"
    assert res.mean_diff == 0.0 and res.lower_bound_bootstrap == 0.0 and res.lower_bound_t == 0.0
    # no discordant pair still leaves the score bound below 0: 300 pairs are not infinitely many
    assert -MARGIN < res.lower_bound < 0.0 and res.upper_bound == pytest.approx(-res.lower_bound)
    assert res.p_bootstrap == 0.0 and res.p_t == 0.0
    assert "zero variance" in res.note


def test_constant_shift_below_margin_fails_with_zero_variance():
    control = np.full(50, 0.9)
    res = noninferiority(control - 0.05, control)
    assert not res.non_inferior
    assert res.lower_bound_t == pytest.approx(-0.05) and res.p_t == 1.0
    assert res.p_bootstrap == 1.0


def test_equal_treatment_passes_at_large_n(equal_large):
    treatment, control = equal_large
    assert np.mean(treatment != control) > 0.3  # many discordant pairs: real variance
    res = noninferiority(treatment, control, margin=MARGIN, alpha=ALPHA)
    assert res.mean_diff == 0.0
    assert res.non_inferior
    assert -MARGIN < res.lower_bound < 0.0
    assert res.p_bootstrap < ALPHA and res.p_t < ALPHA
    assert res.note == ""


def test_same_distribution_passes_at_large_n():
    rng = np.random.default_rng(11)
    control = rng.binomial(1, 0.8, 5000)
    # the treatment agrees with the control except on a random 10% of examples,
    # where it is redrawn from the same Bernoulli(0.8)
    redraw = rng.random(5000) < 0.1
    treatment = np.where(redraw, rng.binomial(1, 0.8, 5000), control)
    assert noninferiority(treatment, control).non_inferior


def test_bootstrap_bound_agrees_with_t_bound_and_scipy(equal_large):
    treatment, control = equal_large
    diff = treatment - control
    res = noninferiority(treatment, control, margin=MARGIN, alpha=ALPHA, seed=0)
    assert res.lower_bound == pytest.approx(res.lower_bound_t, abs=0.002)
    direct = sps.bootstrap(
        (diff,),
        np.mean,
        confidence_level=1 - 2 * ALPHA,
        method="percentile",
        n_resamples=2000,
        rng=np.random.default_rng(12345),  # an independent stream
        vectorized=True,
    )
    assert res.lower_bound == pytest.approx(direct.confidence_interval.low, abs=0.002)
    # the t-test p-value is scipy's, and the bootstrap one is on the same side of alpha
    p = sps.ttest_1samp(diff, -MARGIN, alternative="greater").pvalue
    assert res.p_t == pytest.approx(p)
    assert (res.p_bootstrap < ALPHA) == (res.p_t < ALPHA)


def test_resampling_scheme_matches_scipy_exactly_with_the_same_generator():
    x = np.random.default_rng(5).normal(size=300)
    ours = bootstrap_distribution([x], lambda a: a.mean(axis=-1), n_resamples=1000, seed=3)
    direct = sps.bootstrap(
        (x,),
        np.mean,
        confidence_level=0.9,
        method="percentile",
        n_resamples=1000,
        rng=np.random.default_rng(3),
        vectorized=True,
    )
    np.testing.assert_allclose(ours, direct.bootstrap_distribution, rtol=0, atol=1e-12)
    res = paired_bootstrap(x, np.zeros_like(x), n_resamples=1000, seed=3, confidence=0.9)
    assert res.ci_low == pytest.approx(direct.confidence_interval.low, abs=1e-12)
    assert res.ci_high == pytest.approx(direct.confidence_interval.high, abs=1e-12)


def test_continuous_scores_bootstrap_vs_t():
    rng = np.random.default_rng(21)
    control = rng.normal(0.6, 0.2, 4000)
    treatment = control + rng.normal(-0.005, 0.1, 4000)
    res = noninferiority(treatment, control)
    assert res.lower_bound == pytest.approx(res.lower_bound_t, abs=0.001)
    assert res.non_inferior


def test_ni_bound_is_the_paired_bootstrap_lower_limit():
    rng = np.random.default_rng(4)
    t, c = rng.binomial(1, 0.7, 500), rng.binomial(1, 0.72, 500)
    ni = noninferiority(t, c, alpha=0.05, n_resamples=1500, seed=9)
    pb = paired_bootstrap(t, c, confidence=0.9, n_resamples=1500, seed=9)
    assert ni.lower_bound_bootstrap == pb.ci_low  # reported beside the score bound
    assert ni.mean_diff == pb.estimate
    # continuous scores report it beside the deciding bound, which is the more
    # conservative of the t and the studentized bootstrap bound
    f1_t, f1_c = rng.uniform(0.3, 1.0, 500), rng.uniform(0.3, 1.0, 500)
    ni = noninferiority(f1_t, f1_c, alpha=0.05, n_resamples=1500, seed=9)
    pb = paired_bootstrap(f1_t, f1_c, confidence=0.9, n_resamples=1500, seed=9)
    assert ni.outcome == "continuous" and ni.lower_bound_bootstrap == pb.ci_low
    assert ni.lower_bound == min(ni.lower_bound_t, ni.lower_bound_studentized)
    assert ni.upper_bound == max(ni.upper_bound_t, ni.upper_bound_studentized)
    assert ni.decided_by == "studentized interval"


def test_single_example_leaves_t_quantities_undefined():
    res = noninferiority([1.0], [1.0])
    assert math.isnan(res.lower_bound_t) and math.isnan(res.p_t)
    assert "n = 1" in res.note


# --- determinism ---------------------------------------------------------------------------


def test_same_seed_identical_different_seed_slightly_different():
    rng = np.random.default_rng(8)
    c = rng.normal(100, 20, 800)
    t = c + rng.normal(-1, 5, 800)
    a = paired_bootstrap(t, c, seed=1)
    assert paired_bootstrap(t, c, seed=1) == a
    b = paired_bootstrap(t, c, seed=2)
    assert (a.ci_low, a.ci_high) != (b.ci_low, b.ci_high)
    assert a.estimate == b.estimate
    assert abs(a.ci_low - b.ci_low) < 0.2 and abs(a.ci_high - b.ci_high) < 0.2

    x, y = rng.binomial(1, 0.8, 600), rng.binomial(1, 0.78, 600)
    ni = noninferiority(x, y, seed=3)
    assert noninferiority(x, y, seed=3) == ni
    other = noninferiority(x, y, seed=4)
    assert other.mean_diff == ni.mean_diff
    assert (other.lower_bound, other.p_bootstrap) != (ni.lower_bound, ni.p_bootstrap)
    assert abs(other.lower_bound - ni.lower_bound) < 0.01
    assert bootstrap_ci(c, seed=5) == bootstrap_ci(c, seed=5)
    assert bootstrap_ci(c, seed=5) != bootstrap_ci(c, seed=6)


def test_distribution_does_not_depend_on_block_size(monkeypatch):
    import tersetalk.stats.bootstrap as bs

    x = np.arange(50, dtype=float)
    full = bootstrap_distribution([x], bs._mean, n_resamples=300, seed=0)
    monkeypatch.setattr(bs, "_BLOCK_CELLS", 50 * 7)  # blocks of 7 resamples
    np.testing.assert_array_equal(
        bootstrap_distribution([x], bs._mean, n_resamples=300, seed=0), full
    )


# --- bootstrap helpers ---------------------------------------------------------------------


def test_bootstrap_ci_of_a_mean():
    values = _binary(1000, 700, seed=0)
    res = bootstrap_ci(values)
    assert isinstance(res, BootstrapResult)
    assert res.estimate == pytest.approx(0.7)
    se = math.sqrt(0.7 * 0.3 / 1000)
    assert res.ci_low == pytest.approx(0.7 - 1.96 * se, abs=0.006)
    assert res.ci_high == pytest.approx(0.7 + 1.96 * se, abs=0.006)
    assert "2000 resamples" in res.method and "seed 0" in res.method
    assert bootstrap_ci(values, statistic="median").estimate == 1.0


def test_paired_bootstrap_statistics():
    rng = np.random.default_rng(2)
    c = rng.integers(200, 400, 500).astype(float)
    t = 0.6 * c
    rel = paired_bootstrap(t, c, statistic="relative_reduction")
    assert rel.estimate == pytest.approx(0.4)
    assert rel.ci_low == pytest.approx(0.4) and rel.ci_high == pytest.approx(0.4)
    med = paired_bootstrap(t, c, statistic="median_diff")
    assert med.estimate == pytest.approx(np.median(t - c))

    def ratio(tt, cc):
        return tt.sum(axis=-1) / cc.sum(axis=-1)

    assert paired_bootstrap(t, c, statistic=ratio).estimate == pytest.approx(0.6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"treatment": [1, 0], "control": [1, 0, 1]},
        {"treatment": [1, np.nan], "control": [1, 0]},
        {"treatment": [], "control": []},
        {"treatment": [[1, 0]], "control": [[1, 0]]},
        {"treatment": [1, 0], "control": [1, 0], "statistic": "nope"},
        {"treatment": [1, 0], "control": [1, 0], "confidence": 1.0},
        {"treatment": [1, 0], "control": [1, 0], "n_resamples": 0},
        {"treatment": [1, 0], "control": [1, 0], "seed": -1},
        {"treatment": [1, 0], "control": [0, 0], "statistic": "relative_reduction"},
    ],
)
def test_paired_bootstrap_rejects_bad_input(kwargs):
    with pytest.raises(StatsError):
        paired_bootstrap(**kwargs)


def test_noninferiority_rejects_bad_levels():
    with pytest.raises(StatsError):
        noninferiority([1, 0], [1, 0], alpha=0.5)
    with pytest.raises(StatsError):
        noninferiority([1, 0], [1, 0], margin=-0.1)
    assert issubclass(StatsError, ValueError)


# --- token reduction -----------------------------------------------------------------------


def test_token_tests_known_reduction():
    rng = np.random.default_rng(3)
    control = rng.integers(200, 1200, 400).astype(float)
    treatment = np.round(0.5 * control + rng.normal(0, 10, 400))
    res = token_reduction_tests(treatment, control)
    assert res["n"] == 400
    assert res["relative_reduction"] == pytest.approx(0.5, abs=0.01)
    assert res["relative_reduction_median"] == pytest.approx(0.5, abs=0.02)
    assert res["reduction_mean"] == pytest.approx(0.5 * control.mean(), rel=0.02)
    assert res["reduction_median"] > 0
    assert res["p_ttest"] < 1e-10 and res["p_wilcoxon"] < 1e-10
    assert res["t_statistic"] < 0
    assert res["p_ttest"] == pytest.approx(sps.ttest_rel(treatment, control).pvalue)
    assert res["alternative"] == "two-sided" and res["note"] == ""
    less = token_reduction_tests(treatment, control, alternative="less")
    greater = token_reduction_tests(treatment, control, alternative="greater")
    assert less["p_ttest"] < 1e-10 and less["p_wilcoxon"] < 1e-10
    assert greater["p_ttest"] > 0.99 and greater["p_wilcoxon"] > 0.99


def test_token_tests_no_reduction_is_not_significant():
    rng = np.random.default_rng(4)
    control = rng.integers(200, 1200, 300).astype(float)
    treatment = control + rng.normal(0, 20, 300)
    res = token_reduction_tests(treatment, control)
    assert abs(res["relative_reduction"]) < 0.01
    assert res["p_ttest"] > 0.001 and res["p_wilcoxon"] > 0.001


def test_wilcoxon_all_zero_differences_do_not_crash():
    tokens = np.array([120.0, 80.0, 95.0, 300.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = token_reduction_tests(tokens, tokens.copy())
    assert math.isnan(res["p_wilcoxon"]) and math.isnan(res["p_ttest"])
    assert math.isnan(res["wilcoxon_statistic"])
    assert "all differences are zero" in res["note"]
    assert res["reduction_mean"] == 0.0 and res["relative_reduction"] == 0.0


def test_token_tests_constant_nonzero_difference_and_zero_controls():
    control = np.array([100.0, 50.0, 0.0, 30.0])
    res = token_reduction_tests(control + 10, control)
    assert res["t_statistic"] == math.inf and res["p_ttest"] == 0.0
    assert res["n_relative"] == 3 and "0 control tokens" in res["note"]
    one = token_reduction_tests([5.0], [10.0])
    assert math.isnan(one["p_ttest"]) and "n = 1" in one["note"]
    with pytest.raises(StatsError):
        token_reduction_tests([1.0], [2.0], alternative="bigger")


# --- Pareto frontier -----------------------------------------------------------------------


def test_pareto_hand_made_example():
    pts = pd.DataFrame(
        {
            "system": ["a", "b", "c", "d", "e", "f", "g", "h"],
            "tokens": [100, 200, 150, 300, 100, 250, 50, np.nan],
            "accuracy": [0.50, 0.70, 0.70, 0.90, 0.40, 0.90, 0.30, 1.0],
        },
        index=[10, 3, 7, 1, 9, 2, 5, 4],  # the index plays no part
    )
    mask = pareto_frontier(pts)
    # a: cheapest at 0.5; c beats b (same accuracy, fewer tokens); f beats d; e by a;
    # g: cheapest of all; h has no token count
    assert dict(zip(pts["system"], mask, strict=True)) == {
        "a": True, "b": False, "c": True, "d": False,
        "e": False, "f": True, "g": True, "h": False,
    }  # fmt: skip
    assert mask.dtype == bool and mask.shape == (8,)


def test_pareto_ties():
    pts = pd.DataFrame({"tokens": [10, 10, 20, 5], "accuracy": [0.8, 0.8, 0.9, 0.1]})
    assert pareto_frontier(pts).tolist() == [True, True, True, True]
    assert pareto_frontier(pts, keep_ties=False).tolist() == [True, False, True, True]
    # same x, lower y is dominated; same y, higher x is dominated
    pts = pd.DataFrame({"cost": [10, 10, 12], "score": [0.8, 0.7, 0.8]})
    assert pareto_frontier(pts, x="cost", y="score").tolist() == [True, False, False]
    assert pareto_frontier(pts.iloc[:0], x="cost", y="score").tolist() == []
    with pytest.raises(StatsError):
        pareto_frontier(pts)


def _brute_pareto(xs, ys):
    out = []
    for i in range(len(xs)):
        dominated = any(
            xs[j] <= xs[i] and ys[j] >= ys[i] and (xs[j] < xs[i] or ys[j] > ys[i])
            for j in range(len(xs))
        )
        out.append(not dominated)
    return out


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=0, max_size=25))
def test_pareto_matches_brute_force(pairs):
    xs = [p[0] for p in pairs]
    ys = [p[1] for p in pairs]
    mask = pareto_frontier(pd.DataFrame({"tokens": xs, "accuracy": ys}))
    assert mask.tolist() == _brute_pareto(xs, ys)
    strict = pareto_frontier(pd.DataFrame({"tokens": xs, "accuracy": ys}), keep_ties=False)
    # one representative per distinct frontier point, the first in row order
    firsts = {}
    for i, p in enumerate(pairs):
        firsts.setdefault(p, i)
    expected = [m and firsts[p] == i for i, (m, p) in enumerate(zip(mask, pairs, strict=True))]
    assert strict.tolist() == expected


# --- compare_runs --------------------------------------------------------------------------


def _run(ids, correct, tokens, errors=None) -> pd.DataFrame:
    df = pd.DataFrame(
        {"example_id": ids, "correct": correct, "tokens_total_cl100k": tokens, "other": 0}
    )
    df["error"] = errors if errors is not None else [None] * len(ids)
    return df


@pytest.fixture
def runs():
    rng = np.random.default_rng(0)
    n = 300
    ids = [f"ex{i:04d}" for i in range(n)]
    ctrl_correct = rng.binomial(1, 0.8, n).astype(float)
    ctrl_tokens = rng.integers(300, 900, n)
    free = _run(ids, ctrl_correct, ctrl_tokens)
    # terse: same accuracy on most, half the tokens; missing ex0000 and ex0001, one error
    terse_ids = ids[2:] + ["extra1"]
    terse_correct = np.r_[ctrl_correct[2:], 1.0]
    terse_tokens = np.r_[(ctrl_tokens[2:] * 0.5).astype(int), 100]
    errors = [None] * len(terse_ids)
    errors[5] = "timeout"
    terse = _run(terse_ids, terse_correct, terse_tokens, errors)
    bad = _run(ids, rng.binomial(1, 0.5, n).astype(float), ctrl_tokens)
    return {"tersetalk/default": terse, "freeform/default": free, "bad/default": bad}


def test_compare_runs_joins_on_ids_and_reports_dropped(runs):
    out = compare_runs(
        runs,
        [("tersetalk/default", "freeform/default"), ("bad/default", "freeform/default")],
        margin=0.02,
        alpha=0.05,
        n_resamples=1000,
        seed=0,
    )
    assert list(out["treatment"]) == ["tersetalk/default", "bad/default"]
    assert list(out["control"]) == ["freeform/default", "freeform/default"]
    first = out.iloc[0]
    assert first["n_treatment"] == 299 and first["n_control"] == 300
    assert first["n_paired"] == 298 and first["n"] == 298
    assert first["n_only_treatment"] == 1 and first["only_treatment"] == "extra1"
    assert first["n_only_control"] == 2 and first["only_control"] == "ex0000; ex0001"
    # the errored example (ex0007, right in the control) counts as wrong: one discordant pair
    assert runs["freeform/default"].set_index("example_id").loc["ex0007", "correct"] == 1.0
    assert first["mean_diff"] == pytest.approx(-1 / 298) and bool(first["non_inferior"])
    assert (first["n_errors_as_wrong_treatment"], first["n_errors_as_wrong_control"]) == (1, 0)
    assert first["tokens_n"] == 297 and first["tokens_n_errors_excluded"] == 1
    assert first["tokens_relative_reduction"] == pytest.approx(0.5, abs=0.01)
    assert (
        first["tokens_relative_reduction_ci_low"]
        <= first["tokens_relative_reduction"]
        <= first["tokens_relative_reduction_ci_high"]
    )
    assert first["tokens_p_ttest"] < 1e-10 and first["tokens_p_wilcoxon"] < 1e-10
    assert (first["n_resamples"], first["seed"], first["margin"]) == (1000, 0, 0.02)
    assert first["diff_ci_low"] <= first["mean_diff"] <= first["diff_ci_high"]
    assert first["accuracy_treatment_ci_low"] <= first["mean_treatment"]
    assert not bool(out.iloc[1]["non_inferior"])

    # the row equals noninferiority on the key-sorted paired arrays
    free = runs["freeform/default"].set_index("example_id")
    terse = runs["tersetalk/default"].set_index("example_id")
    shared = sorted(set(free.index) & set(terse.index))
    terse_acc = terse["correct"].where(terse["error"].isna(), 0.0)
    direct = noninferiority(
        terse_acc.loc[shared], free.loc[shared, "correct"], n_resamples=1000, seed=0
    )
    for field, value in direct.as_dict().items():
        both_nan = isinstance(value, float) and math.isnan(value) and math.isnan(first[field])
        assert both_nan or first[field] == value, field


def test_an_error_row_counts_as_a_wrong_answer_in_accuracy():
    from tersetalk.core.intervals import wilson

    ids = [f"e{i}" for i in range(400)]
    right = np.ones(400)
    ctrl = _run(ids, right, np.full(400, 500))
    # the treatment errored on 20 examples: one kept a score of 1, the others have none
    correct = right.copy()
    correct[1:20] = np.nan
    errors = [None] * 400
    errors[:20] = ["timeout"] * 20
    treat = _run(ids, correct, np.full(400, 300), errors)
    row = compare_runs({"t/x": treat, "c/y": ctrl}, [("t/x", "c/y")], n_resamples=200).iloc[0]
    assert row["mean_treatment"] == pytest.approx(380 / 400) and row["mean_diff"] == -0.05
    assert (row["n_errors_as_wrong_treatment"], row["n_errors_as_wrong_control"]) == (20, 0)
    assert row["verdict"] == "inferior"  # 20 of 400 lost is worse than the margin
    assert row["accuracy_ci_method"] == "Wilson score interval, continuity-corrected"
    assert (row["accuracy_control_ci_low"], row["accuracy_control_ci_high"]) == pytest.approx(
        wilson(1.0, 400, continuity=True), abs=1e-12
    )  # Wilson at 400 of 400, not the bootstrap's [1, 1]
    assert row["accuracy_control_ci_low"] < 0.9905  # wider than the uncorrected 0.99049
    assert row["diff_ci_method"] == "Tango score interval, continuity correction 0.5"


def test_compare_runs_is_deterministic_and_order_free(runs):
    pairs = [("bad/default", "freeform/default")]
    a = compare_runs(runs, pairs, margin=0.02, alpha=0.05, n_resamples=500, seed=3)
    b = compare_runs(runs, pairs, margin=0.02, alpha=0.05, n_resamples=500, seed=3)
    pd.testing.assert_frame_equal(a, b)
    shuffled = {k: v.sample(frac=1.0, random_state=1) for k, v in runs.items()}
    c = compare_runs(shuffled, pairs, margin=0.02, alpha=0.05, n_resamples=500, seed=3)
    pd.testing.assert_frame_equal(a, c)
    d = compare_runs(runs, pairs, margin=0.02, alpha=0.05, n_resamples=500, seed=4)
    assert d.loc[0, "seed"] == 4
    assert d.loc[0, "mean_diff"] == a.loc[0, "mean_diff"]


def test_compare_runs_errors(runs):
    kw = {"margin": 0.02, "alpha": 0.05, "n_resamples": 200, "seed": 0}
    with pytest.raises(StatsError, match="hybrid/default"):
        compare_runs(runs, [("hybrid/default", "freeform/default")], **kw)
    disjoint = {"x": _run(["a", "b"], [1.0, 0.0], [5, 6]), "y": _run(["c"], [1.0], [5])}
    with pytest.raises(StatsError, match="zero paired"):
        compare_runs(disjoint, [("x", "y")], **kw)
    dup = {"x": _run(["a", "a"], [1.0, 0.0], [5, 6]), "y": _run(["a"], [1.0], [5])}
    with pytest.raises(StatsError, match="duplicated"):
        compare_runs(dup, [("x", "y")], **kw)
    with pytest.raises(StatsError, match="lacks column"):
        compare_runs(runs, [("tersetalk/default", "freeform/default")], accuracy_col="em", **kw)
    with pytest.raises(StatsError):
        compare_runs(runs, [], **kw)


def test_compare_runs_all_token_pairs_errored():
    runs = {
        "x": _run(["a", "b"], [1.0, 0.0], [5, 6], ["boom", "boom"]),
        "y": _run(["a", "b"], [1.0, 1.0], [9, 9]),
    }
    out = compare_runs(runs, [("x", "y")], n_resamples=200)
    assert out.loc[0, "tokens_n"] == 0 and out.loc[0, "n_paired"] == 2
    assert math.isnan(out.loc[0, "tokens_p_ttest"])
    assert "no paired example" in out.loc[0, "tokens_note"]


def test_run_intervals(runs):
    out = run_intervals(runs, ["correct", "tokens_total_cl100k"], n_resamples=300, seed=0)
    assert list(out["run"].unique()) == sorted(runs)
    assert len(out) == 6
    assert ((out["ci_low"] <= out["mean"]) & (out["mean"] <= out["ci_high"])).all()
    row = out[(out["run"] == "freeform/default") & (out["column"] == "correct")].iloc[0]
    assert row["mean"] == pytest.approx(runs["freeform/default"]["correct"].mean())


# --- LaTeX ---------------------------------------------------------------------------------


def test_to_latex_booktabs():
    df = pd.DataFrame(
        {
            "treatment": ["tersetalk/default", "hybrid_x"],
            "mean_diff": [-0.0123, np.nan],
            "n": [200, 150],
            "non_inferior": [True, False],
            "p_t": [0.000123, 0.5],
        }
    )
    tex = to_latex(
        df,
        {"treatment": "Treatment", "mean_diff": "Mean diff", "n": "n",
         "non_inferior": "NI", "p_t": "p (t)"},
        caption="Non-inferiority at 2% margin",
        label="tab:ni",
        formats={"p_t": "{:.2g}"},
    )  # fmt: skip
    expected = "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{Non-inferiority at 2\% margin}",
            r"\label{tab:ni}",
            r"\begin{tabular}{lrrlr}",
            r"\toprule",
            r"Treatment & Mean diff & n & NI & p (t) \\",
            r"\midrule",
            r"tersetalk/default & -0.012 & 200 & yes & 0.00012 \\",
            r"hybrid\_x & -- & 150 & no & 0.5 \\",
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
            "",
        ]
    )
    assert tex == expected
    assert to_latex(df, ["n"], caption="x", label="l") == to_latex(
        df, ["n"], caption="x", label="l"
    )
    raw = to_latex(df, ["n"], caption=r"$\delta=0.02$", label="l", escape_caption=False)
    assert r"\caption{$\delta=0.02$}" in raw
    with pytest.raises(StatsError):
        to_latex(df, ["missing"], caption="x", label="l")


def test_to_latex_of_compare_runs_output(runs):
    out = compare_runs(runs, [("tersetalk/default", "freeform/default")], n_resamples=200)
    tex = to_latex(
        out,
        ["treatment", "control", "n_paired", "mean_diff", "lower_bound", "non_inferior"],
        caption="NI",
        label="tab:ni",
    )
    assert r"tersetalk/default & freeform/default & 298 & -0.003 &" in tex
    assert tex.count(r"\\") == 2


# --- properties ----------------------------------------------------------------------------

binary_pairs = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 1), min_size=n, max_size=n),
        st.lists(st.integers(0, 1), min_size=n, max_size=n),
    )
)


@given(binary_pairs, st.integers(0, 2**32 - 1))
def test_property_binary_intervals_bracket_the_estimate(pair, seed):
    t, c = (np.array(v, dtype=float) for v in pair)
    pb = paired_bootstrap(t, c, n_resamples=200, seed=seed)
    assert -1.0 <= pb.ci_low <= pb.estimate <= pb.ci_high <= 1.0
    ni = noninferiority(t, c, n_resamples=200, seed=seed)
    assert -1.0 <= ni.lower_bound <= ni.mean_diff <= 1.0
    assert ni.mean_diff == pytest.approx(t.mean() - c.mean())
    if not math.isnan(ni.lower_bound_t):
        assert ni.lower_bound_t <= ni.mean_diff + 1e-12
        assert 0.0 <= ni.p_t <= 1.0
    assert 0.0 <= ni.p_bootstrap <= 1.0
    assert ni.lower_bound_above_margin == (ni.lower_bound > -ni.margin)
    assert ni.outcome == "binary" and ni.decided_by in ("floor rule", "score interval")
    # "non-inferior" needs both the bound and a control shown above the floor
    if ni.non_inferior:
        assert ni.lower_bound > -ni.margin and ni.control_lower > ni.floor == ni.margin
    assert ni.lower_bound <= ni.upper_bound
    for low, high in ((ni.lower_bound_tango, ni.upper_bound_tango),
                      (ni.lower_bound_newcombe, ni.upper_bound_newcombe)):  # fmt: skip
        assert -1.0 <= low <= ni.mean_diff + 1e-12 and ni.mean_diff - 1e-12 <= high <= 1.0
    # the continuity correction only widens Tango's interval
    assert ni.lower_bound <= ni.lower_bound_tango + 1e-12
    one = bootstrap_ci(t, n_resamples=200, seed=seed)
    assert 0.0 <= one.ci_low <= one.estimate <= one.ci_high <= 1.0


@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=40),
    st.integers(0, 1000),
)
def test_property_continuous_interval_brackets_the_mean(values, seed):
    x = np.array(values)
    res = paired_bootstrap(x, np.zeros_like(x), n_resamples=200, seed=seed)
    tol = 1e-9 * (1 + np.abs(x).max())
    assert res.ci_low - tol <= res.estimate <= res.ci_high + tol


# --- the verdict: non-inferior / inferior / inconclusive ----------------------


def test_both_arms_zero_is_inconclusive_never_non_inferior():
    zeros = np.zeros(500)
    res = noninferiority(zeros, zeros.copy(), margin=MARGIN, alpha=ALPHA)
    assert res.lower_bound > -MARGIN and res.lower_bound_above_margin  # the bare test "passes"
    assert res.verdict == "inconclusive" and not res.non_inferior
    assert res.decided_by == "floor rule" and res.verdict_reason.startswith("floor rule")


def test_identical_arms_at_small_n_are_inconclusive():
    # 10 continuous scores, identical in both arms: zero variance, bootstrap bound 0 > -0.02
    arm = np.linspace(0.5, 0.9, 10)
    res = noninferiority(arm, arm.copy(), margin=MARGIN, alpha=ALPHA)
    assert res.outcome == "continuous" and res.lower_bound_above_margin and not res.non_inferior
    assert res.verdict == "inconclusive" and res.n_min == 149 and res.decided_by == "n_min rule"
    assert "too small for the margin" in res.verdict_reason and "149" in res.verdict_reason
    # 10 binary outcomes, 9 right in both arms: the score interval itself is wide
    right = np.ones(10)
    right[0] = 0.0
    res = noninferiority(right, right.copy(), margin=MARGIN, alpha=ALPHA)
    assert res.outcome == "binary" and not res.lower_bound_above_margin
    assert res.verdict == "inconclusive" and res.decided_by == "score interval"


def test_n_min_is_the_zero_event_bound():
    from tersetalk.stats.noninferiority import min_n_for_margin

    for margin, alpha in ((0.02, 0.05), (0.05, 0.05), (0.1, 0.01)):
        n = min_n_for_margin(margin, alpha)
        assert 1 - alpha ** (1 / n) <= margin < 1 - alpha ** (1 / (n - 1))
    assert min_n_for_margin(0.0, 0.05) == 0 and min_n_for_margin(1.0, 0.05) == 1
    # at n_min identical continuous arms pass; one fewer example does not
    arm = np.random.default_rng(4).uniform(0.2, 1.0, 149)
    assert noninferiority(arm, arm.copy()).verdict == "non-inferior"
    assert noninferiority(arm[:148], arm[:148].copy()).verdict == "inconclusive"


def test_clearly_worse_is_inferior_and_straddling_is_inconclusive():
    control = _binary(400, 320, seed=1)
    worse = noninferiority(_binary(400, 240, seed=2), control)
    assert worse.verdict == "inferior" and worse.upper_bound < -MARGIN
    # 500 examples, the treatment 0.02 below: the interval contains -0.02
    c = _binary(500, 400, seed=5)
    t = c.copy()
    t[np.flatnonzero(c)[:10]] = 0.0
    mid = noninferiority(t, c)
    assert mid.lower_bound < -MARGIN < mid.upper_bound
    assert mid.verdict == "inconclusive" and "contains -0.02" in mid.verdict_reason


def test_verdict_in_compare_runs_rows():
    zeros = pd.DataFrame({"example_id": [f"e{i}" for i in range(5)], "correct": 0.0,
                          "tokens_total_cl100k": 10.0})  # fmt: skip
    out = compare_runs({"a/x": zeros, "b/y": zeros.assign(tokens_total_cl100k=20.0)},
                       [("a/x", "b/y")])  # fmt: skip
    row = out.iloc[0]
    assert row["verdict"] == "inconclusive" and not bool(row["non_inferior"])
    assert row["decided_by"] == "floor rule" and row["n_min"] == 149


def test_main_table_accuracy_interval_is_wilson(tmp_path):
    from tersetalk.plots.tables import write_main_table

    summary = pd.DataFrame({
        "task": ["gsm8k"], "system": ["freeform"], "variant": ["default"], "n": [10],
        "accuracy": [0.0], "accuracy_ci_low": [0.0], "accuracy_ci_high": [0.0],  # bootstrap's
        "tokens_total_cl100k_mean": [100.0], "backend": ["llamacpp"], "model": ["smollm2"],
    })  # fmt: skip
    write_main_table(summary, tmp_path, seed=0)
    row = pd.read_csv(tmp_path / "main.csv").iloc[0]
    # 0 of 10: Wilson's (0, 0.278), continuity-corrected (0, 0.345); never [0, 0]
    assert (row["acc. CI low"], row["acc. CI high"]) == (0.0, 0.345)
    caption = (tmp_path / "main.tex").read_text()
    assert "continuity-corrected Wilson intervals of accuracy" in caption


# --- the continuity-corrected Wilson interval (Newcombe 1998, method 4) ----------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # R. G. Newcombe, Statistics in Medicine 17:857-872 (1998), Table II, method 4
        (81, 263, 0.2535, 0.3682),
        (15, 148, 0.0598, 0.1644),
        (0, 20, 0.0, 0.2005),
        (1, 29, 0.0018, 0.1963),
    ],
)
def test_wilson_with_continuity_correction_matches_newcombe_table(k, n, low, high):
    from tersetalk.core.intervals import wilson, wilson_cc

    got = wilson(k / n, n, 0.95, continuity=True)
    assert got == pytest.approx((low, high), abs=5e-5)
    assert wilson_cc(k / n, n) == got
    # the same closed form as scipy's (an independent implementation)
    ref = sps.binomtest(k, n).proportion_ci(0.95, method="wilsoncc")
    assert got == pytest.approx((ref.low, ref.high), abs=1e-12)
    # the uncorrected interval is unchanged and lies inside the corrected one
    plain = wilson(k / n, n, 0.95)
    assert got[0] <= plain[0] and plain[1] <= got[1]


def _exact_coverage(p: float, n: int, continuity: bool) -> float:
    from tersetalk.core.intervals import wilson

    k = np.arange(n + 1)
    ends = [wilson(i / n, n, 0.95, continuity=continuity) for i in k]
    covers = np.array([lo - 1e-12 <= p <= hi + 1e-12 for lo, hi in ends])
    return float(sps.binom.pmf(k, n, p)[covers].sum())


def test_corrected_wilson_covers_at_least_nominal_where_the_plain_one_does_not():
    # exact coverage (binomial sums, no simulation) at the simulation grid's small n and p
    points = [(p, n) for n in (10, 30, 100) for p in (0.01, 0.03, 0.05, 0.08, 0.1, 0.3, 0.9)]
    plain = {pt: _exact_coverage(*pt, continuity=False) for pt in points}
    corrected = {pt: _exact_coverage(*pt, continuity=True) for pt in points}
    assert min(plain.values()) < 0.94  # Wilson's oscillation: 0.904 at p = 0.01, n = 10
    assert min(corrected.values()) >= 0.95


def test_corrected_wilson_edges_and_bad_input():
    from tersetalk.core.intervals import wilson

    assert wilson(0.0, 10, continuity=True)[0] == 0.0
    assert wilson(1.0, 10, continuity=True)[1] == 1.0
    assert wilson(0.3, 0, continuity=True) == (0.0, 1.0)
    assert all(math.isnan(x) for x in wilson(float("nan"), 10, continuity=True))
    with pytest.raises(ValueError, match="proportion"):
        wilson(3.0, 10, continuity=True)


# --- the continuous verdict's bound: the more conservative of t and bootstrap-t --------------


def _skewed_pair(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    control = rng.beta(0.2, 1.8, n)
    treatment = np.clip(control + rng.normal(-0.01, 0.05, n), 0.0, 1.0)
    return treatment, control


@pytest.mark.parametrize("seed", range(6))
def test_continuous_bound_is_never_less_conservative_than_the_t_bound(seed):
    t, c = _skewed_pair(seed)
    res = noninferiority(t, c, n_resamples=400, seed=seed)
    assert res.outcome == "continuous" and res.decided_by in ("studentized interval", "floor rule")
    assert res.lower_bound <= res.lower_bound_t and res.upper_bound >= res.upper_bound_t
    assert res.lower_bound <= res.lower_bound_studentized
    assert res.upper_bound >= res.upper_bound_studentized
    assert res.lower_bound == min(res.lower_bound_t, res.lower_bound_studentized)
    # the control's floor bound follows the same rule
    from tersetalk.stats.noninferiority import conservative_mean_interval

    assert (
        res.control_lower
        == conservative_mean_interval(c, 1 - 2 * ALPHA, n_resamples=400, seed=seed)[0]
    )


def test_studentized_bound_is_the_bootstrap_t_of_the_same_resamples():
    from tersetalk.stats.noninferiority import studentized_bounds

    t, c = _skewed_pair(7, n=200)
    d = t - c
    lo, hi = studentized_bounds(d, 0.05, n_resamples=999, seed=11)
    # an independent computation: the same index stream, the studentized root by hand
    idx = np.random.default_rng(11).integers(0, d.size, size=(999, d.size))
    se = d.std(ddof=1) / math.sqrt(d.size)
    roots = (d[idx].mean(axis=1) - d.mean()) / (d[idx].std(axis=1, ddof=1) / math.sqrt(d.size))
    roots.sort()
    # order statistics at or beyond the quantiles (no interpolation): ranks 950 and 50 of
    # t*, rank 900 of |t*| (the symmetric form), whichever is wider
    q_sym = np.sort(np.abs(roots))[899]
    assert lo == pytest.approx(d.mean() - max(roots[949], q_sym) * se, abs=1e-12)
    assert hi == pytest.approx(d.mean() - min(roots[49], -q_sym) * se, abs=1e-12)
    assert studentized_bounds(d, 0.05, n_resamples=999, seed=11) == (lo, hi)  # deterministic
    assert studentized_bounds(d, 0.05, n_resamples=999, seed=12) != (lo, hi)


def test_studentized_bound_degenerate_data():
    from tersetalk.stats.noninferiority import conservative_mean_interval, studentized_bounds

    assert studentized_bounds(np.full(50, 0.25), 0.05, n_resamples=100, seed=0) == (0.25, 0.25)
    assert all(math.isnan(x) for x in studentized_bounds(np.array([0.1]), 0.05,
                                                         n_resamples=100, seed=0))  # fmt: skip
    # two distinct values: many constant resamples (infinite roots) stay usable
    lo, hi = studentized_bounds(np.r_[np.zeros(3), 1.0], 0.05, n_resamples=200, seed=0)
    assert lo <= 0.25 <= hi
    with pytest.raises(StatsError):
        conservative_mean_interval([], 0.9)
