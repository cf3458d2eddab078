"""``topology_freeform`` and ``topology_tersetalk``: the topology study's routed systems.

Each runs one example on the star (Manager -> Worker -> Critic, one revise round) or
the chain (Manager -> Worker1 -> Worker2 -> Critic -> Manager -> Worker1, one
verify/fix loop), as its variant's routing ``policy`` says: ``star`` or ``chain``
(fixed), ``random`` (seeded 50/50), ``oracle`` (the task's label) or ``adaptive`` (the
router's rule, :mod:`tersetalk.agents.router`). ``topology_freeform`` speaks plain
language and its router reads the brief as prose; ``topology_tersetalk`` speaks
TerseTalk-JSONL (every ``tersetalk`` setting applies) and its router reads the typed
lines. The six policies of the study are the five fixed/random/oracle/adaptive ones on
TerseTalk plus the adaptive one on free-form; free-form's fixed runs are its baselines.

Routing knobs (flat beside the codec's): ``policy``, ``theta``, ``weights``, ``drop``
(one signal out of the score) and, TerseTalk only, ``scramble_tags``. Every row records
the route, the rule's decision, the score, the signals, the weights and θ, and the
routing time (``t_route_s``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.codecs.tersetalk import (
    TERSETALK_RATES,
    TerseTalkCodec,
    TerseTalkSettings,
    touchpoint_models,
)
from tersetalk.agents.engine import Sent
from tersetalk.agents.roles import Participant
from tersetalk.agents.router import Routed, RouteSettings
from tersetalk.encoders.prepare import prepared_compressor_inputs
from tersetalk.systems import Axis, register

__all__ = ["ProseRouteSettings", "RoutedProseCodec", "TerseTalkRouteSettings"]


class ProseRouteSettings(RouteSettings):
    """``topology_freeform``'s variant settings: the routing knobs only."""

    @model_validator(mode="after")
    def _no_tags_to_scramble(self) -> ProseRouteSettings:
        if self.scramble_tags:
            raise ValueError(
                "scramble_tags: free-form briefs have no tags to scramble "
                "(use it on topology_tersetalk)"
            )
        return self


class TerseTalkRouteSettings(TerseTalkSettings, RouteSettings):
    """``topology_tersetalk``'s variant settings: TerseTalk's knobs and the routing ones.

    One difference from ``tersetalk``'s defaults: ``fact_lines: each``. The router counts
    facts by their ``f`` lines, and merged lines would send a paragraph of facts as one.
    """

    fact_lines: Literal["each", "merged"] = "each"


class RoutedProseCodec(ProseCodec):
    """Prose, with Worker1's draft labelled for Worker2 (it arrives after the brief).

    Only the model's input changes; the messages on the wire are the prose codec's.
    """

    def compose(self, who: Participant, inbox: list[Sent]) -> str:
        if who.letter == "W2" and len(inbox) == 2:
            task, draft = inbox
            return f"{task.text}\n\nFirst worker's draft:\n{draft.text}"
        return super().compose(who, inbox)


ROUTE_AXES = {
    "theta": Axis(label="router threshold θ"),
    "drop": Axis(label="signal left out"),
}

register(
    "topology_freeform",
    codec=RoutedProseCodec,
    settings=ProseRouteSettings,
    topology=Routed("prose"),
    ablation=ROUTE_AXES,
)
register(
    "topology_tersetalk",
    codec=TerseTalkCodec,
    settings=TerseTalkRouteSettings,
    topology=Routed("typed"),
    inputs=lambda s: prepared_compressor_inputs(touchpoint_models(s)),
    ablation=ROUTE_AXES,
    rates=TERSETALK_RATES,
)
