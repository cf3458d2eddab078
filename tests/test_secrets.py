"""Secrets stay out of everything a run writes or says: a server URL that carries one
is refused by rule, and whatever a server says in an error body (some servers and
proxies echo the request's Authorization header, at any status) is quoted with the
key and anything key-like masked, in the error, the logs, the traceback and the run's
files.

The servers are real HTTP servers on loopback (``fake_openai_server``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import yaml
from fake_openai_server import FakeServer

from tersetalk.models import (
    GenerationConfig,
    ModelAuthError,
    ModelCallError,
    ModelEnvironmentError,
    ModelError,
    OpenAICompatClient,
    TransientModelError,
    make_client,
)
from tersetalk.models.credentials import looks_like_key, mask_secrets, redact_url
from tersetalk.pipeline.config import ConfigError, validate_config

MSGS = [{"role": "user", "content": "Capital of France?"}]
GEN = GenerationConfig(max_tokens=16)
SECRET = "sk-canary-9d1e77b0c4"
#: a key in no well-known format: only knowing the configured key can mask it
PLAIN_SECRET = "canary0d9f7e3a"


@pytest.fixture
def server():
    srv = FakeServer().start()
    yield srv
    srv.stop()


def everything_said(exc: BaseException, caplog: pytest.LogCaptureFixture) -> str:
    """The error's message, its whole traceback (causes included) and the log."""
    return "".join(traceback.format_exception(exc)) + caplog.text


# -- error bodies, any status ---------------------------------------------------------


@pytest.mark.parametrize("key", [SECRET, PLAIN_SECRET])
@pytest.mark.parametrize(
    ("mode", "error"),
    [("echo_400", ModelCallError), ("echo_422", ModelCallError),
     ("echo_500", TransientModelError)],
)  # fmt: skip
@pytest.mark.parametrize("stream", [True, False])
def test_a_key_echoed_in_an_error_body_is_masked_everywhere(
    server, caplog, key, mode, error, stream
):
    server.mode = mode
    client = OpenAICompatClient(server.base_url, "fake", api_key=key, max_retries=1,
                                backoff_s=0.01, sleep=lambda s: None, stream=stream)  # fmt: skip
    client._contacted = True
    caplog.set_level(logging.DEBUG)
    with pytest.raises(error) as info:
        client.chat(MSGS, GEN)
    said = everything_said(info.value, caplog)
    assert "Authorization: Bearer ***" in str(info.value)
    assert key not in said
    assert server.chat_requests()[0]["authorization"] == f"Bearer {key}"  # it was sent


def test_a_key_echoed_by_the_tokenize_endpoint_is_masked(server, caplog):
    server.side_mode, server.side_fail_path = "echo_500", "/tokenize"
    client = OpenAICompatClient(server.base_url, "fake", api_key=SECRET, max_retries=1,
                                backoff_s=0.01, sleep=lambda s: None)  # fmt: skip
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ModelEnvironmentError, match="HTTP 500") as info:
        client.count_tokens("a b c")
    assert SECRET not in everything_said(info.value, caplog)


def test_a_key_echoed_by_ollama_s_listing_is_masked(server, caplog, monkeypatch):
    server.side_mode, server.side_fail_path = "echo_401", "/api/tags"
    root = server.base_url.removesuffix("/v1")
    monkeypatch.setenv("TT_OLLAMA_KEY", PLAIN_SECRET)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ModelAuthError, match="TT_OLLAMA_KEY") as info:
        make_client({"backend": "ollama", "model": "fake", "base_url": root,
                     "api_key_env": "TT_OLLAMA_KEY"})  # fmt: skip
    assert PLAIN_SECRET not in everything_said(info.value, caplog)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer abcdefgh12345678", "Authorization: Bearer ***"),
        ('{"authorization": "Basic dXNlcjpwYXNzd29yZA=="}', '"authorization": "Basic ***"'),
        ("x-api-key: zzzzzzzzzzzzzzzz; next", "x-api-key: ***; next"),
        ("api_key=abcdef123456 more", "api_key=*** more"),
        ("token ghp_abcdefghijklmnop1234 leaked", "token *** leaked"),
        ("slack xoxb-1234-5678abcdef", "slack ***"),
        ("model Meta-Llama-3.1-8B-Instruct not found", "model Meta-Llama-3.1-8B-Instruct not"),
    ],
)
def test_mask_secrets(text, kept):
    assert kept in mask_secrets(text)


# -- credentials in a URL are refused by rule -----------------------------------------


