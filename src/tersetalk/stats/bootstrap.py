"""Percentile bootstrap confidence intervals, for one sample and for paired samples.

Every resample draws ``n`` example indices with replacement from one
``numpy.random.Generator(PCG64(seed))``; in the paired case the *same* indices
pick the treatment and the control value, so the pairing (same example, two
systems) is kept. Resamples are drawn in blocks to bound memory; the index
stream does not depend on the block size, so the result depends only on the
data, their order, ``n_resamples`` and ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tersetalk.stats._common import (
    StatsError,
    as_pair,
    as_vector,
    check_level,
    check_resamples,
    check_seed,
)

# at most this many resampled values are held in memory at once (int64 indices: 32 MB)
_BLOCK_CELLS = 1 << 22

# A statistic maps resampled arrays, each of shape (k, n), to k values.
Reducer = Callable[..., np.ndarray]


@dataclass(frozen=True)
class BootstrapResult:
    """A point estimate with its two-sided percentile bootstrap interval."""

    estimate: float
    ci_low: float
    ci_high: float
    n: int
    n_resamples: int
    seed: int
    method: str
    statistic: str
    confidence: float

    def as_dict(self) -> dict:
        return asdict(self)


def _mean(x: np.ndarray) -> np.ndarray:
    return x.mean(axis=-1)


def _median(x: np.ndarray) -> np.ndarray:
    return np.median(x, axis=-1)


def _relative_reduction(t: np.ndarray, c: np.ndarray) -> np.ndarray:
    mean_c = c.mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - t.mean(axis=-1) / mean_c


# name -> (reducer, whether it is applied to the paired differences T - C or to (T, C))
PAIRED_STATISTICS: dict[str, tuple[Reducer, bool]] = {
    "mean_diff": (_mean, True),
    "median_diff": (_median, True),
    # 1 - mean(T) / mean(C): the share of the control's total the treatment saves
    "relative_reduction": (_relative_reduction, False),
}
SINGLE_STATISTICS: dict[str, Reducer] = {"mean": _mean, "median": _median}


def _index_blocks(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    block = max(1, min(n_resamples, _BLOCK_CELLS // n))
    done = 0
    while done < n_resamples:
        k = min(block, n_resamples - done)
        yield rng.integers(0, n, size=(k, n))
        done += k


def bootstrap_distribution(
    arrays: Sequence[np.ndarray], reducer: Reducer, *, n_resamples: int, seed: int
) -> np.ndarray:
    """The statistic on ``n_resamples`` joint resamples of equally long 1-D ``arrays``.

    Row ``b`` of the index matrix picks the same examples from every array, so
    paired data stay paired. Returns a float array of length ``n_resamples``.
    """
    n = arrays[0].shape[0]
    out = np.empty(n_resamples, dtype=float)
    done = 0
    for idx in _index_blocks(n, n_resamples, seed):
        out[done : done + idx.shape[0]] = reducer(*(a[idx] for a in arrays))
        done += idx.shape[0]
    return out


def _interval(dist: np.ndarray, confidence: float) -> tuple[float, float, int]:
    """Percentile interval (linear interpolation, as numpy/scipy) over the finite values."""
    finite = dist[np.isfinite(dist)]
    if finite.size == 0:
        return float("nan"), float("nan"), 0
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high), int(dist.size - finite.size)


def _method(kind: str, statistic: str, confidence: float, n_resamples: int, seed: int) -> str:
    return (
        f"{kind} percentile bootstrap of {statistic}: {confidence:.4g} two-sided interval, "
        f"{n_resamples} resamples, numpy PCG64 seed {seed}"
    )


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    statistic: str | Reducer = "mean",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Percentile interval for a statistic of one sample (default: the mean).

    Use for error bars on a run's accuracy or tokens. ``statistic`` is "mean",
    "median" or a callable reducing a (k, n) array along its last axis to k values.
    """
    x = as_vector(values, "values")
    n_resamples = check_resamples(n_resamples)
    seed = check_seed(seed)
    confidence = check_level(confidence, "confidence")
    if callable(statistic):
        reducer, name = statistic, getattr(statistic, "__name__", "custom")
    elif statistic in SINGLE_STATISTICS:
        reducer, name = SINGLE_STATISTICS[statistic], statistic
    else:
        raise StatsError(f"unknown statistic {statistic!r}; use one of {sorted(SINGLE_STATISTICS)}")
    estimate = float(np.asarray(reducer(x[np.newaxis, :]))[0])
    dist = bootstrap_distribution([x], reducer, n_resamples=n_resamples, seed=seed)
    low, high, _ = _interval(dist, confidence)
    return BootstrapResult(
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        n=int(x.size),
        n_resamples=n_resamples,
        seed=seed,
        method=_method("one-sample", name, confidence, n_resamples, seed),
        statistic=name,
        confidence=confidence,
    )


def paired_bootstrap(
    treatment: Sequence[float] | np.ndarray,
    control: Sequence[float] | np.ndarray,
    *,
    statistic: str | Reducer = "mean_diff",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Percentile interval for a paired statistic; element i of both arrays is example i.

    ``statistic``: "mean_diff" (mean of T - C), "median_diff" (median of T - C),
    "relative_reduction" (1 - mean(T) / mean(C)), or a callable ``f(t, c)``
    reducing two (k, n) arrays along the last axis to k values.
    """
    t, c = as_pair(treatment, control)
    n_resamples = check_resamples(n_resamples)
    seed = check_seed(seed)
    confidence = check_level(confidence, "confidence")
    if callable(statistic):
        reducer, on_diff, name = statistic, False, getattr(statistic, "__name__", "custom")
    elif statistic in PAIRED_STATISTICS:
        (reducer, on_diff), name = PAIRED_STATISTICS[statistic], statistic
    else:
        raise StatsError(f"unknown statistic {statistic!r}; use one of {sorted(PAIRED_STATISTICS)}")
    if name == "relative_reduction" and not callable(statistic) and c.mean() == 0:
        raise StatsError("relative_reduction is undefined: the control mean is 0")
    arrays = [t - c] if on_diff else [t, c]
    estimate = float(np.asarray(reducer(*(a[np.newaxis, :] for a in arrays)))[0])
    dist = bootstrap_distribution(arrays, reducer, n_resamples=n_resamples, seed=seed)
    low, high, n_undefined = _interval(dist, confidence)
    method = _method("paired", name, confidence, n_resamples, seed)
    if n_undefined:
        method += f"; {n_undefined} resample(s) with an undefined statistic left out"
    return BootstrapResult(
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        n=int(t.size),
        n_resamples=n_resamples,
        seed=seed,
        method=method,
        statistic=name,
        confidence=confidence,
    )
