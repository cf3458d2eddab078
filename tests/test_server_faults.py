"""What a broken or hostile model server, or a damaged call cache,
does to a run. Each fault is a clear error, a retried transient fault, or an answer
kept; never a run that looks finished but is silently empty, a call held open for
ever, unbounded memory, a lost answer, a stored secret or a raw traceback.

The server tests talk to a real HTTP server on loopback (``fake_openai_server``).
Backoff waits go through an injected sleep, except where a test bounds the wall
clock of a whole call; those assert generous margins only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pydantic
import pytest
import yaml
from fake_openai_server import FakeServer

from tersetalk.models import (
    CachedClient,
    GenerationConfig,
    ModelAuthError,
    ModelError,
    ModelUnavailableError,
    ScriptedClient,
    TransientModelError,
    caused_by,
    is_transient,
    make_client,
)
from tersetalk.pipeline.config import ConfigError, validate_config

MSGS = [{"role": "user", "content": "Capital of France?"}]
GEN = GenerationConfig(max_tokens=160)
SECRET = "sk-canary-9d1e77b0c4"


class Answer(pydantic.BaseModel):
    answer: str


@pytest.fixture
def server():
    srv = FakeServer().start()
    yield srv
    srv.stop()


def client_for(server: FakeServer, *, stream: bool = True, max_retries: int = 2, **kw):
    from tersetalk.models import OpenAICompatClient

    sleeps: list[float] = []
    kw.setdefault("sleep", sleeps.append)
    client = OpenAICompatClient(server.base_url, "fake", max_retries=max_retries,
                                backoff_s=0.01, stream=stream, **kw)  # fmt: skip
    client._contacted = True  # as after a first successful call
    return client, sleeps


def cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if p.is_file())


# -- 401 / 403: a refused key stops the run, naming the variable ------------------------


@pytest.mark.parametrize("status", ["401", "403"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_refused_key_is_an_auth_error_naming_the_key_variable(server, status, stream):
    server.mode = status
    client, sleeps = client_for(server, stream=stream, api_key_env="TERSETALK_TEST_KEY")
    with pytest.raises(ModelAuthError, match=f"HTTP {status}") as info:
        client.chat(MSGS, GEN)
    assert "TERSETALK_TEST_KEY" in str(info.value) and "models.api_key_env" in str(info.value)
    # it stops the run like an unreachable server: not an error row, not a retry
    assert caused_by(info.value, ModelUnavailableError) and not is_transient(info.value)
    assert len(server.chat_requests()) == 1 and sleeps == []


def test_a_refused_key_without_api_key_env_says_none_is_set(server):
    server.mode = "401"
    client, _ = client_for(server)
    with pytest.raises(ModelAuthError, match=r"none is set \(models\.api_key_env is not set\)"):
        client.chat(MSGS, GEN)


def test_a_refused_key_stops_a_structured_call_too(server, tmp_path):
    server.mode = "401"
    client, _ = client_for(server, stream=False, api_key_env="TERSETALK_TEST_KEY")
    cached = CachedClient(client, tmp_path / "calls")
    with pytest.raises(ModelAuthError, match="TERSETALK_TEST_KEY"):
        cached.structured(MSGS, Answer, GEN)
    assert cache_files(tmp_path / "calls") == []  # never cached


def test_ollama_refused_key_at_the_startup_check_is_an_auth_error(server, monkeypatch):
    from tersetalk.models import OllamaClient

    monkeypatch.setenv("TERSETALK_OLLAMA_KEY", "wrong")
    root = server.base_url.removesuffix("/v1")
    server.mode = "401"
    with pytest.raises(ModelAuthError, match="TERSETALK_OLLAMA_KEY"):
        make_client({"backend": "ollama", "model": "fake", "base_url": root,
                     "api_key_env": "TERSETALK_OLLAMA_KEY"})  # fmt: skip
    # past the check, a key refused on the /v1 API stops the call the same way
    server.mode = "ok"
    client = OllamaClient("fake", host=root, backoff_s=0.01, api_key="wrong",
                          api_key_env="TERSETALK_OLLAMA_KEY")  # fmt: skip
    server.mode = "403"
    with pytest.raises(ModelAuthError, match="TERSETALK_OLLAMA_KEY"):
        client.chat(MSGS, GEN)
    # and the key from the variable is what was sent, on both APIs
    assert {r["authorization"] for r in server.requests} == {"Bearer wrong"}


def tersetalk(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tersetalk.cli", *args],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.fixture
def gsm8k_sample(tmp_path, repo):
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=2,
                   calibration_n=0, seed=1)  # fmt: skip
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    return path


@pytest.mark.parametrize("system", ["freeform", "mediator", "msp"])
def test_tersetalk_run_against_a_401_server_exits_2_naming_the_key_and_writes_no_run(
    server, tmp_path, repo, gsm8k_sample, system
):
    from tersetalk.pipeline.runner import checkpoint_path

    server.mode = "401"
    layer = tmp_path / "server.yaml"
    layer.write_text(yaml.safe_dump({
        "models": {"backend": "openai", "base_url": server.base_url, "model": "fake",
                   "max_retries": 1, "timeout_s": 10, "api_key_env": "TERSETALK_TEST_KEY"},
        "cache_dir": str(tmp_path / "cache"),
    }))  # fmt: skip
    out = tmp_path / "run.parquet"
    proc = tersetalk("run", "--task", "gsm8k", "--system", system, "--config",
                     str(repo / "config" / "config.yaml"), str(layer), "--sample",
                     str(gsm8k_sample), "--out", str(out), "--no-progress",
                     cwd=repo, env={"TERSETALK_TEST_KEY": SECRET})  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "tersetalk run: error:" in proc.stderr and "HTTP 401" in proc.stderr
    assert "TERSETALK_TEST_KEY" in proc.stderr and "Traceback" not in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout
    assert not out.exists()  # Snakemake must not take the job as done
    ckpt = checkpoint_path(out)
    assert not ckpt.exists() or ckpt.read_text() == ""  # no error rows kept either
    assert len(server.chat_requests()) == 1  # the first refusal stopped the run


# -- a body that is not JSON is a transient fault in every path --------------------------


def test_a_non_streamed_body_that_is_not_json_is_retried_then_transient(server, tmp_path):
    server.mode = "bad_json"
    client, sleeps = client_for(server, stream=False)
    cached = CachedClient(client, tmp_path / "calls")
    with pytest.raises(TransientModelError, match="malformed reply on all 3 attempts"):
        cached.chat(MSGS, GEN)
    assert len(server.chat_requests()) == 3 and sleeps == [0.01, 0.02]
    assert cache_files(tmp_path / "calls") == []
    server.mode = "ok"
    assert cached.chat(MSGS, GEN).text == "Paris"


def test_a_structured_reply_that_is_not_json_is_retried_then_transient(server, tmp_path):
    server.mode = "bad_json"
    client, sleeps = client_for(server, stream=False, structured_format="json_schema")
    cached = CachedClient(client, tmp_path / "calls")
    with pytest.raises(TransientModelError, match="malformed reply"):
        cached.structured(MSGS, Answer, GEN)
    assert len(server.chat_requests()) == 3 and sleeps == [0.01, 0.02]
    assert cache_files(tmp_path / "calls") == []  # not a stored StructuredOutputError
    server.modes = ["bad_json"]  # one bad body, then a good one: the retry recovers
    server.mode = "ok"
    assert cached.structured(MSGS, Answer, GEN).parsed == {"answer": "Paris"}


# -- timeout_s bounds a whole request, deadline_s a whole call ---------------------------

MARGIN_S = 5.0  # generous: the machine is shared; a trickle would take 60 s


@pytest.mark.parametrize("stream", [True, False])
def test_a_trickling_server_cannot_hold_a_call_open(server, stream):
    server.mode, server.trickle_n, server.trickle_s = "trickle", 60, 1.0
    client, _ = client_for(server, stream=stream, max_retries=0, timeout_s=2.0)
    t0 = time.monotonic()
    with pytest.raises(TransientModelError, match="timeout"):
        client.chat(MSGS, GEN)
    assert time.monotonic() - t0 < 2.0 + MARGIN_S


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_that_hangs_mid_reply_is_cut_off_at_the_deadline(server, stream):
    # the first piece, then silence: a read blocks, so only the watchdog can end it
    server.mode, server.trickle_n, server.trickle_s = "trickle", 2, 60.0
    client, _ = client_for(server, stream=stream, max_retries=0, timeout_s=30.0,
                           deadline_s=2.0)  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(TransientModelError, match="timeout"):
        client.chat(MSGS, GEN)
    assert time.monotonic() - t0 < 2.0 + MARGIN_S


def test_deadline_s_bounds_the_whole_call_retries_included(server):
    server.mode, server.trickle_n, server.trickle_s = "trickle", 60, 1.0
    client, _ = client_for(server, max_retries=10, timeout_s=1.5, deadline_s=4.0,
                           sleep=time.sleep)  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(TransientModelError, match="deadline_s|timeout"):
        client.chat(MSGS, GEN)
    assert time.monotonic() - t0 < 4.0 + MARGIN_S
    assert len(server.chat_requests()) < 11  # the retries stopped when time ran out


def test_a_slow_but_steady_reply_within_timeout_is_kept(server):
    server.mode, server.trickle_n, server.trickle_s = "trickle", 4, 0.2
    client, _ = client_for(server, max_retries=0, timeout_s=10.0)
    assert client.chat(MSGS, GEN).text == "w0 w1 w2 w3 "


def test_deadline_s_is_in_the_schema_and_reaches_the_client(base_config):
    base_config["models"].update(backend="openai", base_url="http://127.0.0.1:1/v1",
                                 model="m", deadline_s=30)  # fmt: skip
    validate_config(base_config)
    assert make_client(base_config["models"]).describe()["deadline_s"] == 30.0
    base_config["models"]["deadline_s"] = 0
    with pytest.raises(ConfigError, match=r"models\.deadline_s"):
        validate_config(base_config)


# -- replies are bounded by max_tokens ---------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "chunked"), [(False, False), (False, True), (True, False), (True, True)]
)
def test_a_20_mb_reply_is_refused_without_reading_it_all(server, stream, chunked):
    from tersetalk.models.openai_compat import reply_byte_cap

    server.mode, server.chunked = "huge", chunked
    server.prepare_huge(20 * 2**20)  # built before the measurement: it is the server's
    client, _ = client_for(server, stream=stream, max_retries=0)
    tracemalloc.start()
    try:
        with pytest.raises(TransientModelError, match="oversized reply") as info:
            client.chat(MSGS, GEN)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(reply_byte_cap(GEN.max_tokens)) in str(info.value)
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB allocated for a refused reply"


def test_the_byte_cap_is_generous_for_an_honest_reply(server):
    from tersetalk.models.openai_compat import reply_byte_cap

    assert reply_byte_cap(160) > 160 * 300  # a streamed token is one event of ~250 bytes
    server.mode, server.trickle_n, server.trickle_s = "trickle", 150, 0.0
    client, _ = client_for(server, max_retries=0)
    assert client.chat(MSGS, GEN).text.startswith("w0 w1 ")


# -- a lone surrogate never costs the answer ---------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_a_lone_surrogate_is_replaced_and_the_answer_cached(server, tmp_path, stream):
    server.answer = "Par\ud800is"  # sent JSON-escaped: "Par\\ud800is"
    client, _ = client_for(server, stream=stream)
    cached = CachedClient(client, tmp_path / "calls")
    first = cached.chat(MSGS, GEN)
    assert first.text == "Par\ufffdis" and first.extra["surrogates_replaced"] == 1
    assert len(cache_files(tmp_path / "calls")) == 1
    again = cached.chat(MSGS, GEN)
    assert again.cache_hit and again.text == first.text
    assert len(server.chat_requests()) == 1


def test_a_lone_surrogate_in_a_structured_answer_is_replaced(server, tmp_path):
    server.answer = "Par\ud800is"
    client, _ = client_for(server, stream=False, structured_format="json_schema")
    cached = CachedClient(client, tmp_path / "calls")
    first = cached.structured(MSGS, Answer, GEN)
    assert first.parsed == {"answer": "Par\ufffdis"} and first.extra["surrogates_replaced"] >= 1
    assert cached.structured(MSGS, Answer, GEN).cache_hit


def test_a_pair_split_across_stream_events_is_joined_not_replaced():
    from tersetalk.models._common import replace_lone_surrogates

    assert replace_lone_surrogates("a\ud83d" + "\ude00b") == ("a\U0001f600b", 0)
    assert replace_lone_surrogates({"k\udc00": ["x\ud800", 3]}) == ({"k\ufffd": ["x\ufffd", 3]}, 2)


def test_any_client_s_surrogate_answer_is_cached_and_returned(tmp_path):
    cached = CachedClient(ScriptedClient(["bad \udfff end"]), tmp_path)
    res = cached.chat(MSGS, GEN)
    assert res.text == "bad \ufffd end" and res.extra["surrogates_replaced"] == 1
    assert len(cache_files(tmp_path)) == 1 and cached.chat(MSGS, GEN).cache_hit


def test_a_cache_write_that_fails_never_loses_the_answer(tmp_path, monkeypatch):
    cached = CachedClient(ScriptedClient(["Paris"]), tmp_path)

    def broken_store(*args, **kwargs):
        raise ValueError("cannot encode (simulated)")

    monkeypatch.setattr(cached, "_store", broken_store)
    with pytest.warns(UserWarning, match="could not write .*the answer is used but not cached"):
        assert cached.chat(MSGS, GEN).text == "Paris"


# -- credentials in a URL are refused like a literal api_key -----------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{SECRET}@127.0.0.1:8000/v1",
        f"http://{SECRET}@127.0.0.1:8000/v1",
        f"http://127.0.0.1:8000/v1?api_key={SECRET}",
        f"http://127.0.0.1:8000/v1?x=1&key={SECRET}",
        f"http://127.0.0.1:8000/v1?Access-Token={SECRET}",
    ],
)
def test_credentials_in_base_url_are_refused(base_config, url):
    base_config["models"].update(backend="openai", base_url=url, model="m")
    with pytest.raises(ConfigError, match=r"models\.base_url.*api_key_env") as info:
        validate_config(base_config)
    assert SECRET not in str(info.value)
    for backend in ("openai", "ollama"):
        with pytest.raises(ModelError, match="api_key_env") as info:
            make_client({"backend": backend, "base_url": url, "model": "m"})
        assert SECRET not in str(info.value)


def test_a_url_without_credentials_is_accepted(base_config):
    base_config["models"].update(backend="openai", model="m",
                                 base_url="http://127.0.0.1:8000/v1?region=eu")  # fmt: skip
    validate_config(base_config)


# -- a cache entry of the wrong types is a miss, rewritten -------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        {"text": None},
        {"prompt_tokens": "abc"},
        {"completion_tokens": 1.5},
        {"parsed": "not an object"},
        {"total_s": "fast"},
        {"cache_hit": "yes"},
        {"attempts": True},
        {"extra": []},
        "result-not-an-object",
        "not-utf-8",
    ],
    ids=str,
)
def test_a_malformed_cache_entry_is_a_miss_and_is_rewritten(tmp_path, damage):
    inner = ScriptedClient(lambda messages: "Paris")
    cached = CachedClient(inner, tmp_path)
    cached.chat(MSGS, GEN)
    [path] = cache_files(tmp_path)
    if damage == "not-utf-8":
        path.write_bytes(b'{"key": "\xff\xfe"}')
    else:
        entry = json.loads(path.read_text())
        if damage == "result-not-an-object":
            entry["result"] = ["Paris"]
        else:
            entry["result"].update(damage)
        path.write_text(json.dumps(entry))
    with pytest.warns(UserWarning, match="corrupt entry"):
        res = cached.chat(MSGS, GEN)
    assert not res.cache_hit and res.text == "Paris" and isinstance(res.prompt_tokens, int)
    assert (cached.hits, cached.misses) == (0, 2) and len(inner.calls) == 2
    assert cached.chat(MSGS, GEN).cache_hit  # rewritten whole: the next lookup hits


# -- found in review: headers that never end, compressed bombs, content that is not text -


def _raw_server(reply) -> tuple[str, object]:
    """A loopback HTTP server whose every connection gets ``reply(sock)`` after the request."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def handle(conn):
        buf = b""
        with conn:
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            head, body = buf.split(b"\r\n\r\n", 1)
            # a GET (the cache's model listing, for the fingerprint) has no body
            n = sum(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                    if h.lower().startswith(b"content-length"))  # fmt: skip
            while len(body) < n:
                body += conn.recv(65536)
            try:
                reply(conn)
            except OSError:
                pass

    def accept():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}/v1", srv