@pytest.mark.parametrize(
    ("url", "part"),
    [
        (f"http://127.0.0.1:8000/v1?bearer={SECRET}", "query parameter(s) bearer"),
        (f"http://127.0.0.1:8000/v1?code={PLAIN_SECRET}", "query parameter(s) code"),
        (f"http://127.0.0.1:8000/v1?private_token={PLAIN_SECRET}", "private_token"),
        (f"http://127.0.0.1:8000/v1?X-Amz-Signature={PLAIN_SECRET}", "X-Amz-Signature"),
        (f"http://127.0.0.1:8000/v1?key[]={PLAIN_SECRET}", "key[]"),
        (f"http://127.0.0.1:8000/v1?session_id={PLAIN_SECRET}", "session_id"),
        (f"http://127.0.0.1:8000/v1?x={SECRET}", "value of the query parameter(s) x"),
        (f"http://127.0.0.1:8000/{SECRET}/v1", "path segment"),
        ("http://127.0.0.1:8000/aB3dE5fG7hJ9kL1mN3pQ5rS7tU/v1", "path segment"),
        (f"http://127.0.0.1:8000/v1#access_token={PLAIN_SECRET}", "fragment"),
        (f"http://user:{PLAIN_SECRET}@127.0.0.1:8000/v1", "user name or password"),
    ],
)
def test_credentials_in_a_url_are_refused_naming_the_part_and_the_fix(base_config, url, part):
    base_config["models"].update(backend="openai", base_url=url, model="m")
    with pytest.raises(ConfigError, match=r"models\.base_url") as info:
        validate_config(base_config)
    assert part in str(info.value) and PLAIN_SECRET not in str(info.value)
    assert SECRET not in str(info.value)
    for backend in ("openai", "ollama"):
        with pytest.raises(ModelEnvironmentError, match="environment variable named by "
                           r"models\.api_key_env") as info:  # fmt: skip
            make_client({"backend": backend, "base_url": url, "model": "m"})
        assert part in str(info.value)
        assert SECRET not in str(info.value) and PLAIN_SECRET not in str(info.value)
    assert SECRET not in redact_url(url) and PLAIN_SECRET not in redact_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1?region=eu",
        "https://example.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18"
        "?api-version=2024-02-01",
        "https://gateway.example/v1/0123456789abcdef0123456789abcdef/my-gateway/openai",
        "https://host.example/models/Meta-Llama-3.1-8B-Instruct/v1",
        "https://host.example/123e4567-e89b-12d3-a456-426614174000/v1",
    ],
)
def test_a_url_without_credentials_is_accepted(base_config, url):
    base_config["models"].update(backend="openai", model="m", base_url=url)
    validate_config(base_config)
    assert not any(looks_like_key(seg) for seg in url.split("/"))


# -- what a run writes ------------------------------------------------------------------


def test_a_run_against_a_server_that_echoes_the_key_writes_it_nowhere(server, tmp_path, repo):
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=1,
                   calibration_n=0, seed=1)  # fmt: skip
    ev.to_parquet(tmp_path / "sample.parquet")
    server.mode = "echo_400"  # every call: an error row quoting the request's headers
    layer = tmp_path / "server.yaml"
    layer.write_text(yaml.safe_dump({
        "models": {"backend": "openai", "base_url": server.base_url, "model": "fake",
                   "max_retries": 0, "timeout_s": 10, "api_key_env": "TT_SECRET_KEY"},
        "cache_dir": str(tmp_path / "cache"),
        "pipeline": {"max_error_share": 1.0},  # keep the error rows: they are the point
    }))  # fmt: skip
    out = tmp_path / "run.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "tersetalk.cli", "run", "--task", "gsm8k", "--system",
         "freeform", "--config", str(repo / "config" / "config.yaml"), str(layer),
         "--sample", str(tmp_path / "sample.parquet"), "--out", str(out), "--no-progress"],
        cwd=repo, capture_output=True, text=True,
        env={**os.environ, "TT_SECRET_KEY": PLAIN_SECRET},
    )  # fmt: skip
    assert server.chat_requests(), proc.stderr  # the server was asked, with the key
    assert server.chat_requests()[0]["authorization"] == f"Bearer {PLAIN_SECRET}"
    assert PLAIN_SECRET not in proc.stdout + proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != layer]
    assert out in written, proc.stderr
    for path in written:
        assert PLAIN_SECRET.encode() not in path.read_bytes(), path
    import pandas as pd

    errors = pd.read_parquet(out)["error"].dropna().tolist()
    assert errors and all("Bearer ***" in e for e in errors), errors


def test_make_client_refuses_before_anything_is_printed():
    with pytest.raises(ModelError) as info:
        make_client({"backend": "openai", "model": "m",
                     "base_url": f"http://127.0.0.1:1/{SECRET}/v1"})  # fmt: skip
    assert SECRET not in str(info.value) and "***" in str(info.value)


def test_redact_url_masks_each_part(tmp_path: Path):
    url = f"http://u:{PLAIN_SECRET}@h:1/{SECRET}/v1?key={PLAIN_SECRET}#t={PLAIN_SECRET}"
    assert redact_url(url) == "http://***@h:1/***/v1?***#***"
