"""Shared validation for the statistics package."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class StatsError(ValueError):
    """Raised when the statistics cannot be computed from the given inputs."""


def as_vector(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """A finite, non-empty 1-D float array, or a StatsError saying what is wrong."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise StatsError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise StatsError(f"{name} holds {bad} non-finite value(s) (NaN or inf)")
    return arr


def as_pair(
    treatment: Sequence[float] | np.ndarray, control: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two aligned vectors of the same length: element i of both is example i."""
    t = as_vector(treatment, "treatment")
    c = as_vector(control, "control")
    if t.shape != c.shape:
        raise StatsError(f"paired samples differ in length: treatment {t.size}, control {c.size}")
    return t, c


def check_level(value: float, name: str, *, upper: float = 1.0) -> float:
    value = float(value)
    if not 0.0 < value < upper:
        raise StatsError(f"{name} must lie in (0, {upper}), got {value}")
    return value


def check_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or int(n_resamples) != n_resamples or n_resamples < 1:
        raise StatsError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    return int(n_resamples)


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise StatsError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)