def _completion(content) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                 "total_tokens": 2}}).encode()  # fmt: skip


def _raw_client(url: str, **kw):
    from tersetalk.models import OpenAICompatClient

    client = OpenAICompatClient(url, "m", backoff_s=0.01, sleep=lambda s: None, **kw)
    client._contacted = True
    return client


def test_interim_responses_before_the_headers_cannot_hold_a_call_open():
    def processing_for_ever(conn):
        for _ in range(240):
            conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
            time.sleep(0.25)

    url, srv = _raw_server(processing_for_ever)
    try:
        client = _raw_client(url, timeout_s=1.5, max_retries=0, stream=False)
        t0 = time.monotonic()
        with pytest.raises(TransientModelError, match="timeout"):
            client.chat(MSGS, GEN)
        assert time.monotonic() - t0 < 1.5 + MARGIN_S
    finally:
        srv.close()


def test_a_compressed_reply_is_refused_before_it_is_inflated():
    import gzip

    bomb = gzip.compress(_completion("a" * 20_000_000))

    def gzipped(conn):
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb) + bomb
        )

    url, srv = _raw_server(gzipped)
    try:
        client = _raw_client(url, max_retries=0, stream=False)
        with pytest.raises(TransientModelError, match="oversized reply.*gzip"):
            client.chat(MSGS, GEN)
    finally:
        srv.close()


