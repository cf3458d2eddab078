"""The Wilson score interval of a proportion: the one the targets table and calibration use.

Chosen over the normal (Wald) interval because it stays meaningful at 0 and 1, which is
exactly where small samples on a weak model land: 0 of 10 correct gives (0, 0.278), not
a zero-width interval that would look certain.
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["wilson"]


def wilson(proportion: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a ``proportion`` observed on ``n`` trials.

    The proportion, not a count: a caller holding k successes passes ``k / n``; one
    holding an accuracy passes it as it is, so the interval is computed from the very
    number that is reported beside it. With no trial (``n = 0``) nothing is known: the
    whole unit interval, ``(0.0, 1.0)``.
    """
    if n <= 0:
        return 0.0, 1.0
    if proportion < 0.0 or proportion > 1.0:  # NaN passes: its interval is NaN
        raise ValueError(f"a proportion lies in [0, 1], got {proportion!r} (k / n, not k)")
    z = _z(confidence)
    p = proportion
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at 0 and 1 the bound is the proportion itself, exactly (not 1 - 1e-16 by rounding)
    low = 0.0 if p == 0.0 else max(0.0, centre - half)
    high = 1.0 if p == 1.0 else min(1.0, centre + half)
    return low, high


@lru_cache(maxsize=8)
def _z(confidence: float) -> float:
    """The two-sided normal quantile. scipy's, imported here and not with the module: a
    run job imports this (through calibration) but never calls it, and scipy.stats takes
    about a second to import. Not ``statistics.NormalDist``, whose quantile differs from
    scipy's in the last bit at 0.95 and would move every interval the tables hold."""
    from scipy import stats as sps

    return float(sps.norm.ppf(1 - (1 - confidence) / 2))
