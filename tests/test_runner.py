"""Control flow of the run step, with the scripted model double (no reported numbers)."""

import json

import pandas as pd
import pytest

from tersetalk.config import run_spec
from tersetalk.metrics.summary import run_metrics
from tersetalk.models import ScriptedClient
from tersetalk.records import DETERMINISTIC_COLUMNS
from tersetalk.runner import checkpoint_path, run
from tersetalk.tasks.loading import load_records, sample


def fake_model(messages):
    system = messages[0]["content"]
    if system.startswith("You are the Critic"):
        return "REVISE: check the number" if "13" in messages[-1]["content"] else "ACCEPT."
    if "Critic asked you to revise" in messages[-1]["content"]:
        return "Answer: 42"
    return "Answer: 13"


@pytest.fixture
def setup(tmp_path, base_config, repo):
    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=4, calibration_n=0, seed=3)
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    base_config["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(base_config, "gsm8k", "freeform", "default")
    return spec, path, tmp_path / "out.parquet"


def test_run_writes_records_with_revision_and_messages(setup):
    spec, sample_path, out = setup
    df = run(spec, sample_path, out, client=ScriptedClient(fake_model), progress=False)
    assert len(df) == 4 and df["error"].isna().all()
    assert (df["prediction"] == "42").all() and (df["revisions"] == 1).all()
    assert (df["verdict"] == "revise").all()
    msgs = json.loads(df["messages"].iloc[0])
    assert [(m["sender"], m["receiver"]) for m in msgs] == [
        ("M", "W"),
        ("W", "C"),
        ("M", "C"),
        ("C", "W"),
        ("W", "M"),
    ]
    assert df["tokens_total_cl100k"].iloc[0] == sum(m["tokens_cl100k"] for m in msgs)
    assert (df["n_model_calls"] == 3).all()
    assert not checkpoint_path(out).exists()
    assert pd.read_parquet(out).equals(df)


def test_failing_example_becomes_error_row(setup):
    spec, sample_path, out = setup
    calls = {"n": 0}

    def flaky(messages):
        calls["n"] += 1
        if calls["n"] == 4:  # first call of the second example
            raise RuntimeError("model returned garbage")
        return fake_model(messages)

    df = run(spec, sample_path, out, client=ScriptedClient(flaky), progress=False)
    assert len(df) == 4
    assert df["error"].notna().sum() == 1
    assert "garbage" in df["error"].dropna().iloc[0]
    metrics = run_metrics(df)
    assert metrics["n_errors"].iloc[0] == 1 and metrics["n"].iloc[0] == 4


def test_interrupted_run_resumes_without_losing_finished_examples(setup):
    spec, sample_path, out = setup
    seen = []

    def dies_on_third(messages):
        if (
            messages[-1]["content"] not in seen
            and messages[0]["content"].startswith("You are the Worker")
            and "revise" not in messages[-1]["content"]
        ):
            seen.append(messages[-1]["content"])
        if len(seen) == 3:
            raise KeyboardInterrupt
        return fake_model(messages)

    with pytest.raises(KeyboardInterrupt):
        run(spec, sample_path, out, client=ScriptedClient(dies_on_third), progress=False)
    ckpt = checkpoint_path(out)
    finished = [json.loads(line) for line in ckpt.read_text().splitlines()]
    assert len(finished) == 2 and not out.exists()
    with open(ckpt, "a") as fh:  # a torn write from the kill
        fh.write('{"example_id": "gsm8k-')
    counter = {"n": 0}

    def counting(messages):
        counter["n"] += 1
        return fake_model(messages)

    df = run(spec, sample_path, out, client=ScriptedClient(counting), progress=False)
    assert len(df) == 4 and counter["n"] == 2 * 3  # only the two unfinished examples ran
    assert list(df["example_id"][:2]) == [r["example_id"] for r in finished]


def test_same_seed_same_deterministic_columns(setup, tmp_path):
    spec, sample_path, out = setup
    a = run(spec, sample_path, out, client=ScriptedClient(fake_model), progress=False)
    b = run(spec, sample_path, tmp_path / "b.parquet", client=ScriptedClient(fake_model),
            progress=False)  # fmt: skip
    pd.testing.assert_frame_equal(a[DETERMINISTIC_COLUMNS], b[DETERMINISTIC_COLUMNS])


def test_unavailable_server_stops_the_run_and_keeps_finished_examples(setup):
    from tersetalk.models import ModelUnavailableError

    spec, sample_path, out = setup
    calls = {"n": 0}

    def dies(messages):
        calls["n"] += 1
        if calls["n"] > 3:
            raise ModelUnavailableError("no server at http://127.0.0.1:9/v1: start one")
        return fake_model(messages)

    with pytest.raises(ModelUnavailableError, match="start one"):
        run(spec, sample_path, out, client=ScriptedClient(dies), progress=False)
    assert len(checkpoint_path(out).read_text().splitlines()) == 1 and not out.exists()