@pytest.mark.parametrize("stream", [True, False])
def test_content_that_is_not_text_is_a_malformed_reply_not_an_answer(stream):
    def number_as_content(conn):
        if stream:
            event = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "delta": {"content": 5}}],
                }
            )
            body = f"data: {event}\n\ndata: [DONE]\n\n".encode()
            kind = b"text/event-stream"
        else:
            body, kind = _completion(5), b"application/json"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                     % (kind, len(body)) + body)  # fmt: skip

    url, srv = _raw_server(number_as_content)
    try:
        client = _raw_client(url, max_retries=1, stream=stream)
        with pytest.raises(TransientModelError, match="malformed reply"):
            client.chat(MSGS, GEN)
    finally:
        srv.close()


def test_a_finished_calls_deadline_does_not_cut_a_later_request_short(server):
    # a deadline that a loaded machine's two loopback round trips stay well within
    client, _ = client_for(server, max_retries=2, deadline_s=2.0)
    client.chat(MSGS, GEN)
    time.sleep(2.1)  # the finished call's deadline has passed
    server.modes = ["500"]  # the next request fails once, then succeeds
    assert client.chat(MSGS, GEN).text  # a fresh call has a fresh deadline
    assert client._call_deadline() is None


def test_a_server_that_echoes_the_refused_key_does_not_put_it_in_the_message():
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}"}}).encode()

    def echo_401(conn):
        conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip

    url, srv = _raw_server(echo_401)
    try:
        client = _raw_client(url, max_retries=0, api_key=SECRET, api_key_env="TT_KEY")
        with pytest.raises(ModelAuthError) as info:
            client.chat(MSGS, GEN)
    finally:
        srv.close()
    assert "TT_KEY" in str(info.value) and "Incorrect API key provided: ***" in str(info.value)
    assert SECRET not in str(info.value)


