"""Topologies: who talks to whom, in which order, and what their records hold.

A topology drives a :class:`~tersetalk.agents.engine.Dialogue` and declares its
:class:`~tersetalk.records.RecordLayout`: the directions of its messages and its own
outcome fields. It never writes or reads a message itself; that is the codec's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tersetalk.agents.engine import Dialogue, Sent
from tersetalk.records import OutcomeField, RecordLayout

__all__ = ["STAR", "Outcome", "Star", "Topology"]


@dataclass
class Outcome:
    """What a topology's run ends with: the final answer, its message, its fields."""

    answer: Any
    final: Sent
    fields: dict[str, Any] = field(default_factory=dict)


class Topology:
    """Who talks to whom; subclasses set ``name`` and ``layout`` and implement ``run``."""

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
