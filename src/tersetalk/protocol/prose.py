"""Render a TerseTalk message as plain English.

The rendering is the reference text for semantic preservation: the same content
as the JSONL, in the words a freeform system would use, so a similarity score
between the two measures what the protocol itself loses (ideally nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

from .lines import (
    AssumptionLine,
    ContextLine,
    DeltaLine,
    FactLine,
    GoalLine,
    LineBase,
    OverflowLine,
    PlanLine,
    QuestionLine,
    RoleLine,
    TextLine,
    VerdictLine,
)
from .repair import parse_lenient
from .tags import ROLE_NAMES, VERDICT_NAMES

_TERMINAL = (".", "!", "?", "…", ":", ";")


def _sentence(text: str, end: str = ".") -> str:
    """Trimmed text ending in punctuation (``end`` when it has none), so rendered
    sentences do not run together."""
    text = " ".join(text.split())
    if not text:
        return ""
    return text if text.endswith(_TERMINAL) else text + end


def _labeled(label: str, text: str, end: str = ".") -> str:
    body = _sentence(text, end)
    return f"{label}: {body}" if body else ""


def line_to_prose(line: LineBase, *, plan_index: int | None = None) -> str:
    """One line as one English sentence (or a few words)."""
    if isinstance(line, RoleLine):
        return f"Role: {ROLE_NAMES[line.role]}."
    if isinstance(line, GoalLine):
        return _labeled("Goal", line.text)
    if isinstance(line, FactLine):
        fact = _labeled("Fact", line.text)
        return f"{fact} (source {line.ref})" if fact and line.ref else fact
    if isinstance(line, AssumptionLine):
        return _labeled("Assumption", line.text)
    if isinstance(line, PlanLine):
        label = f"Plan step {plan_index}" if plan_index is not None else "Plan step"
        return _labeled(label, line.text)
    if isinstance(line, QuestionLine):
        # a q line may leave its "?" to the tag (question_mark: tag): put it back in prose
        return _labeled(f"Question for the {ROLE_NAMES[line.to]}", line.text, end="?")
    if isinstance(line, DeltaLine):
        return f"This refers to earlier content {line.ref}."
    if isinstance(line, VerdictLine):
        return f"Verdict: {VERDICT_NAMES[line.verdict]}."
    if isinstance(line, OverflowLine):
        return _labeled(f"Summary ({line.method}; full text in {line.ref})", line.summary)
    if isinstance(line, ContextLine):
        return _labeled("Context", f"{line.key} = {line.value}")
    if isinstance(line, TextLine):
        return " ".join(line.text.split())
    raise TypeError(f"not a line: {line!r}")


def jsonl_to_prose(lines: Iterable[LineBase] | str | bytes) -> str:
    """A message as natural language, e.g. ``Role: Manager. Goal: ... Verdict: accept.``

    Text or bytes are parsed leniently first, so a messy message renders too.
    Plan steps are numbered in order; empty renderings are skipped.
    """
    if isinstance(lines, str | bytes):
        lines = parse_lenient(lines).lines
    parts: list[str] = []
    plan = 0
    for line in lines:
        if isinstance(line, PlanLine):
            plan += 1
            text = line_to_prose(line, plan_index=plan)
        else:
            text = line_to_prose(line)
        if text:
            parts.append(text)
    return " ".join(parts)