def test_an_escaped_lone_surrogate_in_a_structured_answer_is_replaced_not_cached_as_an_error(
    tmp_path,
):
    content = '{"answer": "Par\\ud800is"}'  # the six characters \ud800, as a model writes them

    def escaped(conn):
        body = _completion(content)
        # it closes the connection after the reply, so it says so: two requests (the
        # fingerprint's listing, then the call), and a pooled connection the client did
        # not yet see closed would fail the second (it did once, under load)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + body)  # fmt: skip

    url, srv = _raw_server(escaped)
    try:
        client = _raw_client(url, max_retries=0, stream=False, structured_format="json_schema")
        cached = CachedClient(client, tmp_path / "calls")
        first = cached.structured(MSGS, Answer, GEN)
        assert first.parsed == {"answer": "Par\ufffdis"}
        assert first.extra["surrogates_replaced"] == 1
        assert cached.structured(MSGS, Answer, GEN).cache_hit
    finally:
        srv.close()


@pytest.mark.parametrize(
    ("text", "expected", "n"),
    [
        ('{"a": "x\\ud800y"}', '{"a": "x\\ufffdy"}', 1),
        ('{"a": "\\ud83d\\ude00"}', '{"a": "\\ud83d\\ude00"}', 0),  # a pair is one character
        ('{"a": "\\\\ud800"}', '{"a": "\\\\ud800"}', 0),  # an escaped backslash, then text
        ('{"a": "\\\\\\ud800"}', '{"a": "\\\\\\ufffd"}', 1),
        ('{"a": "\\udc00\\ud800"}', '{"a": "\\ufffd\\ufffd"}', 2),  # halves in the wrong order
        ('{"a": "\\u00e9"}', '{"a": "\\u00e9"}', 0),
    ],
)
def test_escaped_lone_surrogates_are_found_by_reading_escapes_in_order(text, expected, n):
    from tersetalk.models._common import replace_escaped_lone_surrogates

    assert replace_escaped_lone_surrogates(text) == (expected, n)
    json.loads(expected)
