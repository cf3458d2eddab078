"""GSM8K (test split): grade-school math word problems with a numeric answer.

Record layout: the official file's ``question`` and ``answer`` (worked solution ending
in ``#### <number>``); the example id is ``gsm8k-test-<row>`` (the file has no ids).
The Manager's brief sends the problem's last sentence as the question and the other
sentences as facts. Scoring (:mod:`tersetalk.tasks.scoring`): the gold is the number
after ``#### ``, the prediction the model's final number, compared as numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tersetalk.tasks.base import (
    CHAIN,
    Brief,
    DatasetFile,
    Metric,
    Task,
    last_sentence_question,
    split_sentences,
)
from tersetalk.tasks.scoring import extract_number, gsm8k_correct, gsm8k_gold

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
    answer_note="Plan holds up to 3 short calculation steps; the answer is the final number only.",
    metric=Metric("accuracy", "the final number equals the gold number after '#### '"),
    correct=gsm8k_correct,
    topology=CHAIN,
    extract=final_number,
    brief_question=last_sentence_question,
    cod_worker=(
        "You are the Worker. The Manager sends you a math word problem.",
        "The answer is a number.",
    ),
    numeric_answers=True,
)
