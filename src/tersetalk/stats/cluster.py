"""Intervals with the cluster (task) as the unit: a cluster bootstrap and a cluster t interval.

Why: examples of one task share a label, a prompt shape and a difficulty, so they are not
independent draws. When a study's claim is about tasks (a router that picks the right
topology for the task at hand), the task is the unit, and an interval that resamples
examples would count six tasks as hundreds of independent observations. Here every
resample draws as many clusters as there are, with replacement, and pools all the rows of
the drawn clusters (a cluster drawn twice contributes its rows twice); the statistic is
computed on that pool. With few clusters the interval is honestly wide; with one cluster
it has no width at all and says nothing, which the caller must report (``n_clusters``).

Deterministic: the draws come from one ``numpy.random.Generator(PCG64(seed))``, clusters
are taken in sorted order, so the result depends only on the data, their clusters,
``n_resamples`` and ``seed``. The interval is the percentile interval over the resamples
whose statistic is defined (a NaN resample, e.g. a mean over no row, is left out and
counted in ``n_undefined``); it picks resampled values (numpy's ``inverted_cdf``), so a
resample whose statistic is infinite stays infinite rather than becoming NaN.

**With few clusters, use** :func:`cluster_t_interval`. A percentile interval over k
resampled clusters is too narrow when k is small: it ignores that the spread of k
cluster means is itself estimated (the bootstrap variance is the plug-in ``(k - 1) / k``
of the unbiased one, and the normal-like percentiles stand in for a t quantile with
k - 1 degrees of freedom). The simulation study (:mod:`tersetalk.stats.simulation`,
router study) measures a nominal 95% cluster bootstrap at about 0.70 coverage with 3
tasks and still under 0.94 with 6 and 12. :func:`cluster_t_interval` is the delete-one-
cluster jackknife with a t quantile on ``k - 1`` degrees of freedom: for a mean over
equally sized clusters it is exactly the t interval on the k cluster means
(``mean +- t_{k-1} s / sqrt(k)``); for unequal sizes the jackknife variance of the pooled
(ratio) mean is the usual cluster-robust one, and any other statistic gets its
jackknife variance. It needs no resamples and no seed, and is wide with few clusters,
as it must be (t_{0.975, 2} = 4.30). With one cluster it is undefined (NaN).

A share near 0 or 1 (an agreement of 0.85 whose tasks differ) has skewed cluster means:
a sample without a low task has a high mean *and* a small spread, so the symmetric t
interval misses from above (measured: 0.92-0.93 coverage at agreement 0.85, task SD 0.1,
3 to 12 tasks). ``share=True`` (the statistic is a share in [0, 1]) widens it by the
score form of the same test: the interval also holds every ``mu`` with ``(estimate -
mu)^2 <= t^2 phi mu (1 - mu)``, where ``phi = se^2 / (estimate (1 - estimate))`` is the
dispersion the jackknife measured (Wilson's interval with the variance taken from the
clusters, not from a binomial). Both measure only the spread *between* tasks: tasks
that all agree perfectly (or all disagree) would give [1, 1] (or [0, 0]), an interval
that looks certain from a handful of examples. So a share's interval also holds the
continuity-corrected Wilson interval of the pooled rows (the binomial sampling of the
examples themselves, :func:`tersetalk.core.intervals.wilson`). At each end the widest
of the three is taken, so it is never narrower than the t interval, and it is cut to
[0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tersetalk.core.intervals import wilson
from tersetalk.stats._common import StatsError, check_level, check_resamples, check_seed

__all__ = ["ClusterBootstrapResult", "ClusterTResult", "cluster_bootstrap", "cluster_t_interval"]


@dataclass(frozen=True)
class ClusterBootstrapResult:
    """A statistic with its cluster-bootstrap percentile interval."""

    estimate: float
    low: float
    high: float
    n_clusters: int
    n: int  # rows (observations) over all clusters
    n_resamples: int
    n_undefined: int  # resamples whose statistic was NaN (left out of the percentiles)
    seed: int
    confidence: float

    def as_dict(self) -> dict:
        return asdict(self)


def _nan_result(n: int, n_resamples: int, seed: int, confidence: float) -> ClusterBootstrapResult:
    nan = float("nan")
    return ClusterBootstrapResult(nan, nan, nan, 0, n, n_resamples, n_resamples, seed, confidence)


def cluster_bootstrap(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | np.ndarray,
    statistic: Callable[[np.ndarray], float] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> ClusterBootstrapResult:
    """The ``statistic`` of ``values`` with a percentile interval resampling whole clusters.

    ``values``: one row per observation (1-D, or 2-D with one row per observation when the
    statistic needs several numbers per observation, e.g. two arms of a paired
    comparison); ``clusters``: each row's cluster (any hashable labels, e.g. task names).
    ``statistic``: a function of the pooled rows of one resample (an array shaped like
    ``values``) returning one number; None: the mean of a 1-D ``values`` (computed from
    per-cluster sums, the same numbers as ``np.mean`` of the pooled rows). NaN values
    are allowed; the statistic decides what they mean (``np.nanmean`` skips them).

    Returns estimate (the statistic on all rows), low, high, n_clusters, n. No row at
    all gives NaN everywhere and ``n_clusters`` 0.
    """
    n_resamples = check_resamples(n_resamples)
    seed = check_seed(seed)
    confidence = check_level(confidence, "confidence")
    vals, labels = _check_rows(values, clusters, statistic)
    n = int(vals.shape[0])
    if n == 0:
        return _nan_result(0, n_resamples, seed, confidence)
    names = sorted({str(c) for c in labels})
    keyed = np.array([str(c) for c in labels], dtype=object)
    members = [np.flatnonzero(keyed == name) for name in names]
    k = len(names)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_resamples, k))
    if statistic is None:
        sums = np.array([vals[m].sum() for m in members])
        counts = np.array([float(len(m)) for m in members])
        estimate = float(vals.mean())
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    else:
        estimate = float(statistic(vals))
        dist = np.empty(n_resamples, dtype=float)
        for b in range(n_resamples):
            rows = np.concatenate([members[j] for j in draws[b]])
            dist[b] = float(statistic(vals[rows]))
    defined = dist[~np.isnan(dist)]
    if defined.size == 0:
        low = high = float("nan")
    else:
        tail = (1.0 - confidence) / 2.0
        low, high = (float(q) for q in np.quantile(defined, [tail, 1.0 - tail],
                                                   method="inverted_cdf"))  # fmt: skip
    return ClusterBootstrapResult(
        estimate=estimate,
        low=low,
        high=high,
        n_clusters=k,
        n=n,
        n_resamples=n_resamples,
        n_undefined=int(dist.size - defined.size),
        seed=seed,
        confidence=confidence,
    )


@dataclass(frozen=True)
class ClusterTResult:
    """A statistic with its delete-one-cluster jackknife t interval."""

    estimate: float
    low: float
    high: float
    n_clusters: int
    n: int  # rows (observations) over all clusters
    se: float  # the jackknife standard error over clusters
    df: int  # degrees of freedom of the t quantile: n_clusters - 1
    n_undefined: int  # leave-one-cluster-out statistics that were NaN
    confidence: float
    method: str

    def as_dict(self) -> dict:
        return asdict(self)


def _check_rows(values, clusters, statistic) -> tuple[np.ndarray, np.ndarray]:
    vals = np.asarray(values, dtype=float)
    labels = np.asarray(clusters, dtype=object)
    if vals.ndim not in (1, 2):
        raise StatsError(f"values must be 1-D or 2-D (one row per observation), got {vals.shape}")
    if labels.ndim != 1 or labels.shape[0] != vals.shape[0]:
        raise StatsError(
            f"clusters must give one label per row of values: {labels.shape[0]} labels for "
            f"{vals.shape[0]} rows"
        )
    if statistic is None and vals.ndim != 1:
        raise StatsError("the default statistic (the mean) takes 1-D values; pass a statistic")
    return vals, labels


def cluster_t_interval(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | np.ndarray,
    statistic: Callable[[np.ndarray], float] | None = None,
    *,
    confidence: float = 0.95,
    clip: tuple[float, float] | None = None,
    share: bool = False,
) -> ClusterTResult:
    """The ``statistic`` of ``values`` with a jackknife t interval over whole clusters.

    ``values``, ``clusters`` and ``statistic`` as :func:`cluster_bootstrap` (None: the
    mean of the pooled rows). With ``k`` clusters, ``theta_j`` is the statistic on all
    rows but those of cluster j, ``se^2 = (k - 1) / k * sum_j (theta_j - mean_j
    theta_j)^2`` and the interval ``estimate +- t_{(1 + confidence) / 2, k - 1} se``
    (module docstring). Deterministic: no resampling. One cluster (or none), or a NaN
    leave-one-out statistic, leaves the interval NaN (``n_undefined`` counts the NaN
    ones). ``clip``: the statistic's range (e.g. ``(0, 1)`` for a share), to which the
    interval is cut; None leaves it as computed. ``share=True``: the statistic is a share
    in [0, 1] (an agreement, an accuracy); each end is the wider of the t interval and its
    score form (module docstring), cut to [0, 1]; raises when the estimate is outside.
    """
    from scipy import stats as sps

    confidence = check_level(confidence, "confidence")
    vals, labels = _check_rows(values, clusters, statistic)
    n = int(vals.shape[0])
    nan = float("nan")
    method = "delete-one-cluster jackknife, t quantile on n_clusters - 1 degrees of freedom"
    if share:
        method += (
            ", widened by its score form and the pooled rows' continuity-corrected "
            "Wilson interval for a share"
        )
        clip = (0.0, 1.0)
    if n == 0:
        return ClusterTResult(nan, nan, nan, 0, 0, nan, 0, 0, confidence, method)
    keyed = np.array([str(c) for c in labels], dtype=object)
    names = sorted(set(keyed))
    k = len(names)
    if statistic is None:
        sums = np.array([vals[keyed == name].sum() for name in names])
        counts = np.array([float(np.sum(keyed == name)) for name in names])
        estimate = float(vals.mean())
        with np.errstate(divide="ignore", invalid="ignore"):
            loo = (sums.sum() - sums) / (counts.sum() - counts)
    else:
        estimate = float(statistic(vals))
        loo = np.array([float(statistic(vals[keyed != name])) for name in names])
    if k < 2:
        return ClusterTResult(estimate, nan, nan, k, n, nan, 0, 0, confidence, method)
    undefined = int(np.isnan(loo).sum())
    if undefined or not np.isfinite(estimate):
        return ClusterTResult(estimate, nan, nan, k, n, nan, k - 1, undefined, confidence,
                              method)  # fmt: skip
    se = float(np.sqrt((k - 1) / k * np.sum((loo - loo.mean()) ** 2)))
    tq = float(sps.t.ppf(0.5 + confidence / 2.0, df=k - 1))
    low, high = estimate - tq * se, estimate + tq * se
    if share:
        if not 0.0 <= estimate <= 1.0:
            raise StatsError(f"share=True needs an estimate in [0, 1], got {estimate!r}")
        s_low, s_high = _score_form(estimate, se, tq)
        w_low, w_high = wilson(estimate, n, confidence, continuity=True)
        low, high = min(low, s_low, w_low), max(high, s_high, w_high)
    if clip is not None:
        low, high = max(low, float(clip[0])), min(high, float(clip[1]))
    return ClusterTResult(estimate, low, high, k, n, se, k - 1, 0, confidence, method)


def _score_form(estimate: float, se: float, tq: float) -> tuple[float, float]:
    """The roots in ``mu`` of ``(estimate - mu)^2 = A mu (1 - mu)`` with ``A = tq^2 phi``
    and ``phi = se^2 / (estimate (1 - estimate))``; at 0 or 1 (no spread is possible
    there) the estimate itself."""
    spread = estimate * (1.0 - estimate)
    if spread <= 0.0 or se == 0.0:
        return estimate, estimate
    a = tq * tq * se * se / spread
    qa, qb, qc = 1.0 + a, -(2.0 * estimate + a), estimate * estimate
    root = math.sqrt(max(qb * qb - 4.0 * qa * qc, 0.0))
    return (-qb - root) / (2.0 * qa), (-qb + root) / (2.0 * qa)
