"""The topology router: star or chain, per example, from the Manager's brief.

The router reads the brief as it went on the wire and turns it into a few counts
(*signals*), weighs them into a complexity score and sends the example down the chain
when the score reaches a threshold θ. Both protocols' routers read the same parts of a
brief (the question, context passages, options, facts, program text, plan steps) and
count the same six signals from their content (:mod:`tersetalk.agents.brief_content`):
``hops`` (bridging structure in the question: multi-hop), ``quantities`` and
``arithmetic`` (numbers, and sentences that compute with them: multi-step),
``conditions`` and ``code`` (constraints to check, a program to write:
verification-heavy) and ``plans`` (plan steps). Only how the parts are found differs:

- ``typed`` (TerseTalk-JSONL): from the tags (``q`` the question; ``x`` lines keyed
  ``passage``/``situation`` context, keyed by an option label options, keyed ``code``
  program text; ``f`` lines and the summaries of ``o`` pointers facts; ``p`` plans);
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
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from tersetalk.agents.brief_content import (
    content_signals,
    has_code,
    prose_parts,
    typed_parts,
)
from tersetalk.agents.engine import Dialogue, Sent
from tersetalk.agents.roles import BriefLayoutSettings
from tersetalk.agents.topology import CHAIN, STAR, Outcome, Topology
from tersetalk.core.records import OutcomeField, RecordLayout
from tersetalk.core.routing import (  # the rule itself: the analysis replays it
    DEFAULT_THETA,
    DEFAULT_WEIGHTS,
    SIGNALS,
    TOPOLOGY_OF_LABEL,
    decide,
    score,
)
from tersetalk.protocol import TAGS, parse_lenient
from tersetalk.tasks.registry import topology_label, topology_labels

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
    "Routed",
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
    """The six signals of typed lines: their parts (:func:`~tersetalk.agents.
    brief_content.typed_parts`) counted by content."""
    return content_signals(typed_parts(lines))


def prose_signals(text: str) -> dict[str, int]:
    """The same six signals of a free-form brief (:func:`~tersetalk.agents.brief_content.
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
class RouteSettings(BriefLayoutSettings):
    """A routed system's routing knobs (flat in ``systems.<name>.variants.<variant>``),
    and how its brief carries the task's parts (``brief_context``, ``brief_options``,
    ``brief_code``: :class:`~tersetalk.agents.roles.BriefLayoutSettings`)."""

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


class RouterFileError(ValueError):
    """A fitted router file is missing, unreadable or wrong: a fault of the run's setup,
    not of an example, so a run stops on it (:func:`tersetalk.pipeline.runner.stopping_fault`)."""


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


# -- the routed topology ------------------------------------------------------------------
#: the columns a routed run adds (after the star's and chain's own outcome fields)
ROUTE_FIELDS = (
    OutcomeField("route", "string", "error"),
    OutcomeField("route_policy", "string", "error"),
    OutcomeField("route_rule", "string", "error"),
    OutcomeField("route_label", "string", ""),
    OutcomeField("route_score", "float64", float("nan")),
    OutcomeField("route_theta", "float64", float("nan")),
    OutcomeField("route_signals", "string", "{}"),
    OutcomeField("route_weights", "string", "{}"),
    OutcomeField("route_features", "string", "error"),
    OutcomeField("route_drop", "string", ""),
    OutcomeField("route_scrambled", "bool", False),
    OutcomeField("route_capped", "bool", False),
    # a timing (t_* columns are not deterministic): signals, score and policy
    OutcomeField("t_route_s", "float64", float("nan")),
)


class _BriefWritten(Dialogue):
    """The outer dialogue with the Manager's brief already written.

    The router has to read the brief before it knows who receives it, and writing it
    twice could differ (a codec may fill its memory or call a model to write it), so
    it is written once and this dialogue posts it, addressed to whoever the chosen
    topology sends it to. Everything else passes through; messages land in the outer
    dialogue's list, which the codec's counters read.
    """

    def __init__(self, outer: Dialogue, brief: Sent) -> None:
        super().__init__(outer.ctx, outer.codec, outer.conv, outer.directions)
        self.sent = outer.sent
        self._brief: Sent | None = brief

    def send(self, sender: str, receiver: str, kind: str, content: Any) -> Sent:
        if kind == "brief" and sender == "M" and self._brief is not None:
            brief, self._brief = self._brief, None
            return self._post(dataclasses.replace(brief, sender=sender, receiver=receiver))
        return super().send(sender, receiver, kind, content)


def _directions(*layouts: RecordLayout) -> tuple[str, ...]:
    return tuple(dict.fromkeys(d for layout in layouts for d in layout.directions))


class Routed(Topology):
    """Star or chain per example, chosen by a policy from the Manager's brief.

    ``features`` says how the brief is read (``typed`` lines or ``prose``). The codec's
    validated settings must be a :class:`RouteSettings` (the routed systems' settings
    extend it). A brief is written for the topology's first receiver (``W`` for the
    star, ``W1`` for the chain); codecs whose brief does not depend on its receiver
    (prose, TerseTalk) give a star run byte-identical to the fixed star's.
    """

    def __init__(self, features: str, system: str = "") -> None:
        if features not in FEATURES:
            raise ValueError(f"unknown router features {features!r}; known: {FEATURES}")
        self.features = features
        #: the system whose fitted router ``weights_from`` names
        self.system = system
        self.name = f"routed_{features}"
        self.layout = RecordLayout(
            directions=_directions(STAR.layout, CHAIN.layout),
            outcome=(*STAR.layout.outcome, *ROUTE_FIELDS),
        )

    def signals(self, wire: str, rs: RouteSettings, seed: int, example_id: str) -> dict[str, int]:
        if self.features == "prose":
            return prose_signals(wire)
        lines = typed_lines(wire)
        if rs.scramble_tags:
            lines = scramble(lines, seed, example_id)
        return typed_signals(lines)

    def run(self, d: Dialogue) -> Outcome:
        rs = d.codec.settings
        if not isinstance(rs, RouteSettings):
            raise TypeError(
                f"the routed topology needs route settings (tersetalk.agents.router."
                f"RouteSettings), got {type(rs).__name__}: register the system with a "
                "settings model that extends RouteSettings"
            )
        if rs.scramble_tags and self.features != "typed":
            raise ValueError("scramble_tags needs typed lines; this system reads prose")
        seed, example_id, task = d.ctx.gen.seed, str(d.codec.example["example_id"]), d.ctx.task
        brief = d.codec.write("brief", "M", "W", d.brief)
        start = time.perf_counter()
        signals = self.signals(brief.text, rs, seed, example_id)
        weights, theta = rs.rule(self.system)
        rule, s = decide(signals, weights, theta)
        route = policy_route(rs.policy, rule=rule, task=task, seed=seed, example_id=example_id)
        capped = FAN_OUT[route] > rs.fan_out_cap
        if capped:
            route = "star"
        elapsed = time.perf_counter() - start
        outcome = (CHAIN if route == "chain" else STAR).run(_BriefWritten(d, brief))
        label = topology_labels().get(task)
        outcome.fields.update(
            route=route,
            route_policy=rs.policy,
            route_rule=rule,
            route_label=TOPOLOGY_OF_LABEL[label] if label else "",
            route_score=s,
            route_theta=theta,
            route_signals=json.dumps(signals, sort_keys=True),
            route_weights=json.dumps(weights, sort_keys=True),
            route_features=self.features,
            route_drop=rs.drop or "",
            route_scrambled=rs.scramble_tags,
            route_capped=capped,
            t_route_s=elapsed,
        )
        return outcome
