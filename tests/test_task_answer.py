"""A task declares what its answer is; systems word their prompts from that.

The built-in tasks' prompts are pinned here as the systems write them, so a change of
wording shows up as a change of these strings (the runs' deterministic columns depend
on them)."""

from __future__ import annotations

import dataclasses

import pytest

from tersetalk.agents.codecs.tersetalk import answer_note, reads_plan, system_prompt
from tersetalk.encoders.lingua import LinguaSettings
from tersetalk.systems.freeform import COD_INSTRUCTION, cod_worker_system
from tersetalk.tasks.base import ANSWER_KINDS, Answer
from tersetalk.tasks.registry import get, names

NOTES = {
    "hotpotqa": "The answer is a few words copied from the facts, or yes/no. Plan may be empty.",
    "gsm8k": "Plan holds up to 3 short calculation steps; the answer is the final number only.",
    "boolq": "The answer is yes or no. Plan may be empty.",
    "commonsenseqa": "The answer is the letter of one option. Plan may be empty.",
    "socialiqa": "The answer is the letter of one option. Plan may be empty.",
    "humaneval": "The answer is the complete Python function (signature and body).",
    "toolqa": "The answer is the value only, copied from the tool response.",
}


@pytest.mark.parametrize("task", sorted(NOTES))
def test_the_tersetalk_worker_prompt_ends_with_the_note_its_answer_gives(task):
    assert answer_note(get(task).answer) == NOTES[task]
    for enforcement in ("schema", "lines"):
        assert system_prompt("worker", task, enforcement).endswith(" " + NOTES[task])
        assert NOTES[task] not in system_prompt("critic", task, enforcement)


def test_every_built_in_task_declares_one_of_the_kinds():
    assert set(NOTES) == set(names())
    assert {get(t).answer.kind for t in names()} <= set(ANSWER_KINDS)


def test_chain_of_draft_is_offered_where_a_task_says_what_its_brief_holds():
    assert cod_worker_system("gsm8k") == (
        "You are the Worker. The Manager sends you a math word problem. "
        f"{COD_INSTRUCTION} The answer is a number."
    )
    assert cod_worker_system("hotpotqa") == (
        "You are the Worker. The Manager sends you facts and a question. "
        f"{COD_INSTRUCTION} The answer is a few words copied from the facts, or yes/no."
    )
    assert {t for t in names() if cod_worker_system(t)} == {"gsm8k", "hotpotqa"}


def test_the_kind_decides_the_plan_and_the_kept_digits():
    assert [t for t in names() if not reads_plan(get(t).answer)] == ["hotpotqa"]
    lingua = LinguaSettings()
    assert [t for t in names() if lingua.forces(t)] == ["gsm8k"]
    assert LinguaSettings(force_digits="always").forces("boolq")


@pytest.mark.parametrize(
    ("kind", "note"),
    [
        ("text", "The answer is one city name."),
        ("value", "The answer is one city name."),
        ("span", "The answer is one city name. Plan may be empty."),
        ("choice", "The answer is one city name. Plan may be empty."),
        ("number", NOTES["gsm8k"]),
    ],
)
def test_a_plug_in_answer_is_worded_by_its_kind(kind, note):
    assert answer_note(Answer("one city name", kind)) == note


@pytest.mark.parametrize(
    ("form", "kind", "said"),
    [
        ("a city", "city", "is not one of text, span"),
        ("A city.", "text", "without the full stop"),
        ("  ", "text", "without the full stop"),
    ],
)
def test_an_answer_that_cannot_be_worded_is_refused(form, kind, said):
    with pytest.raises(ValueError, match=said):
        Answer(form, kind)


def test_the_answer_is_frozen_like_the_task():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get("gsm8k").answer.kind = "text"  # type: ignore[misc]
