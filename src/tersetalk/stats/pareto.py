"""The Pareto frontier of quality against cost: fewest tokens, highest accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tersetalk.stats._common import StatsError


def pareto_frontier(
    points: pd.DataFrame, x: str = "tokens", y: str = "accuracy", *, keep_ties: bool = True
) -> np.ndarray:
    """Boolean mask (aligned with ``points``' rows) of the points no other point dominates.

    ``x`` is minimised and ``y`` maximised. Point j dominates point i when
    x_j <= x_i and y_j >= y_i with at least one strict. Identical points do not
    dominate each other: with ``keep_ties`` all of them are on the frontier,
    otherwise only the first in row order. Rows with NaN in x or y are never on
    the frontier and do not dominate anything. O(n log n), independent of the index.
    """
    for col in (x, y):
        if col not in points.columns:
            raise StatsError(f"pareto_frontier: column {col!r} not in {list(points.columns)}")
    xs_all = points[x].to_numpy(dtype=float)
    ys_all = points[y].to_numpy(dtype=float)
    mask = np.zeros(len(points), dtype=bool)
    valid = np.flatnonzero(~(np.isnan(xs_all) | np.isnan(ys_all)))
    if valid.size == 0:
        return mask
    xs, ys = xs_all[valid], ys_all[valid]
    # x ascending, then y descending; lexsort is stable, so equal points keep row order
    order = np.lexsort((-ys, xs))
    xs, ys = xs[order], ys[order]
    new_x = np.r_[True, xs[1:] != xs[:-1]]
    group = np.cumsum(new_x) - 1
    group_max = ys[new_x][group]  # best y at the same x (first of the group)
    best_by_group = np.maximum.accumulate(ys[new_x])
    # best y among strictly smaller x
    before = np.r_[-np.inf, best_by_group[:-1]][group]
    on = (ys == group_max) & (ys > before)
    if not keep_ties:
        on &= np.r_[True, (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1])]
    mask[valid[order]] = on
    return mask
