"""The topology router: star or chain, per example, from the Manager's brief.

The router reads the brief as it went on the wire and turns it into a few counts
(*signals*), weighs them into a complexity score and sends the example down the chain
when the score reaches a threshold θ. Both protocols' routers read the same parts of a
brief (the question, context passages, options, facts, program text, plan steps) and
count the same six signals from their content (:mod:`tersetalk.topology.signals`):
``hops`` (bridging structure in the question, premises that build on each other:
multi-hop), ``quantities`` and
``arithmetic`` (numbers, and sentences that compute with them: multi-step),
``conditions`` and ``code`` (constraints to check, a program to write:
verification-heavy) and ``plans`` (plan steps). Only how the parts are found differs:

- ``typed`` (TerseTalk-JSONL): from the tags (``q`` the question; ``x`` lines keyed
  ``passage`` context, ``situation`` a situation, keyed by an option label options, keyed
  ``code`` program text; ``f`` lines and the summaries of ``o`` pointers facts; ``p`` plans);
- ``prose`` (free-form): from the rendering's headings, bullets, fences and numbered
  steps, or, in prose without headings, from its sentences.

So the typed-versus-prose comparison measures reading the same content from two
encodings, not two schemas, and a brief written in one task's format is read by what it
asks, not by which task's layout it has.

The decision is a pure function of what the record keeps (:func:`decide`: the signals,
the weights and θ), so any row's decision can be checked, and θ swept, after the fact:
``score = Σ weight[s] · signal[s]`` (signals in sorted order), chain iff ``score >= θ``.
Raising θ can only turn a chain decision into a star one, never the reverse.

Ablations: ``drop`` one signal (its weight becomes 0, its count is still recorded),
and ``scramble_tags`` (protocol necessity): before the typed lines are counted, their
tag letters go through a permutation of the tag alphabet drawn from the run's seed and
the example id, so the parts are no longer what the tags said.

Safety valve: ``fan_out_cap`` bounds the Workers one example engages (a route over it
takes the star, recorded as ``route_capped``). The route is chosen once per example,
before its first message, and held to its end, so no example switches topology within
a round (the TerseTalk design's min-dwell of one round holds by construction).

Policies (the study's six are these five on the two codecs): ``star`` and ``chain``
(fixed), ``random`` (seeded 50/50 per example), ``oracle`` (the task's label,
:func:`tersetalk.tasks.registry.topology_label`) and ``adaptive`` (the rule above). Every
policy computes and records the signals, the score and what the rule would say
(``route_rule``), so a fixed-policy run also tells how the router would have routed.

This module decides; the engine's routed topology (:class:`tersetalk.agents.topology.
Routed`) writes the brief, asks it for the signals, the rule and the policy's route, runs
the star or the chain and records the route. The router imports nothing of the engine,
so the study's commands read briefs with it and no conversation is needed.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tersetalk.protocol import TAGS, parse_lenient
from tersetalk.tasks.registry import topology_label
from tersetalk.topology.rule import (  # the rule itself: the analysis replays it
    DEFAULT_THETA,
    DEFAULT_WEIGHTS,
    SIGNALS,
    TOPOLOGY_OF_LABEL,
    RouterFileError,
    decide,
    score,
)
from tersetalk.topology.signals import (
    content_signals,
    has_code,
    prose_parts,
    typed_parts,
)

__all__ = [
    "RouterFileError",
    "DEFAULT_THETA",
    "DEFAULT_WEIGHTS",
    "FAN_OUT",
    "FEATURES",
    "has_code",
    "POLICIES",
    "SIGNALS",
    "TOPOLOGY_OF_LABEL",
    "RouteSettings",
    "decide",
    "label_route",
    "policy_route",
    "prose_signals",
    "random_route",
    "scramble",
    "score",
    "typed_lines",
    "typed_signals",
]

POLICIES: tuple[str, ...] = ("star", "chain", "random", "oracle", "adaptive")
FEATURES: tuple[str, ...] = ("typed", "prose")

#: Workers each topology engages (what ``fan_out_cap`` bounds)
FAN_OUT: dict[str, int] = {"star": 1, "chain": 2}

TypedLine = tuple[str, tuple[str, ...]]
"""A line as the router sees it: its tag and its payload fields."""


# -- signals ------------------------------------------------------------------------------
def typed_lines(wire: str) -> list[TypedLine]:
    """The typed lines of a TerseTalk message (lenient parse: never raises)."""
    return [
        (line.tag, tuple(str(x) for x in line.payload() if x is not None))
        for line in parse_lenient(wire).lines
    ]


def typed_signals(lines: list[TypedLine]) -> dict[str, int]:
    """The six signals of typed lines: their parts (:func:`~tersetalk.topology.
    signals.typed_parts`) counted by content."""
    return content_signals(typed_parts(lines))


def prose_signals(text: str) -> dict[str, int]:
    """The same six signals of a free-form brief (:func:`~tersetalk.topology.signals.
    prose_parts`)."""
    return content_signals(prose_parts(text))


def _unit(*parts: object) -> random.Random:
    """A generator seeded from ``parts`` (stable across processes and Python hash seeds)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def scramble(lines: list[TypedLine], seed: int, example_id: str) -> list[TypedLine]:
    """``lines`` with their tags sent through a permutation of the tag alphabet.

    The permutation is drawn from ``seed`` and ``example_id`` alone, so a rerun
    scrambles alike; payloads stay as they were (so ``code`` keeps its meaning and
    only what the tags said is lost).
    """
    shuffled = list(TAGS)
    _unit(seed, example_id, "scramble").shuffle(shuffled)
    mapping = dict(zip(TAGS, shuffled, strict=True))
    return [(mapping.get(tag, tag), text) for tag, text in lines]


