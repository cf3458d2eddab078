"""Official scoring of BoolQ, CommonsenseQA, Social IQa and HumanEval.

The expected shares of a constant answer come from the data READMEs' label counts
(BoolQ 2,033 true of 3,270; CommonsenseQA 239 A of 1,221; Social IQa 643 "1" of 1,954),
not from the code under test.
"""

import json

import pytest

from tersetalk.agents.roles import build_brief
from tersetalk.tasks import boolq, humaneval, multiple_choice, registry
from tersetalk.tasks.base import CHAIN, DIRECT, ScoringError
from tersetalk.tasks.humaneval.sandbox import bubblewrap_status
from tersetalk.tasks.loading import load_records, sample

NEW_TASKS = ("boolq", "commonsenseqa", "socialiqa", "humaneval")


@pytest.fixture(scope="module")
def golds(request):
    data = request.config.rootpath / "data"
    out = {}
    for task in ("boolq", "commonsenseqa", "socialiqa"):
        recs = load_records(task, data_dir=data)
        ev, _ = sample(task, recs, n=len(recs), calibration_n=0, seed=0)
        out[task] = (recs, list(ev["gold"]))
    return out


def _accuracy(task, predictions, golds):
    check = registry.get(task).correct
    return sum(check(p or "", g) for p, g in zip(predictions, golds, strict=True)) / len(golds)


@pytest.mark.parametrize("task", ["boolq", "commonsenseqa", "socialiqa"])
def test_gold_answers_score_100_percent(task, golds):
    recs, gold = golds[task]
    if task == "boolq":
        predictions = gold
    else:
        predictions = [multiple_choice.parse_gold(g)[0] for g in gold]
    assert _accuracy(task, predictions, gold) == 1.0


@pytest.mark.parametrize("task", ["commonsenseqa", "socialiqa"])
def test_the_gold_options_text_also_scores_unless_two_options_share_it(task, golds):
    _, gold = golds[task]
    texts, shared = [], 0
    for g in gold:
        label, options = multiple_choice.parse_gold(g)
        texts.append(options[label].upper() + ".")  # case and punctuation do not matter
        norm = multiple_choice._normal
        shared += sum(norm(t) == norm(options[label]) for t in options.values()) > 1
    # a few questions repeat the gold option's text under a second label: that text names
    # neither option, so exactly those examples cannot score by text
    assert shared <= 10
    assert _accuracy(task, texts, gold) == pytest.approx(1 - shared / len(gold))


@pytest.mark.parametrize(
    ("task", "constant", "expected"),
    [
        ("boolq", "yes", 2033 / 3270),
        ("boolq", "No.", 1237 / 3270),
        ("boolq", "I cannot tell from the passage.", 0.0),  # unparseable counts wrong
        ("commonsenseqa", "A", 239 / 1221),
        ("commonsenseqa", "E", 235 / 1221),
        ("socialiqa", "A", 643 / 1954),
        ("socialiqa", "(C)", 657 / 1954),
        ("socialiqa", "D", 0.0),  # not an option of a three-option task
    ],
)
def test_a_constant_answer_scores_the_share_of_its_gold(task, constant, expected, golds):
    _, gold = golds[task]
    assert _accuracy(task, [constant] * len(gold), gold) == pytest.approx(expected)


def test_each_task_declares_its_label_metric_and_shipped_file():
    assert registry.topology_labels() == {
        "boolq": DIRECT,
        "commonsenseqa": DIRECT,
        "socialiqa": DIRECT,
        "humaneval": CHAIN,
        "hotpotqa": CHAIN,
        "gsm8k": CHAIN,
    }
    assert registry.get("humaneval").metric.name == "pass@1"
    assert registry.get("hotpotqa").metric.name == "exact match"
    for t in NEW_TASKS:
        spec = registry.get(t).dataset
        assert spec.hub_path and len(spec.sha256) == 64
    with pytest.raises(KeyError, match="unknown task 'mmlu'.*known tasks: boolq, "):
        registry.get("mmlu")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", "yes"),
        ("Yes, the passage says so.", "yes"),
        ("NO.", "no"),
        ("False", "no"),
        ("Based on the passage, the answer is no.", "no"),
        ("Answer: yes", "yes"),
        ("The passage clearly says yes", "yes"),
        ("Maybe.", None),
        ("yes or no? I am not sure", "yes"),  # the first word decides
        ("It could be yes, or it could be no.", None),  # both, no leading decision
        ("", None),
    ],
)
def test_boolq_reduces_an_answer_to_yes_or_no(text, expected):
    assert boolq.yes_no(text) == expected


def test_boolq_gold_must_be_yes_or_no():
    with pytest.raises(ScoringError, match="'yes' or 'no'"):
        boolq.correct("yes", "True")


