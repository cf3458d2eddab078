"""The Wilson score interval of a proportion, with and without a continuity correction.

Chosen over the normal (Wald) interval because it stays meaningful at 0 and 1, which is
exactly where small samples on a weak model land: 0 of 10 correct gives (0, 0.278), not
a zero-width interval that would look certain.

Two versions (Newcombe, "Two-sided confidence intervals for the single proportion:
comparison of seven methods", Statistics in Medicine 17:857-872, 1998):

- ``wilson(p, n)``: the score interval without correction (Newcombe's method 3). Its
  coverage is close to nominal *on average* but oscillates with ``n`` and ``p``; the
  simulation study (:mod:`tersetalk.stats.simulation`) measures a minimum of about 0.91
  for a nominal 0.95 at n <= 30 and small p, below the 0.94 the project accepts.
- ``wilson(p, n, continuity=True)``: the score interval with a continuity correction of
  half a unit (Newcombe's method 4): the score test of ``k`` against ``n * pi`` is taken
  with ``|k - n pi| - 1/2`` in place of ``|k - n pi|``. It aims at the *minimum* coverage
  and is conservative by construction (closer to the exact Clopper-Pearson interval). It
  is what a decision uses (the floor rule of :mod:`tersetalk.stats.noninferiority`) and
  what a reported accuracy interval should use wherever coverage >= 0.94 must hold at
  every n; the simulation reports both.
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["wilson", "wilson_cc"]


def wilson(
    proportion: float, n: int, confidence: float = 0.95, *, continuity: bool = False
) -> tuple[float, float]:
    """Wilson score interval of a ``proportion`` observed on ``n`` trials.

    The proportion, not a count: a caller holding k successes passes ``k / n``; one
    holding an accuracy passes it as it is, so the interval is computed from the very
    number that is reported beside it. With no trial (``n = 0``) nothing is known: the
    whole unit interval, ``(0.0, 1.0)``. ``continuity=True``: Newcombe's method 4, the
    continuity-corrected score interval (module docstring); the default is method 3.
    """
    if n <= 0:
        return 0.0, 1.0
    if proportion < 0.0 or proportion > 1.0:  # NaN passes: its interval is NaN
        raise ValueError(f"a proportion lies in [0, 1], got {proportion!r} (k / n, not k)")
    z = _z(confidence)
    p = proportion
    if continuity:
        return _wilson_cc(p, n, z)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at 0 and 1 the bound is the proportion itself, exactly (not 1 - 1e-16 by rounding)
    low = 0.0 if p == 0.0 else max(0.0, centre - half)
    high = 1.0 if p == 1.0 else min(1.0, centre + half)
    return low, high


def wilson_cc(proportion: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The continuity-corrected Wilson interval: ``wilson(..., continuity=True)``."""
    return wilson(proportion, n, confidence, continuity=True)


def _wilson_cc(p: float, n: int, z: float) -> tuple[float, float]:
    """Newcombe's (1998) method 4 in closed form: the roots in pi of
    ``(|n p - n pi| - 1/2)^2 = z^2 n pi (1 - pi)`` on either side of ``p``; the lower
    bound is 0 at ``p = 0`` and the upper bound 1 at ``p = 1``."""
    if math.isnan(p):
        return math.nan, math.nan
    zz = z * z
    denom = 2.0 * (n + zz)
    q = 1.0 - p
    low = high = math.nan
    if p == 0.0:
        low = 0.0
    else:
        root = math.sqrt(max(zz - 2.0 - 1.0 / n + 4.0 * p * (n * q + 1.0), 0.0))
        low = max(0.0, (2.0 * n * p + zz - 1.0 - z * root) / denom)
    if p == 1.0:
        high = 1.0
    else:
        root = math.sqrt(max(zz + 2.0 - 1.0 / n + 4.0 * p * (n * q - 1.0), 0.0))
        high = min(1.0, (2.0 * n * p + zz + 1.0 + z * root) / denom)
    return low, high


@lru_cache(maxsize=8)
def _z(confidence: float) -> float:
    """The two-sided normal quantile. scipy's, imported here and not with the module: a
    run job imports this (through calibration) but never calls it, and scipy.stats takes
    about a second to import. Not ``statistics.NormalDist``, whose quantile differs from
    scipy's in the last bit at 0.95 and would move every interval the tables hold."""
    from scipy import stats as sps

    return float(sps.norm.ppf(1 - (1 - confidence) / 2))
