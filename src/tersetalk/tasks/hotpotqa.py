"""HotpotQA (distractor setting): multi-hop questions over Wikipedia paragraphs.

Record layout: the official file's ``id``, ``question``, ``answer``, ``type``,
``level``, ``supporting_facts`` (``[title, sentence index]`` pairs) and ``context``
(``[title, sentences]`` pairs). The Manager's facts are ``"Title: sentence"``: the
supporting sentences (config ``hotpotqa.facts: supporting``, the default) or every
context paragraph (``context``).

Scoring is the official ``hotpot_evaluate_v1.py`` answer part, written here so our
numbers compare with published ones: normalisation is
``white_space_fix(remove_articles(remove_punc(lower(s))))``; F1 is the token overlap
(multiset intersection) after normalisation, except that when either normalised side is
``yes``, ``no`` or ``noanswer`` and the two differ, precision, recall and F1 are all 0;
EM is equality after normalisation; every average divides by the number of *gold*
questions, so a question without a prediction adds 0. EM is the run's accuracy, F1,
precision and recall are reported beside it.

The rest of this module is the "Title: sentence" rules TerseTalk's brief applies
(``fact_titles``, ``title_names``, ``residue``) and the token audit measures: when a
sentence already names its title, and what stripped Wikipedia markup left behind.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tersetalk.tasks.base import (
    CHAIN,
    Answer,
    Brief,
    DatasetFile,
    Metric,
    ScoringError,
    Task,
    TitledFacts,
    mean_in_order,
)

# --- the official answer scoring -------------------------------------------------

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


# --- the task ------------------------------------------------------------------------

GOAL = "Answer the question with a short span taken from the facts."
WORKER_SYSTEM = (
    "You are the Worker. The Manager sends you facts and a question. "
    "Reply with the answer only: a few words copied from the facts, or yes/no. "
    "No explanation."
)


def from_hub(rec: dict) -> dict:
    """A hub row in the shipped file's layout (lists, as in the original files)."""
    sf = rec["supporting_facts"]
    ctx = rec["context"]
    return {
        "id": rec["id"],
        "question": rec["question"],
        "answer": rec["answer"],
        "type": rec.get("type"),
        "level": rec.get("level"),
        "supporting_facts": [list(p) for p in zip(sf["title"], sf["sent_id"], strict=True)],
        "context": [list(p) for p in zip(ctx["title"], ctx["sentences"], strict=True)],
    }


def hotpot_facts(record: dict, mode: str) -> list[str]:
    """Supporting sentences ("Title: sentence") or every context paragraph.

    A few HotpotQA supporting facts point past the end of their paragraph (the
    official data has them too); there is no sentence to send for those, so they
    are left out, and answer preservation only checks facts that have text.
    """
    paragraphs = {title: sents for title, sents in record["context"]}
    if mode == "context":
        return [f"{title}: {''.join(sents).strip()}" for title, sents in record["context"]]
    facts = []
    for title, sent_id in record["supporting_facts"]:
        sents = paragraphs.get(title, [])
        if 0 <= sent_id < len(sents):
            facts.append(f"{title}: {sents[sent_id].strip()}")
    return facts


def brief(record: dict, options: Mapping[str, Any]) -> Brief:
    mode = options.get("facts", "supporting")
    return Brief(
        goal=GOAL,
        facts=hotpot_facts(record, mode),
        question=record["question"].strip(),
        supporting=None if mode == "supporting" else hotpot_facts(record, "supporting"),
    )


def score(prediction: str, gold: str, options: Mapping[str, Any]) -> dict[str, float]:
    """EM, F1, precision and recall of one prediction; ``correct`` is EM."""
    f1, p, r = hotpot_f1(prediction, gold)
    em = hotpot_em(prediction, gold)
    return {"em": em, "f1": f1, "precision": p, "recall": r, "correct": em}


