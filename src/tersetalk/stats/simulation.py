"""A simulation study of the statistics: do the verdicts and intervals keep their promises?

The paper's claims rest on a non-inferiority verdict (:mod:`tersetalk.stats.noninferiority`)
and on intervals: Wilson for one accuracy, with and without the continuity correction
(:mod:`tersetalk.core.intervals`), score intervals for a paired difference of accuracies
(:mod:`tersetalk.stats.paired_proportions`), the t and studentized bootstrap intervals
(and the paired percentile bootstrap beside them) for continuous scores, and the
delete-one-task jackknife t interval (and the cluster bootstrap beside it) with the task
as the unit (:mod:`tersetalk.stats.cluster`). Each one is run here, as the workflow calls
it, on data drawn from a known truth, many times per grid point, and the table says how
often it was right. No model is involved.

Three studies (config section ``stats_sim``):

``binary`` -- paired 0/1 outcomes (two systems, the same examples)
    Per grid point: the control's accuracy ``p_C`` (``base_rates``), the number of
    examples ``n`` and a discordance level ``s`` (``discordance``), in two scenarios: the
    true difference ``d = p_T - p_C`` is exactly ``-margin`` (``at_margin``: every
    "non-inferior" verdict is a type I error) or 0 (``no_difference``: the share of
    "non-inferior" verdicts is the power). The four cells of the 2x2 table (both right
    ``a``, only the treatment right ``b``, only the control right ``c``, both wrong) follow
    from ``p_C``, ``d`` and the discordance ``q = P(the arms differ) = b + c``:
    ``b = (q + d) / 2``, ``c = (q - d) / 2``. The feasible ``q`` run from ``|d|`` (the
    arms differ only where they must) upward; independent arms give
    ``q_ind = p_T (1 - p_C) + p_C (1 - p_T)``, which is always feasible, so the level
    ``s`` in [0, 1] sets ``q = |d| + s (q_ind - |d|)``: 0 is as concordant as the truth
    allows, 1 is independent arms (at ``d = 0``, ``s = 1 - phi``, the arms' correlation).
    Real systems on the same examples are strongly concordant, so low levels matter most.
    A point with ``p_T`` outside [0, 1] (``p_C < margin`` at the margin) cannot exist:
    its rows say so in ``note`` and hold no estimate. Each replicate draws the table from
    the multinomial, lays the examples out in cell order (the resampling does not depend
    on the order) and computes the verdict, Wilson for each arm without and with the
    continuity correction (Newcombe's methods 3 and 4; the corrected one decides the
    floor rule), the Tango interval of ``d`` with the verdict's continuity correction of
    half a pair (the interval the verdict inverts) and without it, Newcombe's interval
    and the paired percentile bootstrap interval of ``d`` (reported, never deciding: with
    few discordant pairs it has next to no width).

``continuous`` -- paired scores in [0, 1] (F1-like)
    Each arm's score is Beta with mean ``mu`` (the control's: ``means``; the treatment's
    ``mu + d``) and concentration ``a + b = concentration``; the two arms are joined by a
    Gaussian copula with correlation ``rho`` (``correlations``; the scores' own
    correlation is a little lower). The true mean difference is exactly ``d``. Per
    replicate: the verdict, the interval it decides with (at each end the more
    conservative of the t and the studentized bootstrap bound,
    :func:`tersetalk.stats.noninferiority.conservative_mean_interval`) and the paired
    percentile bootstrap interval of ``d``.

``router`` -- agreement of a routing policy with a per-example oracle, tasks as clusters
    ``n_tasks`` tasks of ``examples_per_task`` examples. Each example's oracle label is a
    tie (share ``tie_share``: any topology is right) or the cheapest correct topology
    (star or chain, the star's share drawn per task from U(0.2, 0.8)); the policy picks
    the oracle's topology on a non-tied example with probability ``s_k``, a per-task
    rate drawn from a Beta so that the task's true agreement ``a_k = tie_share +
    (1 - tie_share) s_k`` has mean ``agreement`` and standard deviation ``task_sd`` over
    tasks (0: every task the same), and picks at random on a tie. Agreement is computed
    from the drawn labels and choices. Reported: the coverage of the delete-one-task
    jackknife t interval (:func:`tersetalk.stats.cluster.cluster_t_interval` with
    ``share=True``, k - 1 degrees of freedom) and of the cluster bootstrap interval
    (tasks resampled) of the mean agreement over the population of tasks
    (``agreement``), of the per-task Wilson intervals of each ``a_k``, and, as a
    contrast,
    of one Wilson interval over all examples pooled (which treats examples as independent
    and under-covers when tasks differ). With few tasks the cluster bootstrap under-covers
    too: a percentile interval over 3 resampled tasks cannot be wide enough; the t
    quantile on k - 1 degrees of freedom is what makes the jackknife interval honest.

Per grid point and quantity, one row: ``estimate`` (a share over ``replicates``),
``mcse`` (its Monte-Carlo standard error, ``sqrt(p (1 - p) / R)``), ``mcse_nominal`` (the
same at the nominal value: ``alpha`` or ``confidence``), ``mean_width`` of the interval,
and the acceptance: a type I error must stay at or below ``alpha + 2 mcse_nominal``, an
interval's coverage at or above ``coverage_floor`` (``threshold``, ``meets``);
``within_mc`` says whether a coverage is within 2 ``mcse_nominal`` of ``confidence``
(with few replicates 0.94 is inside the noise of a 0.95 interval). Across many
grid points a few excesses of 2 standard errors are expected by chance alone (about 2.5%
of points at a rate exactly nominal). The summary adds each quantity's ``role`` (which
interval decides, which is reported, which is a contrast) and ``passes``.

Deterministic: each grid point draws from its own ``numpy`` generator seeded by the
study's seed and the point's parameters (so adding a value to the grid leaves the other
points' numbers as they were), and each replicate's bootstrap seed comes from that
generator. Points can run in worker processes (``workers``); the table is the same.
"""

