"""The fitted topology router: weights and θ learned from labelled briefs.

The router's rule is linear (:func:`tersetalk.topology.rule.decide`: chain iff
``Σ weight · signal >= θ``), so the model that learns it is the linear classifier a
reader can check by hand: an L2-regularised logistic regression on the six signals of
:data:`~tersetalk.topology.rule.SIGNALS`, with chain as the positive class. Its decision
``w · x + b >= 0`` is the router's rule with ``θ = -b``, so the fitted weights go into a
routed variant unchanged (``weights_from``) and every row's decision stays a pure
function of its recorded signals.

How it is fitted, and why:

- each signal is centred and scaled by its standard deviation before fitting, so the
  penalty treats a count of numbers and a 0/1 code flag alike; the weights and θ are then
  given back in raw signal units;
- the penalty ``l2/2 · ||w - w₀||²`` (on the scaled weights, not the intercept) shrinks
  the weights towards the design's (:data:`~tersetalk.topology.rule.DEFAULT_WEIGHTS`,
  ``w₀``) rather than towards 0. It keeps them finite when the calibration briefs are
  linearly separable, which at a few examples per task they often are, and a signal that
  never varies in the calibration briefs keeps its design weight: when the one task that
  carries a signal is left out of the fit (HumanEval's code), the fit has no evidence
  against the design, and a weight of 0 would send that task's briefs to the star;
- Newton's method from the design's weights, with backtracking, in NumPy: no randomness,
  so the same inputs give bitwise the same floats. ``seed`` is recorded with the fit, for
  the record of what produced it; the fit itself draws nothing.

The training selection accuracy is the router's own (:func:`decide` replayed with the
fitted weights), not the classifier's probability rounded, so it is what a run with
``weights_from`` would score on the same briefs.

:func:`leave_one_task_out_fitted` fits on all tasks but one and scores the one left out;
:func:`write_router_yaml` / :func:`read_router_yaml` keep the fits in
``results/topology/router.yaml`` (the file :func:`tersetalk.topology.router.load_fitted`
reads).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tersetalk.topology.rule import DEFAULT_WEIGHTS, SIGNALS, RouterFileError, decide

__all__ = [
    "LABELS",
    "FittedRouter",
    "RouterFileError",
    "fit_frame",
    "fit_router",
    "leave_one_task_out_fitted",
    "read_router_yaml",
    "signal_rows",
    "write_router_yaml",
]

#: the two routes a label names; ``chain`` is the positive class
LABELS: tuple[str, ...] = ("star", "chain")
_MAX_ITER = 100
_TOL = 1e-10


@dataclass(frozen=True)
class FittedRouter:
    """One fitted router: what :func:`decide` needs and what tells how it was fitted."""

    #: weight per signal, in raw signal units, in :data:`SIGNALS` order
    weights: dict[str, float]
    #: chain iff ``Σ weight · signal >= theta``
    theta: float
    #: L2 penalty on the standardised weights
    l2: float
    seed: int
    #: training rows
    n: int
    #: training rows per label (``star``, ``chain``)
    n_per_label: dict[str, int]
    #: the router's selection accuracy on its own training rows
    train_selection_accuracy: float
    #: the tasks the rows came from (the calibration tasks), sorted
    tasks: tuple[str, ...] = ()
    #: Newton iterations taken, and whether the gradient fell under the tolerance
    iterations: int = 0
    converged: bool = True
    #: what else a caller wants kept beside the fit (not used by the rule)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str:
        """The kind of model, as the router file names it."""
        return f"logistic regression, L2={self.l2:g}"

    def route(self, signals: Mapping[str, float]) -> str:
        """``chain`` or ``star`` for one brief's signals: the router's own rule."""
        return decide(signals, self.weights, self.theta)[0]

    def as_dict(self) -> dict[str, Any]:
        """The router file's entry for this fit (plain types, in reading order)."""
        entry: dict[str, Any] = {
            "model": self.model,
            "weights": {k: float(self.weights[k]) for k in SIGNALS},
            "theta": float(self.theta),
            "l2": float(self.l2),
            "seed": int(self.seed),
            "n": int(self.n),
            "n_per_label": {k: int(self.n_per_label.get(k, 0)) for k in LABELS},
            "train_selection_accuracy": float(self.train_selection_accuracy),
            "tasks": list(self.tasks),
            "iterations": int(self.iterations),
            "converged": bool(self.converged),
        }
        if self.extra:
            entry["extra"] = dict(self.extra)
        return entry


