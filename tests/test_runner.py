"""Control flow of the run step, with the scripted model double (no reported numbers)."""

import dataclasses
import json

import pandas as pd
import pytest

from tersetalk.core.io import message_list
from tersetalk.core.records import deterministic_columns
from tersetalk.metrics.summary import run_metrics
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec
from tersetalk.pipeline.runner import checkpoint_path, run
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
    msgs = message_list(df["messages"].iloc[0])
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

    spec["pipeline"]["max_error_share"] = 0.25  # 1 of 4 is allowed
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
    cols = deterministic_columns(a)
    assert cols == deterministic_columns(b) and "verdict" in cols and "messages" in cols
    pd.testing.assert_frame_equal(a[cols], b[cols])


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


def test_two_kills_in_a_row_lose_and_duplicate_nothing(setup):
    """A torn line, a resume, a second kill after one more example, a second resume."""
    spec, sample_path, out = setup
    ckpt = checkpoint_path(out)

    def dies_after(n_calls):
        calls = {"n": 0}

        def responder(messages):
            calls["n"] += 1
            if calls["n"] > n_calls:
                raise KeyboardInterrupt  # the job is killed in the middle of an example
            return fake_model(messages)

        return responder

    with pytest.raises(KeyboardInterrupt):  # first kill: 2 examples done (3 calls each)
        run(spec, sample_path, out, client=ScriptedClient(dies_after(2 * 3)), progress=False)
    first = [json.loads(line) for line in ckpt.read_text().splitlines()]
    assert len(first) == 2
    with open(ckpt, "a") as fh:  # the kill tore the third record mid-write
        fh.write('{"example_id": "gsm8k-test-')

    with pytest.raises(KeyboardInterrupt):  # resume, finish one more example, killed again
        run(spec, sample_path, out, client=ScriptedClient(dies_after(3)), progress=False)
    raw = ckpt.read_bytes()
    assert raw.endswith(b"\n")
    second = [json.loads(line) for line in raw.decode().splitlines()]  # every line readable
    assert [r["example_id"] for r in second[:2]] == [r["example_id"] for r in first]
    assert len(second) == 3 and len({r["example_id"] for r in second}) == 3

    counter = {"n": 0}

    def counting(messages):
        counter["n"] += 1
        return fake_model(messages)

    df = run(spec, sample_path, out, client=ScriptedClient(counting), progress=False)
    assert counter["n"] == 3  # only the last example ran: none of the three was lost
    assert len(df) == 4 and df["example_id"].is_unique and df["error"].isna().all()
    assert list(df["example_id"][:3]) == [r["example_id"] for r in second]
    assert not ckpt.exists()


def test_partial_last_line_is_skipped_even_when_it_parses(tmp_path, caplog):
    from tersetalk.pipeline.runner import drop_partial_line, read_checkpoint

    ckpt = tmp_path / "x.checkpoint.jsonl"
    good = json.dumps({"example_id": "a", "spec_hash": "h"})
    tail = json.dumps({"example_id": "b", "spec_hash": "h"})  # newline never written
    ckpt.write_text(good + "\n" + tail)
    with caplog.at_level("WARNING"):
        assert list(read_checkpoint(ckpt, "h")) == ["a"]
    assert "partial last line" in caplog.text
    assert drop_partial_line(ckpt) == len(tail)
    assert ckpt.read_text() == good + "\n"
    assert drop_partial_line(ckpt) == 0
    ckpt.write_text("no newline at all")
    assert drop_partial_line(ckpt) == len("no newline at all") and ckpt.read_bytes() == b""


class _UnknownUsageClient(ScriptedClient):
    """Reports no usage for one call (as a streaming server without usage does)."""

    def chat(self, messages, gen):
        res = super().chat(messages, gen)
        if len(self.calls) == 2:  # the Critic's call on the first example
            return dataclasses.replace(
                res,
                prompt_tokens=-1,
                completion_tokens=-1,
                extra={
                    "usage_source": "unavailable",
                    "transport_tries": 2,
                    "response_format": "json_object_schema",
                },
            )
        return dataclasses.replace(res, extra={"usage_source": "server"})


def test_unknown_usage_makes_totals_nan_and_call_provenance_is_kept(setup):
    spec, sample_path, out = setup
    df = run(spec, sample_path, out, client=_UnknownUsageClient(fake_model), progress=False)
    assert df["usage_prompt_tokens"].dtype == "float64"
    assert pd.isna(df["usage_prompt_tokens"].iloc[0])
    assert pd.isna(df["usage_completion_tokens"].iloc[0])
    assert df["usage_unknown_calls"].tolist() == [1, 0, 0, 0]
    assert df["usage_source"].tolist() == ["server; unavailable"] + ["server"] * 3
    for row in df.iloc[1:].itertuples():
        calls = json.loads(row.calls)
        assert row.usage_prompt_tokens == sum(c["prompt_tokens"] for c in calls) > 0
        assert row.usage_completion_tokens == sum(c["completion_tokens"] for c in calls) > 0
    calls = json.loads(df["calls"].iloc[0])
    assert calls[1]["usage_source"] == "unavailable"
    assert calls[1]["transport_tries"] == 2
    assert calls[1]["response_format"] == "json_object_schema"
    assert calls[1]["role"] and calls[1]["prompt_tokens"] == -1
    assert pd.read_parquet(out)["usage_prompt_tokens"].isna().tolist() == [True] + [False] * 3
