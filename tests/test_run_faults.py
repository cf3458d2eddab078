"""What stops a run and what becomes a row: an error that is not about the example never
becomes a row, too many error rows refuse the run, a record that cannot be written stops
it with the example's id. Control flow only, with the scripted model double."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tersetalk.models import ModelEnvironmentError, ScriptedClient
from tersetalk.pipeline.config import ConfigError, run_spec
from tersetalk.pipeline.runner import (
    RecordWriteError,
    TooManyErrorsError,
    checkpoint_path,
    errors_path,
    read_checkpoint,
    results_hash,
    run,
    stopping_fault,
    too_many_errors,
)
from tersetalk.tasks.humaneval.sandbox import SandboxUnavailableError
from tersetalk.tasks.loading import load_records, sample


def answers(messages):
    if messages[0]["content"].startswith("You are the Critic"):
        return "ACCEPT."
    return "Answer: 13"


@pytest.fixture
def setup(tmp_path, base_config, repo):
    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=5, calibration_n=0, seed=3)
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    base_config["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(base_config, "gsm8k", "freeform", "default")
    return spec, path, tmp_path / "out.parquet"


class BrokenCounter(ScriptedClient):
    """A client whose token counting fails for a reason that is not the example's."""

    def __init__(self, fail_after: int) -> None:
        super().__init__(answers)
        self.counted = 0
        self.fail_after = fail_after

    def count_tokens(self, text: str) -> int:
        self.counted += 1
        if self.counted > self.fail_after:
            raise ModelEnvironmentError(
                "POST http://127.0.0.1:9/tokenize: HTTP 500 after 3 tries; fix the server"
            )
        return len(text.split())


def test_the_one_classifier_knows_the_environment_from_the_example():
    assert stopping_fault(ModelEnvironmentError("usage report broken")) is not None
    assert stopping_fault(SandboxUnavailableError("no bubblewrap")) is not None
    assert stopping_fault(ConfigError("bad key")) is not None
    wrapped = RuntimeError("the mediator's judge failed")
    wrapped.__cause__ = ModelEnvironmentError("tokenize endpoint: HTTP 500")
    assert isinstance(stopping_fault(wrapped), ModelEnvironmentError)
    assert stopping_fault(ValueError("the model's answer is not JSON")) is None


def test_the_runner_knows_any_tasks_machinery_by_the_generic_errors():
    from tersetalk.tasks.base import TaskHostFault, TaskUnavailableError
    from tersetalk.tasks.humaneval.sandbox import SandboxFault

    # a plug-in task's own tool that cannot run here stops the run, as the sandbox does
    assert stopping_fault(TaskUnavailableError("the task's grader is not installed")) is not None
    assert issubclass(SandboxUnavailableError, TaskUnavailableError)
    # a host fault is left for the next run, never a stop
    assert issubclass(SandboxFault, TaskHostFault)
    assert stopping_fault(TaskHostFault("no temporary folder")) is None


def test_an_environment_error_mid_run_stops_it_and_is_never_a_row(setup):
    spec, sample_path, out = setup
    client = BrokenCounter(fail_after=12)  # the second or third example's messages
    with pytest.raises(ModelEnvironmentError, match="HTTP 500"):
        run(spec, sample_path, out, client=client, progress=False)
    assert not out.exists()  # nothing Snakemake would take as done
    done = read_checkpoint(checkpoint_path(out), results_hash(spec))
    assert 0 < len(done) < 5
    assert all(rec["error"] is None for rec in done.values())  # no row holds the fault


def test_too_many_error_rows_refuse_the_run_and_a_rerun_redoes_them(setup):
    spec, sample_path, out = setup
    spec["pipeline"]["max_error_share"] = 0.2
    calls = {"n": 0}

    def broken_then_fixed(messages):
        calls["n"] += 1
        if calls["n"] <= 3:  # the first three examples: a setup that is broken
            raise RuntimeError("the model's brief is garbage")
        return answers(messages)

    with pytest.raises(TooManyErrorsError, match="max_error_share") as caught:
        run(spec, sample_path, out, client=ScriptedClient(broken_then_fixed), progress=False)
    aside = errors_path(checkpoint_path(out))
    assert "garbage" in str(caught.value) and str(aside) in str(caught.value)
    assert not out.exists()
    set_aside = [json.loads(line) for line in aside.read_text().splitlines()]
    kept = read_checkpoint(checkpoint_path(out), results_hash(spec))
    assert len(set_aside) == 3 and len(kept) == 2
    assert all(r["error"] for r in set_aside) and all(r["error"] is None for r in kept.values())

    # fixed: the rerun redoes the examples set aside, keeps the rest, and tidies up
    calls["n"] = 100
    df = run(spec, sample_path, out, client=ScriptedClient(broken_then_fixed), progress=False)
    assert out.exists() and df["error"].isna().all() and not aside.exists()