# -- the fit ------------------------------------------------------------------------------
def _matrix(signals: Sequence[Mapping[str, float]]) -> np.ndarray:
    rows = []
    for i, row in enumerate(signals):
        missing = [k for k in SIGNALS if k not in row]
        if missing:
            raise ValueError(f"signals row {i} lacks {missing}; each row gives {list(SIGNALS)}")
        values = []
        for k in SIGNALS:
            v = row[k]
            if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
                raise ValueError(f"signals row {i}: {k} must be a number, got {v!r}")
            if not math.isfinite(float(v)):
                raise ValueError(f"signals row {i}: {k} must be finite, got {v!r}")
            values.append(float(v))
        rows.append(values)
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(SIGNALS))


def _objective(
    beta: np.ndarray, z: np.ndarray, y: np.ndarray, l2: float, prior: np.ndarray
) -> float:
    margin = z @ beta
    shift = beta[1:] - prior
    # log(1 + e^m) - y·m, summed: the negative log-likelihood, stable for any m
    return float(np.sum(np.logaddexp(0.0, margin) - y * margin) + 0.5 * l2 * shift @ shift)


def _newton(
    z: np.ndarray, y: np.ndarray, l2: float, prior: np.ndarray
) -> tuple[np.ndarray, int, bool]:
    """The penalised maximum-likelihood coefficients (intercept first) of ``z`` (with its
    column of ones) and ``y``, the weights shrunk towards ``prior``, by Newton's method
    with backtracking from the prior."""
    k = z.shape[1]
    penalty = np.full(k, l2)
    penalty[0] = 0.0  # the intercept is not shrunk
    centre = np.concatenate([[0.0], prior])
    beta = centre.copy()
    value = _objective(beta, z, y, l2, prior)
    for it in range(1, _MAX_ITER + 1):
        p = 0.5 * (1.0 + np.tanh(0.5 * (z @ beta)))  # the logistic function, overflow-free
        grad = z.T @ (p - y) + penalty * (beta - centre)
        if float(np.max(np.abs(grad))) <= _TOL * max(1, len(y)):
            return beta, it - 1, True
        hess = (z * (p * (1.0 - p))[:, None]).T @ z + np.diag(penalty)
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        t = 1.0
        while True:
            trial = beta - t * step
            trial_value = _objective(trial, z, y, l2, prior)
            if trial_value <= value or t < 1e-12:
                break
            t *= 0.5
        if trial_value > value:  # no step lowers the objective: as good as it gets
            return beta, it, True
        done = abs(value - trial_value) <= 1e-15 * max(1.0, abs(value))
        beta, value = trial, trial_value
        if done:
            return beta, it, True
    return beta, _MAX_ITER, False