from __future__ import annotations

import logging
import math
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import pandas as pd

log = logging.getLogger("tersetalk.stats.simulation")

__all__ = [
    "DEFAULTS",
    "QUANTITIES",
    "SCENARIOS",
    "SimSettings",
    "binary_cells",
    "grid_points",
    "run_simulation",
    "settings_from_config",
    "summarise",
    "summary_markdown",
]

#: the section's defaults (config/config.yaml and the schema say the same)
DEFAULTS: dict = {
    "seed": 0,
    "replicates": 100,
    "n_resamples": 500,
    "margin": None,  # None: evaluation.margin
    "alpha": None,  # None: evaluation.alpha
    "confidence": 0.95,
    "coverage_floor": 0.94,
    "binary": {
        "base_rates": [0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9],
        "n": [10, 30, 100, 300, 1000],
        "discordance": [0.1, 0.4, 1.0],
    },
    "continuous": {
        "means": [0.1, 0.5, 0.9],
        "n": [10, 30, 100, 300, 1000],
        "correlations": [0.5, 0.9],
        "concentration": 2.0,
    },
    "router": {
        "n_tasks": [3, 6, 12],
        "examples_per_task": [30, 100],
        "agreement": [0.6, 0.85],
        "task_sd": [0.0, 0.1],
        "tie_share": 0.2,
    },
}

#: the true difference of each scenario, as a multiple of the margin
SCENARIOS: dict[str, float] = {"at_margin": -1.0, "no_difference": 0.0}

#: quantity -> (what it is, kind: "type1" | "coverage" | "share")
QUANTITIES: dict[str, tuple[str, str]] = {
    "type1_error": ("share of 'non-inferior' verdicts when the true difference is -margin",
                    "type1"),
    "power": ("share of 'non-inferior' verdicts when the true difference is 0", "share"),
    "inconclusive": ("share of 'inconclusive' verdicts", "share"),
    "inferior": ("share of 'inferior' verdicts", "share"),
    "coverage_wilson_control": ("Wilson interval of the control's accuracy", "coverage"),
    "coverage_wilson_treatment": ("Wilson interval of the treatment's accuracy", "coverage"),
    "coverage_wilson_cc_control": ("continuity-corrected Wilson interval (Newcombe's method "
                                   "4) of the control's accuracy", "coverage"),
    "coverage_wilson_cc_treatment": ("continuity-corrected Wilson interval of the "
                                     "treatment's accuracy", "coverage"),
    "coverage_tango_cc": ("Tango score interval with the verdict's continuity correction "
                          "(1/2 pair) of the paired difference", "coverage"),
    "coverage_tango": ("Tango score interval (no correction) of the paired difference",
                       "coverage"),
    "coverage_newcombe": ("Newcombe hybrid score interval of the paired difference",
                          "coverage"),
    "coverage_bootstrap": ("paired percentile bootstrap interval of the mean difference",
                           "coverage"),
    "coverage_t_studentized": ("the more conservative of the t and the studentized "
                               "bootstrap interval of the mean difference (the verdict's)",
                               "coverage"),
    "coverage_cluster_bootstrap": ("cluster bootstrap (tasks resampled) of the mean "
                                   "agreement over tasks", "coverage"),
    "coverage_cluster_t": ("delete-one-task jackknife t interval (k - 1 df, widened by its "
                           "score form for a share) of the mean agreement over tasks",
                           "coverage"),
    "coverage_wilson_task": ("per-task continuity-corrected Wilson interval of the task's "
                             "agreement", "coverage"),
    "coverage_wilson_pooled": ("one Wilson interval over all examples pooled (ignores the "
                               "tasks), of the mean agreement over tasks", "coverage"),
}  # fmt: skip

