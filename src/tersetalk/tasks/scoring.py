"""Answer scoring for the benchmark tasks.

HotpotQA is scored the way the official ``hotpot_evaluate_v1.py`` scores the
answer part, so our numbers can be compared with published ones:

* normalisation is ``white_space_fix(remove_articles(remove_punc(lower(s))))``;
* F1 is token overlap (multiset intersection) after normalisation, except that
  when either normalised side is ``yes``, ``no`` or ``noanswer`` and the two
  differ, precision, recall and F1 are all 0;
* EM is equality after normalisation;
* the corpus score divides by the number of *gold* examples, so a question
  without a prediction contributes 0.

GSM8K gold answers end with ``#### <number>``; a model's free text is reduced
to one number and compared numerically.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

__all__ = [
    "ScoringError",
    "extract_number",
    "gsm8k_correct",
    "gsm8k_gold",
    "hotpot_aggregate",
    "hotpot_em",
    "hotpot_f1",
    "normalize_answer",
]


class ScoringError(ValueError):
    """Raised when a gold answer or a scoring input cannot be interpreted."""


# --------------------------------------------------------------------------- #
# HotpotQA
# --------------------------------------------------------------------------- #

# ASCII punctuation only, as in the official script (it uses string.punctuation).
_PUNCTUATION = frozenset(string.punctuation)
# \b is Unicode-aware on str patterns, matching the official regex exactly.
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# Answers for which partial credit makes no sense: the official script zeroes
# F1 whenever one side is one of these and the two sides are not identical.
_SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer(s: str) -> str:
    """Normalise an answer the official HotpotQA way.

    Steps, in this order: lowercase, drop ASCII punctuation, replace the
    whole words ``a``/``an``/``the`` by a space, collapse whitespace.  The
    order matters: punctuation goes first, so ``"the-end"`` becomes
    ``"theend"`` and keeps no article, and articles are matched on word
    boundaries, so ``"theory"`` is untouched.
    """
    text = s.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def hotpot_f1(prediction: str, gold: str) -> tuple[float, float, float]:
    """Return ``(f1, precision, recall)`` of token overlap, official rules.

    A yes/no/noanswer mismatch scores 0 on all three, so a model cannot earn
    partial credit on a binary question.  No shared tokens (which includes
    an empty prediction or gold) also scores 0; note that this makes two
    empty answers score F1 0 even though their EM is 1, as in the official
    script.
    """
    norm_pred = normalize_answer(prediction)
    norm_gold = normalize_answer(gold)

    if norm_pred != norm_gold and (norm_pred in _SPECIAL_ANSWERS or norm_gold in _SPECIAL_ANSWERS):
        return 0.0, 0.0, 0.0

    pred_tokens = norm_pred.split()
    gold_tokens = norm_gold.split()
    overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if overlap == 0:
        return 0.0, 0.0, 0.0

    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    f1 = 2 * precision * recall / (precision + recall)
    return f1, precision, recall


def hotpot_em(prediction: str, gold: str) -> float:
    """Return 1.0 when the normalised answers are identical, else 0.0."""
    return 1.0 if normalize_answer(prediction) == normalize_answer(gold) else 0.0


def hotpot_aggregate(predictions: Mapping[str, str], golds: Mapping[str, str]) -> dict[str, float]:
    """Average EM, F1, precision and recall over every gold question.

    The denominator is ``len(golds)``: a question with no prediction adds 0,
    so dropping hard questions cannot raise the score (official behaviour).
    Predictions for ids not in ``golds`` are ignored.  Returns keys ``em``,
    ``f1``, ``precision``, ``recall`` and ``n`` (the number of gold questions).

    Raises ScoringError when ``golds`` is empty, since an average over no
    questions is undefined and usually means an upstream bug.
    """
    n = len(golds)
    if n == 0:
        raise ScoringError("hotpot_aggregate needs at least one gold answer")

    em_sum = f1_sum = precision_sum = recall_sum = 0.0
    for qid, gold in golds.items():
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        em_sum += hotpot_em(prediction, gold)
        f1, precision, recall = hotpot_f1(prediction, gold)
        f1_sum += f1
        precision_sum += precision
        recall_sum += recall

    return {
        "em": em_sum / n,
        "f1": f1_sum / n,
        "precision": precision_sum / n,
        "recall": recall_sum / n,
        "n": n,
    }


# --------------------------------------------------------------------------- #
# GSM8K
# --------------------------------------------------------------------------- #

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
