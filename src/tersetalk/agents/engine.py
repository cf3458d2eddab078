"""The dialogue engine: the one place where agents send messages and ask models.

A system is a **codec** (how one message is written and read) run on a
**topology** (who talks to whom, in which order). The topology drives a
:class:`Dialogue` through five moves -- ``send``, ``resend``, ``respond``, ``ask``,
``revise`` -- and the dialogue hands every message to the codec to write and every
reply to the codec to read, logging each message in the :class:`Conversation`
(tokens under three tokenizers, bytes) and each model call. Nothing here knows a
protocol or a system by name: a new protocol is a codec, a new shape of agents is
a topology.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tersetalk.agents.context import RunContext, SystemResult
from tersetalk.agents.conversation import Conversation
from tersetalk.agents.roles import Brief, Participant, build_brief, lay_out, participant
from tersetalk.models import GenerationConfig

__all__ = ["Codec", "Dialogue", "Outcome", "Sent", "TopologyInterface", "converse"]


@dataclass
class Sent:
    """One message as it went on the wire.

    ``content`` is what the codec was asked to write (a :class:`Brief`, a reply, ...);
    ``meta`` is whatever the codec wants to remember about how it wrote it (the
    TerseTalk lines, a hybrid route, ...).
    """

    sender: str
    receiver: str
    kind: str
    text: str
    content: Any = None
    meta: Any = None
    #: the Conversation's record of this message (turn, tokens, bytes)
    message: dict = field(default_factory=dict)


class Codec:
    """How one example's messages are written and read: subclass per protocol.

    One instance per example, built by :func:`converse` with the run context, the
    system's validated settings, the example, the Manager's brief and the
    conversation (for logging calls a codec makes itself, e.g. an encoder model).

    Writing: :meth:`write` turns what a participant says into wire text. Reading:
    :meth:`prompt` and :meth:`compose` build a participant's model input from what
    it received, :meth:`reply` makes the model call and reads the answer,
    :meth:`respond` is a participant's whole turn (by default one reply; a codec
    may ask again, e.g. to dereference ``M#`` pointers), :meth:`revise_text` words
    feedback for a revision, :meth:`verdict` reads a critique, :meth:`prediction`
    the final answer, and :meth:`counters` reports the codec's protocol counters.
    """

    def __init__(
        self,
        ctx: RunContext,
        settings: Any,
        example: dict,
        brief: Brief,
        conv: Conversation,
    ) -> None:
        self.ctx, self.settings, self.example, self.brief, self.conv = (
            ctx, settings, example, brief, conv,
        )  # fmt: skip

    # -- writing ------------------------------------------------------------------------
    def write(self, kind: str, sender: str, receiver: str, content: Any) -> Sent:
        """The wire form of one message."""
        raise NotImplementedError

    def write_copy(self, sent: Sent, sender: str, receiver: str) -> Sent:
        """``sent`` passed on to someone else (the brief's copy to the Critic): by
        default the same text, not written anew; a codec may send less."""
        return Sent(sender, receiver, sent.kind, sent.text, sent.content, sent.meta)

    # -- reading ------------------------------------------------------------------------
    def prompt(self, who: Participant) -> str:
        """The system prompt of a participant."""
        raise NotImplementedError

    def compose(self, who: Participant, inbox: list[Sent]) -> str:
        """The user text a participant answers: what it received, as this codec words it."""
        raise NotImplementedError

    def reply(self, who: Participant, messages: list[dict], gen: GenerationConfig) -> Any:
        """One model call on behalf of ``who``, read into this codec's reply form."""
        raise NotImplementedError

    def respond(
        self, d: Dialogue, who: Participant, inbox: list[Sent], gen: GenerationConfig
    ) -> tuple[Any, list[dict]]:
        """A participant's turn: its reply and the chat so far (for a revision)."""
        messages = [
            {"role": "system", "content": self.prompt(who)},
            {"role": "user", "content": self.compose(who, inbox)},
        ]
        return self.reply(who, messages, gen), messages

    def revise_text(self, feedback: Sent) -> str:
        """The user text that asks for a revision, given the feedback as sent."""
        raise NotImplementedError

    def verdict(self, critique: Any) -> tuple[str, bool]:
        """``(accept | revise | escalate, stated explicitly)`` of a critique."""
        raise NotImplementedError

    def prediction(self, answer: Any) -> str:
        """The answer to score, from the final answer."""
        raise NotImplementedError

    def counters(self, d: Dialogue) -> dict[str, Any]:
        """This codec's protocol counters for the record (``t_*`` ones are timings)."""
        return {}


class Dialogue:
    """The moves a topology makes; every message and call goes through here."""

    def __init__(
        self, ctx: RunContext, codec: Codec, conv: Conversation, directions: tuple[str, ...]
    ) -> None:
        self.ctx, self.codec, self.conv = ctx, codec, conv
        #: the directions the topology declares (counters keyed by direction use them)
        self.directions = directions
        self.sent: list[Sent] = []

    @property
    def brief(self) -> Brief:
        return self.codec.brief

    def _post(self, sent: Sent) -> Sent:
        sent.message = self.conv.send(sent.sender, sent.receiver, sent.kind, sent.text)
        self.sent.append(sent)
        return sent

    def send(self, sender: str, receiver: str, kind: str, content: Any) -> Sent:
        """``sender`` tells ``receiver`` ``content``, written by the codec."""
        return self._post(self.codec.write(kind, sender, receiver, content))

    def resend(self, sent: Sent, sender: str, receiver: str) -> Sent:
        """``sent`` passed on to someone else, as the codec writes a copy."""
        return self._post(self.codec.write_copy(sent, sender, receiver))

    def respond(
        self, who: str, inbox: list[Sent], gen: GenerationConfig | None = None
    ) -> tuple[Any, list[dict]]:
        """``who`` answers what it received; returns its reply and its chat so far."""
        return self.codec.respond(self, participant(who), inbox, gen or self.ctx.gen)

    def ask(self, who: str, inbox: list[Sent], gen: GenerationConfig | None = None) -> Any:
        """A one-shot reply of ``who`` to what it received (system prompt + composed text)."""
        p = participant(who)
        messages = [
            {"role": "system", "content": self.codec.prompt(p)},
            {"role": "user", "content": self.codec.compose(p, inbox)},
        ]
        return self.codec.reply(p, messages, gen or self.ctx.gen)

    def revise(
        self,
        who: str,
        history: list[dict],
        own: Sent,
        feedback: Sent,
        gen: GenerationConfig | None = None,
    ) -> Any:
        """``who`` answers again, after its own message and the feedback on it."""
        messages = history + [
            {"role": "assistant", "content": own.text},
            {"role": "user", "content": self.codec.revise_text(feedback)},
        ]
        return self.codec.reply(participant(who), messages, gen or self.ctx.gen)


@dataclass
class Outcome:
    """What a topology's run ends with: the final answer, its message, its fields."""

    answer: Any
    final: Sent
    fields: dict[str, Any] = field(default_factory=dict)


class _Layout(Protocol):
    @property
    def directions(self) -> tuple[str, ...]: ...


class TopologyInterface(Protocol):
    """What :func:`converse` calls of a topology: the directions of its layout (a
    :class:`~tersetalk.core.records.RecordLayout`) and ``run``. Declared here so the engine
    needs nothing from :mod:`tersetalk.agents.topology`, whose topologies drive a
    :class:`Dialogue` and implement this."""

    @property
    def layout(self) -> _Layout: ...

    def run(self, d: Dialogue) -> Outcome: ...


def converse(
    example: dict,
    ctx: RunContext,
    *,
    codec: type[Codec],
    topology: TopologyInterface,
    settings: Any = None,
    brief: Brief | None = None,
) -> SystemResult:
    """Run one example: the Manager's brief, the topology's turns, the codec's reading.

    ``brief``: the example's brief as the runner built it (once, and recorded); built
    here from the example's record when not given."""
    if brief is None:
        brief = build_brief(ctx.task, example["record"], ctx.task_options)
    brief = lay_out(brief, settings)
    conv = Conversation(ctx.client)
    writer = codec(ctx, settings, example, brief, conv)
    dialogue = Dialogue(ctx, writer, conv, topology.layout.directions)
    outcome = topology.run(dialogue)
    return SystemResult(
        prediction=writer.prediction(outcome.answer),
        raw_answer=outcome.final.text,
        conversation=conv,
        outcome=outcome.fields,
        counters=writer.counters(dialogue),
    )