#: what each judged quantity is for in the workflow (the summary's ``role``)
ROLES: dict[str, str] = {
    "type1_error": "the verdict",
    "power": "the verdict",
    "coverage_wilson_control": "report (uncorrected Wilson)",
    "coverage_wilson_treatment": "report (uncorrected Wilson)",
    "coverage_wilson_cc_control": "decides (floor rule); report",
    "coverage_wilson_cc_treatment": "report",
    "coverage_tango_cc": "decides (binary verdict); report",
    "coverage_tango": "beside the verdict",
    "coverage_newcombe": "beside the verdict",
    "coverage_bootstrap": "beside the verdict, never decides",
    "coverage_t_studentized": "decides (continuous verdict); report",
    "coverage_cluster_t": "for task-level intervals",
    "coverage_cluster_bootstrap": "contrast (under-covers with few tasks)",
    "coverage_wilson_task": "report (one task)",
    "coverage_wilson_pooled": "contrast (ignores tasks)",
}

#: the discordance levels' names in figures and summaries (others print as numbers)
LEVEL_NAMES = {0.1: "low", 0.4: "medium", 1.0: "high (independent)"}


def _config_error(message: str) -> Exception:
    from tersetalk.core.configio import ConfigError

    return ConfigError(message)


# ---- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SimSettings:
    """The validated ``stats_sim`` section, with margin and alpha resolved."""

    seed: int
    replicates: int
    n_resamples: int
    margin: float
    alpha: float
    confidence: float
    coverage_floor: float
    base_rates: tuple[float, ...]
    n: tuple[int, ...]
    discordance: tuple[float, ...]
    means: tuple[float, ...]
    continuous_n: tuple[int, ...]
    correlations: tuple[float, ...]
    concentration: float
    n_tasks: tuple[int, ...]
    examples_per_task: tuple[int, ...]
    agreement: tuple[float, ...]
    task_sd: tuple[float, ...]
    tie_share: float
    studies: tuple[str, ...] = field(default=("binary", "continuous", "router"))

    def as_dict(self) -> dict:
        return asdict(self)


def _merge(defaults: Mapping, given: Mapping, where: str) -> dict:
    out = dict(defaults)
    for key, value in given.items():
        if key not in defaults:
            known = ", ".join(sorted(defaults))
            raise _config_error(f"config key '{where}.{key}' is unknown; known keys: {known}")
        if isinstance(defaults[key], Mapping):
            if not isinstance(value, Mapping):
                raise _config_error(f"config key '{where}.{key}' must be a mapping")
            out[key] = _merge(defaults[key], value, f"{where}.{key}")
        else:
            out[key] = value
    return out


def _number(value, key: str, *, low: float, high: float, closed=(True, True)) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _config_error(f"config key '{key}' must be a finite number, got {value!r}")
    lo_ok = value >= low if closed[0] else value > low
    hi_ok = value <= high if closed[1] else value < high
    if not (lo_ok and hi_ok):
        brackets = ("[" if closed[0] else "(") + f"{low:g}, {high:g}" + ("]" if closed[1] else ")")
        raise _config_error(f"config key '{key}' must lie in {brackets}, got {value!r}")
    return float(value)


