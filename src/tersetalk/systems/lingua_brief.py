"""The Manager's free-form brief as a message for LLMLingua (the llmlingua and hybrid systems).

Why here and not in :mod:`tersetalk.encoders.messages`: the encoders are text
transforms below the dialogue engine and know nothing of its roles; the systems
that compress a :class:`~tersetalk.agents.roles.Brief` are the ones that know what
a brief looks like, so the view of one lives on their side.
"""

from __future__ import annotations

from typing import Any

from tersetalk.agents.roles import Brief
from tersetalk.encoders.lingua import Compressor, LinguaSettings
from tersetalk.encoders.messages import MessageView, compress_message

__all__ = ["brief_view", "compress_brief"]


def brief_view(brief: Brief) -> MessageView:
    """The free-form brief, rendered exactly as :func:`~tersetalk.agents.roles.render_brief`."""
    return MessageView(
        head=(f"Goal: {brief.goal}",),
        pieces=tuple(brief.facts),
        tail=(f"Question: {brief.question}",),
        question=brief.question,
        label="Facts:",
    )


def compress_brief(
    brief: Brief, compressor: Compressor, opts: LinguaSettings, task: str
) -> tuple[str, dict[str, Any]]:
    """The compressed free-form brief and its counters (``lingua_*``, ``t_lingua_s``)."""
    out = compress_message(brief_view(brief), compressor, opts, task)
    return out.text, out.counters
