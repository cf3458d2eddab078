"""Plain natural language: the free-form baseline's codec, and the base of codecs that
change only how the Manager's brief travels (LLMLingua, the mediator, MSP)."""

from __future__ import annotations

from typing import Any

from tersetalk.agents.engine import Codec, Dialogue, Sent
from tersetalk.agents.roles import (
    CRITIC_SYSTEM,
    REVISE_INSTRUCTION,
    Brief,
    Participant,
    extract_prediction,
    parse_verdict,
    render_brief,
    worker_system,
)
from tersetalk.models import GenerationConfig

__all__ = ["ProseCodec"]


class ProseCodec(Codec):
    """Every message is the text as written; replies are the model's raw text.

    Subclasses override :meth:`write_brief` to change the Manager's message only.
    """

    def write_brief(self, brief: Brief) -> str:
        return render_brief(brief)

    def write(self, kind: str, sender: str, receiver: str, content: Any) -> Sent:
        text = self.write_brief(content) if kind == "brief" else str(content)
        return Sent(sender, receiver, kind, text, content)

    def prompt(self, who: Participant) -> str:
        if who.kind == "worker":
            return worker_system(self.ctx.task)
        if who.kind == "critic":
            return CRITIC_SYSTEM
        raise ValueError(f"the prose codec has no prompt for a {who.kind}")

    def compose(self, who: Participant, inbox: list[Sent]) -> str:
        if who.kind == "critic":
            task, answer = inbox
            return f"Manager's task:\n{task.text}\n\nWorker's answer:\n{answer.text}"
        return "\n".join(s.text for s in inbox)

    def reply(self, who: Participant, messages: list[dict], gen: GenerationConfig) -> str:
        return self.conv.ask(who.name, messages, gen)

    def revise_text(self, feedback: Sent) -> str:
        return REVISE_INSTRUCTION.format(feedback=feedback.text)

    def verdict(self, critique: str) -> tuple[str, bool]:
        return parse_verdict(critique)

    def prediction(self, answer: str) -> str:
        return extract_prediction(self.ctx.task, answer)

    def counters(self, d: Dialogue) -> dict[str, Any]:
        return {}
