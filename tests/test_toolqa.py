"""The toolqa task: examples built from the checksummed corpus, seeded samples, scoring.

Why these: toolqa's examples are generated, not read, so the test pins what makes
them a dataset -- the same corpus and options give the same examples, the sample
draws from them with the seed like every task, a changed corpus file stops the run,
and the gold answers are the question generator's, scored by the comprehension
experiment's own check.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tersetalk.agents.roles import build_brief, render_brief
from tersetalk.formats.corpus import load_corpus
from tersetalk.formats.questions import answer_matches, questions_for
from tersetalk.metrics.summary import run_metrics
from tersetalk.pipeline.records import score
from tersetalk.tasks import toolqa
from tersetalk.tasks.loading import TaskDataError, load_records, read_sample, sample


@pytest.fixture(scope="module")
def records(request):
    return load_records("toolqa", data_dir=request.config.rootpath / "data")


def test_examples_are_the_question_generators_over_the_shipped_corpus(records, repo):
    assert len(records) > 100
    assert len({r["id"] for r in records}) == len(records)  # example ids are unique
    corpus = {p.id: p for p in load_corpus(repo / "data" / "toolresponses", kinds=("json",))}
    for rec in records[:: max(1, len(records) // 15)]:
        payload = corpus[rec["payload_id"]]
        assert rec["payload"] == payload.text  # as the tool returned it: pretty JSON
        made = {q.qid: q for q in questions_for(payload, seed=toolqa.QUESTION_SEED)}
        q = made[rec["id"]]
        assert (rec["question"], rec["answer"], rec["kind"]) == (q.text, q.gold, q.kind)


def test_options_decide_which_examples_exist(records, repo):
    data = repo / "data"
    small = load_records("toolqa", data_dir=data, options={"max_payload_tokens": 200})
    assert 0 < len(small) < len(records)
    assert {r["id"] for r in small} <= {r["id"] for r in records}
    more = load_records("toolqa", data_dir=data, options={"questions_per_kind": 2})
    assert len(more) > len(records)
    # keys that shape briefs, not examples, are ignored (the sample gets the whole section)
    same = load_records("toolqa", data_dir=data, options={"facts": "context"})
    assert [r["id"] for r in same] == [r["id"] for r in records]
    with pytest.raises(TaskDataError, match="config key 'toolqa'"):
        load_records("toolqa", data_dir=data, options={"max_payload_tokens": 1})


def test_hub_source_reads_the_shipped_corpus(records, repo):
    hub = load_records("toolqa", source="hub", data_dir=repo / "data")
    assert [r["id"] for r in hub] == [r["id"] for r in records]


def test_checksum_mismatch_and_missing_corpus_are_clear_errors(tmp_path, repo):
    (tmp_path / "toolresponses").mkdir()
    bad = tmp_path / "toolresponses" / "json.jsonl"
    shutil.copy(repo / "data" / "toolresponses" / "json.jsonl", bad)
    with open(bad, "ab") as fh:
        fh.write(b"\n")
    with pytest.raises(TaskDataError, match="checksum mismatch"):
        load_records("toolqa", data_dir=tmp_path)
    bad.unlink()
    with pytest.raises(TaskDataError, match="missing"):
        load_records("toolqa", data_dir=tmp_path)


def test_sampling_is_seeded_disjoint_and_prefix_stable(records, tmp_path):
    ev, cal = sample("toolqa", records, n=8, calibration_n=4, seed=7)
    ev2, cal2 = sample("toolqa", records, n=8, calibration_n=4, seed=7)
    assert ev.equals(ev2) and cal.equals(cal2)
    assert not set(ev["example_id"]) & set(cal["example_id"])
    bigger, _ = sample("toolqa", records, n=12, calibration_n=0, seed=7)
    assert list(bigger["example_id"][:8]) == list(ev["example_id"])
    other, _ = sample("toolqa", records, n=8, calibration_n=4, seed=8)
    assert list(other["example_id"]) != list(ev["example_id"])
    with pytest.raises(TaskDataError, match="loosen config key 'toolqa'"):
        sample("toolqa", records, n=len(records), calibration_n=1, seed=0)
    # the payload survives the sample's sorted-keys JSON with its own key order
    path = tmp_path / "s.parquet"
    ev.to_parquet(path)
    row = read_sample(path)[0]
    src = next(r for r in records if r["id"] == row["example_id"])
    assert row["record"]["payload"] == src["payload"]
    assert row["gold"] == src["answer"]


def test_brief_carries_the_payload_as_returned_and_the_question(records):
    rec = records[0]
    brief = build_brief("toolqa", rec)
    assert brief.payload == rec["payload"] and brief.question == rec["question"]
    assert brief.facts == []
    text = render_brief(brief)
    assert f"Tool response:\n{rec['payload']}\nQuestion: {rec['question']}" in text


@pytest.mark.parametrize(
    ("prediction", "gold", "ok"),
    [
        ("42", "42", True),
        ("42.0", "42", True),
        ('"octocat"', "octocat", True),
        ("The value is octocat.", "octocat", True),
        ("yes", "true", True),
        ("none", "null", True),
        ("43", "42", False),
        ("", "42", False),
        ("octocat-2", "octocat", False),
    ],
)
def test_scoring_is_the_comprehension_check(prediction, gold, ok):
    assert toolqa.correct(prediction, gold) is ok
    assert ok == (bool(prediction) and answer_matches(prediction, gold))
    assert score("toolqa", prediction, gold)["correct"] == float(ok)


def test_run_metrics_recompute_accuracy_with_the_same_check():
    import pandas as pd

    df = pd.DataFrame(
        {
            "task": "toolqa",
            "system": "freeform",
            "variant": "default",
            "seed": 0,
            "example_id": ["a", "b", "c"],
            "prediction": ["42", "nope", ""],
            "gold": ["42", "7", "x"],
            "error": [None, None, "RuntimeError: boom"],
            **{c: 0 for c in ("tokens_total_cl100k", "tokens_total_o200k", "tokens_total_model")},
            "bytes_on_wire": 0,
            "usage_prompt_tokens": 1.0,
            "usage_completion_tokens": 1.0,
            "usage_unknown_calls": 0,
            "usage_source": "x",
            "n_model_calls": 2,
            "cache_hits": 0,
            "t_example_s": 0.1,
            "t_ttft_mean_s": 0.0,
            "t_itl_mean_s": 0.0,
            "t_model_s": 0.1,
            "backend": "scripted",
            "model": "scripted",
        }
    )
    row = run_metrics(df).iloc[0]
    assert row["accuracy"] == pytest.approx(1 / 3)  # the error row counts 0


def test_records_are_json_and_self_contained(records):
    rec = json.loads(json.dumps(records[0], sort_keys=True))
    assert json.loads(rec["payload"]) is not None  # the payload travels as its own text
