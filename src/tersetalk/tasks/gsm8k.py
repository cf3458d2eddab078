"""GSM8K (test split): grade-school math word problems with a numeric answer.

Record layout: the official file's ``question`` and ``answer`` (worked solution ending
in ``#### <number>``); the example id is ``gsm8k-test-<row>`` (the file has no ids).
The Manager's brief sends the problem's last sentence as the question and the other
sentences as facts. Scoring: the gold is the number after ``#### ``, the prediction
the model's free text reduced to one number (:func:`extract_number`), compared as
numbers (:func:`gsm8k_correct`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from tersetalk.tasks.base import (
    CHAIN,
    Answer,
    Brief,
    DatasetFile,
    Metric,
    ScoringError,
    Task,
    last_sentence_question,
    split_sentences,
)

# --- the official answer ("#### <number>") and the number a reply gives -----------

_GOLD_MARKER = "#### "

# One number as a model writes it.  Groups:
#   sign  - a minus directly before the number (or before its "$"), but not
#           when glued to a preceding word/digit/")" -- "16-3" is a
#           subtraction, not 16 and -3;
#   sign2 - a minus right after a "$" ("$-5");
#   num   - either comma-grouped thousands ("1,234,567.5") or plain digits
#           ("1234.5").  A trailing "." with no digit after it (end of a
#           sentence) is not consumed, and "%" or units after the number
#           are simply left behind.
_NUMBER = re.compile(
    r"(?:(?<![\w)])(?P<sign>[-\u2212]))?"
    r"(?:\$\s?(?P<sign2>[-\u2212])?)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?)"
)
# A TerseTalk memory pointer (``M#1``, ``M#12``; protocol.tags.REF_PATTERN) is the id of
# an overflowed text, not a number: a prediction that names one must not be read as 1.
# Matched whole, so "M#12" hides 12 and not only its 1; a word glued before
# the "M" ("HM#1") is no pointer.
_MEMORY_POINTER = re.compile(r"(?<![A-Za-z0-9_])M#[0-9]+")
# "The answer is", "Final answer:", "**Answer:**", "answer = ".
_ANSWER_PHRASE = re.compile(r"\banswer(?:\s+is\b|\s*\**\s*[:=])", re.IGNORECASE)
# LaTeX final answers, as many instruction-tuned models emit them.
_BOXED = re.compile(r"\\boxed\{")


def gsm8k_gold(answer_field: str) -> str:
    """Return the gold number from a GSM8K ``answer`` field.

    GSM8K puts the final answer after the last ``#### ``; commas used as
    thousands separators (``#### 1,000``) are removed so the string parses
    as a number.  Raises ScoringError when the marker or the value is
    missing, because scoring against an empty gold would silently count
    every prediction wrong.
    """
    if _GOLD_MARKER not in answer_field:
        raise ScoringError(f"GSM8K answer has no {_GOLD_MARKER!r} marker: {answer_field!r:.200}")
    value = answer_field.rpartition(_GOLD_MARKER)[2].replace(",", "").strip()
    if not value:
        raise ScoringError(
            f"GSM8K answer has nothing after {_GOLD_MARKER!r}: {answer_field!r:.200}"
        )
    return value


def _canonical(match: re.Match[str]) -> str:
    """Turn a regex match of _NUMBER into a plain decimal string.

    Commas and ``$`` go, trailing fractional zeros go (``"18.00"`` ->
    ``"18"``, ``"3.50"`` -> ``"3.5"``), and ``-0`` becomes ``"0"``, so equal
    numbers always give equal strings.
    """
    negative = bool(match.group("sign")) != bool(match.group("sign2"))
    value = Decimal(match.group("num").replace(",", ""))
    if negative:
        value = -value
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _first_number(text: str) -> str | None:
    """Return the first number in ``text`` in canonical form, or None."""
    match = _NUMBER.search(text)
    return _canonical(match) if match else None


def _last_number(text: str) -> str | None:
    """Return the last number in ``text`` in canonical form, or None."""
    matches = list(_NUMBER.finditer(text))
    return _canonical(matches[-1]) if matches else None


def _first_line(text: str) -> str:
    """Return the first non-blank line of ``text`` ("" if there is none)."""
    return text.lstrip().split("\n", 1)[0]


def extract_number(text: str) -> str | None:
    """Extract a model's final numeric answer from free text.

    Models reason before answering, so the *first* number is rarely the
    answer.  In order of preference:

    1. the first number after the last ``####`` (GSM8K's own format);
    2. the number inside the last ``\\boxed{...}``;
    3. the first number on the line after the last "answer is" /
       "Answer:" phrase that has one;
    4. the last number anywhere in the text.

    Handles ``1,234``, ``-3``, ``3.50``, ``$18``, a sentence-final ``.``
    and trailing ``%`` or units.  Memory pointers of the TerseTalk protocol
    (``M#1``) are not numbers and are skipped everywhere.  Returns a canonical
    string (``"1234"``, ``"-3"``, ``"3.5"``) or None when the text has no number.
    """
    if "M#" in text:
        text = _MEMORY_POINTER.sub(" ", text)
    if "####" in text:
        found = _first_number(text.rpartition("####")[2])
        if found is not None:
            return found

    boxes = list(_BOXED.finditer(text))
    if boxes:
        inside = text[boxes[-1].end() :].split("}", 1)[0]
        found = _first_number(inside)
        if found is not None:
            return found

    for phrase in reversed(list(_ANSWER_PHRASE.finditer(text))):
        found = _first_number(_first_line(text[phrase.end() :]))
        if found is not None:
            return found

    return _last_number(text)


def _to_float(value: str, what: str) -> float:
    """Parse ``value`` as a float, raising ScoringError with context."""
    try:
        number = Decimal(value)
    except InvalidOperation as exc:
        raise ScoringError(f"{what} is not a number: {value!r}") from exc
    if not number.is_finite():
        raise ScoringError(f"{what} is not a finite number: {value!r}")
    return float(number)


def gsm8k_correct(prediction_text: str, gold_answer_field: str) -> bool:
    """Whether the model's final number equals the GSM8K gold number.

    ``gold_answer_field`` may be the raw GSM8K ``answer`` (with ``#### ``)
    or a gold value already taken out by gsm8k_gold (``"18"``, ``"1,000"``),
    because the run records store the extracted value.  Compared as numbers
    with an absolute tolerance of 1e-6, so ``"18.00"`` matches ``18``.  A
    prediction without any number is wrong, not an error; a gold that is
    neither form raises ScoringError.
    """
    if _GOLD_MARKER in gold_answer_field:
        gold_value = gsm8k_gold(gold_answer_field)
    else:
        gold_value = gold_answer_field.replace(",", "").strip()
    gold = _to_float(gold_value, "GSM8K gold answer")
    predicted = extract_number(prediction_text)
    if predicted is None:
        return False
    return math.isclose(_to_float(predicted, "extracted answer"), gold, rel_tol=0.0, abs_tol=1e-6)


# --- the task ------------------------------------------------------------------------

GOAL = "Solve the math word problem and give the final number."
WORKER_SYSTEM = (
    "You are the Worker. The Manager sends you a math word problem. "
    "Work it out in a few short steps, then end with a line 'Answer: <number>'."
)


def brief(record: dict, options: Mapping[str, Any]) -> Brief:
    sentences = split_sentences(record["question"])
    return Brief(
        goal=GOAL,
        facts=sentences[:-1],
        question=last_sentence_question(record["question"]),
    )


def final_number(text: str) -> str:
    """The reply's final number as a string ("" when it has none)."""
    number = extract_number(text)
    return number if number is not None else ""


TASK = Task(
    name="gsm8k",
    title="GSM8K (accuracy)",
    dataset=DatasetFile(
        "gsm8k/test.jsonl.gz",
        "1affc2f095eb08c525d0504bce7f620740776bcd7d67a12c71901700cb7ab73a",
        "openai/gsm8k",
        "main",
        "test",
        from_hub=lambda rec: {"question": rec["question"], "answer": rec["answer"]},
        gold=lambda rec: gsm8k_gold(rec["answer"]),
        example_id=lambda row, rec: f"gsm8k-test-{row:04d}",
    ),
    brief=brief,
    worker_system=WORKER_SYSTEM,
    answer=Answer("a number", "number"),
    brief_holds="a math word problem",
    metric=Metric("accuracy", "the final number equals the gold number after '#### '"),
    correct=gsm8k_correct,
    topology=CHAIN,
    extract=final_number,
    brief_question=last_sentence_question,
)
