"""The TerseTalk-JSONL vocabulary: tags, roles, verdicts and the words for them.

Single letters keep every line a few tokens long; the alias tables exist because
small models often write the long word ("fact", "manager", "accept") instead of
the letter, and lenient parsing should map those back deterministically.
"""

from __future__ import annotations

import re
from typing import Literal

# defined on the ground floor, where the data dictionary reads them too; named here as
# part of the protocol's vocabulary (caps and the package import them from this module)
from tersetalk.core.tags import CAPPABLE_TAGS, TAG_NAMES, TAGS  # noqa: F401

Tag = Literal["r", "g", "f", "u", "p", "q", "d", "v", "o", "t", "x"]
Role = Literal["M", "W", "C"]
Verdict = Literal["A", "R", "E"]

ROLES: tuple[str, ...] = ("M", "W", "C")
VERDICTS: tuple[str, ...] = ("A", "R", "E")

ROLE_NAMES: dict[str, str] = {"M": "Manager", "W": "Worker", "C": "Critic"}
VERDICT_NAMES: dict[str, str] = {"A": "accept", "R": "revise", "E": "escalate"}

#: Long or alternative tag names (lower case) -> tag.
TAG_ALIASES: dict[str, str] = {
    **{t: t for t in TAGS},
    "role": "r",
    "speaker": "r",
    "sender": "r",
    "goal": "g",
    "subgoal": "g",
    "sub_goal": "g",
    "sub-goal": "g",
    "objective": "g",
    "task": "g",
    "fact": "f",
    "facts": "f",
    "evidence": "f",
    "assumption": "u",
    "assumptions": "u",
    "assume": "u",
    "plan": "p",
    "plan_step": "p",
    "plan step": "p",
    "step": "p",
    "steps": "p",
    "question": "q",
    "questions": "q",
    "ask": "q",
    "query": "q",
    "delta": "d",
    "delta_ref": "d",
    "diff": "d",
    "verdict": "v",
    "decision": "v",
    "judgement": "v",
    "judgment": "v",
    "overflow": "o",
    "text": "t",
    "free_text": "t",
    "free text": "t",
    "note": "t",
    "notes": "t",
    "comment": "t",
    "reason": "t",
    "rationale": "t",
    "explanation": "t",
    "answer": "t",
    "context": "x",
    "ctx": "x",
}

ROLE_WORDS: dict[str, str] = {
    "m": "M",
    "manager": "M",
    "mgr": "M",
    "lead": "M",
    "planner": "M",
    "w": "W",
    "worker": "W",
    "solver": "W",
    "executor": "W",
    "assistant": "W",
    "c": "C",
    "critic": "C",
    "reviewer": "C",
    "checker": "C",
    "verifier": "C",
}

VERDICT_WORDS: dict[str, str] = {
    "a": "A",
    "accept": "A",
    "accepted": "A",
    "accepts": "A",
    "approve": "A",
    "approved": "A",
    "pass": "A",
    "ok": "A",
    "yes": "A",
    "correct": "A",
    "r": "R",
    "revise": "R",
    "revised": "R",
    "revision": "R",
    "reject": "R",
    "rejected": "R",
    "retry": "R",
    "redo": "R",
    "fix": "R",
    "incorrect": "R",
    "e": "E",
    "escalate": "E",
    "escalated": "E",
    "escalation": "E",
}

#: Plural long names: with a list value each item is its own line ({"facts": [...]}).
PLURAL_ALIASES: frozenset[str] = frozenset({"facts", "assumptions", "steps", "questions", "notes"})

#: Canonical memory reference: ``M#`` followed by a positive integer.
REF_PATTERN = r"^M#[1-9][0-9]*$"
REF_RE = re.compile(REF_PATTERN)
#: A reference mentioned inside free text, e.g. in a question "what is in M#4?".
REF_MENTION_RE = re.compile(r"(?<![A-Za-z0-9_])M#([1-9][0-9]*)(?![0-9])")


def _key(word: str) -> str:
    return " ".join(word.strip().lower().split())


def tag_for(word: str) -> str | None:
    """Tag for a tag letter or long name (case-insensitive), or ``None``."""
    return TAG_ALIASES.get(_key(word))


def role_for(word: str) -> str | None:
    """Role letter for a role letter or word (case-insensitive), or ``None``."""
    return ROLE_WORDS.get(_key(word))


def verdict_for(word: str) -> str | None:
    """Verdict letter for a verdict letter or word (case-insensitive), or ``None``."""
    return VERDICT_WORDS.get(_key(word).rstrip(".!"))
