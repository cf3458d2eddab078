"""The Manager's brief: role, subgoal, facts and a question, with caps applied."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .caps import CapCounters, CompressHook, apply_caps
from .errors import ProtocolError
from .lines import ContextLine, FactLine, GoalLine, LineBase, QuestionLine, RoleLine
from .memory import Memory
from .summarize import Summarizer
from .tags import role_for
from .tokens import TokenCounter, approx_token_count


def encode_brief(
    goal: str | None,
    facts: Iterable[str],
    question: str | None,
    role: str = "M",
    caps: Mapping[str, int] | None = None,
    memory: Memory | None = None,
    summarizer: str | Summarizer = "extractive",
    count_tokens: TokenCounter = approx_token_count,
    *,
    addressee: str = "W",
    compress: CompressHook | None = None,
    role_line: bool = True,
    merge_facts: bool = False,
    context: Iterable[tuple[str, str]] = (),
    options: Iterable[tuple[str, str]] = (),
    code: str = "",
) -> tuple[list[LineBase], CapCounters]:
    """``r``, ``g``, context, one ``f`` per fact, options, code and ``q`` (to
    ``addressee``), capped.

    ``context`` (``(name, passage)``) and ``options`` (``(label, text)``) become ``x``
    lines (``["x", "passage", ...]``, ``["x", "A", "bank"]``) before and after the facts;
    ``code`` one ``["x", "code", ...]`` line before the question that no cap touches
    (a summary would cut a signature or docstring; it never overflows into ``M#``).

    ``role_line=False`` leaves out the ``r`` line and ``goal=None`` the ``g`` line (a
    transport that names the sender, and a receiver told the task's goal once, need
    neither in every message).

    ``merge_facts=True`` sends consecutive facts that fit their cap as one ``f`` line
    (their texts joined by a space): caps still apply to each fact, and a fact that
    overflowed keeps its own line with its ``M#`` pointer. It saves the line syntax
    (``["f","`` and ``"]``, about four tokens) of every fact after the first.

    ``caps=None`` uses :data:`~tersetalk.protocol.caps.DEFAULT_CAPS`; ``{}`` disables
    capping. Overflowed texts go into ``memory``: pass the run's store so the
    receiver's questions can be answered; with ``memory=None`` a private store is
    used and the full texts are unreachable afterwards. ``question=None`` omits the
    ``q`` line. Role and addressee accept letters or words ("manager", "worker").
    """
    role_letter = role_for(role) if isinstance(role, str) else None
    to_letter = role_for(addressee) if isinstance(addressee, str) else None
    if role_letter is None or to_letter is None:
        raise ProtocolError(
            "role and addressee must be M, W, C (or manager, worker, critic)",
            snippet=f"role={role!r}, addressee={addressee!r}",
        )
    lines: list[LineBase] = [RoleLine(role=role_letter)] if role_line else []
    if goal is not None:
        lines.append(GoalLine(text=goal))
    lines += [ContextLine(key=name, value=text) for name, text in context]
    lines += [FactLine(text=fact) for fact in facts]
    lines += [ContextLine(key=label, value=text) for label, text in options]
    code_line = ContextLine(key="code", value=code) if code else None
    if code_line is not None:
        lines.append(code_line)
    if question is not None:
        lines.append(QuestionLine(to=to_letter, text=question))
    result = apply_caps(
        lines,
        caps,
        memory=memory if memory is not None else Memory(),
        summarizer=summarizer,
        compress=compress,
        count_tokens=count_tokens,
        verbatim=lambda line: line is code_line,
    )
    out = merge_fact_lines(result.lines) if merge_facts else result.lines
    return out, result.counters


def merge_fact_lines(lines: list[LineBase]) -> list[LineBase]:
    """Runs of consecutive ``f`` lines without a pointer, each run as one ``f`` line."""
    out: list[LineBase] = []
    for line in lines:
        prev = out[-1] if out else None
        if (
            isinstance(line, FactLine)
            and line.ref is None
            and isinstance(prev, FactLine)
            and prev.ref is None
        ):
            out[-1] = FactLine(text=f"{prev.text} {line.text}")
        else:
            out.append(line)
    return out