def fit_router(
    signals: Sequence[Mapping[str, float]],
    labels: Sequence[str],
    *,
    l2: float = 1.0,
    seed: int = 0,
    tasks: Sequence[str] = (),
    prior: Mapping[str, float] | None = None,
) -> FittedRouter:
    """Weights and θ for the router's rule, by L2-regularised logistic regression.

    ``signals``: one mapping per brief with each of :data:`SIGNALS`; ``labels``: the
    route each brief's task asks for (``star`` or ``chain``). ``l2`` > 0 (it keeps the
    weights finite on separable data). ``prior``: the weights the penalty shrinks
    towards (default: the design's, :data:`~tersetalk.topology.rule.DEFAULT_WEIGHTS`;
    ``{}`` shrinks towards 0). A signal that never varies in the calibration briefs keeps
    its prior weight: nothing there says otherwise, and a task held out of the fit may be
    the one that carries it. Deterministic: the same inputs give the same floats.
    ``tasks``: the calibration tasks, kept with the fit.
    """
    if (
        isinstance(l2, bool)
        or not isinstance(l2, int | float)
        or not (l2 > 0 and math.isfinite(l2))
    ):
        raise ValueError(
            f"l2 must be a finite number > 0 (it keeps the weights finite), got {l2!r}"
        )
    if len(signals) != len(labels):
        raise ValueError(f"{len(signals)} signal rows but {len(labels)} labels")
    if not signals:
        raise ValueError("no rows to fit the router on: give the signals of labelled briefs")
    bad = sorted({str(label) for label in labels} - set(LABELS))
    if bad:
        raise ValueError(f"unknown label(s) {bad}; a label is one of {list(LABELS)}")
    counts = {k: sum(1 for label in labels if label == k) for k in LABELS}
    missing = [k for k, v in counts.items() if v == 0]
    if missing:
        have = [k for k in LABELS if k not in missing]
        raise ValueError(
            f"the rows hold one label only ({have[0]}: {counts[have[0]]}); no {missing[0]} "
            "example to fit against: the calibration tasks must include both direct "
            "(star) and chain tasks"
        )
    x = _matrix(signals)
    y = np.asarray([1.0 if label == "chain" else 0.0 for label in labels])
    mean = x.mean(axis=0)
    sd = x.std(axis=0)
    constant = sd == 0
    scale = np.where(constant, 1.0, sd)
    z = np.column_stack([np.ones(len(y)), (x - mean) / scale])
    prior = dict(DEFAULT_WEIGHTS if prior is None else prior)
    w0 = np.asarray([float(prior.get(k, 0.0)) for k in SIGNALS])
    # the prior in the standardised units the penalty works in (0 where nothing varies)
    beta, iterations, converged = _newton(z, y, float(l2), np.where(constant, 0.0, w0 * scale))
    raw = np.where(constant, w0, beta[1:] / scale)
    # the intercept in raw units: the centring undone, and a constant signal's prior
    # contribution (the same on every calibration brief) taken out of it
    intercept = beta[0] - float(np.sum(np.where(constant, w0 * mean, beta[1:] * mean / scale)))
    if not (np.all(np.isfinite(raw)) and math.isfinite(intercept)):
        raise ValueError(f"the fit did not give finite weights ({raw}, {intercept}); raise l2")
    weights = {k: float(w) + 0.0 for k, w in zip(SIGNALS, raw, strict=True)}  # no -0.0
    theta = float(-intercept) + 0.0
    routes = [decide(row, weights, theta)[0] for row in _rows_of(x)]
    accuracy = sum(r == label for r, label in zip(routes, labels, strict=True)) / len(labels)
    return FittedRouter(
        weights=weights,
        theta=theta,
        l2=float(l2),
        seed=int(seed),
        n=len(labels),
        n_per_label=counts,
        train_selection_accuracy=float(accuracy),
        tasks=tuple(sorted(set(tasks))),
        iterations=iterations,
        converged=converged,
    )


def _rows_of(x: np.ndarray) -> list[dict[str, float]]:
    return [dict(zip(SIGNALS, map(float, row), strict=True)) for row in x]


# -- frames of signals --------------------------------------------------------------------
def signal_rows(frame: pd.DataFrame) -> list[dict[str, float]]:
    """The signals of each row of ``frame``: its columns named after :data:`SIGNALS`, or
    else its ``route_signals`` JSON (a run file's)."""
    if all(k in frame.columns for k in SIGNALS):
        return [
            {k: float(row[k]) for k in SIGNALS} for row in frame[list(SIGNALS)].to_dict("records")
        ]
    if "route_signals" in frame.columns:
        return [{k: float(v) for k, v in json.loads(s).items()} for s in frame["route_signals"]]
    raise ValueError(
        f"no signals in the frame: it needs the columns {list(SIGNALS)} "
        "(`tersetalk topology-signals`) or route_signals (a routed run)"
    )