OPTIONS = {"A": "bank", "B": "library", "C": "department store", "D": "mall", "E": "new york"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", "B"),
        ("(B)", "B"),
        ("B. library", "B"),
        ("**D**", "D"),
        ("The answer is C.", "C"),
        ("Answer: (E)", "E"),
        ("Department Store", "C"),
        ("library.", "B"),
        ("A bank", None),  # "A" as an article, and not an option's exact text
        ("I would go to the mall", None),  # the text must be the option exactly
        ("F", None),
        ("", None),
    ],
)
def test_multiple_choice_extracts_a_label_or_the_exact_option_text(text, expected):
    assert multiple_choice.chosen_label(text, OPTIONS) == expected


def test_multiple_choice_gold_is_checked():
    with pytest.raises(ScoringError, match="not among"):
        multiple_choice.parse_gold(json.dumps({"label": "F", "options": OPTIONS}))
    with pytest.raises(ScoringError, match="label or JSON"):
        multiple_choice.parse_gold("bank")


def test_socialiqa_labels_map_one_two_three_to_a_b_c(golds):
    recs, _ = golds["socialiqa"]
    first = recs[0]  # the README's first line: label "3"
    assert first["context"] == ["Tracy didn't go home that evening and resisted Riley's attacks."]
    assert first["answer"] == "C" and first["options"][2] == ["C", "Find somewhere to go"]


def test_humaneval_gold_is_checked():
    with pytest.raises(ScoringError, match="exactly"):
        humaneval.parse_gold(json.dumps({"entry_point": "f"}))
    with pytest.raises(ScoringError, match="not JSON"):
        humaneval.parse_gold("def f(): pass")


# the real sandbox where bubblewrap runs (CI installs it), else the recorded weaker one
ISOLATION = "bubblewrap" if bubblewrap_status()[0] else "process"


def test_records_and_summary_use_the_official_scorers(request):
    """The run step's ``correct`` and the summary's accuracy, through the real dispatch."""
    from tersetalk.agents.topology import STAR
    from tersetalk.core.records import records_frame
    from tersetalk.metrics.summary import run_metrics
    from tersetalk.pipeline.records import build_record, score

    he = load_records("humaneval", data_dir=request.config.rootpath / "data")[:2]
    cases = {
        "boolq": [("Yes.", "yes"), ("no", "yes"), ("unsure", "no")],
        "commonsenseqa": [
            ("B", json.dumps({"label": "B", "options": OPTIONS})),
            ("mall", json.dumps({"label": "D", "options": OPTIONS})),
            ("A", json.dumps({"label": "C", "options": OPTIONS})),
        ],  # fmt: skip
        "humaneval": [
            (he[0]["canonical_solution"], humaneval.gold_of(he[0])),
            ("    return None\n", humaneval.gold_of(he[1])),
            ("    return (\n", humaneval.gold_of(he[1])),
        ],  # fmt: skip
    }
    for task, rows in cases.items():
        records = []
        for i, (pred, gold) in enumerate(rows):
            ex = {"example_id": f"e{i}", "position": i, "question": "q", "gold": gold}
            spec = {"task": task, "system": "freeform", "variant": "default", "seed": 0,
                    "task_options": {"sandbox": {"isolation": ISOLATION}}}  # fmt: skip
            records.append(build_record(
                ex, spec, layout=STAR.layout, prediction=pred, raw_answer=pred, messages=[],
                calls=[], outcome={"verdict": "accept", "verdict_explicit": True, "revisions": 0},
                counters={}, backend="b", model="m", spec_hash="h", error=None, elapsed_s=0.1,
            ))  # fmt: skip
        df = records_frame(records, STAR.layout)
        expected = [1.0, 1.0, 0.0] if task == "commonsenseqa" else [1.0, 0.0, 0.0]
        assert list(df["correct"]) == expected
        assert run_metrics(df).iloc[0]["accuracy"] == pytest.approx(df["correct"].mean())
    assert list(df["sandbox_reason"]) == ["passed", "failed", "error"]
    assert set(df["sandbox_isolation"]) == {ISOLATION}
    assert "t_sandbox_s" in df.columns
    assert score("boolq", "", "no")["correct"] == 0.0  # an empty prediction is wrong