def aggregate(scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The official averages over every gold question (an unanswered one scores 0, as in
    :func:`hotpot_aggregate`, summed in the same order); accuracy is EM."""
    means = {k: mean_in_order(s[k] for s in scores) for k in ("em", "f1", "precision", "recall")}
    return {**means, "accuracy": means["em"]}


def fact_sentence(fact: str) -> str:
    """A fact's sentence: what must reach the Worker (its title is a label)."""
    return fact.split(": ", 1)[1] if ": " in fact else fact


# ---- "Title: sentence" ------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_ASIDE = re.compile(r"\([^)]*\)")
#: legal-form suffixes a sentence leaves out when it names a company ("Stone Brewing")
LEGAL_SUFFIXES = frozenset({"co", "inc", "ltd", "corp", "llc", "plc", "gmbh"})
#: the shortest title word that may stand for a longer sentence word ("Chris", "Case")
MIN_PREFIX = 3


def _fold(word: str) -> str:
    """A word compared without case or accents ("Grindé" and "Grinde" match)."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def names_title(title: str, sentence: str, loose: bool = False) -> bool:
    """Whether ``sentence`` names ``title``: every word of the title occurs in it.

    A parenthetical aside ("(album)") is not part of the name. ``loose`` also folds
    accents, lets a title word of MIN_PREFIX or more letters be the start of a
    sentence word (a short first name: "Chris Summers" is named by "Christopher C
    Summers") and lets a legal-form suffix ("Co.") be absent.
    """
    words = _WORD.findall(_ASIDE.sub(" ", title))
    said = _WORD.findall(sentence)
    if loose:
        words = [_fold(w) for w in words]
        said = [_fold(w) for w in said]
        if len(words) > 1 and words[-1] in LEGAL_SUFFIXES:
            words = words[:-1]
    else:
        words = [w.casefold() for w in words]
        said = [w.casefold() for w in said]
    if not words:
        return False
    vocab = set(said)

    def named(word: str) -> bool:
        if word in vocab:
            return True
        return loose and len(word) >= MIN_PREFIX and any(s.startswith(word) for s in said)

    return all(named(w) for w in words)


def dedup_title(fact: str, loose: bool = False) -> str:
    """``"Title: sentence"`` without the title when the sentence already names it.

    HotpotQA facts carry their paragraph's title; it adds nothing when every word of
    the title (outside a parenthetical aside such as "(album)") occurs in the sentence,
    e.g. "Paul Kantner: Paul Lorin Kantner (...) was an American rock musician."
    ``loose``: see :func:`names_title`; the title kept is also HTML-decoded.
    """
    title, sep, sentence = fact.partition(": ")
    if not sep or not sentence.strip():
        return fact
    if loose:
        title = html.unescape(title)
    if names_title(title, sentence, loose):
        return sentence
    return f"{title}: {sentence}"


def paragraph_titles(facts: list[str], loose: bool = False) -> list[str]:
    """Titles deduplicated, and said once per run of facts from the same paragraph.

    HotpotQA's supporting sentences of one paragraph follow each other; the second
    continues the first ("Genny Light is an American light beer ... The beer has
    4.0% alcohol"), so its title repeats what the run already established. A run
    starts again whenever the title changes.
    """
    out: list[str] = []
    previous = None
    for fact in facts:
        title, sep, sentence = fact.partition(": ")
        if sep and sentence.strip() and title == previous:
            out.append(sentence)
        else:
            out.append(dedup_title(fact, loose))
        previous = title if sep else None
    return out


#: asides (after a space, as in prose: not a call "g()") holding only what stripped
#: markup left: spaces, ";", "," or "]"; a run of them is one match, so it is judged by
#: the words around the whole run
_EMPTY_ASIDE = re.compile(r"(?:\s+\((?:\s|[;,\]])*\))+")
#: the residue at the start of an aside that goes on ("( ; June 18" -> "(June 18")
_ASIDE_LEAD = re.compile(r"(?:(?<=\s)|^)\((?:\s|[;,\]])+(?=[^\s;,\])])")
_SPACES = re.compile(r" {2,}")


def strip_residue(text: str) -> str:
    """``text`` without what stripped Wikipedia markup left behind.

    HotpotQA's sentences come from Wikipedia with pronunciations removed, leaving
    ``McLean ( ) is``, ``Roger Joseph Ebert ( ; June 18, 1942 ...`` or ``Mendoza (    ;
    born ...``. Those characters say nothing. Only spaces and punctuation go, and an
    empty aside between two words leaves a space, so the text a reader (or
    :func:`normalize_answer`) takes from it is the same.
    """

    def empty(match: re.Match) -> str:
        # words the aside's spaces kept apart ("a ( )b") stay apart; punctuation next
        # to it does not separate words for a reader that drops punctuation
        if not any(c.isspace() for c in match.group()):
            return ""
        before = match.string[: match.start()].rstrip(string.punctuation)
        after = match.string[match.end() :].lstrip(string.punctuation)
        apart = not before or not after or before[-1].isspace() or after[0].isspace()
        return "" if apart else " "

    text = _EMPTY_ASIDE.sub(empty, text)
    text = _ASIDE_LEAD.sub("(", text)
    return _SPACES.sub(" ", text)


def correct(prediction: str, gold: str) -> bool:
    """Exact match after the official normalisation."""
    return hotpot_em(prediction, gold) == 1.0


TASK = Task(
    name="hotpotqa",
    title="HotpotQA (exact match)",
    dataset=DatasetFile(
        "hotpotqa/hotpot_dev_distractor.jsonl.gz",
        "9c21599828600d90bade97561777f43df6b920af509c7227e58e67956c342a95",
        "hotpotqa/hotpot_qa",
        "distractor",
        "validation",
        from_hub=from_hub,
    ),
    brief=brief,
    worker_system=WORKER_SYSTEM,
    answer=Answer("a few words copied from the facts, or yes/no", "span"),
    brief_holds="facts and a question",
    metric=Metric(
        "exact match",
        "official hotpot_evaluate_v1 exact match after normalisation (F1 beside it)",
    ),
    correct=correct,
    topology=CHAIN,
    score=score,
    aggregate=aggregate,
    fact_text=fact_sentence,
    run_options=True,
    titled_facts=TitledFacts(strip_residue, dedup_title, paragraph_titles),
)
