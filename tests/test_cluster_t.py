"""The jackknife t interval over clusters (tasks): exact against the t interval on the
cluster means where the two coincide, against a delete-one loop elsewhere, and its
degenerate cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from tersetalk.stats import StatsError
from tersetalk.stats.cluster import cluster_bootstrap, cluster_t_interval


def _equal_clusters(seed: int, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.4, 0.9, k)
    values = (rng.random((k, m)) < rates[:, None]).astype(float).ravel()
    return values, np.repeat([f"task{j}" for j in range(k)], m)


@pytest.mark.parametrize("k", [3, 6, 12])
def test_equal_sizes_give_the_t_interval_on_the_cluster_means(k):
    values, tasks = _equal_clusters(k, k, 40)
    res = cluster_t_interval(values, tasks, confidence=0.95)
    means = values.reshape(k, 40).mean(axis=1)
    low, high = sps.t.interval(0.95, df=k - 1, loc=means.mean(), scale=sps.sem(means))
    assert (res.low, res.high) == pytest.approx((low, high), abs=1e-12)
    assert res.estimate == pytest.approx(values.mean())
    assert (res.n_clusters, res.df, res.n, res.n_undefined) == (k, k - 1, k * 40, 0)


def test_unequal_sizes_and_a_statistic_are_the_delete_one_cluster_jackknife():
    rng = np.random.default_rng(3)
    sizes = [5, 20, 60, 11]
    tasks = np.repeat(["b", "a", "d", "c"], sizes)
    values = np.c_[rng.random(tasks.size), rng.random(tasks.size)]

    def stat(rows: np.ndarray) -> float:
        return float(rows[:, 0].mean() - rows[:, 1].mean())

    res = cluster_t_interval(values, tasks, stat, confidence=0.9)
    loo = np.array([stat(values[tasks != name]) for name in sorted(set(tasks))])
    k = len(loo)
    se = math.sqrt((k - 1) / k * np.sum((loo - loo.mean()) ** 2))
    half = sps.t.ppf(0.95, df=k - 1) * se
    assert res.estimate == stat(values)
    expected = (stat(values) - half, stat(values) + half, se)
    assert (res.low, res.high, res.se) == pytest.approx(expected, abs=1e-12)
    # the default statistic (the pooled mean) by its closed form equals the loop
    pooled = cluster_t_interval(values[:, 0], tasks)
    by_loop = cluster_t_interval(values[:, 0], tasks, lambda r: float(r.mean()))
    assert (pooled.low, pooled.high) == pytest.approx((by_loop.low, by_loop.high), abs=1e-12)


def test_wider_than_the_cluster_bootstrap_with_three_tasks():
    values, tasks = _equal_clusters(1, 3, 30)
    jack = cluster_t_interval(values, tasks)
    boot = cluster_bootstrap(values, tasks, n_resamples=2000, seed=0)
    assert jack.high - jack.low > 2 * (boot.high - boot.low)


def test_degenerate_cases_and_clip():
    one = cluster_t_interval([1.0, 0.0, 1.0], ["a", "a", "a"])
    assert one.n_clusters == 1 and math.isnan(one.low) and math.isnan(one.high)
    empty = cluster_t_interval([], [])
    assert empty.n_clusters == 0 and math.isnan(empty.estimate)
    same = cluster_t_interval([1.0, 1.0, 1.0, 1.0], ["a", "a", "b", "b"])
    assert (same.low, same.high, same.se) == (1.0, 1.0, 0.0)
    values, tasks = _equal_clusters(2, 3, 10)
    wide = cluster_t_interval(values, tasks)
    clipped = cluster_t_interval(values, tasks, clip=(0.0, 1.0))
    assert wide.high > 1.0 and clipped.high == 1.0 and clipped.low == max(wide.low, 0.0)
    undefined = cluster_t_interval([1.0, 2.0, 3.0], ["a", "b", "c"],
                                   lambda r: float("nan") if len(r) < 3 else 1.0)  # fmt: skip
    assert undefined.n_undefined == 3 and math.isnan(undefined.low)


def test_bad_input_and_determinism():
    with pytest.raises(StatsError, match="one label per row"):
        cluster_t_interval([1.0, 2.0], ["a"])
    with pytest.raises(StatsError, match="pass a statistic"):
        cluster_t_interval(np.ones((4, 2)), ["a", "a", "b", "b"])
    with pytest.raises(StatsError):
        cluster_t_interval([1.0, 2.0], ["a", "b"], confidence=1.5)
    values, tasks = _equal_clusters(4, 6, 20)
    assert cluster_t_interval(values, tasks) == cluster_t_interval(values, tasks)
    # the labels' order does not matter, only which rows share one
    order = np.random.default_rng(0).permutation(values.size)
    a, b = cluster_t_interval(values, tasks), cluster_t_interval(values[order], tasks[order])
    assert (a.low, a.high) == pytest.approx((b.low, b.high), abs=1e-12)


def test_a_share_is_widened_by_the_score_form_and_never_narrower_than_t():
    # three tasks near the ceiling: the t interval is symmetric; the score form reaches
    # further down, where a skewed share's misses are
    values = np.r_[np.ones(28), np.zeros(2), np.ones(27), np.zeros(3), np.ones(29), np.zeros(1)]
    tasks = np.repeat(["a", "b", "c"], 30)
    plain = cluster_t_interval(values, tasks)
    share = cluster_t_interval(values, tasks, share=True)
    est, se, tq = plain.estimate, plain.se, sps.t.ppf(0.975, df=2)
    # the score form by hand: (est - mu)^2 = tq^2 phi mu (1 - mu), phi = se^2 / (est (1 - est))
    a = tq**2 * se**2 / (est * (1 - est))
    roots = np.sort(np.roots([1 + a, -(2 * est + a), est**2]))
    assert share.low == pytest.approx(min(roots[0], plain.low), abs=1e-12)
    assert share.low < plain.low and share.high == 1.0 > plain.low
    assert "score form" in share.method
    with pytest.raises(StatsError, match="in \\[0, 1\\]"):
        cluster_t_interval(values * 2.0, tasks, share=True)


def test_a_share_every_task_gets_right_is_never_certain():
    """Tasks that all agree perfectly show no spread between tasks; the interval still
    holds the pooled rows' sampling (continuity-corrected Wilson), never [1, 1]."""
    from tersetalk.core.intervals import wilson

    tasks = np.repeat(["a", "b", "c", "d"], 2)
    res = cluster_t_interval(np.ones(8), tasks, share=True)
    assert res.se == 0.0 and res.high == 1.0
    assert res.low == pytest.approx(wilson(1.0, 8, 0.95, continuity=True)[0]) and res.low < 0.7
    low = cluster_t_interval(np.zeros(8), tasks, share=True)
    assert low.low == 0.0 and low.high == pytest.approx(wilson(0.0, 8, continuity=True)[1])
    assert "Wilson" in res.method