def test_brief_parts_and_gold_text_for_each_task(golds, request):
    recs, gold = golds["socialiqa"]
    parts = build_brief("socialiqa", recs[0])
    situation = "Tracy didn't go home that evening and resisted Riley's attacks."
    # the task's parts: the situation is context and the options are options, not facts
    assert parts.facts == [] and parts.context == [("situation", situation)]
    assert parts.options == [
        ("A", "make a new plan"), ("B", "Go home and see Riley"), ("C", "Find somewhere to go")
    ]  # fmt: skip
    assert parts.question == "What does Tracy need to do before this?"
    # folded (what codecs that know only facts receive): situation, then "A: ..." facts
    assert parts.flat().facts == [
        situation,
        "A: make a new plan",
        "B: Go home and see Riley",
        "C: Find somewhere to go",
    ]
    assert parts.flat().options == [] and parts.flat().context == []
    bq = build_brief("boolq", golds["boolq"][0][0])
    assert bq.question == "does ethanol take more energy make that produces?"
    assert bq.context == [("passage", golds["boolq"][0][0]["passage"])] and bq.facts == []
    flat = bq.flat().facts
    assert len(flat) > 1 and " ".join(flat) == golds["boolq"][0][0]["passage"].strip()
    assert flat == golds["boolq"][0][0]["context"]  # the record's sentences, as before
    he = load_records("humaneval", data_dir=request.config.rootpath / "data")[0]
    hb = build_brief("humaneval", he)
    assert hb.code == he["question"] and hb.question == humaneval.CODE_QUESTION
    # folded, the question is the prompt itself (code a summariser must not cut)
    assert hb.flat().question == he["question"] and hb.flat().code == ""
    gold = json.dumps({"label": "C", "options": OPTIONS})
    assert registry.get("commonsenseqa").answer_text(gold) == "department store"
    assert registry.get("boolq").answer_text("no") == "no"
    assert registry.get("humaneval").answer_text(humaneval.gold_of(he)) is None
    assert all(registry.get(t).worker_system.startswith("You are the Worker") for t in NEW_TASKS)


def test_hub_rows_map_to_the_shipped_layout(monkeypatch):
    """``source: hub`` rows (as the hub's dataset cards define them) give the same records."""
    import datasets

    hub_rows = {
        "boolq": [{"question": "is it", "answer": False, "passage": "It is not. Really."}],
        "commonsenseqa": [
            {
                "id": "x1",
                "question": "Where?",
                "question_concept": "place",
                "choices": {"label": list("ABCDE"), "text": ["a", "b", "c", "d", "e"]},
                "answerKey": "D",
            }
        ],
        "socialiqa": [
            {
                "context": "C.",
                "question": "Q?",
                "answerA": "a",
                "answerB": "b",
                "answerC": "c",
                "label": "2",
            }  # fmt: skip
        ],
        "humaneval": [
            {
                "task_id": "HumanEval/0",
                "prompt": "def f():\n",
                "canonical_solution": "  return 1\n",
                "test": "def check(c):\n    assert c() == 1\n",
                "entry_point": "f",
            }  # fmt: skip
        ],
    }

    class FakeDataset:
        def __init__(self, rows):
            self.rows = rows

        def to_list(self):
            return self.rows

    seen = []

    def fake_load(path, name=None, split=None):
        seen.append((path, split))
        task = {registry.get(t).dataset.hub_path: t for t in registry.names()}[path]
        return FakeDataset(hub_rows[task])

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    boolq_rec = load_records("boolq", source="hub")[0]
    assert boolq_rec["answer"] == "no" and boolq_rec["context"] == ["It is not.", "Really."]
    csqa = load_records("commonsenseqa", source="hub")[0]
    assert csqa["options"][3] == ["D", "d"] and csqa["answer"] == "D" and csqa["id"] == "x1"
    assert load_records("socialiqa", source="hub")[0]["answer"] == "B"
    he = load_records("humaneval", source="hub")[0]
    # the dataset's own solution (trusted code): the weaker box where bubblewrap is missing
    assert humaneval.run(he["canonical_solution"], humaneval.gold_of(he),
                         isolation=ISOLATION).passed  # fmt: skip
    assert [p for p, _ in seen] == [
        "google/boolq",
        "tau/commonsense_qa",
        "allenai/social_i_qa",
        "openai/openai_humaneval",
    ]


def test_humaneval_is_scored_from_the_verdict_its_run_recorded():
    """Its scorer runs model code: the score step reads the run's sandbox verdict as data
    and never runs the code again (no sandbox is needed to score a run file)."""
    import pandas as pd

    from tersetalk.metrics.summary import example_scores

    assert registry.get("humaneval").executes
    run = pd.DataFrame({
        "task": "humaneval", "system": "freeform", "variant": "default", "seed": 1,
        "example_id": ["a", "b", "c"], "prediction": ["import os; os._exit(3)", "x", ""],
        "gold": "{}", "error": [None, None, "ModelCallError: timeout"],
        **{c: [1.0, 0.0, 1.0] for c in ("em", "f1", "precision", "recall", "correct")},
    })  # fmt: skip
    assert [s["correct"] for s in example_scores(run)] == [1.0, 0.0, 0.0]  # error: 0
    assert registry.get("humaneval").run_metrics(example_scores(run))["accuracy"] == 1 / 3
    with pytest.raises(ValueError, match="verdict the run recorded"):
        registry.get("humaneval").example_scores("x", "{}")


@pytest.mark.parametrize(
    "recorded",
    [
        {"em": 1, "f1": 1, "precision": 1, "recall": 1, "correct": None},
        {"correct": 1.0},
        {"em": "x", "f1": 1, "precision": 1, "recall": 1, "correct": 1},
    ],
    ids=["none", "missing", "text"],
)
def test_a_damaged_recorded_verdict_is_a_scoring_error(recorded):
    with pytest.raises(ScoringError, match="recorded verdict is not a score.*rerun it"):
        registry.get("humaneval").example_scores("x", "{}", recorded=recorded)
