"""The typed content of one message, and its paired renderings.

MB-1 compares two ways of carrying the same typed fields -- role, goal, facts,
plan steps, questions (with their addressee) and verdict -- so everything starts
from one :class:`Fields` value and every representation is rendered from it:

* ``jsonl``: canonical TerseTalk-JSONL built with the protocol's own line models
  and :func:`~tersetalk.protocol.serialize`;
* ``freeform``: the free-form layout the ``freeform`` system sends (exactly
  :func:`~tersetalk.agents.roles.render_brief` for a brief), extended with the same
  labels for plan steps and a verdict;
* ``prose``: one paragraph of English sentences,
  :func:`~tersetalk.protocol.jsonl_to_prose` of the JSONL.

Texts are canonical (whitespace runs collapsed to one space, non-empty, no lone
surrogates): a line-based free-form message cannot hold a newline inside a fact,
so both sides carry the same canonical text and the comparison stays fair.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tersetalk.protocol import (
    FactLine,
    GoalLine,
    LineBase,
    PlanLine,
    QuestionLine,
    RoleLine,
    VerdictLine,
    jsonl_to_prose,
    serialize,
)
from tersetalk.protocol.lines import replace_surrogates

ROLE_NAMES = {"M": "Manager", "W": "Worker", "C": "Critic"}
ROLE_LETTERS = {name: letter for letter, name in ROLE_NAMES.items()}
VERDICT_NAMES = {"A": "accept", "R": "revise", "E": "escalate"}
VERDICT_LETTERS = {name: letter for letter, name in VERDICT_NAMES.items()}
#: The addressee a bare ``Question:`` line means (the Manager's brief asks the Worker).
DEFAULT_ADDRESSEE = "W"
FIELD_NAMES = ("role", "goal", "facts", "plan", "questions", "verdict")

#: ``(role, goal, facts, plan, questions, verdict)``: what extractors return. A plain
#: tuple, so no extractor pays for building or validating a model in the timed loop.
Key = tuple[str | None, str | None, tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...],
            str | None]  # fmt: skip

_WS_RE = re.compile(r"\s+")


class FieldsError(ValueError):
    """A :class:`Fields` value breaks an invariant (empty text, newline, bad code)."""


def canonical_text(text: str) -> str:
    """Whitespace runs collapsed to one space, ends trimmed, lone surrogates replaced."""
    return _WS_RE.sub(" ", replace_surrogates(text)).strip()


@dataclass(frozen=True, slots=True)
class Fields:
    """The typed fields of one message (hashable, so a corpus can be deduplicated)."""

    role: str | None = None
    goal: str | None = None
    facts: tuple[str, ...] = ()
    plan: tuple[str, ...] = ()
    questions: tuple[tuple[str, str], ...] = ()
    verdict: str | None = None

    def __post_init__(self) -> None:
        if self.role is not None and self.role not in ROLE_NAMES:
            raise FieldsError(f"role must be one of M, W, C, got {self.role!r}")
        if self.verdict is not None and self.verdict not in VERDICT_NAMES:
            raise FieldsError(f"verdict must be one of A, R, E, got {self.verdict!r}")
        texts = [*self.facts, *self.plan, *(q for _, q in self.questions)]
        if self.goal is not None:
            texts.append(self.goal)
        for text in texts:
            if not isinstance(text, str) or not text or text != canonical_text(text):
                raise FieldsError(f"texts must be canonical and non-empty, got {text!r}")
        for to, _ in self.questions:
            if to not in ROLE_NAMES:
                raise FieldsError(f"question addressee must be M, W or C, got {to!r}")

    @property
    def n_items(self) -> int:
        """How many typed values the message holds (what an extractor must recover)."""
        return (
            (self.role is not None)
            + (self.goal is not None)
            + len(self.facts)
            + len(self.plan)
            + len(self.questions)
            + (self.verdict is not None)
        )

    def key(self) -> Key:
        """The plain tuple every extractor returns (compared with ``==``)."""
        return (self.role, self.goal, self.facts, self.plan, self.questions, self.verdict)

    @classmethod
    def from_key(cls, key: Key) -> Fields:
        return cls(*key)

    def is_empty(self) -> bool:
        return self.n_items == 0 or (self.n_items == 1 and self.role is not None)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with every key (lists, not tuples): the corpus's JSON column."""
        return {
            "role": self.role,
            "goal": self.goal,
            "facts": list(self.facts),
            "plan": list(self.plan),
            "questions": [list(q) for q in self.questions],
            "verdict": self.verdict,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fields:
        return cls(
            role=data.get("role"),
            goal=data.get("goal"),
            facts=tuple(data.get("facts") or ()),
            plan=tuple(data.get("plan") or ()),
            questions=tuple((str(to), str(text)) for to, text in data.get("questions") or ()),
            verdict=data.get("verdict"),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Fields:
        return cls.from_dict(json.loads(text))


def to_lines(fields: Fields) -> list[LineBase]:
    """Protocol line models in canonical order: r, g, f..., p..., q..., v."""
    return lines_from_key(fields.key())


def lines_from_key(key: Key) -> list[LineBase]:
    """:func:`to_lines` of an extracted key (no :class:`Fields` validation on the way)."""
    role, goal, facts, plan, questions, verdict = key
    lines: list[LineBase] = []
    if role is not None:
        lines.append(RoleLine(role=role))
    if goal is not None:
        lines.append(GoalLine(text=goal))
    lines += [FactLine(text=t) for t in facts]
    lines += [PlanLine(text=t) for t in plan]
    lines += [QuestionLine(to=to, text=t) for to, t in questions]
    if verdict is not None:
        lines.append(VerdictLine(verdict=verdict))
    return lines


def key_from_lines(lines: list[LineBase]) -> Key:
    """The typed fields of parsed lines; other tags (d, o, t, x, u) are not fields here."""
    role = goal = verdict = None
    facts: list[str] = []
    plan: list[str] = []
    questions: list[tuple[str, str]] = []
    for line in lines:  # dispatch on the tag, as the array extractors do
        tag = line.tag
        if tag == "f":
            facts.append(line.text)
        elif tag == "p":
            plan.append(line.text)
        elif tag == "q":
            questions.append((line.to, line.text))
        elif tag == "g":
            goal = line.text
        elif tag == "r":
            role = line.role
        elif tag == "v":
            verdict = line.verdict
    return (role, goal, tuple(facts), tuple(plan), tuple(questions), verdict)


def to_jsonl(fields: Fields) -> str:
    """Canonical TerseTalk-JSONL of the fields (the protocol's own serializer)."""
    return serialize(to_lines(fields))


def to_freeform(fields: Fields) -> str:
    """The free-form layout of the ``freeform`` system.

    For a brief (role omitted, goal, facts, one question to the Worker) this is
    exactly ``render_brief``; plan steps are numbered lines under ``Plan:``, a
    question to another role says so, and a verdict is ``Verdict: accept``.
    """
    return render_freeform(fields.key())


def render_freeform(key: Key) -> str:
    """:func:`to_freeform` of an extracted key (no :class:`Fields` validation on the way)."""
    role, goal, facts, plan, questions, verdict = key
    out: list[str] = []
    if role is not None:
        out.append("Role: " + ROLE_NAMES[role])
    if goal is not None:
        out.append("Goal: " + goal)
    if facts:
        out.append("Facts:")
        out.extend(["- " + t for t in facts])
    if plan:
        out.append("Plan:")
        out.extend([f"{i}. {t}" for i, t in enumerate(plan, start=1)])
    for to, text in questions:
        label = "Question" if to == DEFAULT_ADDRESSEE else f"Question for the {ROLE_NAMES[to]}"
        out.append(f"{label}: {text}")
    if verdict is not None:
        out.append("Verdict: " + VERDICT_NAMES[verdict])
    return "\n".join(out)


def to_prose(fields: Fields) -> str:
    """One paragraph of sentences: the protocol's own ``jsonl_to_prose`` rendering."""
    return jsonl_to_prose(to_lines(fields))


def prose_key(key: Key) -> Key:
    """A comparison key of the fields with one trailing ``.`` dropped from every text
    (``?`` too from a question's).

    ``jsonl_to_prose`` ends each text with a period (a question with ``?``) unless it
    already ends in punctuation, so "Paris" and "Paris." render the same; prose
    extraction is therefore compared modulo that one mark (applied to both sides alike).
    """

    def cut(text: str, marks: str = ".") -> str:
        return text[:-1] if text.endswith(tuple(marks)) else text

    role, goal, facts, plan, questions, verdict = key
    return (
        role,
        None if goal is None else cut(goal),
        tuple(cut(t) for t in facts),
        tuple(cut(t) for t in plan),
        tuple((to, cut(t, ".?")) for to, t in questions),
        verdict,
    )
