"""An independent oracle for the HotpotQA answer metrics (test helper, not the package).

Written from the definition of the official ``hotpot_evaluate_v1.py`` answer
metrics, deliberately by a different route than :mod:`tersetalk.tasks.hotpotqa`'s scorer,
so that a test comparing the two can catch a slip in either:

* normalise: lowercase, delete every character of ``string.punctuation``, turn each
  whole word ``a``/``an``/``the`` into a space, then collapse whitespace. "Whole
  word" is meant the way the official regex ``\\b(a|an|the)\\b`` means it on a
  ``str``: a maximal run of word characters (``str.isalnum()`` or ``_``), which is
  not the same as a whitespace-separated token once Unicode punctuation is present;
* F1: 0 when the normalised prediction and gold differ and either of them is
  ``yes``, ``no`` or ``noanswer``; otherwise the token-multiset F1, 0 without any
  shared token;
* EM: the normalised strings are equal.

Here the article step walks runs of word characters instead of using a regex,
and the overlap is counted by hand rather than with ``Counter.__and__``.
"""

from __future__ import annotations

import itertools
import string
from collections import Counter

ARTICLES = {"a", "an", "the"}
SPECIAL = {"yes", "no", "noanswer"}
PUNCTUATION = set(string.punctuation)


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def normalize_answer(s: str) -> str:
    lowered = s.lower()
    no_punc = "".join(ch for ch in lowered if ch not in PUNCTUATION)
    pieces = []
    for is_word, run in itertools.groupby(no_punc, key=_is_word_char):
        chunk = "".join(run)
        pieces.append(" " if is_word and chunk in ARTICLES else chunk)
    return " ".join("".join(pieces).split())


def f1_score(prediction: str, gold: str) -> tuple[float, float, float]:
    """``(f1, precision, recall)`` as the official script returns them."""
    pred = normalize_answer(prediction)
    ref = normalize_answer(gold)
    if pred != ref and (pred in SPECIAL or ref in SPECIAL):
        return 0.0, 0.0, 0.0
    pred_tokens = pred.split()
    ref_tokens = ref.split()
    pred_counts = Counter(pred_tokens)
    ref_counts = Counter(ref_tokens)
    same = 0
    for token, n in pred_counts.items():
        same += min(n, ref_counts.get(token, 0))
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred_tokens)
    recall = same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))
