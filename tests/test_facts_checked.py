"""The brief is built once, by the run, which records the facts answer preservation checks;
the score step reads them from the run file and never asks the task for a brief again."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec
from tersetalk.pipeline.runner import run
from tersetalk.tasks import hotpotqa
from tersetalk.tasks.base import Brief
from tersetalk.tasks.loading import load_records, sample


def _answer(messages):
    if messages[0]["content"].startswith("You are the Critic"):
        return "ACCEPT."
    return "Answer: Paris"


def _hotpot_run(tmp_path, repo, base_config, facts: str, name: str = "run"):
    ev, _ = sample("hotpotqa", load_records("hotpotqa", data_dir=repo / "data"), n=3,
                   calibration_n=0, seed=5)  # fmt: skip
    sample_path = tmp_path / "sample.parquet"
    ev.to_parquet(sample_path)
    base_config["cache_dir"] = str(tmp_path / "calls")
    base_config["hotpotqa"] = {**(base_config.get("hotpotqa") or {}), "facts": facts}
    spec = run_spec(base_config, "hotpotqa", "freeform", "default")
    out = tmp_path / f"{name}.parquet"
    run(spec, sample_path, out, client=ScriptedClient(_answer), progress=False)
    return ev, out


@pytest.mark.parametrize("facts", ["supporting", "context"])
def test_the_run_records_the_supporting_facts_whatever_the_brief_holds(
    tmp_path, repo, base_config, facts
):
    ev, out = _hotpot_run(tmp_path, repo, base_config, facts)
    df = pd.read_parquet(out)
    for (_, row), record in zip(df.iterrows(), ev["record"], strict=True):
        record = json.loads(record) if isinstance(record, str) else record
        supporting = hotpotqa.hotpot_facts(record, "supporting")
        assert supporting and list(row["facts_checked"]) == supporting
        sent = row["messages"][0]["content"]  # the Manager's brief to the Worker
        if facts == "context":  # every paragraph is sent, the supporting facts checked
            assert len(hotpotqa.hotpot_facts(record, "context")) != len(supporting)
            assert all(title in sent for title, _ in record["context"])


def test_scoring_reads_the_recorded_facts_and_builds_no_brief(
    tmp_path, repo, base_config, monkeypatch
):
    from tersetalk.cli import main

    _, out = _hotpot_run(tmp_path, repo, base_config, "supporting")
    recorded = pd.read_parquet(out)["facts_checked"].map(len).tolist()

    def no_brief(*_a, **_k):
        raise AssertionError("the score step built a brief")

    monkeypatch.setattr(Brief, "__init__", no_brief)
    records = tmp_path / "records.parquet"
    assert main(["score", "--run", str(out), "--out-records", str(records),
                 "--out", str(tmp_path / "score.parquet")]) == 0  # fmt: skip
    per_example = pd.read_parquet(records)
    assert per_example["n_facts_checked"].tolist() == recorded
    assert per_example["facts_reaching_worker"].notna().all()


def test_a_run_file_without_the_recorded_facts_is_refused_by_name(
    tmp_path, repo, base_config, capsys
):
    from tersetalk.cli import main

    _, out = _hotpot_run(tmp_path, repo, base_config, "supporting")
    old = tmp_path / "old.parquet"
    pd.read_parquet(out).drop(columns=["facts_checked"]).to_parquet(old)
    argv = ["score", "--run", str(old), "--out-records", str(tmp_path / "r.parquet"),
            "--out", str(tmp_path / "s.parquet")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"run file {old} has no facts_checked column" in err and "rerun it" in err
    for i, odd in enumerate(["Paris is in France.", [1, 2]]):  # text; numbers, not texts
        bad = tmp_path / f"odd{i}.parquet"
        pd.read_parquet(out).assign(facts_checked=[odd] * 3).to_parquet(bad)
        assert main(["score", "--run", str(bad), "--out-records", str(tmp_path / "r.parquet"),
                     "--out", str(tmp_path / "s.parquet")]) == 2  # fmt: skip
        err = capsys.readouterr().err
        assert f"run file {bad}: its facts_checked column holds something else" in err
    # without per-example metrics, the run's scores need no facts
    assert main(["score", "--run", str(old), "--out", str(tmp_path / "s.parquet")]) == 0


def test_an_example_whose_brief_cannot_be_built_is_an_error_row_without_facts(
    tmp_path, repo, base_config, monkeypatch
):
    from tersetalk.cli import main
    from tersetalk.pipeline import runner

    built = runner.build_brief
    calls = []

    def build_brief(task, record, options):
        calls.append(record["question"])
        if len(calls) == 1:
            raise ValueError("a record without its context")
        return built(task, record, options)

    monkeypatch.setattr(runner, "build_brief", build_brief)
    _, out = _hotpot_run(tmp_path, repo, base_config, "supporting")
    assert len(calls) == 3  # once per example
    df = pd.read_parquet(out)
    failed = df["error"].notna()
    assert failed.sum() == 1  # the example whose brief failed, alone
    assert "a record without its context" in df.loc[failed, "error"].iloc[0]
    assert df.loc[failed, "facts_checked"].iloc[0] is None
    assert all(len(f) > 0 for f in df.loc[~failed, "facts_checked"])
    records = tmp_path / "records.parquet"
    assert main(["score", "--run", str(out), "--out-records", str(records),
                 "--out", str(tmp_path / "score.parquet")]) == 0  # fmt: skip
    checked = pd.read_parquet(records)["n_facts_checked"]
    assert checked[failed.to_numpy()].tolist() == [0] and (checked[~failed.to_numpy()] > 0).all()
