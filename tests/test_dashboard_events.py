"""Run progress events: what a run publishes, that publishing never breaks a run, and
the dashboard's tailer reading them (control flow with the scripted double)."""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tersetalk.core import events as publish
from tersetalk.core.events import RunPublisher, events_path, publishing
from tersetalk.core.io import message_list
from tersetalk.core.records import deterministic_columns
from tersetalk.dashboard.tail import EventTailer
from tersetalk.models import ScriptedClient, TransientModelError
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import RunIncompleteError, run
from tersetalk.tasks.loading import load_records, sample

REPO = Path(__file__).resolve().parents[1]


def answer(messages):
    if messages[0]["content"].startswith("You are the Critic"):
        return "ACCEPT."
    return "Answer: 42"


@pytest.fixture(scope="module")
def sample_path(tmp_path_factory):
    ev, _ = sample(
        "gsm8k", load_records("gsm8k", data_dir=REPO / "data"), n=3, calibration_n=0, seed=11
    )
    path = tmp_path_factory.mktemp("sample") / "gsm8k.parquet"
    ev.to_parquet(path)
    return path


@pytest.fixture
def spec(base_config, tmp_path):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    return run_spec(cfg, "gsm8k", "freeform", "default")


def read_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_run_publishes_its_progress_in_order(spec, sample_path, tmp_path):
    out = tmp_path / "runs" / "gsm8k" / "freeform" / "default.parquet"
    df = run(spec, sample_path, out, client=ScriptedClient(answer), progress=False, events=True)
    evs = read_events(events_path(out))
    assert events_path(out) == out.with_name("default.events.jsonl")
    kinds = [e["event"] for e in evs]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert evs[0]["task"] == "gsm8k" and evs[0]["system"] == "freeform"
    assert evs[0]["n_examples"] == 3 and evs[-1]["status"] == "finished"
    assert len({e["run"] for e in evs}) == 1
    for row in df.itertuples():
        mine = [e for e in evs if e.get("example_id") == row.example_id]
        order = [e["event"] for e in mine]
        # messages are published live, as the engine sends them, and each exactly once
        assert order == [
            "example_started",
            *["message"] * row.n_messages,
            "verdict",
            "example_finished",
        ]
        sent = message_list(row.messages)
        got = [e for e in mine if e["event"] == "message"]
        assert [(m["turn"], m["tokens"]) for m in got] == [
            (m["turn"], m["tokens_cl100k"]) for m in sent
        ]
        verdict = next(e for e in mine if e["event"] == "verdict")
        assert verdict["prediction"] == row.prediction and verdict["gold"] == row.gold
        finished = next(e for e in mine if e["event"] == "example_finished")
        assert finished["tokens"] == row.tokens_total_cl100k


def test_events_off_by_flag_or_environment(spec, sample_path, tmp_path, monkeypatch):
    out = tmp_path / "a.parquet"
    run(spec, sample_path, out, client=ScriptedClient(answer), progress=False, events=False)
    assert not events_path(out).exists()
    monkeypatch.setenv("TERSETALK_EVENTS", "off")
    out = tmp_path / "b.parquet"
    run(spec, sample_path, out, client=ScriptedClient(answer), progress=False)
    assert not events_path(out).exists()
    monkeypatch.setenv("TERSETALK_EVENTS", "on")
    out = tmp_path / "c.parquet"
    run(spec, sample_path, out, client=ScriptedClient(answer), progress=False)
    assert events_path(out).exists()


def test_an_unwritable_sink_is_disabled_with_one_warning(spec, sample_path, tmp_path, caplog):
    plain = run(
        spec,
        sample_path,
        tmp_path / "plain.parquet",
        client=ScriptedClient(answer),
        progress=False,
        events=False,
    )
    out = tmp_path / "blocked.parquet"
    events_path(out).mkdir()  # a folder where the event file should go: open() fails
    with caplog.at_level(logging.WARNING, logger="tersetalk.core.events"):
        df = run(spec, sample_path, out, client=ScriptedClient(answer), progress=False, events=True)
    warnings = [r for r in caplog.records if r.name == "tersetalk.core.events"]
    assert len(warnings) == 1 and "run events disabled" in warnings[0].getMessage()
    cols = [c for c in deterministic_columns(df) if c != "spec_hash"]
    assert df[cols].equals(plain[cols])


def test_a_sink_failing_mid_run_stops_publishing_not_the_run(
    spec, sample_path, tmp_path, caplog, monkeypatch
):
    class DiesAfter:
        """A file whose writes start failing after three lines (a full disk)."""

        def __init__(self, path, *a, **k):
            self.fh, self.n = open(path, *a, **k), 0

        def write(self, text):
            self.n += 1
            if self.n > 3:
                raise OSError(28, "No space left on device")
            return self.fh.write(text)

        def flush(self):
            self.fh.flush()

        def close(self):
            self.fh.close()

    monkeypatch.setattr(publish, "open", DiesAfter, raising=False)
    out = tmp_path / "full.parquet"
    with caplog.at_level(logging.WARNING, logger="tersetalk.core.events"):
        df = run(spec, sample_path, out, client=ScriptedClient(answer), progress=False, events=True)
    assert len(df) == 3 and df["error"].isna().all()
    assert len([r for r in caplog.records if "run events disabled" in r.getMessage()]) == 1
    assert len(read_events(events_path(out))) == 3