@pytest.mark.parametrize(
    ("n_errors", "n", "refused"),
    [(1, 2, False), (2, 2, True), (1, 1, True), (2, 5, False), (3, 10, True), (2, 10, False),
     (3, 15, False), (4, 15, True), (0, 0, False)],
)  # fmt: skip
def test_a_small_run_is_refused_only_when_every_example_failed(n_errors, n, refused):
    assert too_many_errors(n_errors, n, 0.2) is refused


def test_an_error_share_within_the_limit_writes_the_run(setup):
    spec, sample_path, out = setup
    spec["pipeline"]["max_error_share"] = 0.2
    seen = {"n": 0}

    def one_bad(messages):
        seen["n"] += 1
        if seen["n"] == 1:
            raise RuntimeError("garbage")
        return answers(messages)

    df = run(spec, sample_path, out, client=ScriptedClient(one_bad), progress=False)
    assert df["error"].notna().sum() == 1 and out.exists()  # 1 of 5 = 0.2: allowed


def test_an_error_quoting_a_lone_surrogate_is_still_a_writable_row(setup):
    spec, sample_path, out = setup
    spec["pipeline"]["max_error_share"] = 1.0

    def surrogate(messages):
        raise RuntimeError("model wrote " + chr(0xD800))  # not Unicode: no UTF-8 for it

    df = run(spec, sample_path, out, client=ScriptedClient(surrogate), progress=False)
    assert df["error"].str.contains("\\ud800", regex=False).all()
    run(spec, sample_path, out, client=ScriptedClient(answers), progress=False)  # a rerun


def test_a_record_that_cannot_be_written_stops_the_run_with_its_id(setup, monkeypatch):
    import tersetalk.pipeline.runner as runner

    spec, sample_path, out = setup
    real = runner.build_record

    def unwritable(*args, **kwargs):
        rec = real(*args, **kwargs)
        rec["prediction"] = "13" + chr(0xDC80)  # a defect upstream of the checkpoint
        return rec

    monkeypatch.setattr(runner, "build_record", unwritable)
    with pytest.raises(RecordWriteError, match="cannot be written") as caught:
        run(spec, sample_path, out, client=ScriptedClient(answers), progress=False)
    assert "example gsm8k-" in str(caught.value)
    assert not out.exists()
    ckpt = checkpoint_path(out)
    assert not ckpt.exists() or ckpt.read_bytes() == b""  # no torn line was left


def test_the_cli_says_a_stopping_error_in_one_line_and_exits_2(tmp_path, repo, base_config):
    """Through ``tersetalk run``: a model server that is down is one line and exit 2."""
    import yaml

    records = load_records("gsm8k", data_dir=repo / "data")
    ev, _ = sample("gsm8k", records, n=2, calibration_n=0, seed=3)
    ev.to_parquet(tmp_path / "sample.parquet")
    cfg = {
        "models": {
            "backend": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",  # nothing listens: the server is down
            "timeout_s": 2,
            "max_retries": 0,
        },
        "cache_dir": str(tmp_path / "cache"),
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    res = subprocess.run(
        [sys.executable, "-m", "tersetalk", "run", "--config", str(tmp_path / "c.yaml"),
         "--task", "gsm8k", "--system", "freeform", "--variant", "default",
         "--sample", str(tmp_path / "sample.parquet"), "--out", str(tmp_path / "r.parquet")],
        capture_output=True, text=True, cwd=repo, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert any("error:" in line for line in res.stderr.splitlines()), res.stderr[-2000:]
    assert not (tmp_path / "r.parquet").exists()