def _integer(value, key: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise _config_error(f"config key '{key}' must be an integer >= {low}, got {value!r}")
    return int(value)


def _values(value, key: str, check: Callable) -> tuple:
    if not isinstance(value, (list, tuple)) or not value:
        raise _config_error(f"config key '{key}' must be a non-empty list, got {value!r}")
    items = tuple(check(v, f"{key}[{i}]") for i, v in enumerate(value))
    if len(set(items)) != len(items):
        raise _config_error(f"config key '{key}' lists a value twice: {list(value)!r}")
    return items


def settings_from_config(config: Mapping) -> SimSettings:
    """The study's settings from a config holding a ``stats_sim`` section (and, for the
    margin and alpha it leaves at null, an ``evaluation`` section). Every value is
    checked here too (the CLI can be called without the workflow's schema check); a bad
    one raises :class:`tersetalk.pipeline.config.ConfigError` naming the key."""
    section = config.get("stats_sim") or {}
    if not isinstance(section, Mapping):
        raise _config_error("config key 'stats_sim' must be a mapping")
    s = _merge(DEFAULTS, section, "stats_sim")
    evaluation = config.get("evaluation") or {}
    margin = s["margin"] if s["margin"] is not None else evaluation.get("margin", 0.02)
    alpha = s["alpha"] if s["alpha"] is not None else evaluation.get("alpha", 0.05)
    k = "stats_sim"
    prob = lambda v, key: _number(v, key, low=0.0, high=1.0, closed=(False, False))  # noqa: E731
    b, c, r = s["binary"], s["continuous"], s["router"]
    settings = SimSettings(
        seed=_integer(s["seed"], f"{k}.seed", low=0),
        replicates=_integer(s["replicates"], f"{k}.replicates", low=1),
        n_resamples=_integer(s["n_resamples"], f"{k}.n_resamples", low=10),
        margin=_number(margin, f"{k}.margin", low=0.0, high=0.5, closed=(False, False)),
        alpha=_number(alpha, f"{k}.alpha", low=0.0, high=0.5, closed=(False, False)),
        confidence=prob(s["confidence"], f"{k}.confidence"),
        coverage_floor=prob(s["coverage_floor"], f"{k}.coverage_floor"),
        base_rates=_values(b["base_rates"], f"{k}.binary.base_rates", prob),
        n=_values(b["n"], f"{k}.binary.n", lambda v, key: _integer(v, key, low=2)),
        discordance=_values(
            b["discordance"], f"{k}.binary.discordance",
            lambda v, key: _number(v, key, low=0.0, high=1.0),
        ),
        means=_values(c["means"], f"{k}.continuous.means", prob),
        continuous_n=_values(c["n"], f"{k}.continuous.n", lambda v, key: _integer(v, key, low=2)),
        correlations=_values(
            c["correlations"], f"{k}.continuous.correlations",
            lambda v, key: _number(v, key, low=-1.0, high=1.0, closed=(False, False)),
        ),
        concentration=_number(c["concentration"], f"{k}.continuous.concentration", low=0.0,
                              high=1e6, closed=(False, True)),
        n_tasks=_values(r["n_tasks"], f"{k}.router.n_tasks",
                        lambda v, key: _integer(v, key, low=2)),
        examples_per_task=_values(r["examples_per_task"], f"{k}.router.examples_per_task",
                                  lambda v, key: _integer(v, key, low=1)),
        agreement=_values(r["agreement"], f"{k}.router.agreement", prob),
        task_sd=_values(r["task_sd"], f"{k}.router.task_sd",
                        lambda v, key: _number(v, key, low=0.0, high=0.5)),
        tie_share=_number(r["tie_share"], f"{k}.router.tie_share", low=0.0, high=1.0,
                          closed=(True, False)),
    )  # fmt: skip
    for a in settings.agreement:
        if a <= settings.tie_share:
            raise _config_error(
                f"config key 'stats_sim.router.agreement': {a:g} is not above tie_share "
                f"{settings.tie_share:g} (a tie agrees whatever the policy picks, so agreement "
                "is at least the tie share); raise the agreement or lower tie_share"
            )
        for sd in settings.task_sd:
            _router_beta(a, sd, settings.tie_share)  # raises when no Beta has these moments
    return settings


def _router_beta(agreement: float, sd: float, tie: float) -> tuple[float, float] | None:
    """Beta parameters of the per-task rate on non-tied examples, or None for sd = 0."""
    mu = (agreement - tie) / (1.0 - tie)
    sigma = sd / (1.0 - tie)
    if sigma == 0.0:
        return None
    var_max = mu * (1.0 - mu)
    if sigma * sigma >= var_max:
        raise _config_error(
            f"config key 'stats_sim.router.task_sd': {sd:g} is too large for agreement "
            f"{agreement:g} with tie_share {tie:g} (a rate in [0, 1] with that mean has a "
            f"standard deviation below {math.sqrt(var_max) * (1 - tie):.3g})"
        )
    kappa = var_max / (sigma * sigma) - 1.0
    return mu * kappa, (1.0 - mu) * kappa


# ---- the truth of a binary point ---------------------------------------------------------


def binary_cells(p_c: float, d: float, level: float) -> tuple[np.ndarray, float] | None:
    """``(cell probabilities (a, b, c, d), discordance q)`` of the paired table with
    control accuracy ``p_c``, true difference ``d`` and discordance level ``level`` (module
    docstring); None when ``p_c + d`` is not a probability."""
    p_t = p_c + d
    if p_t < 0.0 or p_t > 1.0:
        return None
    q_ind = p_t * (1.0 - p_c) + p_c * (1.0 - p_t)
    q = abs(d) + level * (q_ind - abs(d))
    p_b, p_c_only = (q + d) / 2.0, (q - d) / 2.0
    p_a = p_t - p_b
    p_d = 1.0 - p_a - p_b - p_c_only
    cells = np.array([p_a, p_b, p_c_only, p_d])
    if np.any(cells < -1e-12):  # not reachable for level in [0, 1]: a guard
        raise ValueError(f"infeasible table {cells} for p_C={p_c}, d={d}, level={level}")
    cells = np.clip(cells, 0.0, None)
    return cells / cells.sum(), float(q)


# ---- grid --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One grid point: its study and parameters (unused ones NaN / 0)."""

    study: str
    scenario: str = ""
    base_rate: float = float("nan")
    n: int = 0
    discordance_level: float = float("nan")
    correlation: float = float("nan")
    n_tasks: int = 0
    examples_per_task: int = 0
    agreement: float = float("nan")
    task_sd: float = float("nan")

    def key(self) -> str:
        return "|".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))


