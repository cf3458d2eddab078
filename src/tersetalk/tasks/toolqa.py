"""``toolqa``: questions over real API payloads, the format study's task in the pipeline.

An example is (payload, question, gold): a GitHub REST API response body from
``data/toolresponses/json.jsonl`` and a question whose gold answer is read off the body
by :func:`tersetalk.formats.questions.questions_for` (the comprehension experiment's
questions: the k-th item's field, a count, a lookup, a wrapper field, a nested field).
The Manager forwards the payload as the tool returned it (pretty JSON, the corpus's
``Payload.text``) with the question; the ``formats`` system re-encodes that payload.

Why the examples are built here rather than shipped: the questions are a pure,
seeded function of the checksummed corpus file, so building them is as reproducible
as reading a file, and a change to the question generator shows up as new example ids
instead of a stale copy. Two options decide which examples exist (config key
``toolqa``): ``max_payload_tokens`` keeps payloads whose pretty JSON fits a model's
context (o200k_base tokens, so the set does not depend on the model), and
``questions_per_kind`` how many questions of each kind one payload contributes.

Scoring is the comprehension experiment's answer check,
:func:`tersetalk.formats.questions.answer_matches` (first line, quotes and a final
period stripped, case-insensitive, numbers as numbers, yes/no for booleans).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tersetalk.tasks.base import Answer, Brief, DatasetFile, Metric, Task

#: the question generator's seed: the questions are the dataset, fixed like a file's
#: content; the run's seed only draws the sample from them
QUESTION_SEED = 0
DEFAULT_MAX_PAYLOAD_TOKENS = 1000
DEFAULT_QUESTIONS_PER_KIND = 1
PAYLOAD_TOKENIZER = "o200k_base"

GOAL = "Answer the question with the value read from the tool response."
WORKER_SYSTEM = (
    "You are the Worker. The Manager sends you a tool response and a question about it. "
    "Reply with the value only, copied from the tool response. No explanation."
)


def build_records(
    corpus_dir: str | Path,
    *,
    max_payload_tokens: int = DEFAULT_MAX_PAYLOAD_TOKENS,
    questions_per_kind: int = DEFAULT_QUESTIONS_PER_KIND,
) -> list[dict]:
    """Every (payload, question, gold) of the corpus, in corpus then question order.

    ``payload`` is the body as the tool returned it (a string: a sample stores its
    records with sorted keys, which must not reorder the payload's own keys).
    """
    from tersetalk.core.tokens import count_tokens
    from tersetalk.formats.corpus import load_corpus
    from tersetalk.formats.questions import questions_for

    records = []
    for p in load_corpus(corpus_dir, kinds=("json",)):
        if count_tokens(p.text, PAYLOAD_TOKENIZER) > max_payload_tokens:
            continue
        for q in questions_for(p, seed=QUESTION_SEED, per_kind=questions_per_kind):
            records.append(
                {
                    "id": q.qid,
                    "payload_id": p.id,
                    "shape": p.shape,
                    "request": p.where,
                    "kind": q.kind,
                    "path": list(q.path),
                    "question": q.text,
                    "answer": q.gold,
                    "payload": p.text,
                }
            )
    return records


def correct(prediction: str, gold: str) -> bool:
    """The comprehension experiment's answer check (see the module docstring)."""
    from tersetalk.formats.questions import answer_matches

    return bool(prediction) and answer_matches(prediction, gold)


def _build(path: Path, **options) -> list[dict]:
    return build_records(path.parent, **options)


def brief(record: dict, options: Mapping[str, Any]) -> Brief:
    """The question, and the payload forwarded whole (not a fact: data to read)."""
    return Brief(goal=GOAL, question=record["question"].strip(), payload=record["payload"])


TASK = Task(
    name="toolqa",
    title="ToolQA (answer check)",
    dataset=DatasetFile(
        "toolresponses/json.jsonl",
        "772dc695d8faa9f164656abb014e806eed5753fab03cc9f7e8113d105ae2e973",
        build=_build,
        options=("max_payload_tokens", "questions_per_kind"),
    ),
    brief=brief,
    worker_system=WORKER_SYSTEM,
    answer=Answer("the value only, copied from the tool response", "value"),
    metric=Metric("accuracy", "the comprehension experiment's answer check"),
    correct=correct,
)
