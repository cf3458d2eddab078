"""Topologies: who talks to whom, in which order, and what their records hold.

A topology drives a :class:`~tersetalk.agents.engine.Dialogue` and declares its
:class:`~tersetalk.core.records.RecordLayout`: the directions of its messages and its own
outcome fields. It never writes or reads a message itself; that is the codec's.

The star and the chain are fixed; :class:`Routed` runs one of them per example, as the
topology study's router (:mod:`tersetalk.topology.router`) decides from the Manager's
brief. The router stands below the engine: it reads a brief's text and returns a route,
and this module runs the route and records it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from tersetalk.agents.engine import Dialogue, Outcome, Sent
from tersetalk.core.records import OutcomeField, RecordLayout
from tersetalk.tasks.registry import topology_labels
from tersetalk.topology.router import (
    FAN_OUT,
    FEATURES,
    TOPOLOGY_OF_LABEL,
    RouteSettings,
    decide,
    policy_route,
    prose_signals,
    scramble,
    typed_lines,
    typed_signals,
)

__all__ = ["CHAIN", "ROUTE_FIELDS", "STAR", "Chain", "Outcome", "Routed", "Star", "Topology"]


class Topology:
    """Who talks to whom; subclasses set ``name`` and ``layout`` and implement ``run``
    (the engine's :class:`~tersetalk.agents.engine.TopologyInterface`; a run ends with
    an :class:`~tersetalk.agents.engine.Outcome`, re-exported here)."""

    name: str = ""
    layout: RecordLayout

    def run(self, d: Dialogue) -> Outcome:
        raise NotImplementedError


class Star(Topology):
    """Manager -> Worker -> Critic, with one revise round.

    The Manager briefs the Worker; the Worker's draft goes to the Critic, with the
    brief forwarded so the Critic can judge it; the Critic's verdict goes back to
    the Worker. A ``revise`` verdict buys exactly one revision (``max_revisions`` 0
    turns it off; more than 1 adds nothing): the revised answer goes to the Manager
    and the Critic does not re-judge it.
    """

    name = "star"
    layout = RecordLayout(
        directions=("M_W", "W_C", "M_C", "C_W", "W_M"),
        outcome=(
            OutcomeField("verdict", "string", "error"),
            OutcomeField("verdict_explicit", "bool", False),
            OutcomeField("revisions", "int64", 0),
        ),
    )

    def run(self, d: Dialogue) -> Outcome:
        brief = d.send("M", "W", "brief", d.brief)
        draft, history = d.respond("W", [brief])
        draft_sent = d.send("W", "C", "draft", draft)
        copy = d.resend(brief, "M", "C")
        critique = d.ask("C", [copy, draft_sent], d.ctx.critic_gen)
        critique_sent = d.send("C", "W", "verdict", critique)
        verdict, explicit = d.codec.verdict(critique)
        answer, revisions = draft, 0
        if verdict == "revise" and d.ctx.max_revisions > 0:
            answer, revisions = d.revise("W", history, draft_sent, critique_sent), 1
        final = d.send("W", "M", "final", answer)
        fields = {"verdict": verdict, "verdict_explicit": explicit, "revisions": revisions}
        return Outcome(answer, final, fields)


STAR = Star()


class Chain(Topology):
    """Manager -> Worker1 -> Worker2 -> Critic -> Manager -> Worker1: one verify/fix loop.

    The Manager briefs Worker1, whose draft goes on to Worker2 together with the brief
    (Worker1 forwards it: a chain has no side door). Worker2 refines the draft into the
    chain's proposal and sends it to the Critic with the brief's copy (the codec decides
    how much of it a Critic needs). The Critic's verdict goes back to the Manager. A
    ``revise`` verdict buys exactly one fix (``max_revisions`` 0 turns it off; more than
    1 adds nothing): the Manager passes the critique to Worker1, which answers again
    after the chain's proposal (shown as its own previous answer: it is the answer
    under critique) and sends the fixed answer to the Manager; nobody re-judges it.
    Otherwise Worker2's proposal is the final answer and goes to the Manager.

    The record has the star's outcome fields (``verdict``, ``verdict_explicit``,
    ``revisions``: here the fixes, 0 or 1), so the two topologies' runs line up column
    for column. ``M_W2`` is declared for a codec that dereferences ``M#`` pointers for
    Worker2 (the Manager holds the memory).
    """

    name = "chain"
    layout = RecordLayout(
        directions=("M_W1", "W1_W2", "M_W2", "W2_C", "C_M", "W2_M", "W1_M"),
        outcome=Star.layout.outcome,
    )

    def run(self, d: Dialogue) -> Outcome:
        brief = d.send("M", "W1", "brief", d.brief)
        draft, history = d.respond("W1", [brief])
        copy = d.resend(brief, "W1", "W2")
        draft_sent = d.send("W1", "W2", "draft", draft)
        proposal, _ = d.respond("W2", [copy, draft_sent])
        proposal_sent = d.send("W2", "C", "draft", proposal)
        critic_copy = d.resend(brief, "W2", "C")
        critique = d.ask("C", [critic_copy, proposal_sent], d.ctx.critic_gen)
        critique_sent = d.send("C", "M", "verdict", critique)
        verdict, explicit = d.codec.verdict(critique)
        if verdict == "revise" and d.ctx.max_revisions > 0:
            fix = d.resend(critique_sent, "M", "W1")
            answer = d.revise("W1", history, proposal_sent, fix)
            final = d.send("W1", "M", "final", answer)
            revisions = 1
        else:
            answer, revisions = proposal, 0
            final = d.send("W2", "M", "final", answer)
        fields = {"verdict": verdict, "verdict_explicit": explicit, "revisions": revisions}
        return Outcome(answer, final, fields)


CHAIN = Chain()


# -- the routed topology: star or chain as the router says --------------------------------
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
                f"the routed topology needs route settings (tersetalk.topology.router."
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
