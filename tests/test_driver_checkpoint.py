"""The checkpoint never holds back the next example: each line is written and flushed
as its example comes back (a kill of the process loses none), and fsynced behind, on
a thread of its own; the run file is written only after the last fsync.

Control flow only, with the scripted model double.
"""

from __future__ import annotations

import os
import threading

import pytest

from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec
from tersetalk.pipeline.runner import CheckpointWriter, RecordWriteError, checkpoint_path, run
from tersetalk.tasks.loading import load_records, sample


def fake_model(messages):
    if messages[0]["content"].startswith("You are the Critic"):
        return "ACCEPT."
    return "Answer: 42"


@pytest.fixture
def setup(tmp_path, base_config, repo):
    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=3,
                   calibration_n=0, seed=3)  # fmt: skip
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    base_config["cache_dir"] = str(tmp_path / "cache")
    return run_spec(base_config, "gsm8k", "freeform", "default"), path, tmp_path / "out.parquet"


def test_the_next_example_starts_while_the_checkpoint_is_still_being_synced(setup, monkeypatch):
    spec, sample_path, out = setup
    started, released = threading.Event(), threading.Event()
    seen: dict[str, object] = {}
    calls = {"n": 0}
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        # held until the next example calls the model: a runner that waited for the
        # sync before the next example would hold here until the timeout
        started.set()
        seen.setdefault("released_by_next_example", released.wait(60))
        real_fsync(fd)

    def model(messages):
        calls["n"] += 1
        if calls["n"] > 2:  # the second example (two calls an example): the first is written
            started.wait(30)  # its sync under way on the writer's thread (a slow machine)
            released.set()
        return fake_model(messages)

    monkeypatch.setattr(CheckpointWriter, "fsync", staticmethod(fsync))
    df = run(spec, sample_path, out, client=ScriptedClient(model), progress=False)
    assert len(df) == 3 and df["error"].isna().all()
    assert seen["released_by_next_example"] is True


def test_every_line_is_flushed_at_once_and_synced_before_close(tmp_path, monkeypatch):
    path = tmp_path / "run.checkpoint.jsonl"
    gate = threading.Event()
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        gate.wait(60)
        real_fsync(fd)
        synced.append(fd)

    monkeypatch.setattr(CheckpointWriter, "fsync", staticmethod(fsync))
    with open(path, "ab") as fh:
        writer = CheckpointWriter(fh, path)
        for i in range(5):
            writer.append(b'{"n": %d}\n' % i)
        # flushed: another reader (a resume after a kill) sees every line already
        assert path.read_bytes().count(b"\n") == 5
        assert writer.synced == 0
        gate.set()
        writer.close()
        assert writer.synced == 5
    assert 1 <= len(synced) <= 5  # one fsync covers the lines written before it


def test_a_failing_fsync_stops_the_run_with_the_checkpoint_named(setup, monkeypatch):
    spec, sample_path, out = setup

    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CheckpointWriter, "fsync", staticmethod(broken))
    with pytest.raises(RecordWriteError, match=r"cannot be synced to disk .*No space left"):
        run(spec, sample_path, out, client=ScriptedClient(fake_model), progress=False)
    assert not out.exists()
    # what was written is kept for the rerun
    assert checkpoint_path(out).read_bytes().count(b"\n") >= 1


def test_a_run_stopped_midway_syncs_what_it_wrote_and_ends_its_writer(setup, monkeypatch):
    spec, sample_path, out = setup
    gate = threading.Event()
    real_fsync = os.fsync
    calls = {"n": 0}

    def slow_fsync(fd: int) -> None:
        gate.wait(60)  # behind until the run is stopped: only the close can wait for it
        real_fsync(fd)

    def model(messages):
        calls["n"] += 1
        if calls["n"] > 2:  # the second example: the first is written, its sync held
            gate.set()
            raise KeyboardInterrupt
        return fake_model(messages)

    monkeypatch.setattr(CheckpointWriter, "fsync", staticmethod(slow_fsync))
    writers: list[CheckpointWriter] = []
    real_init = CheckpointWriter.__init__

    def keep(self, fh, path):
        real_init(self, fh, path)
        writers.append(self)

    monkeypatch.setattr(CheckpointWriter, "__init__", keep)
    with pytest.raises(KeyboardInterrupt):
        run(spec, sample_path, out, client=ScriptedClient(model), progress=False)
    # the stop waited for the writer: the finished example is on disk, its thread is over
    (writer,) = writers
    assert writer.synced == 1
    assert not writer._thread.is_alive()
    assert checkpoint_path(out).read_bytes().count(b"\n") == 1
