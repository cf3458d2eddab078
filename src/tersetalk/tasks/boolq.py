"""BoolQ: a Wikipedia passage and a yes/no question about it (direct-optimal).

Record layout (what ``tersetalk sample`` stores and the systems read): ``id``
(``boolq-dev-<row>``, the row in the shipped dev file), ``question`` (as in the file:
lower case, no question mark), ``title``, ``passage``, ``context`` (the passage's
sentences, the brief's facts) and ``answer``, ``"yes"`` or ``"no"`` (the file's boolean).

Scoring is accuracy on yes/no, as in the BoolQ paper. A free-text prediction is reduced
to yes or no by :func:`yes_no`; a prediction that says neither (or both, undecided) is
*unparseable* and counts as wrong, never dropped: the denominator is every example.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tersetalk.tasks.base import DIRECT, Answer, Brief, DatasetFile, Metric, Task

GOAL = "Answer the yes/no question from the passage."
WORKER_SYSTEM = (
    "You are the Worker. The Manager sends you a passage and a yes/no question about it. "
    "Reply with one word: yes or no. No explanation."
)

_YES = frozenset({"yes", "true", "correct"})
_NO = frozenset({"no", "false", "incorrect"})
_WORD = re.compile(r"[a-z]+")
_ANSWER_PHRASE = re.compile(r"\banswer(?:\s+is\b|\s*\**\s*[:=])", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def split_sentences(text: str) -> list[str]:
    """The passage's sentences (a split after ``.``, ``!`` or ``?`` before a capital)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def to_record(raw: dict, row: int) -> dict:
    """The shipped (or hub) line as the pipeline's record."""
    answer = raw["answer"]
    if not isinstance(answer, bool):
        raise ValueError(f"BoolQ row {row}: answer is not a boolean: {answer!r}")
    passage = raw["passage"]
    return {
        "id": f"boolq-dev-{row:04d}",
        "question": raw["question"],
        "title": raw.get("title", ""),
        "passage": passage,
        "context": split_sentences(passage),
        "answer": "yes" if answer else "no",
    }


def brief_question(record: dict) -> str:
    """The question as the Manager asks it (a question mark added when the file lacks one)."""
    q = record["question"].strip()
    return q if q.endswith("?") else q + "?"


def _first_decision(words: list[str]) -> str | None:
    for w in words:
        if w in _YES:
            return "yes"
        if w in _NO:
            return "no"
    return None


def yes_no(text: str) -> str | None:
    """``"yes"``, ``"no"`` or None (unparseable) for a model's answer.

    In order: the first word (``yes``/``true``/``correct``, ``no``/``false``/``incorrect``);
    the first such word after the last "answer is" / "Answer:"; otherwise the one of
    *yes* and *no* that the text contains as a word, if it contains exactly one of them.
    Anything else (no decision, or both words with no leading one) is None.
    """
    words = _WORD.findall(text.lower())
    if not words:
        return None
    if words[0] in _YES or words[0] in _NO:
        return "yes" if words[0] in _YES else "no"
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:
        found = _first_decision(_WORD.findall(text[phrases[-1].end() :].lower())[:3])
        if found is not None:
            return found
    present = {w for w in words if w in ("yes", "no")}
    return present.pop() if len(present) == 1 else None


def correct(prediction: str, gold: str) -> bool:
    """Whether the prediction's yes/no equals the gold ``"yes"``/``"no"``."""
    if gold not in ("yes", "no"):
        from tersetalk.tasks.base import ScoringError

        raise ScoringError(f"BoolQ gold must be 'yes' or 'no', got {gold!r}")
    return yes_no(prediction or "") == gold


def brief(record: dict, options: Mapping[str, Any]) -> Brief:
    """The passage as context (folded into facts, it is its sentences) and the question
    with its question mark."""
    return Brief(
        goal=GOAL, context=[("passage", record["passage"])], question=brief_question(record)
    )


TASK = Task(
    name="boolq",
    title="BoolQ (yes/no accuracy)",
    dataset=DatasetFile(
        "boolq/dev.jsonl.gz",
        "6e943fcb79eeaabb77e41b5e2df0ca1e5253666fcb2946d6f97572c5c78ad586",
        "google/boolq",
        None,
        "validation",
        # the hub copy has no title
        from_hub=lambda rec: {
            "question": rec["question"],
            "title": "",
            "answer": rec["answer"],
            "passage": rec["passage"],
        },  # fmt: skip
        to_record=to_record,
    ),
    brief=brief,
    worker_system=WORKER_SYSTEM,
    answer=Answer("yes or no", "yes/no"),
    metric=Metric(
        "accuracy", "yes/no accuracy; an answer that says neither yes nor no counts as wrong"
    ),
    correct=correct,
    topology=DIRECT,
)