def _usable(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a fit can learn from: no error, and a label (from the task if absent)."""
    if "task" not in frame.columns:
        raise ValueError("the frame has no task column: leave-one-task-out and labels need it")
    ok = frame[frame["error"].isna()] if "error" in frame.columns else frame
    if "label" not in ok.columns:
        from tersetalk.topology.metrics import label_of

        ok = ok.assign(label=[label_of(t) for t in ok["task"]])
    return ok


def fit_frame(frame: pd.DataFrame, *, l2: float = 1.0, seed: int = 0) -> FittedRouter:
    """:func:`fit_router` on a frame of signals (``tersetalk topology-signals``' rows of
    one system; rows with an error are left out, and counted in ``extra``)."""
    ok = _usable(frame)
    fit = fit_router(signal_rows(ok), [str(v) for v in ok["label"]], l2=l2, seed=seed,
                     tasks=[str(t) for t in ok["task"]])  # fmt: skip
    if len(ok) < len(frame):
        extra = {**fit.extra, "rows_with_error_left_out": len(frame) - len(ok)}
        return dataclasses.replace(fit, extra=extra)
    return fit


def _one_system(frame: pd.DataFrame) -> None:
    if "system" in frame.columns and frame["system"].nunique() > 1:
        raise ValueError(
            f"the frame mixes systems {sorted(frame['system'].unique())}: fit one at a time"
        )


def leave_one_task_out_fitted(
    frame: pd.DataFrame, *, l2: float = 1.0, seed: int = 0
) -> pd.DataFrame:
    """For each task: fit on the other tasks' rows, score the held-out task's rows.

    One row per held-out task (sorted): ``held_out``, ``n`` (its rows),
    ``selection_accuracy`` (the fitted rule on them), ``train_selection_accuracy``,
    ``theta``, ``weights`` (JSON) and ``note`` (why a fit was impossible, e.g. the other
    tasks hold one label only; its numbers are then NaN). Rows with an error are left out.
    """
    _one_system(frame)
    ok = _usable(frame)
    columns = ["held_out", "n", "selection_accuracy", "train_selection_accuracy", "theta",
               "weights", "note"]  # fmt: skip
    rows = []
    for task in sorted(ok["task"].astype(str).unique()):
        train, test = ok[ok["task"].astype(str) != task], ok[ok["task"].astype(str) == task]
        try:
            fit = fit_router(signal_rows(train), [str(v) for v in train["label"]], l2=l2,
                             seed=seed, tasks=[str(t) for t in train["task"]])  # fmt: skip
        except ValueError as exc:
            rows.append({"held_out": task, "n": len(test), "selection_accuracy": math.nan,
                         "train_selection_accuracy": math.nan, "theta": math.nan,
                         "weights": "{}", "note": str(exc)})  # fmt: skip
            continue
        routes = [fit.route(s) for s in signal_rows(test)]
        hits = [r == str(label) for r, label in zip(routes, test["label"], strict=True)]
        rows.append(
            {
                "held_out": task,
                "n": len(test),
                "selection_accuracy": float(np.mean(hits)) if hits else math.nan,
                "train_selection_accuracy": fit.train_selection_accuracy,
                "theta": fit.theta,
                "weights": json.dumps(fit.weights),
                "note": "",
            }
        )
    return pd.DataFrame(rows, columns=columns)


# -- the router file ----------------------------------------------------------------------
_HEADER = """\
# The fitted topology router (`tersetalk topology-fit`).
# Per routed system: the route is chain iff sum(weight * signal) >= theta, with the
# signals counted from the Manager's brief (tersetalk.topology.router). The weights are in
# raw signal units; a variant reads them with `weights_from: <this file>`.
"""


def write_router_yaml(
    path: str | Path, fits: Mapping[str, FittedRouter], meta: Mapping[str, Any] | None = None
) -> Path:
    """Write the router file: ``systems.<name>`` per fit (sorted), ``meta`` beside them."""
    import yaml

    from tersetalk.core.io import write_text_atomic

    if not fits:
        raise ValueError("no fitted routers to write")
    doc = {"meta": dict(meta or {}), "systems": {k: fits[k].as_dict() for k in sorted(fits)}}
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return write_text_atomic(_HEADER + body, path)


def _number(path: Path, key: str, value: object, *, finite: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RouterFileError(f"router file {path}: key {key} must be a number, got {value!r}")
    if finite and not math.isfinite(value):
        raise RouterFileError(f"router file {path}: key {key} must be finite, got {value!r}")
    return float(value)


def _count(path: Path, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RouterFileError(
            f"router file {path}: key {key} must be a count (>= 0), got {value!r}"
        )
    return value


def _entry(path: Path, name: str, entry: object) -> FittedRouter:
    at = f"systems.{name}"
    if not isinstance(entry, dict):
        raise RouterFileError(f"router file {path}: key {at} must be a mapping, got {entry!r}")
    required = ("weights", "theta", "l2", "seed", "n", "n_per_label", "train_selection_accuracy")
    for key in required:
        if key not in entry:
            raise RouterFileError(f"router file {path}: key {at}.{key} is missing")
    weights = entry["weights"]
    if not isinstance(weights, dict):
        raise RouterFileError(f"router file {path}: key {at}.weights must be a mapping")
    missing = [k for k in SIGNALS if k not in weights]
    unknown = sorted(set(weights) - set(SIGNALS))
    if missing or unknown:
        raise RouterFileError(
            f"router file {path}: key {at}.weights must give each of {list(SIGNALS)} "
            f"(missing {missing}, unknown {unknown})"
        )
    labels = entry["n_per_label"]
    if not isinstance(labels, dict) or sorted(labels) != sorted(LABELS):
        raise RouterFileError(
            f"router file {path}: key {at}.n_per_label must give {list(LABELS)}, got {labels!r}"
        )
    accuracy = _number(path, f"{at}.train_selection_accuracy", entry["train_selection_accuracy"])
    if not 0.0 <= accuracy <= 1.0:
        raise RouterFileError(
            f"router file {path}: key {at}.train_selection_accuracy must be in [0, 1], "
            f"got {accuracy}"
        )
    tasks = entry.get("tasks", [])
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise RouterFileError(f"router file {path}: key {at}.tasks must be a list of task names")
    l2 = _number(path, f"{at}.l2", entry["l2"])
    model = entry.get("model")
    if model is not None and model != f"logistic regression, L2={l2:g}":
        raise RouterFileError(
            f"router file {path}: key {at}.model is {model!r}; this reader knows "
            f"'logistic regression, L2={l2:g}'"
        )
    extra = entry.get("extra", {})
    return FittedRouter(
        weights={k: _number(path, f"{at}.weights.{k}", weights[k]) for k in SIGNALS},
        theta=_number(path, f"{at}.theta", entry["theta"]),
        l2=l2,
        seed=_count(path, f"{at}.seed", entry["seed"]),
        n=_count(path, f"{at}.n", entry["n"]),
        n_per_label={k: _count(path, f"{at}.n_per_label.{k}", labels[k]) for k in LABELS},
        train_selection_accuracy=accuracy,
        tasks=tuple(tasks),
        iterations=_count(path, f"{at}.iterations", entry.get("iterations", 0)),
        converged=bool(entry.get("converged", True)),
        extra=dict(extra) if isinstance(extra, dict) else {},
    )


def read_router_yaml(path: str | Path) -> tuple[dict[str, FittedRouter], dict[str, Any]]:
    """``(fits by system, meta)`` of a router file; a :class:`RouterFileError` naming the
    file and the key when it cannot be read or a value is wrong."""
    import yaml

    from tersetalk.core.io import load_yaml_text

    path = Path(path)
    try:
        doc = load_yaml_text(
            path.read_text(encoding="utf-8"), f"router file {path}", RouterFileError
        )
    except FileNotFoundError:
        raise RouterFileError(
            f"router file {path} does not exist; `tersetalk topology-fit` writes it"
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RouterFileError(f"router file {path}: cannot be read: {exc}") from None
    if not isinstance(doc, dict):
        raise RouterFileError(f"router file {path}: must be a mapping with a key systems")
    systems = doc.get("systems")
    if not isinstance(systems, dict) or not systems:
        raise RouterFileError(
            f"router file {path}: key systems must map each routed system to its fit"
        )
    meta = doc.get("meta", {})
    if not isinstance(meta, dict):
        raise RouterFileError(f"router file {path}: key meta must be a mapping")
    return {str(k): _entry(path, str(k), v) for k, v in systems.items()}, meta


def selection_from_signals(
    frame: pd.DataFrame, fits: Mapping[str, FittedRouter] | None = None
) -> pd.DataFrame:
    """Selection accuracy of briefs' signals (``topology-signals`` rows), without a run.

    One row per (system, variant, router, task) and per (system, variant, router) over
    all tasks (``task`` "all"): ``router`` is ``variant`` (the variant's own rule, as
    recorded in ``route_rule``) or ``fitted`` (the system's router in ``fits`` replayed
    on the same signals); ``k`` right of ``n`` with its 95% Wilson interval. Error rows
    count as wrong choices, as in a run.
    """
    from tersetalk.core.intervals import wilson

    rows = []
    for (system, variant), g in frame.groupby(["system", "variant"], sort=True):
        routers = {"variant": g["route_rule"].astype("string")}
        if fits and system in fits:
            fit = fits[system]
            routers["fitted"] = pd.Series(
                [
                    fit.route(json.loads(sig)) if isinstance(sig, str) and sig else "error"
                    for sig in g["route_signals"]
                ],
                index=g.index,
                dtype="string",
            )
        for router, routes in routers.items():
            right = (routes == g["label"].astype("string")).fillna(False)
            parts = [("all", right)] + [(t, right[g["task"] == t]) for t in sorted(set(g["task"]))]
            for task, ok in parts:
                n, k = len(ok), int(ok.sum())
                low, high = wilson(k / n, n, continuity=True) if n else (math.nan, math.nan)
                rows.append(
                    {
                        "system": system,
                        "variant": variant,
                        "router": router,
                        "task": task,
                        "n": n,
                        "k": k,
                        "selection_accuracy": k / n if n else math.nan,
                        "ci_low": low,
                        "ci_high": high,
                    }  # fmt: skip
                )
    return pd.DataFrame(rows)
