"""``topology_freeform`` and ``topology_tersetalk``: the topology study's routed systems.

Each runs one example on the star (Manager -> Worker -> Critic, one revise round) or
the chain (Manager -> Worker1 -> Worker2 -> Critic -> Manager -> Worker1, one
verify/fix loop), as its variant's routing ``policy`` says: ``star`` or ``chain``
(fixed), ``random`` (seeded 50/50), ``oracle`` (the task's label) or ``adaptive`` (the
router's rule, :mod:`tersetalk.topology.router`, run by the engine's
:class:`~tersetalk.agents.topology.Routed`). ``topology_freeform`` speaks plain
language and its router reads the brief as prose; ``topology_tersetalk`` speaks
TerseTalk-JSONL (every ``tersetalk`` setting applies) and its router reads the typed
lines. The six policies of the study are the five fixed/random/oracle/adaptive ones on
TerseTalk plus the adaptive one on free-form; free-form's fixed runs are its baselines.

Routing knobs (flat beside the codec's): ``policy``, ``theta``, ``weights``, ``drop``
(one signal out of the score) and, TerseTalk only, ``scramble_tags``; how the brief
carries the task's parts (``brief_context``, ``brief_options``, ``brief_code``); the
planning Manager (``planner: model`` and its ``plan_*`` knobs,
:mod:`tersetalk.agents.planner`). Every row records
the route, the rule's decision, the score, the signals, the weights and θ, and the
routing time (``t_route_s``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import model_validator

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.codecs.tersetalk import (
    TERSETALK_RATES,
    TerseTalkCodec,
    TerseTalkSettings,
    touchpoint_models,
)
from tersetalk.agents.engine import Dialogue, Sent
from tersetalk.agents.planner import (
    PlanCounters,
    PlannerSettings,
    insert_plan,
    insert_prose_plan,
    numbered_plan,
    plan_lines,
    prose_plan,
)
from tersetalk.agents.roles import Brief, BriefLayoutSettings, Participant
from tersetalk.agents.topology import Routed
from tersetalk.encoders.prepare import prepared_compressor_inputs
from tersetalk.protocol import LineBase, serialize
from tersetalk.systems import Axis, register
from tersetalk.topology.router import RouteSettings

__all__ = [
    "ProseRouteSettings",
    "RoutedProseCodec",
    "RoutedTerseTalkCodec",
    "TerseTalkRouteSettings",
]


class ProseRouteSettings(RouteSettings, BriefLayoutSettings, PlannerSettings):
    """``topology_freeform``'s variant settings: the routing knobs, the brief's layout and
    the planning Manager (no codec knobs: free-form has none)."""

    @model_validator(mode="after")
    def _no_tags_to_scramble(self) -> ProseRouteSettings:
        if self.scramble_tags:
            raise ValueError(
                "scramble_tags: free-form briefs have no tags to scramble "
                "(use it on topology_tersetalk)"
            )
        return self


class TerseTalkRouteSettings(
    TerseTalkSettings, RouteSettings, BriefLayoutSettings, PlannerSettings
):
    """``topology_tersetalk``'s variant settings: TerseTalk's knobs, the routing ones, the
    brief's layout and the planning Manager.

    One difference from ``tersetalk``'s defaults: ``fact_lines: each``. The router counts
    facts by their ``f`` lines, and merged lines would send a paragraph of facts as one.
    """

    fact_lines: Literal["each", "merged"] = "each"


class RoutedProseCodec(ProseCodec):
    """Prose, with Worker1's draft labelled for Worker2 (it arrives after the brief),
    and, under ``planner: model``, the planning Manager's numbered steps in the brief
    (one call, before the question)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan_counters = PlanCounters()
        self._plan: str | None = None

    def write_brief(self, brief: Brief) -> str:
        text = super().write_brief(brief)
        if self._plan is None:  # the plan is asked for once per example
            steps, self.plan_counters = prose_plan(self.conv, self.ctx.gen, brief, self.settings)
            self._plan = numbered_plan(steps)
        return insert_prose_plan(text, self._plan, brief.question)

    def counters(self, d: Dialogue) -> dict[str, Any]:
        return {**super().counters(d), **self.plan_counters.as_dict()}

    def compose(self, who: Participant, inbox: list[Sent]) -> str:
        if who.letter == "W2" and len(inbox) == 2:
            task, draft = inbox
            return f"{task.text}\n\nFirst worker's draft:\n{draft.text}"
        return super().compose(who, inbox)


class RoutedTerseTalkCodec(TerseTalkCodec):
    """TerseTalk, and under ``planner: model`` the planning Manager's ``p`` lines (and
    ``d`` lines for the stored texts it delegates) inserted after capping, before the
    question: one call per example, its counters recorded as ``planner_*``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan_counters = PlanCounters()
        self._plan: list[LineBase] | None = None

    def write(self, kind: str, sender: str, receiver: str, content: Any) -> Sent:
        sent = super().write(kind, sender, receiver, content)
        if kind != "brief":
            return sent
        if self._plan is None:  # the plan is asked for once per example
            self._plan, self.plan_counters = plan_lines(
                self.conv, self.ctx.gen, self.brief, self.memory, self.tts, self.tts.enforcement
            )
        if not self._plan:
            return sent
        self.lines = insert_plan(self.lines, self._plan)
        return dataclasses.replace(sent, text=serialize(self.lines))

    def counters(self, d: Dialogue) -> dict[str, Any]:
        return {**super().counters(d), **self.plan_counters.as_dict()}


def router_inputs(settings: RouteSettings) -> dict[str, list[str]]:
    """The router file a fitted variant reads (``weights_from``): built before its run."""
    return {"router": [settings.weights_from]} if settings.weights_from else {}


ROUTE_AXES = {
    "theta": Axis(label="router threshold θ"),
    "drop": Axis(label="signal left out"),
}

register(
    "topology_freeform",
    codec=RoutedProseCodec,
    settings=ProseRouteSettings,
    topology=Routed("prose", "topology_freeform"),
    inputs=router_inputs,
    ablation=ROUTE_AXES,
)
register(
    "topology_tersetalk",
    codec=RoutedTerseTalkCodec,
    settings=TerseTalkRouteSettings,
    topology=Routed("typed", "topology_tersetalk"),
    inputs=lambda s: {**prepared_compressor_inputs(touchpoint_models(s)), **router_inputs(s)},
    ablation=ROUTE_AXES,
    rates=TERSETALK_RATES,
)
