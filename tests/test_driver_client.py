"""The driver's cost per model call: what an OpenAI-compatible backend does per call.

A token count is asked of the server once per text (a bounded memo), never when the
served model's GGUF file is readable here (llama.cpp's ``/props`` names it); one HTTP
client serves every request of a backend; one thread keeps every request's deadline.
The servers are real HTTP servers on loopback (``fake_openai_server``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx2
import pytest
from fake_openai_server import FakeServer

from tersetalk.models import GenerationConfig, OpenAICompatClient
from tersetalk.models import http as model_http
from tersetalk.models.llamacpp import GGUFTokenizer, default_model_path

GEN = GenerationConfig(max_tokens=16)
MSGS = [{"role": "user", "content": "Capital of France?"}]


@pytest.fixture
def server():
    srv = FakeServer().start()
    yield srv
    srv.stop()


def client_for(server: FakeServer, **kw: Any) -> OpenAICompatClient:
    kw = {"max_retries": 1, "backoff_s": 0.01, "sleep": lambda s: None, **kw}
    return OpenAICompatClient(server.base_url, "fake", **kw)


def _paths(server: FakeServer) -> list[str]:
    return [r["path"] for r in server.side_requests]


def test_a_text_is_sent_to_the_tokenize_endpoint_once(server):
    client = client_for(server)
    counts = [client.count_tokens(t) for t in ["a b c", "d e", "a b c", "a b c", "d e"]]
    assert counts == [3, 2, 3, 3, 2]
    assert _paths(server).count("/extras/tokenize") == 2
    assert client.tokens_model_source() == "server tokenize endpoint (/extras/tokenize)"


def test_the_memo_is_bounded_and_keeps_the_most_recently_used(server, monkeypatch):
    monkeypatch.setattr(OpenAICompatClient, "TOKEN_MEMO_SIZE", 2)
    client = client_for(server)
    for text in ["a", "b b", "a", "c c c"]:  # "b b" is the least recently used: dropped
        client.count_tokens(text)
    before = _paths(server).count("/extras/tokenize")
    assert client.count_tokens("a") == 1 and client.count_tokens("c c c") == 3
    assert _paths(server).count("/extras/tokenize") == before
    assert client.count_tokens("b b") == 2
    assert _paths(server).count("/extras/tokenize") == before + 1
    assert len(client._token_memo) == 2


def test_a_llamacpp_server_on_this_machine_is_counted_with_its_model_file(server):
    gguf = default_model_path()
    server.owned_by, server.props_model_path = "llamacpp", str(gguf)
    client = client_for(server)
    text = "Natalia sold clips to 48 of her friends in April."
    assert client.count_tokens(text) == GGUFTokenizer(gguf).count(text)
    assert "/extras/tokenize" not in _paths(server) and "/tokenize" not in _paths(server)
    assert client.tokens_model_source() == (
        f"gguf:{gguf.name} (the server's model file, from /props)"
    )


def test_a_model_file_that_is_not_here_leaves_the_counting_to_the_server(server):
    server.owned_by = "llamacpp"  # its /props names /nonexistent/model.gguf
    client = client_for(server)
    assert client.count_tokens("a b c") == 3
    assert _paths(server) == ["/v1/models", "/props", "/extras/tokenize"]


def test_the_model_report_answers_where_the_model_file_is(server):
    """A client that reported its model (the fingerprint) asks nothing again to count."""
    server.owned_by, server.props_model_path = "llamacpp", str(default_model_path())
    client = client_for(server)
    client.model_report()
    client.count_tokens("a b c")
    assert _paths(server) == ["/v1/models", "/props"]


def test_one_http_client_serves_every_request_of_a_backend(server, monkeypatch):
    model_http._side_client.cache_clear()  # the process-wide client, built on first use
    built: list[Any] = []
    init = httpx2.Client.__init__

    def counting(self: Any, *args: Any, **kw: Any) -> None:
        built.append(self)
        init(self, *args, **kw)

    monkeypatch.setattr(httpx2.Client, "__init__", counting)
    server.owned_by = "llamacpp"
    client = client_for(server)
    client.model_report()
    client.count_tokens("a b c")
    assert client.chat(MSGS, GEN).text
    assert len(built) == 1
    model_http._side_client.cache_clear()


def _guard(deadline_s: float) -> model_http.Guard:
    return model_http.Guard(time.monotonic() + deadline_s, 1024, deadline_s)


def test_many_watchdogs_share_one_thread_and_each_fires_at_its_deadline():
    before = threading.active_count()
    dogs = [model_http.Watchdog(_guard(600.0)) for _ in range(50)]
    assert threading.active_count() <= before + 1
    gone = model_http.Watchdog(_guard(1.0))
    gone.cancel()
    soon = model_http.Watchdog(_guard(1.5))  # sooner than what the thread waits for
    for _ in range(3000):  # polls; the deadline is what is checked, not the wall time
        if soon.guard.expired:
            break
        time.sleep(0.01)
    assert soon.guard.expired  # after gone's deadline: gone was due first, and skipped
    assert not gone.guard.expired and not any(d.guard.expired for d in dogs)
    for dog in dogs:
        dog.cancel()
