"""The held-out topology set (data/topology/heldout): records each task's own brief
builder accepts, labelled star or chain by the work the question needs.

The set is written to cross the boundary between the tasks' label groups (a single
lookup in HotpotQA's format, a multi-step question in BoolQ's), so these tests check
both the records (every task's builder reads them unchanged, the answers hold up) and
the labels (``crosses`` agrees with the task's own group, enough items cross).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from tersetalk.agents.roles import build_brief
from tersetalk.tasks.base import CHAIN, DIRECT
from tersetalk.tasks.boolq import split_sentences as passage_sentences
from tersetalk.tasks.gsm8k import gsm8k_gold
from tersetalk.tasks.hotpotqa import hotpot_facts
from tersetalk.tasks.registry import topology_labels

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "topology" / "heldout"
TASKS = ("boolq", "commonsenseqa", "socialiqa", "hotpotqa", "gsm8k", "humaneval")
#: the route each task label group stands for (the topology study's ``star``/``chain``)
ROUTE = {DIRECT: "star", CHAIN: "chain"}
COMMON = {"id", "question", "answer", "label", "crosses", "rationale"}
#: what each task's brief builder (and its record layout) needs beside the common fields
FIELDS = {
    "boolq": {"title", "passage", "context"},
    "commonsenseqa": {"context", "options"},
    "socialiqa": {"context", "options"},
    "hotpotqa": {"context", "supporting_facts"},
    "gsm8k": set(),
    "humaneval": {"entry_point", "test", "canonical_solution"},
}
PER_TASK = 65
PER_TASK_CROSSING = 32
TOTAL = 390
TOTAL_CROSSING = 195


def _read(task: str) -> list[dict]:
    path = HELDOUT / f"{task}.jsonl"
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path.name} line {n} is blank"
        try:
            items.append(json.loads(line))
        except ValueError as exc:
            pytest.fail(f"{path.name} line {n} is not JSON: {exc}")
    return items


ITEMS = {task: _read(task) for task in TASKS}
ALL = [(task, item) for task in TASKS for item in ITEMS[task]]
IDS = [item.get("id", f"{task}-?") for task, item in ALL]


def test_the_set_holds_exactly_the_six_task_files():
    assert sorted(p.name for p in HELDOUT.glob("*.jsonl")) == sorted(f"{t}.jsonl" for t in TASKS)


def test_sizes_and_crossing_counts():
    assert len(ALL) >= TOTAL
    assert sum(item["crosses"] is True for _, item in ALL) >= TOTAL_CROSSING
    for task in TASKS:
        items = ITEMS[task]
        crossing = sum(item["crosses"] is True for item in items)
        assert len(items) >= PER_TASK, task
        assert crossing >= PER_TASK_CROSSING, f"{task}: {crossing} crossing items"
        assert len(items) - crossing >= PER_TASK_CROSSING, f"{task}: too few natural items"


#: each batch's items per format, and how many of them cross (README: "How the items
#: were written")
BATCHES = {1: (11, None), 2: (6, 3), 3: (8, 4), 4: (10, 5), 5: (10, 5), 6: (10, 5), 7: (10, 5)}


def test_every_item_names_its_batch_and_the_later_batches_are_whole():
    batches = Counter(item.get("batch") for _, item in ALL)
    assert set(batches) == set(BATCHES), batches
    for task in TASKS:
        for batch, (size, crossing) in BATCHES.items():
            items = [item for item in ITEMS[task] if item["batch"] == batch]
            assert len(items) == size, (task, batch)
            if crossing is not None:
                assert sum(item["crosses"] for item in items) == crossing, (task, batch)


def test_ids_are_unique_and_name_their_task():
    assert not [i for i, c in Counter(IDS).items() if c > 1]
    for task, item in ALL:
        assert re.fullmatch(rf"heldout-{task}-\d{{2}}", item["id"]), item["id"]


@pytest.mark.parametrize(("task", "item"), ALL, ids=IDS)
def test_fields_labels_and_crossing(task, item):
    missing = (COMMON | FIELDS[task]) - set(item)
    assert not missing, f"{item.get('id')}: missing {sorted(missing)}"
    assert item["label"] in ("star", "chain")
    assert isinstance(item["crosses"], bool)
    own = ROUTE[topology_labels()[task]]
    assert item["crosses"] == (item["label"] != own), (
        f"{item['id']}: label {item['label']} in a {own} task, crosses={item['crosses']}"
    )
    rationale = item["rationale"]
    assert isinstance(rationale, str) and rationale.strip() and "\n" not in rationale


@pytest.mark.parametrize(("task", "item"), ALL, ids=IDS)
def test_the_task_builder_accepts_the_record(task, item):
    brief = build_brief(task, item, {})
    assert brief.question.strip()
    assert brief.facts or brief.context or brief.options or brief.code


# ---- each format's answers hold up ------------------------------------------------------


@pytest.mark.parametrize("item", ITEMS["boolq"], ids=[i["id"] for i in ITEMS["boolq"]])
def test_boolq_record(item):
    assert item["answer"] in ("yes", "no")
    assert item["context"] == passage_sentences(item["passage"])
    assert item["question"] == item["question"].lower() and not item["question"].endswith("?")


MULTIPLE_CHOICE = ITEMS["commonsenseqa"] + ITEMS["socialiqa"]


@pytest.mark.parametrize("item", MULTIPLE_CHOICE, ids=[i["id"] for i in MULTIPLE_CHOICE])
def test_multiple_choice_record(item):
    labels = [label for label, _ in item["options"]]
    n = 5 if item["id"].startswith("heldout-commonsenseqa") else 3
    assert labels == list("ABCDE"[:n])
    assert item["answer"] in labels
    texts = [text for _, text in item["options"]]
    assert len(set(texts)) == len(texts) and all(t.strip() for t in texts)
    if item["id"].startswith("heldout-commonsenseqa"):
        assert item["context"] == []
    else:
        assert item["context"] and all(s.strip() for s in item["context"])


def test_multiple_choice_answers_are_spread_over_the_labels():
    for task in ("commonsenseqa", "socialiqa"):
        assert len({item["answer"] for item in ITEMS[task]}) >= 3, task


@pytest.mark.parametrize("item", ITEMS["hotpotqa"], ids=[i["id"] for i in ITEMS["hotpotqa"]])
def test_hotpotqa_record(item):
    titles = [title for title, _ in item["context"]]
    assert len(set(titles)) == len(titles)
    facts = hotpot_facts(item, "supporting")
    # every supporting fact names a sentence that exists
    assert len(facts) == len(item["supporting_facts"]) >= 1
    if item["answer"] not in ("yes", "no"):
        assert any(item["answer"].lower() in fact.lower() for fact in facts), item["answer"]
    if item["label"] == "chain":
        assert len({title for title, _ in item["supporting_facts"]}) >= 2


#: a worked step: ``<<expression=value>>value`` (the value repeated after the annotation)
_STEP = re.compile(r"<<([^=>]+)=([^>]+)>>(\d+(?:\.\d+)?|)")


@pytest.mark.parametrize("item", ITEMS["gsm8k"], ids=[i["id"] for i in ITEMS["gsm8k"]])
def test_gsm8k_record(item):
    gold = float(gsm8k_gold(item["answer"]))
    steps = _STEP.findall(item["answer"])
    for expr, value, shown in steps:
        assert re.fullmatch(r"[\d+\-*/. ()]+", expr), expr
        assert shown == value, f"<<{expr}={value}>> is followed by {shown!r}"
        assert eval(expr) == pytest.approx(float(value)), f"{expr} != {value}"  # noqa: S307
    if steps:
        assert float(steps[-1][1]) == pytest.approx(gold)
    assert build_brief("gsm8k", item, {}).question.endswith("?")


def _run_check(item: dict, body: str) -> None:
    namespace: dict = {}
    exec(item["question"] + body + item["test"], namespace)  # noqa: S102 - the set's own code
    namespace["check"](namespace[item["entry_point"]])


@pytest.mark.parametrize("item", ITEMS["humaneval"], ids=[i["id"] for i in ITEMS["humaneval"]])
def test_humaneval_record(item):
    assert item["answer"] == item["canonical_solution"]
    assert f"def {item['entry_point']}(" in item["question"]
    _run_check(item, item["canonical_solution"])  # the reference passes its tests
    with pytest.raises(AssertionError):  # and the tests reject a body that does nothing
        _run_check(item, "    pass\n")