def random_route(seed: int, example_id: str) -> str:
    """The random policy's fair coin for one example, from the random seed and the example id."""
    return "chain" if _unit(seed, example_id, "random").random() < 0.5 else "star"


def label_route(task: str) -> str:
    """The topology a task's label asks for (``star`` for direct, ``chain`` for chain)."""
    return TOPOLOGY_OF_LABEL[topology_label(task)]


def policy_route(policy: str, *, rule: str, task: str, seed: int, example_id: str) -> str:
    """The topology ``policy`` takes for one example; ``rule`` is the adaptive decision."""
    if policy in ("star", "chain"):
        return policy
    if policy == "random":
        return random_route(seed, example_id)
    if policy == "oracle":
        return label_route(task)
    if policy == "adaptive":
        return rule
    raise ValueError(f"unknown routing policy {policy!r}; known: {', '.join(POLICIES)}")


# -- settings -----------------------------------------------------------------------------
class RouteSettings(BaseModel):
    """A routed system's routing knobs (flat in ``systems.<name>.variants.<variant>``).

    A routed system's settings extend this model and the engine's
    :class:`~tersetalk.agents.roles.BriefLayoutSettings` (how its brief carries the task's
    parts: ``brief_context``, ``brief_options``, ``brief_code``); the router stands below
    the engine, so the two are joined there (:mod:`tersetalk.systems.topology`), not here.
    """

    model_config = ConfigDict(extra="forbid")

    #: star | chain (fixed), random (seeded 50/50), oracle (task label), adaptive (rule)
    policy: Literal["star", "chain", "random", "oracle", "adaptive"] = "adaptive"
    #: the threshold: chain iff score >= theta
    theta: float = Field(DEFAULT_THETA, allow_inf_nan=False)
    #: weights per signal; the ones not given keep their default (DEFAULT_WEIGHTS)
    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    #: a signal left out of the score (weight 0; its count is still recorded)
    drop: Literal["hops", "quantities", "arithmetic", "conditions", "code", "plans"] | None = None
    #: shuffle the tag letters of the typed lines before counting (typed features only)
    scramble_tags: bool = False
    #: a router file (``tersetalk topology-fit``'s ``results/topology/router.yaml``):
    #: the weights and θ fitted for this system replace ``weights`` and ``theta`` (which
    #: are then not used; each row records the ones that were)
    weights_from: str | None = None
    #: the most Workers one example may engage (the star 1, the chain 2): a route to a
    #: topology over the cap takes the star instead, recorded as ``route_capped``
    fan_out_cap: int = Field(2, ge=1)

    @field_validator("weights", mode="before")
    @classmethod
    def _known_signals(cls, weights: object) -> object:
        if isinstance(weights, dict):
            unknown = sorted(set(weights) - set(SIGNALS))
            if unknown:
                raise ValueError(
                    f"unknown signal(s) {unknown} in weights; the signals are {list(SIGNALS)}"
                )
            bad = sorted(k for k, v in weights.items() if not _finite(v))
            if bad:
                raise ValueError(f"weights of {bad} must be finite numbers")
            return {**DEFAULT_WEIGHTS, **weights}
        return weights

    def effective_weights(self, weights: Mapping[str, float] | None = None) -> dict[str, float]:
        """The weights the score uses (``weights``, or the settings' own): ``drop`` set to 0."""
        weights = self.weights if weights is None else weights
        return {k: (0.0 if k == self.drop else float(weights[k])) for k in SIGNALS}

    def rule(self, system: str) -> tuple[dict[str, float], float]:
        """``(weights, theta)`` the rule uses for ``system``: the settings' own, or the
        fitted ones of ``weights_from`` (``drop`` applied either way)."""
        if self.weights_from is None:
            return self.effective_weights(), self.theta
        weights, theta = load_fitted(self.weights_from, system)
        return self.effective_weights(weights), theta


def load_fitted(path: str | Path, system: str) -> tuple[dict[str, float], float]:
    """The fitted ``(weights, theta)`` of ``system`` in a router file (read once per
    version of the file); a clear error naming the file and the key when it cannot."""
    p = Path(path)
    try:
        stat = p.stat()
    except OSError as exc:
        raise RouterFileError(
            f"router file {p}: {exc.strerror}; build it with `tersetalk topology-fit` "
            "(the workflow's topology_fit rule)"
        ) from None
    return _load_fitted(str(p), stat.st_mtime_ns, stat.st_size, system)


@functools.lru_cache(maxsize=16)
def _load_fitted(path: str, _mtime: int, _size: int, system: str) -> tuple[dict, float]:
    import yaml

    from tersetalk.core.io import load_yaml_text

    try:
        data = load_yaml_text(
            Path(path).read_text(encoding="utf-8"), f"router file {path}", error=RouterFileError
        )
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RouterFileError(f"router file {path}: cannot be read: {exc}") from None
    systems = data.get("systems", data) if isinstance(data, dict) else None
    entry = systems.get(system) if isinstance(systems, dict) else None
    if not isinstance(entry, dict):
        known = sorted(systems) if isinstance(systems, dict) else []
        raise RouterFileError(f"router file {path}: no fitted router for {system!r} (has: {known})")
    weights, theta = entry.get("weights"), entry.get("theta")
    if not isinstance(weights, dict) or sorted(weights) != sorted(SIGNALS):
        raise RouterFileError(
            f"router file {path}: {system}.weights must give each of {list(SIGNALS)}"
        )
    bad = sorted(k for k, v in weights.items() if not _finite(v))
    if bad or not _finite(theta):
        raise RouterFileError(
            f"router file {path}: {system}: weights {bad} / theta {theta!r} must be finite numbers"
        )
    return {k: float(v) for k, v in weights.items()}, float(theta)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
