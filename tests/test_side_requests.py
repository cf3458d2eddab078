"""Every request a model backend makes besides its chat calls (the model listing, the
tokenize endpoint, llama.cpp's ``/props``, Ollama's ``/api/tags``) is bounded like a
chat call: a total deadline, a byte cap, no compressed body, a connection of its own;
and what a server answers is checked before it becomes a number or an answer.

The servers are real HTTP servers on loopback (``fake_openai_server``, or a raw socket
server where the fault is below HTTP's usual shape). No test measures the wall clock:
each uses a small ``timeout_s`` and asserts the error's type; :func:`bounded` only
stops a request that would otherwise hang the test run.
"""

from __future__ import annotations

import json
import socket
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from fake_openai_server import FakeServer

from tersetalk.models import (
    CachedClient,
    GenerationConfig,
    ModelCallError,
    ModelEnvironmentError,
    OllamaClient,
    OpenAICompatClient,
    TransientModelError,
    is_transient,
)
from tersetalk.models.fingerprint import model_fingerprint

MSGS = [{"role": "user", "content": "Capital of France?"}]
GEN = GenerationConfig(max_tokens=160)
#: long enough that a request it stalls has clearly hung; the fake servers stall longer
OUTER_GUARD_S = 30.0


def bounded(fn: Callable[[], Any], limit_s: float = OUTER_GUARD_S) -> Any:
    """``fn()`` in a thread; fails the test if it is still running after ``limit_s``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"the request was still running after {limit_s:g}s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture
def server():
    srv = FakeServer().start()
    yield srv
    srv.stop()


def client_for(server: FakeServer, **kw: Any) -> OpenAICompatClient:
    kw = {"max_retries": 1, "backoff_s": 0.01, "sleep": lambda s: None, **kw}
    return OpenAICompatClient(server.base_url, "fake", **kw)


def ollama_for(server: FakeServer, **kw: Any) -> OllamaClient:
    root = server.base_url.removesuffix("/v1")
    return OllamaClient("fake", host=root, max_retries=1, backoff_s=0.01, **kw)


# -- each side request, and what asks for it ---------------------------------------------


def _listing(server: FakeServer, **kw: Any) -> Any:
    return client_for(server, **kw).model_report()


def _extras_tokenize(server: FakeServer, **kw: Any) -> Any:
    return client_for(server, **kw).count_tokens("a b c")


def _tokenize(server: FakeServer, **kw: Any) -> Any:
    client = client_for(server, **kw)
    client._tokenize_route = "/tokenize"  # llama.cpp's, as once found
    return client.count_tokens("a b c")


def _props(server: FakeServer, **kw: Any) -> Any:
    server.owned_by = "llamacpp"  # the listing says llama.cpp: the client asks /props
    return client_for(server, **kw).model_report()


def _ollama_check(server: FakeServer, **kw: Any) -> Any:
    return ollama_for(server, **kw)  # the startup check lists /api/tags


def _ollama_digest(server: FakeServer, **kw: Any) -> Any:
    return ollama_for(server, check=False, **kw).model_digest()


SIDE_REQUESTS = {
    "/v1/models": _listing,
    "/extras/tokenize": _extras_tokenize,
    "/tokenize": _tokenize,
    "/props": _props,
    "/api/tags (startup check)": _ollama_check,
    "/api/tags (digest)": _ollama_digest,
}
PATHS = {  # what side_fail_path picks out for each
    "/v1/models": "/v1/models",
    "/extras/tokenize": "/extras/tokenize",
    "/tokenize": "/tokenize",
    "/props": "/props",
    "/api/tags (startup check)": "/api/tags",
    "/api/tags (digest)": "/api/tags",
}


@pytest.mark.parametrize("which", list(SIDE_REQUESTS))
def test_a_trickling_side_request_ends_at_its_deadline(server, which):
    # one byte a second: every read is quick, so only a total deadline ends it
    server.side_mode, server.side_fail_path, server.trickle_s = "trickle", PATHS[which], 1.0
    with pytest.raises(ModelEnvironmentError, match="timeout on all 2 attempts"):
        bounded(lambda: SIDE_REQUESTS[which](server, timeout_s=1.0))
    assert [r["path"] for r in server.side_requests if PATHS[which] in r["path"]]


@pytest.mark.parametrize("which", list(SIDE_REQUESTS))
def test_a_gzip_bomb_on_a_side_request_is_refused_before_it_is_inflated(server, which):
    server.side_mode, server.side_fail_path = "gzip", PATHS[which]
    server.gzip_bomb()  # warm: building the bomb is the server's work, not the client's
    tracemalloc.start()
    try:
        with pytest.raises(ModelEnvironmentError, match="oversized reply.*gzip"):
            bounded(lambda: SIDE_REQUESTS[which](server))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB allocated for a refused reply"


def test_a_side_reply_over_its_byte_cap_is_refused():
    from tersetalk.models.http import ReplyTooLarge, side_request

    srv = FakeServer().start()
    try:
        with pytest.raises(ReplyTooLarge, match="over the 10 allowed"):
            side_request("GET", srv.base_url + "/models", timeout_s=5.0, max_bytes=10)
        srv.chunked = True  # no Content-Length: the cap counts the bytes as they come
        with pytest.raises(ReplyTooLarge, match="went over 10 bytes"):
            side_request("GET", srv.base_url + "/models", timeout_s=5.0, max_bytes=10)
    finally:
        srv.stop()


def test_a_failing_listing_stops_the_run_instead_of_weakening_the_fingerprint(server):
    server.side_mode, server.side_fail_path = "500", "/v1/models"
    client = client_for(server)
    with pytest.raises(ModelEnvironmentError, match=r"HTTP 500 on all 2 attempts"):
        model_fingerprint(client)
    assert not is_transient(ModelEnvironmentError("x"))  # not an example to redo later


def test_the_side_requests_send_the_key_and_ask_for_a_connection_of_their_own(server):
    client = client_for(server, api_key="k-test-1234567")
    server.owned_by = "llamacpp"
    client.model_report()
    assert client.count_tokens("a b c") == 3
    sent = server.side_requests
    assert [r["path"] for r in sent] == ["/v1/models", "/props", "/extras/tokenize"]
    assert {r["authorization"] for r in sent} == {"Bearer k-test-1234567"}
    assert {r["connection"] for r in sent} == {"close"}


# -- the tokenize endpoint is retried like a call -----------------------------------------


def test_a_tokenize_endpoint_answering_500_is_retried_then_an_environment_error(server):
    server.side_mode, server.side_fail_path = "500", "/tokenize"
    sleeps: list[float] = []
    client = client_for(server, max_retries=2, sleep=sleeps.append)
    with pytest.raises(ModelEnvironmentError, match=r"counting tokens .*HTTP 500 on all 3"):
        client.count_tokens("a b c")
    assert sleeps == [0.01, 0.02]


def test_a_tokenize_endpoint_that_fails_once_recovers(server):
    # the first side request is the listing (is the server llama.cpp's, with a model
    # file here to count with?); the second the tokenize endpoint, failing once
    server.side_modes, server.side_fail_path = ["ok", "500"], "/tokenize"
    sleeps: list[float] = []
    client = client_for(server, sleep=sleeps.append)
    assert client.count_tokens("a b c") == 3 and sleeps == [0.01]


# -- an interim 102 on a reused connection ------------------------------------------------


def _keepalive_server() -> tuple[str, socket.socket, threading.Event]:
    """A loopback server that keeps connections alive: ``GET`` gets a model listing,
    ``POST`` an interim ``102 Processing`` every quarter second until stopped."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()
    listing = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()

    def handle(conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            while not stop.is_set():
                line = f.readline()
                if not line:
                    return
                length = 0
                while (header := f.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                f.read(length)
                if line.startswith(b"GET"):
                    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(listing)
                    conn.sendall(head + listing)
                    continue
                while not stop.wait(0.25):
                    conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
                return

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}/v1", srv, stop


@pytest.mark.parametrize("stream", [True, False])
def test_interim_responses_on_a_connection_left_by_the_listing_cannot_hold_a_call(tmp_path, stream):
    url, srv, stop = _keepalive_server()
    try:
        client = OpenAICompatClient(url, "m", timeout_s=1.5, max_retries=0, stream=stream)
        client._contacted = True
        cached = CachedClient(client, tmp_path)  # its first lookup lists the models
        with pytest.raises(TransientModelError, match="timeout"):
            bounded(lambda: cached.chat(MSGS, GEN))
    finally:
        stop.set()
        srv.close()


# -- a broken usage report; an answer made of tool calls ----------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("prompt_tokens", "12"),
        ("prompt_tokens", 1.5),
        ("prompt_tokens", None),
        ("completion_tokens", -3),
        ("completion_tokens", True),
    ],
)
def test_a_usage_count_that_is_not_a_non_negative_integer_is_an_environment_error(
    server, tmp_path, stream, field, value
):
    server.usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6, field: value}
    cached = CachedClient(client_for(server, stream=stream), tmp_path / "calls")
    with pytest.raises(ModelEnvironmentError, match=f"usage.{field} is {value!r}"):
        cached.chat(MSGS, GEN)
    assert not list((tmp_path / "calls").rglob("*.json"))  # nothing cached


def test_a_usage_count_that_is_broken_stops_a_structured_call_too(server, tmp_path):
    import pydantic

    class Answer(pydantic.BaseModel):
        answer: str

    server.usage = {"prompt_tokens": "5", "completion_tokens": 1}
    client = client_for(server, stream=False, structured_format="json_schema")
    with pytest.raises(ModelEnvironmentError, match="usage.prompt_tokens"):
        CachedClient(client, tmp_path / "calls").structured(MSGS, Answer, GEN)
    assert not list((tmp_path / "calls").rglob("*.json"))


@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_made_of_a_tool_call_is_the_example_s_error_never_an_empty_answer(
    server, tmp_path, stream
):
    server.mode = "tool_call"
    cached = CachedClient(client_for(server, stream=stream), tmp_path / "calls")
    with pytest.raises(ModelCallError, match=r"tool call \(lookup\) and no text") as info:
        cached.chat(MSGS, GEN)
    # the model's answer to this example: an error row, neither retried nor a stop
    assert not is_transient(info.value) and not isinstance(info.value, ModelEnvironmentError)
    assert len(server.chat_requests()) == 1
    assert not list((tmp_path / "calls").rglob("*.json"))