def test_a_passing_server_fault_is_an_error_event_and_an_incomplete_run(
    spec, sample_path, tmp_path
):
    calls = {"n": 0}

    def flaky(messages):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TransientModelError("HTTP 503 from the model server")
        return answer(messages)

    out = tmp_path / "flaky.parquet"
    with pytest.raises(RunIncompleteError):
        run(spec, sample_path, out, client=ScriptedClient(flaky), progress=False, events=True)
    evs = read_events(events_path(out))
    errors = [e for e in evs if e["event"] == "error"]
    assert len(errors) == 1 and errors[0]["transient"] and "503" in errors[0]["error"]
    assert evs[-1]["event"] == "run_finished" and evs[-1]["status"] == "incomplete"


def test_mediator_stage_events_join_the_run(base_config, tmp_path):
    ev, _ = sample(
        "hotpotqa", load_records("hotpotqa", data_dir=REPO / "data"), n=1, calibration_n=0, seed=5
    )
    path = tmp_path / "hotpotqa.parquet"
    ev.to_parquet(path)
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"]["mediator"] = {
        "variants": {"v": {"budget": 12, "compressor": "truncate", "judge": False}}
    }
    validate_config(cfg)
    spec = run_spec(cfg, "hotpotqa", "mediator", "v")
    out = tmp_path / "m.parquet"
    run(spec, path, out, client=ScriptedClient(answer), progress=False, events=True)
    stages = [e["stage"] for e in read_events(events_path(out)) if e["event"] == "stage"]
    assert stages[0] == "message_received" and stages[-1] == "pipeline_complete"
    assert "compression_pass" in stages and "extraction_complete" in stages


def test_no_publisher_outside_a_run_and_the_hooks_are_inert():
    assert publish.current() is None
    publish.on_message_sent({"content": "x"})  # no run: nothing happens, nothing raises
    pub = publish.NullPublisher()
    with publishing(pub):
        assert publish.current() is None  # events off: the hooks see nothing at all


# -- the tailer ----------------------------------------------------------------------


def test_tailer_reads_only_complete_lines_and_folds_state(tmp_path):
    pub = RunPublisher(
        tmp_path / "runs/gsm8k/freeform/default.events.jsonl",
        task="gsm8k",
        system="freeform",
        variant="default",
    )
    (tmp_path / "cache" / "calls").mkdir(parents=True)
    (tmp_path / "cache" / "calls" / "ignored.events.jsonl").write_text("{}\n")
    tail = EventTailer(tmp_path, rescan_s=0)
    assert tail.poll() == []
    pub.run_started(n_examples=2)
    pub.example_started({"example_id": "e1", "position": 0})
    pub.message(
        {
            "turn": 0,
            "sender": "M",
            "receiver": "W",
            "kind": "brief",
            "content": "hello",
            "tokens_cl100k": 7,
        }
    )
    got = tail.poll()
    assert [e["event"] for _, e in got] == ["run_started", "example_started", "message"]
    (state,) = tail.states()
    assert state["key"] == "runs/gsm8k/freeform/default" and state["status"] == "running"
    assert state["tokens"] == 7 and state["current_example"] == "e1"
    # a line the writer has not finished is left for the next poll
    with open(pub.path, "a", encoding="utf-8") as fh:
        fh.write('{"event": "verdict", "example_id": "e1", "correct"')
    assert tail.poll() == []
    with open(pub.path, "a", encoding="utf-8") as fh:
        fh.write(": 1.0}\n")
    assert [e["event"] for _, e in tail.poll()] == ["verdict"]
    pub.example_finished(
        {
            "example_id": "e1",
            "messages": "[]",
            "tokens_total_cl100k": 7,
            "error": None,
            "correct": 1.0,
        }
    )
    pub.run_finished("finished", n_done=1)
    tail.poll()
    (state,) = tail.states()
    assert state["n_done"] == 1 and state["n_correct"] == 2 and state["status"] == "finished"
    pub.close()


def test_tailer_starts_over_when_a_file_is_replaced(tmp_path):
    path = tmp_path / "x.events.jsonl"
    path.write_text(
        json.dumps({"event": "run_started", "n_examples": 5, "pid": None})
        + "\n"
        + json.dumps({"event": "example_finished", "example_id": "a"})
        + "\n"
    )
    tail = EventTailer(tmp_path, rescan_s=0)
    tail.poll()
    assert tail.states()[0]["n_done"] == 1
    path.write_text(json.dumps({"event": "run_started", "n_examples": 2}) + "\n")
    tail.poll()
    assert tail.states()[0]["n_done"] == 0 and tail.states()[0]["n_examples"] == 2


def test_a_run_killed_without_a_word_shows_as_stopped(tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(gone.stdout)
    path = tmp_path / "k.events.jsonl"
    path.write_text(
        json.dumps({"event": "run_started", "n_examples": 1, "pid": pid, "host": ""}) + "\n"
    )
    tail = EventTailer(tmp_path, rescan_s=0)
    tail.poll()
    assert tail.states()[0]["status"] == "stopped"


def test_messages_the_hook_missed_are_published_from_the_record(tmp_path):
    """A system sending from a thread of its own is outside the run's context: its
    messages still reach the dashboard, from the record, once the example is done."""
    pub = RunPublisher(tmp_path / "r.events.jsonl", task="t", system="s", variant="v")
    pub.example_started({"example_id": "e"})
    pub.message({"turn": 0, "content": "seen live", "tokens_cl100k": 2})
    sent = [
        {"turn": 0, "content": "seen live", "tokens_cl100k": 2},
        {"turn": 1, "content": "sent elsewhere", "tokens_cl100k": 3},
    ]
    pub.example_finished({"example_id": "e", "messages": json.dumps(sent), "n_messages": 2})
    pub.close()
    msgs = [e for e in read_events(pub.path) if e["event"] == "message"]
    assert [(m["turn"], m["content"]) for m in msgs] == [(0, "seen live"), (1, "sent elsewhere")]