def grid_points(s: SimSettings) -> list[Point]:
    """Every grid point of the studies in ``s.studies``, in table order."""
    pts: list[Point] = []
    if "binary" in s.studies:
        for p in s.base_rates:
            for n in s.n:
                for lv in s.discordance:
                    for sc in SCENARIOS:
                        pts.append(Point("binary", sc, p, n, discordance_level=lv))
    if "continuous" in s.studies:
        for mu in s.means:
            for n in s.continuous_n:
                for rho in s.correlations:
                    for sc in SCENARIOS:
                        pts.append(Point("continuous", sc, mu, n, correlation=rho))
    if "router" in s.studies:
        for k in s.n_tasks:
            for m in s.examples_per_task:
                for a in s.agreement:
                    for sd in s.task_sd:
                        pts.append(Point("router", "", n=k * m, n_tasks=k, examples_per_task=m,
                                         agreement=a, task_sd=sd))  # fmt: skip
    return pts


def _rng(seed: int, point: Point) -> np.random.Generator:
    """The point's own generator: the study's seed and a checksum of its parameters."""
    return np.random.default_rng([seed, zlib.crc32(point.key().encode())])


# ---- replicate bookkeeping ---------------------------------------------------------------


class _Tally:
    """Hit counts and interval widths per quantity over a point's replicates."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.trials: dict[str, int] = {}
        self.width: dict[str, float] = {}
        self.undefined: dict[str, int] = {}

    def share(self, name: str, hit: bool) -> None:
        self.hits[name] = self.hits.get(name, 0) + int(hit)
        self.trials[name] = self.trials.get(name, 0) + 1

    def cover(self, name: str, low: float, high: float, truth: float) -> None:
        if not (math.isfinite(low) and math.isfinite(high)):
            self.undefined[name] = self.undefined.get(name, 0) + 1
            self.share(name, False)  # an interval that is not there covers nothing
            return
        self.share(name, low - 1e-12 <= truth <= high + 1e-12)
        self.width[name] = self.width.get(name, 0.0) + (high - low)


def _verdicts(tally: _Tally, verdict: str, scenario: str) -> None:
    tally.share("type1_error" if scenario == "at_margin" else "power", verdict == "non-inferior")
    tally.share("inconclusive", verdict == "inconclusive")
    tally.share("inferior", verdict == "inferior")


def _binary_point(pt: Point, s: SimSettings) -> tuple[_Tally, dict]:
    from tersetalk.core.intervals import wilson
    from tersetalk.stats.bootstrap import paired_bootstrap
    from tersetalk.stats.noninferiority import CONTINUITY, noninferiority
    from tersetalk.stats.paired_proportions import paired_difference_interval

    d = SCENARIOS[pt.scenario] * s.margin
    truth = binary_cells(pt.base_rate, d, pt.discordance_level)
    tally = _Tally()
    if truth is None:
        return tally, {
            "true_diff": d,
            "note": f"infeasible: the treatment's accuracy p_C + d = {pt.base_rate + d:g} is "
            "not a probability (no estimate)",
        }
    probs, q = truth
    p_t = pt.base_rate + d
    rng = _rng(s.seed, pt)
    counts = rng.multinomial(pt.n, probs, size=s.replicates)
    seeds = rng.integers(0, 2**31 - 1, size=s.replicates)
    cache: dict[tuple, tuple] = {}
    for r in range(s.replicates):
        a, b, c, dd = (int(x) for x in counts[r])
        t = np.repeat([1.0, 1.0, 0.0, 0.0], [a, b, c, dd])
        ctl = np.repeat([1.0, 0.0, 1.0, 0.0], [a, b, c, dd])
        ni = noninferiority(t, ctl, margin=s.margin, alpha=s.alpha, n_resamples=s.n_resamples,
                            seed=int(seeds[r]))  # fmt: skip
        _verdicts(tally, ni.verdict, pt.scenario)
        key = (a, b, c, dd)
        if key not in cache:  # closed-form intervals depend on the table only
            cache[key] = (
                wilson((a + c) / pt.n, pt.n, s.confidence),
                wilson((a + b) / pt.n, pt.n, s.confidence),
                wilson((a + c) / pt.n, pt.n, s.confidence, continuity=True),
                wilson((a + b) / pt.n, pt.n, s.confidence, continuity=True),
                paired_difference_interval(t, ctl, confidence=s.confidence, method="tango",
                                           continuity=CONTINUITY),
                paired_difference_interval(t, ctl, confidence=s.confidence, method="tango"),
                paired_difference_interval(t, ctl, confidence=s.confidence, method="newcombe"),
            )  # fmt: skip
        w_c, w_t, wcc_c, wcc_t, tango_cc, tango, newcombe = cache[key]
        tally.cover("coverage_wilson_control", *w_c, pt.base_rate)
        tally.cover("coverage_wilson_treatment", *w_t, p_t)
        tally.cover("coverage_wilson_cc_control", *wcc_c, pt.base_rate)
        tally.cover("coverage_wilson_cc_treatment", *wcc_t, p_t)
        tally.cover("coverage_tango_cc", *tango_cc, d)
        tally.cover("coverage_tango", *tango, d)
        tally.cover("coverage_newcombe", *newcombe, d)
        boot = paired_bootstrap(t, ctl, n_resamples=s.n_resamples, seed=int(seeds[r]),
                                confidence=s.confidence)  # fmt: skip
        tally.cover("coverage_bootstrap", boot.ci_low, boot.ci_high, d)
    return tally, {"true_diff": d, "discordance": q, "note": ""}


def _continuous_point(pt: Point, s: SimSettings) -> tuple[_Tally, dict]:
    from scipy import stats as sps

    from tersetalk.stats.bootstrap import paired_bootstrap
    from tersetalk.stats.noninferiority import conservative_mean_interval, noninferiority

    d = SCENARIOS[pt.scenario] * s.margin
    mu_c, mu_t = pt.base_rate, pt.base_rate + d
    tally = _Tally()
    if not (0.0 < mu_t < 1.0):
        return tally, {
            "true_diff": d,
            "note": f"infeasible: the treatment's mean score {mu_t:g} is not inside (0, 1) "
            "(no estimate)",
        }
    kappa, rho = s.concentration, pt.correlation
    rng = _rng(s.seed, pt)
    z = rng.standard_normal((s.replicates, pt.n, 2))
    z_t = rho * z[..., 0] + math.sqrt(1.0 - rho * rho) * z[..., 1]
    ctl_all = sps.beta.ppf(sps.norm.cdf(z[..., 0]), mu_c * kappa, (1 - mu_c) * kappa)
    t_all = sps.beta.ppf(sps.norm.cdf(z_t), mu_t * kappa, (1 - mu_t) * kappa)
    seeds = rng.integers(0, 2**31 - 1, size=s.replicates)
    for r in range(s.replicates):
        t, ctl = t_all[r], ctl_all[r]
        ni = noninferiority(t, ctl, margin=s.margin, alpha=s.alpha, n_resamples=s.n_resamples,
                            seed=int(seeds[r]))  # fmt: skip
        _verdicts(tally, ni.verdict, pt.scenario)
        boot = paired_bootstrap(t, ctl, n_resamples=s.n_resamples, seed=int(seeds[r]),
                                confidence=s.confidence)  # fmt: skip
        tally.cover("coverage_bootstrap", boot.ci_low, boot.ci_high, d)
        both = conservative_mean_interval(t - ctl, s.confidence, n_resamples=s.n_resamples,
                                          seed=int(seeds[r]))  # fmt: skip
        tally.cover("coverage_t_studentized", *both, d)
    return tally, {"true_diff": d, "note": ""}


def _router_point(pt: Point, s: SimSettings) -> tuple[_Tally, dict]:
    from tersetalk.core.intervals import wilson
    from tersetalk.stats.cluster import cluster_bootstrap, cluster_t_interval

    k, m, tie = pt.n_tasks, pt.examples_per_task, s.tie_share
    params = _router_beta(pt.agreement, pt.task_sd, tie)
    mu = (pt.agreement - tie) / (1.0 - tie)
    rng = _rng(s.seed, pt)
    tasks = np.repeat(np.arange(k), m)
    tally = _Tally()
    for _ in range(s.replicates):
        rate = np.full(k, mu) if params is None else rng.beta(*params, size=k)
        star_share = rng.uniform(0.2, 0.8, size=k)
        # oracle label per example: 0 tie, 1 star, 2 chain (the cheapest correct topology)
        u = rng.random(k * m)
        label = np.where(u < tie, 0, np.where(rng.random(k * m) < star_share[tasks], 1, 2))
        right = rng.random(k * m) < rate[tasks]
        choice = np.where(label == 0, 1 + (rng.random(k * m) < 0.5),
                          np.where(right, label, 3 - label))  # fmt: skip
        agree = ((label == 0) | (choice == label)).astype(float)
        truth_task = tie + (1.0 - tie) * rate
        boot_seed = int(rng.integers(0, 2**31 - 1))
        res = cluster_bootstrap(agree, tasks, n_resamples=s.n_resamples, seed=boot_seed,
                                confidence=s.confidence)  # fmt: skip
        low = getattr(res, "low", getattr(res, "ci_low", float("nan")))
        high = getattr(res, "high", getattr(res, "ci_high", float("nan")))
        tally.cover("coverage_cluster_bootstrap", low, high, pt.agreement)
        jack = cluster_t_interval(agree, tasks, confidence=s.confidence, share=True)
        tally.cover("coverage_cluster_t", jack.low, jack.high, pt.agreement)
        per_task = agree.reshape(k, m).mean(axis=1)
        for j in range(k):
            tally.cover("coverage_wilson_task",
                        *wilson(float(per_task[j]), m, s.confidence, continuity=True),
                        float(truth_task[j]))  # fmt: skip
        tally.cover("coverage_wilson_pooled", *wilson(float(agree.mean()), k * m, s.confidence),
                    pt.agreement)  # fmt: skip
    return tally, {"note": ""}


_STUDIES = {"binary": _binary_point, "continuous": _continuous_point, "router": _router_point}

#: every column of the table, in order
COLUMNS = (
    "study", "scenario", "quantity", "base_rate", "true_diff", "n", "discordance_level",
    "discordance", "correlation", "concentration", "n_tasks", "examples_per_task",
    "agreement", "task_sd", "tie_share", "replicates", "trials", "estimate", "mcse",
    "mcse_nominal", "mean_width", "n_undefined", "target", "threshold", "meets", "within_mc",
    "margin",
    "alpha", "confidence", "n_resamples", "seed", "note",
)  # fmt: skip

#: the quantities each study reports, in table order (binary and continuous: per scenario)
_STUDY_QUANTITIES = {
    "binary": ("type1_error", "power", "inconclusive", "inferior", "coverage_wilson_control",
               "coverage_wilson_treatment", "coverage_wilson_cc_control",
               "coverage_wilson_cc_treatment", "coverage_tango_cc", "coverage_tango",
               "coverage_newcombe", "coverage_bootstrap"),
    "continuous": ("type1_error", "power", "inconclusive", "inferior", "coverage_t_studentized",
                   "coverage_bootstrap"),
    "router": ("coverage_cluster_t", "coverage_cluster_bootstrap", "coverage_wilson_task",
               "coverage_wilson_pooled"),
}  # fmt: skip


def _rows(pt: Point, s: SimSettings, tally: _Tally, extra: dict) -> list[dict]:
    rows = []
    for q in _STUDY_QUANTITIES[pt.study]:
        if q == "type1_error" and pt.scenario != "at_margin":
            continue
        if q == "power" and pt.scenario != "no_difference":
            continue
        kind = QUANTITIES[q][1]
        trials = tally.trials.get(q, 0)
        est = tally.hits[q] / trials if trials else float("nan")
        target = {"type1": s.alpha, "coverage": s.confidence}.get(kind, float("nan"))
        nominal_se = math.sqrt(target * (1 - target) / trials) if trials else float("nan")
        if kind == "type1":
            threshold = target + 2.0 * nominal_se
        elif kind == "coverage":
            threshold = s.coverage_floor
        else:
            threshold = float("nan")
        if not trials or kind == "share":
            meets = within = pd.NA
        elif kind == "type1":
            meets = within = bool(est <= threshold)
        else:
            meets = bool(est >= threshold)
            within = bool(est >= target - 2.0 * nominal_se)
        defined = trials - tally.undefined.get(q, 0)
        rows.append({
            "study": pt.study,
            "scenario": pt.scenario,
            "quantity": q,
            "base_rate": pt.base_rate,
            "true_diff": extra.get("true_diff", float("nan")),
            "n": pt.n,
            "discordance_level": pt.discordance_level,
            "discordance": extra.get("discordance", float("nan")),
            "correlation": pt.correlation,
            "concentration": s.concentration if pt.study == "continuous" else float("nan"),
            "n_tasks": pt.n_tasks if pt.study == "router" else pd.NA,
            "examples_per_task": pt.examples_per_task if pt.study == "router" else pd.NA,
            "agreement": pt.agreement,
            "task_sd": pt.task_sd,
            "tie_share": s.tie_share if pt.study == "router" else float("nan"),
            "replicates": s.replicates if trials else 0,
            "trials": trials,
            "estimate": est,
            "mcse": math.sqrt(est * (1 - est) / trials) if trials else float("nan"),
            "mcse_nominal": nominal_se,
            "mean_width": tally.width[q] / defined if defined and q in tally.width else math.nan,
            "n_undefined": tally.undefined.get(q, 0),
            "target": target,
            "threshold": threshold,
            "meets": meets,
            "within_mc": within,
            "margin": s.margin,
            "alpha": s.alpha,
            "confidence": s.confidence,
            "n_resamples": s.n_resamples,
            "seed": s.seed,
            "note": extra.get("note", ""),
        })  # fmt: skip
    return rows


def _simulate_point(job: tuple[Point, SimSettings]) -> list[dict]:
    pt, s = job
    tally, extra = _STUDIES[pt.study](pt, s)
    return _rows(pt, s, tally, extra)


def _frame(rows: Iterable[dict]) -> pd.DataFrame:
    df = pd.DataFrame(list(rows), columns=list(COLUMNS))
    for col in ("n", "replicates", "trials", "n_undefined", "n_resamples", "seed"):
        df[col] = df[col].astype("int64")
    for col in ("n_tasks", "examples_per_task"):
        df[col] = df[col].astype("Int64")
    for col in ("meets", "within_mc"):
        df[col] = df[col].astype("boolean")
    for col in ("study", "scenario", "quantity", "note"):
        df[col] = df[col].astype("string")
    return df


def run_simulation(s: SimSettings, *, workers: int = 1, progress: bool = False) -> pd.DataFrame:
    """The table: one row per grid point and quantity (module docstring), in grid order.

    ``workers`` > 1 runs grid points in that many processes; the rows are the same."""
    pts = grid_points(s)
    jobs = [(pt, s) for pt in pts]
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc="stats-sim grid points", unit="point", file=sys.stderr,
               disable=not progress, mininterval=2.0)  # fmt: skip
    rows: list[dict] = []
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
            for out in pool.map(_simulate_point, jobs, chunksize=1):
                rows.extend(out)
                bar.update(1)
    else:
        for job in jobs:
            rows.extend(_simulate_point(job))
            bar.update(1)
    bar.close()
    return _frame(rows)


# ---- summary -----------------------------------------------------------------------------


def _where(row) -> str:
    """A grid point in words: the parameters of its study."""
    if row["study"] == "router":
        return (f"tasks={row['n_tasks']}, examples/task={row['examples_per_task']}, "
                f"agreement={row['agreement']:g}, task_sd={row['task_sd']:g}")  # fmt: skip
    base = "p_C" if row["study"] == "binary" else "mean_C"
    text = f"{base}={row['base_rate']:g}, n={row['n']}, d={row['true_diff']:+g}"
    if row["study"] == "binary":
        return text + f", discordance={row['discordance']:.3g}"
    return text + f", rho={row['correlation']:g}"


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Per study and quantity with an acceptance rule (type I error, coverage) and the
    power: grid points, the worst value (max type I error, min coverage; max power)
    and where, the threshold there, how many points meet it and which do not."""
    out = []
    for (study, quantity), rows in table.groupby(["study", "quantity"], sort=False):
        kind = QUANTITIES[quantity][1]
        if kind == "share" and quantity != "power":
            continue
        est = rows[rows["trials"] > 0]
        if est.empty:
            continue
        worst_i = est["estimate"].idxmin() if kind == "coverage" else est["estimate"].idxmax()
        worst = est.loc[worst_i]
        judged = est[est["meets"].notna()]
        failing = judged[~judged["meets"].astype(bool)]
        out.append({
            "study": study,
            "quantity": quantity,
            "what": QUANTITIES[quantity][0],
            "role": ROLES.get(quantity, ""),
            "points": int(len(est)),
            "points_infeasible": int(len(rows) - len(est)),
            "worst": "min" if kind == "coverage" else "max",
            "worst_estimate": float(worst["estimate"]),
            "worst_mcse": float(worst["mcse"]),
            "worst_at": _where(worst),
            "mean_estimate": float(est["estimate"].mean()),
            "target": float(worst["target"]),
            "threshold": float(worst["threshold"]),
            "points_meeting": int(judged["meets"].astype(bool).sum()),
            "points_failing": int(len(failing)),
            "passes": (pd.NA if judged.empty else bool(failing.empty)),
            # beyond Monte-Carlo error of the nominal value (coverage below
            # confidence - 2 mcse_nominal; for the type I error the same as failing)
            "points_beyond_mc": int((~judged["within_mc"].astype(bool)).sum()),
            "failing_at": "; ".join(_where(r) + f" ({r['estimate']:.3f})"
                                    for _, r in failing.iterrows()),
        })  # fmt: skip
    frame = pd.DataFrame(out)
    if "passes" in frame:
        frame["passes"] = frame["passes"].astype("boolean")
    return frame


