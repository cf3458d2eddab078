"""Topologies: who talks to whom, in which order, and what their records hold.

A topology drives a :class:`~tersetalk.agents.engine.Dialogue` and declares its
:class:`~tersetalk.core.records.RecordLayout`: the directions of its messages and its own
outcome fields. It never writes or reads a message itself; that is the codec's.
"""

from __future__ import annotations

from tersetalk.agents.engine import Dialogue, Outcome
from tersetalk.core.records import OutcomeField, RecordLayout

__all__ = ["CHAIN", "STAR", "Chain", "Outcome", "Star", "Topology"]


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
