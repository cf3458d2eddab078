"""CommonsenseQA (five options A-E) and Social IQa (three options A-C), direct-optimal.

Record layout: ``id`` (CommonsenseQA's own id; ``socialiqa-dev-<row>`` for Social IQa,
whose file has none), ``question``, ``context`` (a list of sentences: Social IQa's
situation; empty for CommonsenseQA), ``options`` (``[[label, text], ...]`` in label
order) and ``answer``, the gold option's label. Social IQa's file numbers its gold
``"1"``-``"3"`` (answerA-answerC); it becomes ``A``-``C`` here.

The sample's ``gold`` is JSON ``{"label": "B", "options": {"A": ..., "B": ...}}``: the
label is what is scored, and the options travel with it so that the scorer can accept
an answer that gives the option's text instead of its label (:func:`chosen_label`),
from the run file alone. The score is accuracy on the label, over every example; an
answer naming no option is wrong.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from typing import Any

from tersetalk.tasks.base import DIRECT, Answer, Brief, DatasetFile, Metric, Task

GOAL = "Choose the best option for the question."
WORKER_SYSTEM = (
    "You are the Worker. The Manager sends you a question and its lettered options. "
    "Reply with the letter of the best option only. No explanation."
)

_PUNCT = frozenset(string.punctuation)
# "B", "(B)", "B.", "B)", "B:", "**B**" as the whole answer or its start
_LEADING_LABEL = re.compile(r"^\W*(?:\(([A-Z])\)|([A-Z])(?:[.):\]]|\*+|\s*$|\s+[-:]\s))")
_PHRASE_LABEL = re.compile(
    r"\b(?:answer|option|choice)(?:\s+is)?\s*\**\s*[:=]?\s*\**\s*\(?([A-Z])\b\)?", re.IGNORECASE
)


def _normal(text: str) -> str:
    return " ".join("".join(c for c in text.lower() if c not in _PUNCT).split())


def csqa_record(raw: dict, row: int) -> dict:
    """A CommonsenseQA line as the pipeline's record."""
    q = raw["question"]
    options = [[c["label"], c["text"]] for c in sorted(q["choices"], key=lambda c: c["label"])]
    return {
        "id": raw["id"],
        "question": q["stem"],
        "concept": q.get("question_concept"),
        "context": [],
        "options": options,
        "answer": raw["answerKey"],
    }


def siqa_record(raw: dict, row: int) -> dict:
    """A Social IQa line (with its merged ``label``) as the pipeline's record."""
    label = str(raw["label"]).strip()
    if label not in ("1", "2", "3"):
        raise ValueError(f"Social IQa row {row}: label must be 1, 2 or 3, got {label!r}")
    return {
        "id": f"socialiqa-dev-{row:04d}",
        "question": raw["question"],
        "context": [raw["context"]],
        "options": [["A", raw["answerA"]], ["B", raw["answerB"]], ["C", raw["answerC"]]],
        "answer": "ABC"[int(label) - 1],
    }


def option_lines(record: dict) -> list[str]:
    """The options as the brief lists them: ``"A: bank"``."""
    return [f"{label}: {text}" for label, text in record["options"]]


def gold_of(record: dict) -> str:
    """The sample's gold for a record: the label with the options (JSON, sorted keys)."""
    return json.dumps(
        {"label": record["answer"], "options": dict(record["options"])},
        ensure_ascii=False,
        sort_keys=True,
    )


def parse_gold(gold: str) -> tuple[str, dict[str, str]]:
    """``(label, {label: text})`` from a sample's gold; a bare label has no options."""
    from tersetalk.tasks.base import ScoringError

    text = gold.strip()
    if len(text) == 1 and text.isupper():
        return text, {}
    try:
        obj = json.loads(text)
        label, options = obj["label"], obj["options"]
    except (ValueError, TypeError, KeyError) as exc:
        raise ScoringError(
            f"multiple-choice gold must be a label or JSON with 'label' and 'options': "
            f"{gold!r:.200} ({exc})"
        ) from exc
    if label not in options:
        raise ScoringError(f"multiple-choice gold label {label!r} is not among {sorted(options)}")
    return label, {str(k): str(v) for k, v in options.items()}