def summary_markdown(summary: pd.DataFrame, s: SimSettings) -> str:
    """The summary as a short Markdown document the README can quote."""
    lines = [
        "# Simulation study of the statistics",
        "",
        f"{s.replicates} replicates per grid point, {s.n_resamples} bootstrap resamples, "
        f"margin {s.margin:g}, alpha {s.alpha:g}, confidence {s.confidence:g}, seed {s.seed}. "
        f"Type I error passes at or below alpha + 2 Monte-Carlo SE at alpha "
        f"(alpha + {2 * math.sqrt(s.alpha * (1 - s.alpha) / s.replicates):.3f}); coverage "
        f"passes at or above {s.coverage_floor:g}.",
        "",
        "| study | quantity | role | points | worst | at | threshold | failing | beyond MC "
        "error | result |",
        "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for _, r in summary.iterrows():
        thr = "" if not math.isfinite(r["threshold"]) else f"{r['threshold']:.3f}"
        judged = math.isfinite(r["threshold"])
        fail = f"{r['points_failing']}" if judged else ""
        beyond = f"{r['points_beyond_mc']}" if judged else ""
        result = ("pass" if r["points_failing"] == 0 else "FAIL") if judged else ""
        lines.append(
            f"| {r['study']} | {r['quantity']} | {r.get('role', '')} | {r['points']} | "
            f"{r['worst']} {r['worst_estimate']:.3f} (SE {r['worst_mcse']:.3f}) | "
            f"{r['worst_at']} | {thr} | {fail} | {beyond} | {result} |"
        )
    lines += [
        "",
        "Across many grid points a few estimates beyond 2 Monte-Carlo standard errors are "
        "expected by chance (about 2.5% of points at a rate exactly nominal). Points whose "
        "truth cannot exist (a treatment accuracy below 0) are left out and counted in the "
        "table's note.",
        "",
    ]
    for _, r in summary.iterrows():
        if r["points_failing"]:
            lines.append(f"- {r['study']} {r['quantity']} fails at: {r['failing_at']}")
    return "\n".join(lines).rstrip() + "\n"
