"""What each role says and how its words are read back.

The Manager is deterministic: its brief is built from the example (by the task, see
:mod:`tersetalk.tasks.registry`), so every system starts from the same information and
differs only in how that information travels. The Worker and the Critic are model calls.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tersetalk.core.participants import PARTICIPANTS, Participant, participant
from tersetalk.tasks.base import Brief, lay_out_parts, split_sentences
from tersetalk.tasks.registry import get as get_task

__all__ = [
    "CRITIC_SYSTEM",
    "PARTICIPANTS",
    "REVISE_INSTRUCTION",
    "VERDICTS",
    "Brief",
    "BriefLayoutSettings",
    "Participant",
    "build_brief",
    "extract_prediction",
    "lay_out",
    "parse_verdict",
    "participant",
    "render_brief",
    "split_sentences",
    "worker_system",
]


def build_brief(task: str, record: dict, task_options: dict | None = None) -> Brief:
    """The Manager's brief for one record, as the task builds it (``task_options``: the
    task's config section, e.g. HotpotQA's ``facts``)."""
    return get_task(task).brief(record, task_options or {})


class BriefLayoutSettings(BaseModel):
    """How a codec that knows the brief's parts receives them.

    A task's brief may hold context passages, answer options and program text beside
    its facts (:class:`~tersetalk.tasks.base.Brief`). A codec whose settings extend this
    model receives each part in its own field, or folded into facts and the question
    as its setting says (the ablation of each change); any other codec receives the
    brief folded (:meth:`Brief.flat`), as every codec did before the parts existed.
    """

    model_config = ConfigDict(extra="forbid")

    #: passages as context (TerseTalk ``x`` lines, a free-form section) or as facts
    brief_context: Literal["context", "facts"] = "context"
    #: answer options as options (``x`` lines keyed by label, a section) or as facts
    brief_options: Literal["options", "facts"] = "options"
    #: program text as code kept verbatim (an uncapped ``x`` line, a fenced section), or
    #: as the question itself (a ``q`` line under the cap: it overflows into ``M#``)
    brief_code: Literal["code", "question"] = "code"


def lay_out(brief: Brief, settings: object) -> Brief:
    """``brief`` as a codec with ``settings`` receives it (see :class:`BriefLayoutSettings`)."""
    if not isinstance(settings, BriefLayoutSettings):
        return brief.flat()
    return lay_out_parts(
        brief,
        context=settings.brief_context == "context",
        options=settings.brief_options == "options",
        code=settings.brief_code == "code",
    )


def render_brief(brief: Brief) -> str:
    """The free-form Manager message: goal, context passages, facts, options, the tool
    response, program text (fenced) and the question, each part under its own heading."""
    lines = [f"Goal: {brief.goal}"]
    for name, text in brief.context:
        lines += [f"{name.capitalize()}:", text]
    if brief.facts:
        lines.append("Facts:")
        lines.extend(f"- {f}" for f in brief.facts)
    if brief.options:
        lines.append("Options:")
        lines.extend(f"- {label}: {text}" for label, text in brief.options)
    if brief.payload:
        lines.append("Tool response:")
        lines.append(brief.payload)
    if brief.code:
        lines += ["Code:", "```python", brief.code.strip("\n"), "```"]
    lines.append(f"Question: {brief.question}")
    return "\n".join(lines)


def worker_system(task: str) -> str:
    """The Worker's system prompt in prose for ``task``."""
    return get_task(task).worker_system


CRITIC_SYSTEM = (
    "You are the Critic. You see the Manager's task and the Worker's answer. "
    "Start your reply with one word: ACCEPT if the answer is right, REVISE if it "
    "should be fixed, ESCALATE if the task cannot be answered from what was given. "
    "Then give one short sentence of feedback."
)

REVISE_INSTRUCTION = (
    "The Critic asked you to revise your answer. Critic: {feedback}\n"
    "Give your corrected reply in the same format as before."
)

VERDICTS = ("accept", "revise", "escalate")
_VERDICT_RE = re.compile(r"\b(accept|revise|escalate)\w*", re.IGNORECASE)


def parse_verdict(text: str) -> tuple[str, bool]:
    """The Critic's verdict and whether it was stated explicitly.

    A verdict the Critic never states is read as ``accept`` (no revision is forced
    on the Worker), and the record says it was defaulted.
    """
    m = _VERDICT_RE.search(text)
    if m:
        return m.group(1).lower(), True
    return "accept", False


def extract_prediction(task: str, text: str) -> str:
    """The final answer the Worker gave, as a string to score (the task reads it)."""
    return get_task(task).extract(text)
