"""A hostile server and a careless user get clear errors, never an empty
success, a raw traceback or a stored secret.

The server tests talk to a real HTTP server on loopback (``fake_openai_server``); the
client sleeps through an injected function, so no test waits on the wall clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fake_openai_server import FakeServer

from tersetalk.models import (
    CachedClient,
    GenerationConfig,
    ModelCallError,
    ModelError,
    TransientModelError,
    is_transient,
    make_client,
)
from tersetalk.pipeline.config import ConfigError, load_config, run_spec, spec_hash, validate_config

MSGS = [{"role": "user", "content": "Capital of France?"}]
GEN = GenerationConfig(max_tokens=8)


@pytest.fixture
def server():
    srv = FakeServer().start()
    yield srv
    srv.stop()


def client_for(server: FakeServer, *, stream: bool = True, max_retries: int = 2, **kw):
    from tersetalk.models import OpenAICompatClient

    sleeps: list[float] = []
    client = OpenAICompatClient(server.base_url, "fake", max_retries=max_retries,
                                backoff_s=0.01, stream=stream, sleep=sleeps.append,
                                **kw)  # fmt: skip
    client._contacted = True  # as after a first successful call (else a refusal is "down")
    return client, sleeps


# -- 1. a bad reply is retried, then an error, and never cached --------------------------


@pytest.mark.parametrize(
    ("mode", "stream"),
    [("empty", True), ("empty", False), ("truncated", True), ("500", True), ("500", False)],
)
def test_server_faults_are_retried_then_transient_errors(server, mode, stream):
    server.mode = mode
    client, sleeps = client_for(server, stream=stream)
    with pytest.raises(TransientModelError, match="on all 3 attempts"):
        client.chat(MSGS, GEN)
    assert len(server.chat_requests()) == 3  # 1 + max_retries
    assert sleeps == [0.01, 0.02]


def test_an_empty_answer_is_an_error_not_a_success(server):
    server.mode = "empty_stream"  # well-formed, but the content is empty
    client, _ = client_for(server)
    with pytest.raises(ModelCallError, match="empty content on all 3 attempts") as info:
        client.chat(MSGS, GEN)
    assert not is_transient(info.value)  # the model's doing: an error row, not a retry


def test_a_fault_is_not_cached_and_the_healthy_server_is_asked_again(server, tmp_path):
    client, _ = client_for(server)
    cached = CachedClient(client, tmp_path / "calls")
    server.mode = "empty"  # the reproduction: a JSON body on a stream request
    with pytest.raises(TransientModelError):
        cached.chat(MSGS, GEN)
    assert not list((tmp_path / "calls").rglob("*.json"))
    server.mode = "ok"
    r = cached.chat(MSGS, GEN)
    assert r.text == "Paris" and not r.cache_hit
    assert cached.chat(MSGS, GEN).cache_hit  # and the good answer is cached


def test_structured_calls_treat_a_malformed_reply_as_a_server_fault(server, tmp_path):
    import pydantic

    class Answer(pydantic.BaseModel):
        answer: str

    client, _ = client_for(server, stream=False, structured_format="json_schema")
    cached = CachedClient(client, tmp_path / "calls")
    server.mode = "empty"
    with pytest.raises(TransientModelError):
        cached.structured(MSGS, Answer, GEN)
    assert not list((tmp_path / "calls").rglob("*.json"))  # not a cached StructuredOutputError
    server.mode = "ok"
    assert cached.structured(MSGS, Answer, GEN).parsed == {"answer": "Paris"}


def test_a_slow_server_times_out_as_a_transient_error(server):
    server.mode, server.delay_s = "slow", 1.5
    client, _ = client_for(server, max_retries=0, timeout_s=0.3)
    with pytest.raises(TransientModelError, match="timeout"):
        client.chat(MSGS, GEN)


# -- 6. Retry-After ----------------------------------------------------------------------


def test_retry_after_is_honoured(server):
    server.modes, server.retry_after = ["429"], "3"
    client, sleeps = client_for(server)
    assert client.chat(MSGS, GEN).text == "Paris"
    assert sleeps == [3.0]  # not the 0.01 s backoff


def test_a_retry_after_longer_than_max_wait_fails_at_once(server):
    server.mode, server.retry_after = "429", "600"
    client, sleeps = client_for(server, max_wait_s=30)
    with pytest.raises(TransientModelError, match="retry after 600s.*max_wait_s=30"):
        client.chat(MSGS, GEN)
    assert sleeps == [] and len(server.chat_requests()) == 1


def test_persistent_429_is_transient(server):
    server.mode, server.retry_after = "429", "1"
    client, sleeps = client_for(server)
    with pytest.raises(TransientModelError, match="HTTP 429"):
        client.chat(MSGS, GEN)
    assert sleeps == [1.0, 1.0]


# -- 3. transient errors fail the job; a rerun redoes only those examples ----------------


@pytest.fixture
def gsm8k_sample(tmp_path, repo):
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=3,
                   calibration_n=0, seed=1)  # fmt: skip
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    return path, [q[:40] for q in ev["question"]]  # the brief splits a question into facts


def server_config(tmp_path: Path, server: FakeServer, **models) -> Path:
    layer = {
        "models": {"backend": "openai", "base_url": server.base_url, "model": "fake",
                   "max_retries": 1, "timeout_s": 10, **models},
        "cache_dir": str(tmp_path / "cache"),
    }  # fmt: skip
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump(layer))
    return path


def tersetalk(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "tersetalk.cli", *args],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_transient_failures_fail_the_job_and_a_rerun_redoes_only_them(
    server, tmp_path, repo, gsm8k_sample
):
    from tersetalk.pipeline.runner import checkpoint_path

    sample_path, questions = gsm8k_sample
    server.mode, server.fail_if = "500", questions[1]  # one example meets a broken server
    cfg = server_config(tmp_path, server)
    out = tmp_path / "run.parquet"
    args = ["run", "--task", "gsm8k", "--system", "freeform", "--config",
            str(repo / "config" / "config.yaml"), str(cfg), "--sample", str(sample_path),
            "--out", str(out), "--no-progress"]  # fmt: skip
    first = tersetalk(*args, cwd=repo)
    assert first.returncode == 2, first.stderr
    assert "1 of 3 examples failed" in first.stderr and "run the same command again" in first.stderr
    assert "Traceback" not in first.stderr
    assert not out.exists()  # Snakemake must not take the job as done
    kept = [json.loads(line) for line in checkpoint_path(out).read_text().splitlines()]
    assert len(kept) == 2 and all(r["error"] is None for r in kept)
    assert questions[1] not in {r["question"] for r in kept}

    server.mode = "ok"
    before = len(server.chat_requests())
    second = tersetalk(*args, cwd=repo)
    assert second.returncode == 0, second.stderr
    assert "resuming: 2 of 3" in second.stderr
    new = server.chat_requests()[before:]
    # only the failed example was run again (the others are neither asked nor re-run)
    assert new and not any(q in r["text"] for r in new for q in (questions[0], questions[2]))
    import pandas as pd

    df = pd.read_parquet(out)
    assert len(df) == 3 and df["error"].isna().all() and (df["raw_answer"] != "").all()


# -- 2. no key on disk, in a hash or on a command line -----------------------------------


CANARY = "sk-canary-7f3a9c1e55d0"


def test_api_key_comes_from_the_environment_and_is_never_written(
    server, tmp_path, repo, gsm8k_sample
):
    sample_path, _ = gsm8k_sample
    cfg = server_config(tmp_path, server, api_key_env="TERSETALK_TEST_KEY")
    out = tmp_path / "results" / "run.parquet"
    proc = tersetalk("--log-level", "DEBUG", "run", "--task", "gsm8k", "--system", "freeform",
                     "--config", str(repo / "config" / "config.yaml"), str(cfg),
                     "--sample", str(sample_path), "--out", str(out), "--limit", "1",
                     "--no-progress", cwd=repo, env={"TERSETALK_TEST_KEY": CANARY})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # the key was really used ...
    assert {r["authorization"] for r in server.chat_requests()} == {f"Bearer {CANARY}"}
    # ... and is nowhere: not in any file written, the cache, the logs
    assert CANARY not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    # nor in the run spec Snakemake puts on the command line, nor in its hash
    config = load_config(repo / "config" / "config.yaml", cfg)
    spec = run_spec(config, "gsm8k", "freeform", "default")
    assert CANARY not in json.dumps(spec) and spec["models"]["api_key_env"] == "TERSETALK_TEST_KEY"
    import os

    os.environ["TERSETALK_TEST_KEY"] = "another-key"  # rotating the key keeps checkpoints
    try:
        assert spec_hash(run_spec(config, "gsm8k", "freeform", "default")) == spec_hash(spec)
    finally:
        del os.environ["TERSETALK_TEST_KEY"]


def test_a_literal_api_key_in_a_config_is_refused(base_config):
    base_config["models"].update(backend="openai", base_url="http://127.0.0.1:1/v1",
                                 model="m", api_key=CANARY)  # fmt: skip
    with pytest.raises(ConfigError, match=r"models\.api_key.*api_key_env") as info:
        validate_config(base_config)
    assert CANARY not in str(info.value)
    with pytest.raises(ModelError, match="api_key_env"):
        make_client({"backend": "openai", "base_url": "http://x/v1", "model": "m",
                     "api_key": CANARY})  # fmt: skip


def test_a_missing_key_variable_says_which_to_export(monkeypatch):
    monkeypatch.delenv("TERSETALK_NO_SUCH_KEY", raising=False)
    with pytest.raises(ModelError, match="export TERSETALK_NO_SUCH_KEY="):
        make_client({"backend": "openai", "base_url": "http://x/v1", "model": "m",
                     "api_key_env": "TERSETALK_NO_SUCH_KEY"})  # fmt: skip


# -- 4. bad custom caps stop the workflow at startup ---------------------------------------


@pytest.mark.parametrize(
    ("caps", "problem"), [({"f": -3}, "non-negative"), ({"zz": 4}, "cannot cap tag 'zz'")]
)
def test_bad_custom_caps_are_a_config_error(base_config, caps, problem):
    base_config["systems"]["tersetalk"]["variants"]["custom"] = {"caps": caps}
    with pytest.raises(ConfigError, match=r"systems\.tersetalk\.variants\.custom\.caps") as info:
        validate_config(base_config)
    assert problem in str(info.value)


def test_bad_caps_inside_a_hybrid_variant_are_a_config_error(base_config):
    base_config["systems"]["hybrid"]["variants"]["custom"] = {"tersetalk": {"caps": {"f": -1}}}
    with pytest.raises(ConfigError, match=r"hybrid\.variants\.custom\.tersetalk\.caps"):
        validate_config(base_config)


def test_snakemake_dry_run_refuses_bad_caps(tmp_path, repo):
    layer = tmp_path / "caps.yaml"
    layer.write_text(yaml.safe_dump(
        {"systems": {"tersetalk": {"variants": {"custom": {"caps": {"f": -3, "zz": 4}}}}}}
    ))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(layer)],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "systems.tersetalk.variants.custom.caps" in proc.stdout + proc.stderr


# -- 7. unreadable inputs, 8. --limit ------------------------------------------------------


def test_a_truncated_sample_is_a_clear_error(tmp_path, repo, gsm8k_sample):
    sample_path, _ = gsm8k_sample
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(sample_path.read_bytes()[:200])
    proc = tersetalk("run", "--task", "gsm8k", "--system", "freeform", "--sample", str(broken),
                     "--out", str(tmp_path / "o.parquet"), cwd=repo)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error:" in proc.stderr and str(broken) in proc.stderr


def test_a_sample_whose_record_is_not_json_is_a_clear_error(tmp_path, repo, gsm8k_sample):
    import pandas as pd

    sample_path, _ = gsm8k_sample
    df = pd.read_parquet(sample_path)
    df.loc[1, "record"] = "{not json"
    bad = tmp_path / "bad.parquet"
    df.to_parquet(bad)
    proc = tersetalk("run", "--task", "gsm8k", "--system", "freeform", "--sample", str(bad),
                     "--out", str(tmp_path / "o.parquet"), cwd=repo)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "row 1" in proc.stderr and "'record' column is not JSON" in proc.stderr


def test_an_unreadable_run_file_is_a_clear_error_for_score(tmp_path, repo):
    bad = tmp_path / "run.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    proc = tersetalk("score", "--run", str(bad), "--out", str(tmp_path / "m.parquet"), cwd=repo)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "run file" in proc.stderr and str(bad) in proc.stderr


@pytest.mark.parametrize("limit", ["-9", "0", "two"])
def test_limit_must_be_a_positive_number(tmp_path, repo, gsm8k_sample, limit):
    sample_path, _ = gsm8k_sample
    proc = tersetalk("run", "--task", "gsm8k", "--system", "freeform", "--sample",
                     str(sample_path), "--out", str(tmp_path / "o.parquet"), "--limit", limit,
                     cwd=repo)  # fmt: skip
    assert proc.returncode == 2 and "--limit" in proc.stderr
    assert not (tmp_path / "o.parquet").exists()


def test_run_refuses_a_non_positive_limit_from_python(tmp_path, gsm8k_sample, base_config):
    from tersetalk.pipeline.runner import run

    spec = run_spec(base_config, "gsm8k", "freeform", "default")
    with pytest.raises(ValueError, match="positive"):
        run(spec, gsm8k_sample[0], tmp_path / "o.parquet", limit=0)


def test_mediator_errors_keep_a_server_fault_recognisable():
    from tersetalk.mediator.errors import PipelineError
    from tersetalk.mediator.pipeline import MediatorResult
    from tersetalk.models import ModelUnavailableError, caused_by

    try:
        raise RuntimeError("LLM judge failed") from TransientModelError("HTTP 500")
    except RuntimeError as exc:
        err = PipelineError.from_exception("judge", exc, recoverable=False)
    assert err.transient and err.server_fault and not err.unavailable
    down = PipelineError.from_exception("compression", ModelUnavailableError("no server"), False)
    assert down.unavailable and down.server_fault
    res = MediatorResult(message_id="m1", original_text="x", original_tokens=1, error=err)
    with pytest.raises(Exception) as info:
        res.raise_for_error()
    assert is_transient(info.value)  # the runner retries it instead of recording it
    res.error = down
    with pytest.raises(Exception) as info:
        res.raise_for_error()
    assert caused_by(info.value, ModelUnavailableError)  # the runner stops
