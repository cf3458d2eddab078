"""The topology router's decision rule as data: what the runs record and the analysis
replays without the engine.

A routed example's record keeps its signals (counts read off the Manager's brief), the
weights and θ; the decision is ``score = Σ weight[s] · signal[s]`` over the signals in
sorted order, chain iff ``score >= θ``. The engine's router
(:mod:`tersetalk.topology.router`) counts the signals and applies this rule; the topology
study's metrics and figures apply it again to what was recorded (θ swept, fitted
weights, held-out briefs), so both stand on this module and neither on the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = [
    "DEFAULT_THETA",
    "DEFAULT_WEIGHTS",
    "SIGNALS",
    "TOPOLOGY_OF_LABEL",
    "RouterFileError",
    "decide",
    "score",
]


class RouterFileError(ValueError):
    """A fitted router file that is missing, unreadable or does not hold what a fitted
    router needs: a fault of the run's setup, not of an example, so a run stops on it
    (:func:`tersetalk.pipeline.runner.stopping_fault`); the fit's reader raises it too."""


#: the router's signals, in the order records and figures list them
SIGNALS: tuple[str, ...] = ("hops", "quantities", "arithmetic", "conditions", "code", "plans")
#: the default rule, by the TerseTalk design's intent (multi-hop, multi-step or
#: verification-heavy work down the chain): a bridge in the question, a program whose
#: description names two kinds of work, or two computing sentences reach θ alone;
#: numbers, conditions and plan steps add to them
DEFAULT_WEIGHTS: dict[str, float] = {
    "hops": 3.0, "quantities": 0.25, "arithmetic": 1.5, "conditions": 1.0, "code": 1.5,
    "plans": 1.0,
}  # fmt: skip
DEFAULT_THETA = 3.0
#: a task's topology label (``Task.topology``) -> the topology that serves it
TOPOLOGY_OF_LABEL: dict[str, str] = {"direct": "star", "chain": "chain"}


def score(signals: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """``Σ weight · signal`` over the signals in sorted order (a signal without weight: 0)."""
    return math.fsum(float(weights.get(k, 0.0)) * float(signals[k]) for k in sorted(signals))


def decide(
    signals: Mapping[str, float], weights: Mapping[str, float], theta: float
) -> tuple[str, float]:
    """``(chain | star, score)``: chain iff the score reaches ``theta``. Pure."""
    s = score(signals, weights)
    return ("chain" if s >= theta else "star"), s
