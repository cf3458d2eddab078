"""The router on briefs it never trained on: the held-out set and leave-one-out checks.

Agreement with task labels on the study's own briefs says little: every brief of a task
has that task's layout, so a router can agree by recognising the layout. Three checks
ask more of it, all offline (signals only, no model):

- **the held-out set** (``data/topology/heldout/<task>.jsonl``): briefs written in one
  task's record format, each labelled star or chain by the work its question needs
  (multi-hop, multi-step or verification-heavy → chain), about half of them crossing
  their format's label group. The router never trains on them. :func:`agreement_table`
  gives agreement per system and router, overall, on the crossing and non-crossing
  items and per format, each with its Wilson interval;
- **leave one task out** on the study's calibration briefs (:func:`leave_one_task_out`):
  θ chosen on the other tasks' briefs (the design's weights), or the whole router fitted
  on them (:func:`~tersetalk.topology.fit.fit_frame`), scored on the task left
  out. The headline is the chain tasks' mean, since the direct tasks' briefs are alike;
- **leave one format out** (:func:`leave_one_format_out`): the same two routers, fitted
  without a task's briefs, scored on the held-out items written in that task's format.

"design" is the rule a routed variant runs with (its weights and θ as recorded in the
signals files), "fitted" the router file's weights and θ for the system.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tersetalk.core.intervals import wilson
from tersetalk.tasks.registry import topology_labels
from tersetalk.topology.fit import FittedRouter, fit_frame
from tersetalk.topology.rule import SIGNALS, decide

__all__ = [
    "AGREEMENT_COLUMNS",
    "DEFAULT_THETAS",
    "agreement_table",
    "decisions",
    "leave_one_format_out",
    "leave_one_task_out",
    "summary",
]

#: the θ grid leave-one-out chooses from (the design's weights)
DEFAULT_THETAS: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
AGREEMENT_COLUMNS = (
    "system", "router", "subset", "n", "agree", "agreement", "ci_low", "ci_high",
)  # fmt: skip
_CHAIN_GROUP = "chain"


def _signals(frame: pd.DataFrame) -> list[dict[str, float]]:
    return [{k: float(row[k]) for k in SIGNALS} for row in frame[list(SIGNALS)].to_dict("records")]


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["error"].isna()] if "error" in frame.columns else frame


def decisions(
    frame: pd.DataFrame, weights: Mapping[str, float] | None, theta: float | None
) -> pd.Series:
    """The rule's route for each row (``weights``/``theta`` None: the row's recorded ones)."""
    out = []
    for sig, row in zip(_signals(frame), frame.to_dict("records"), strict=True):
        w = weights if weights is not None else json.loads(row["route_weights"])
        t = theta if theta is not None else float(row["route_theta"])
        out.append(decide(sig, w, t)[0])
    return pd.Series(out, index=frame.index, dtype="string")


def _agreement(routes: pd.Series, labels: pd.Series) -> tuple[int, int, float, float, float]:
    n = len(routes)
    agree = int((routes.astype(str) == labels.astype(str)).sum())
    share = agree / n if n else math.nan
    low, high = wilson(share, n, continuity=True) if n else (math.nan, math.nan)
    return n, agree, share, low, high


def _crosses(frame: pd.DataFrame) -> pd.Series:
    """Whether each row's label differs from its task's label group."""
    groups = topology_labels()
    own = frame["task"].map(lambda t: "chain" if groups.get(t) == _CHAIN_GROUP else "star")
    return frame["label"].astype(str) != own


def agreement_table(
    heldout: pd.DataFrame, fitted: Mapping[str, FittedRouter] | None = None
) -> pd.DataFrame:
    """Agreement with the held-out labels, per system and router (``design``, and
    ``fitted`` for each system in ``fitted``), on all items, the crossing and the
    non-crossing ones, each format and each batch the records name (``subset``), with
    Wilson intervals."""
    rows = []
    ok = _ok(heldout)
    for system, g in ok.groupby("system", sort=True):
        routers = [("design", None, None)]
        if fitted and system in fitted:
            routers.append(("fitted", fitted[system].weights, fitted[system].theta))
        crosses = _crosses(g)
        for name, weights, theta in routers:
            routes = decisions(g, weights, theta)
            subsets = [("all", g.index), ("crossing", g.index[crosses]),
                       ("not crossing", g.index[~crosses])]  # fmt: skip
            subsets += [(f"format {t}", idx.index) for t, idx in g.groupby("task", sort=True)]
            if "batch" in g.columns:
                batches = g["batch"].fillna("").astype(str)
                subsets += [(f"batch {b}", g.index[batches == b])
                            for b in sorted(set(batches) - {""})]  # fmt: skip
            for subset, idx in subsets:
                n, agree, share, low, high = _agreement(routes.loc[idx], g.loc[idx, "label"])
                rows.append(dict(system=system, router=name, subset=subset, n=n, agree=agree,
                                 agreement=share, ci_low=low, ci_high=high))  # fmt: skip
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))


def _best_theta(frame: pd.DataFrame, thetas: Sequence[float]) -> float:
    """The θ of ``thetas`` that agrees best with ``frame``'s labels under its recorded
    weights (the smallest on a tie)."""
    best, best_theta = -1.0, float(thetas[0])
    for theta in sorted(thetas):
        share = float((decisions(frame, None, theta) == frame["label"]).mean())
        if share > best:
            best, best_theta = share, float(theta)
    return best_theta


def _routers_without(
    train: pd.DataFrame, thetas: Sequence[float], l2: float, seed: int
) -> list[tuple[str, dict | None, float]]:
    fit = fit_frame(train, l2=l2, seed=seed)
    return [("design", None, _best_theta(train, thetas)), ("fitted", fit.weights, fit.theta)]


def leave_one_task_out(
    calibration: pd.DataFrame,
    thetas: Sequence[float] = DEFAULT_THETAS,
    *,
    l2: float = 1.0,
    seed: int = 0,
) -> pd.DataFrame:
    """Per system, task and router (``design``: θ chosen on the other tasks; ``fitted``:
    fitted on them): agreement on the task left out, with its label group and θ."""
    rows = []
    groups = topology_labels()
    for system, g in _ok(calibration).groupby("system", sort=True):
        for task in sorted(g["task"].unique()):
            train, test = g[g["task"] != task], g[g["task"] == task]
            for name, weights, theta in _routers_without(train, thetas, l2, seed):
                n, agree, share, low, high = _agreement(
                    decisions(test, weights, theta), test["label"]
                )
                rows.append(dict(system=system, router=name, held_out=task,
                                 group=groups.get(task, ""), theta=theta, n=n, agree=agree,
                                 agreement=share, ci_low=low, ci_high=high))  # fmt: skip
    return pd.DataFrame(rows)


def leave_one_format_out(
    calibration: pd.DataFrame,
    heldout: pd.DataFrame,
    thetas: Sequence[float] = DEFAULT_THETAS,
    *,
    l2: float = 1.0,
    seed: int = 0,
) -> pd.DataFrame:
    """Per system, format and router: fitted (or θ chosen) on the study's briefs of the
    other tasks, agreement on the held-out items written in the format left out."""
    rows = []
    cal, held = _ok(calibration), _ok(heldout)
    for system, g in held.groupby("system", sort=True):
        c = cal[cal["system"] == system]
        for task, items in g.groupby("task", sort=True):
            train = c[c["task"] != task]
            if train.empty:
                continue
            for name, weights, theta in _routers_without(train, thetas, l2, seed):
                n, agree, share, low, high = _agreement(
                    decisions(items, weights, theta), items["label"]
                )
                rows.append(dict(system=system, router=name, format=task, theta=theta, n=n,
                                 agree=agree, agreement=share, ci_low=low,
                                 ci_high=high))  # fmt: skip
    return pd.DataFrame(rows)


def _mean(values: Iterable[float]) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(np.mean(v)) if v else math.nan


def summary(agreement: pd.DataFrame, loto: pd.DataFrame, lofo: pd.DataFrame) -> dict:
    """The headline numbers per system and router: held-out agreement (all, crossing),
    the chain tasks' leave-one-task-out mean and lowest, and the leave-one-format-out
    mean, each agreement with its interval where it has one."""
    out: dict = {}
    for (system, router), g in agreement.groupby(["system", "router"], sort=True):
        entry = {}
        for subset in ("all", "crossing", "not crossing"):
            hit = g[g["subset"] == subset]
            if len(hit):
                r = hit.iloc[0]
                entry[subset.replace(" ", "_")] = {
                    "n": int(r["n"]), "agreement": float(r["agreement"]),
                    "ci": [float(r["ci_low"]), float(r["ci_high"])],
                }  # fmt: skip
        lo = loto[(loto["system"] == system) & (loto["router"] == router)] if len(loto) else loto
        chain = lo[lo["group"] == _CHAIN_GROUP] if len(lo) else lo
        entry["loto_chain_mean"] = _mean(chain["agreement"]) if len(chain) else math.nan
        entry["loto_chain_min"] = float(chain["agreement"].min()) if len(chain) else math.nan
        entry["loto_by_task"] = (
            {str(t): float(a) for t, a in zip(lo["held_out"], lo["agreement"], strict=True)}
            if len(lo) else {}
        )  # fmt: skip
        lf = lofo[(lofo["system"] == system) & (lofo["router"] == router)] if len(lofo) else lofo
        entry["lofo_mean"] = _mean(lf["agreement"]) if len(lf) else math.nan
        out.setdefault(str(system), {})[str(router)] = entry
    return out