def chosen_label(text: str, options: dict[str, str]) -> str | None:
    """The option a model's answer picks, or None when it names none.

    In order: a label alone or leading the answer (``B``, ``(B)``, ``B.``, ``B) library``);
    a label after "answer"/"option"/"choice" (``The answer is C``); an answer equal to one
    option's text (case, punctuation and spacing ignored; a few questions repeat a text
    under two labels, and such a text names neither). Only labels among the options count
    (when the options are unknown, any of A-E).
    """
    labels = set(options) or set("ABCDE")
    stripped = (text or "").strip()
    if not stripped:
        return None
    first_line = stripped.splitlines()[0].strip()
    m = _LEADING_LABEL.match(first_line)
    if m and (m.group(1) or m.group(2)) in labels:
        return m.group(1) or m.group(2)
    for m in _PHRASE_LABEL.finditer(stripped):
        if m.group(1).upper() in labels and m.group(1).isupper():
            return m.group(1)
    for candidate in (stripped, first_line):
        hits = [k for k, t in options.items() if _normal(t) == _normal(candidate)]
        if len(hits) == 1:
            return hits[0]
        if hits:  # a text two options share names neither
            return None
    return None


def correct(prediction: str, gold: str) -> bool:
    """Whether the answer picks the gold option (see :func:`chosen_label`)."""
    label, options = parse_gold(gold)
    return chosen_label(prediction or "", options) == label


def brief(record: dict, options: Mapping[str, Any]) -> Brief:
    """The situation (Social IQa) as context, the options as options, and the question.

    Folded into facts (:meth:`Brief.flat`), the situation's sentences come first and
    then one fact per option (``"A: bank"``, :func:`option_lines`)."""
    return Brief(
        goal=GOAL,
        context=[("situation", text) for text in record["context"]],
        options=[(str(label), str(text)) for label, text in record["options"]],
        question=record["question"].strip(),
    )


def gold_text(gold: str) -> str | None:
    """The gold option's text: the answer string that can reach the Worker."""
    label, options = parse_gold(gold)
    return options.get(label)


def _csqa_from_hub(rec: dict) -> dict:
    ch = rec["choices"]
    choices = [{"label": k, "text": t} for k, t in zip(ch["label"], ch["text"], strict=True)]
    return {
        "answerKey": rec["answerKey"],
        "id": rec["id"],
        "question": {
            "question_concept": rec.get("question_concept"),
            "choices": choices,
            "stem": rec["question"],
        },
    }


def _task(name: str, title: str, labels: str, dataset: DatasetFile) -> Task:
    return Task(
        name=name,
        title=title,
        dataset=dataset,
        brief=brief,
        worker_system=WORKER_SYSTEM,
        answer=Answer("the letter of one option", "choice"),
        metric=Metric(
            "accuracy",
            f"accuracy on the option label ({labels}); the option's exact text also counts",
        ),
        correct=correct,
        topology=DIRECT,
        gold_text=gold_text,
    )


TASKS = (
    _task(
        "commonsenseqa",
        "CommonsenseQA (option accuracy)",
        "A-E",
        DatasetFile(
            "commonsenseqa/dev_rand_split.jsonl.gz",
            "18467ce05dc2cb17864eeb39a9c835526defc6d010dc19661f89d8d3f1ef828f",
            "tau/commonsense_qa",
            None,
            "validation",
            from_hub=_csqa_from_hub,
            to_record=csqa_record,
            gold=gold_of,
        ),
    ),
    _task(
        "socialiqa",
        "Social IQa (option accuracy)",
        "A-C",
        DatasetFile(
            "socialiqa/dev.jsonl.gz",
            "14c86079e1f840f9ebbd86677758e78bf800a3f3226a949b55d88d2e265dc25b",
            "allenai/social_i_qa",
            None,
            "validation",
            from_hub=dict,  # the hub rows have the file's keys
            to_record=siqa_record,
            gold=gold_of,
        ),
    ),
)
