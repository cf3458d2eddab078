"""Model clients: the call cache and error paths (scripted double, fake servers) and the
embedded llama.cpp model (integration: token counts, timing, determinism, and a proof
that grammar-constrained decoding is really on)."""

from __future__ import annotations

import enum
import json
import os
import socket
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pydantic
import pytest

from tersetalk.models import (
    CachedClient,
    CallResult,
    GenerationConfig,
    ModelCallError,
    ModelError,
    ModelUnavailableError,
    ScriptedClient,
    make_client,
)
from tersetalk.models.base import StructuredOutputError

MSGS = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name a colour."},
]
GEN = GenerationConfig(max_tokens=16)


class Verdict(pydantic.BaseModel):
    ok: bool
    reason: str


def closed_port() -> int:
    """A localhost port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- base types -------------------------------------------------------------------------


def test_generation_config_is_hashable_and_json_ready():
    g = GenerationConfig(stop=["\n"])  # a list from YAML becomes a tuple
    assert g.stop == ("\n",) and hash(g) == hash(GenerationConfig(stop=("\n",)))
    assert json.loads(json.dumps(g.as_dict())) == {
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "seed": 0, "stop": ["\n"],
        "json_mode": False,
    }  # fmt: skip
    with pytest.raises(ModelError, match="max_tokens"):
        GenerationConfig(max_tokens=0)


def test_call_result_round_trips_through_json():
    r = CallResult("t", {"a": 1}, 3, 4, 0.1, 0.01, 0.5, 2, False, "scripted", "m")
    assert CallResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


# -- scripted double ----------------------------------------------------------------------


def test_scripted_structured_retries_then_fails():
    ok = ScriptedClient(["not json", '{"ok": true, "reason": "fine"}'])
    r = ok.structured(MSGS, Verdict, GEN)
    assert r.attempts == 2 and r.parsed == {"ok": True, "reason": "fine"}
    bad = ScriptedClient(["x", "y", "z"], max_retries=2)
    with pytest.raises(StructuredOutputError, match="after 3 attempts"):
        bad.structured(MSGS, Verdict, GEN)


def test_scripted_accepts_one_argument_callables():
    c = ScriptedClient(lambda messages: messages[-1]["content"].upper())
    assert c.chat(MSGS, GEN).text == "NAME A COLOUR."
    assert c.describe()["backend"] == "scripted"


# -- call cache --------------------------------------------------------------------------


def counting_client():
    calls = {"n": 0}

    def answer(messages, gen, schema):
        calls["n"] += 1
        if schema is not None:
            return json.dumps({"ok": True, "reason": f"n={calls['n']}"})
        return f"answer {calls['n']}"

    return ScriptedClient(answer), calls


def entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.rglob("*") if p.is_file())


def test_cache_miss_then_hit(tmp_path):
    inner, calls = counting_client()
    c = CachedClient(inner, tmp_path)
    first = c.chat(MSGS, GEN)
    second = c.chat(MSGS, GEN)
    assert calls["n"] == 1 and (c.hits, c.misses) == (1, 1)
    assert not first.cache_hit and second.cache_hit
    assert second.text == first.text and second.prompt_tokens == first.prompt_tokens
    # layout: cache_dir/ab/abcdef...json, named by the sha256 key
    [path] = entries(tmp_path)
    assert path.parent.name == path.name[:2] and len(path.stem) == 64
    stored = json.loads(path.read_text())
    assert stored["key"] == path.stem and stored["result"]["cache_hit"] is False
    # structured calls are cached too, parsed object included
    s1 = c.structured(MSGS, Verdict, GEN)
    s2 = c.structured(MSGS, Verdict, GEN)
    assert s2.cache_hit and s2.parsed == s1.parsed and calls["n"] == 2


def test_cache_key_covers_everything_that_changes_the_answer(tmp_path):
    inner, calls = counting_client()
    c = CachedClient(inner, tmp_path)
    c.chat(MSGS, GEN)
    c.chat(MSGS, GenerationConfig(max_tokens=16, seed=1))  # generation params
    c.chat(MSGS, GenerationConfig(max_tokens=16, stop=("\n",)))
    c.chat(MSGS[:1] + [{"role": "user", "content": "Name a color."}], GEN)  # messages
    c.structured(MSGS, Verdict, GEN)  # kind + schema

    class Other(pydantic.BaseModel):
        ok: bool

    c.structured(MSGS, Other, GEN)
    assert calls["n"] == 6 and c.hits == 0
    # another model behind the same cache folder never sees these entries
    other, other_calls = counting_client()
    other.model = "another-model"
    CachedClient(other, tmp_path).chat(MSGS, GEN)
    assert other_calls["n"] == 1


def test_corrupt_cache_file_is_a_miss_and_is_overwritten(tmp_path):
    inner, calls = counting_client()
    c = CachedClient(inner, tmp_path)
    c.chat(MSGS, GEN)
    [path] = entries(tmp_path)
    path.write_text('{"key": "trunc')  # e.g. written by a tool that died
    with pytest.warns(UserWarning, match="corrupt"):
        r = c.chat(MSGS, GEN)
    assert not r.cache_hit and calls["n"] == 2
    assert json.loads(path.read_text())["result"]["text"] == "answer 2"  # overwritten
    assert c.chat(MSGS, GEN).cache_hit


def test_interrupted_write_leaves_no_entry_and_no_temp_file(tmp_path, monkeypatch):
    inner, calls = counting_client()
    c = CachedClient(inner, tmp_path)

    def killed(src, dst):  # the process dies between writing the temp file and renaming it
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        c.chat(MSGS, GEN)
    monkeypatch.undo()
    assert entries(tmp_path) == []  # neither a half entry nor a stray temp file
    r = c.chat(MSGS, GEN)  # the rerun computes and stores it normally
    assert not r.cache_hit and calls["n"] == 2 and len(entries(tmp_path)) == 1


def test_failed_calls_are_not_cached(tmp_path):
    # transport-like failures are retried on a rerun; only a StructuredOutputError (a
    # property of the answer) is stored, see tests/test_cache_failures.py
    inner = ScriptedClient([RuntimeError("boom"), "fine"])
    c = CachedClient(inner, tmp_path)
    with pytest.raises(RuntimeError):
        c.chat(MSGS, GEN)
    assert entries(tmp_path) == []
    assert c.chat(MSGS, GEN).text == "fine"
    timeout = ModelCallError("server at http://x: timeout on all 3 attempts")
    flaky = CachedClient(ScriptedClient([timeout, '{"ok": true, "reason": "r"}']), tmp_path / "s")
    with pytest.raises(ModelCallError) as info:
        flaky.structured(MSGS, Verdict, GEN)
    assert not isinstance(info.value, StructuredOutputError)
    assert entries(tmp_path / "s") == []


# -- make_client and error messages --------------------------------------------------------


def test_make_client_rejects_unknown_backend():
    with pytest.raises(ModelError, match=r"models\.backend.*llamacpp, openai, ollama"):
        make_client({"backend": "vllm"}, None)
    with pytest.raises(ModelError, match=r"models\.base_url"):
        make_client({"backend": "openai", "model": "m"}, None)


def test_server_down_says_how_to_start_one():
    from tersetalk.models import OpenAICompatClient

    url = f"http://127.0.0.1:{closed_port()}/v1"
    client = OpenAICompatClient(url, "m", max_retries=3, backoff_s=5.0)
    with pytest.raises(ModelUnavailableError) as info:  # at once: no backoff on first contact
        client.chat(MSGS, GEN)
    msg = str(info.value)
    assert f"no OpenAI-compatible server at {url}" in msg
    assert "python -m tersetalk.models.llamacpp_server" in msg and "ollama serve" in msg
    assert "models.base_url" in msg
    with pytest.raises(ModelUnavailableError, match="no OpenAI-compatible server"):
        client.structured(MSGS, Verdict, GEN)  # structured path wraps it the same way


def test_ollama_not_running_says_ollama_serve():
    host = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ModelUnavailableError, match=r"Ollama is not running at .*`ollama serve`"):
        make_client({"backend": "ollama", "model": "mistral:instruct", "base_url": host}, None)


class _Fake(BaseHTTPRequestHandler):
    """A scripted HTTP server: ``script`` is a list of (status, body | None) per POST."""

    script: list = []
    tags: dict = {"models": []}
    posts: list = []

    def log_message(self, *args):
        pass

    def _send(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/tags":
            self._send(200, self.tags)
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        type(self).posts.append(json.loads(self.rfile.read(n)))
        status, body = type(self).script.pop(0)
        if status == "sleep":
            import time

            time.sleep(body)
            self._send(500, {"error": "late"})
        elif status == 200:
            chunks = [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"index": 0, "delta": {"content": "Hello"}}]},
                {"choices": [{"index": 0, "delta": {"content": " there"}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2,
                                          "total_tokens": 13}},
            ]  # fmt: skip
            sse = "".join(
                "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                        "created": 0, "model": "m", **c}) + "\n\n"
                for c in chunks
            ) + "data: [DONE]\n\n"  # fmt: skip
            self._send(200, sse, "text/event-stream")
        else:
            self._send(status, body)


@pytest.fixture
def fake_server():
    class Handler(_Fake):
        script = []
        posts = []
        tags = {"models": []}

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Handler
    server.shutdown()
    server.server_close()


def test_ollama_model_not_pulled_says_ollama_pull(fake_server):
    from tersetalk.models import OllamaClient

    host, handler = fake_server
    handler.tags = {"models": [{"model": "llama3:latest", "name": "llama3:latest"}]}
    with pytest.raises(ModelUnavailableError, match=r"`ollama pull mistral:instruct`.*llama3"):
        OllamaClient("mistral:instruct", host=host)
    client = OllamaClient("llama3", host=host)  # no tag means :latest
    assert client.base_url == f"{host}/v1" and client.describe()["backend"] == "ollama"


def test_5xx_is_retried_with_backoff_and_stream_usage_is_read(fake_server):
    from tersetalk.models import OpenAICompatClient

    url, handler = fake_server
    handler.script = [(503, {"error": "busy"}), (502, {"error": "gateway"}), (200, None)]
    client = OpenAICompatClient(url + "/v1", "m", max_retries=3, backoff_s=0.01)
    r = client.chat(MSGS, GEN)
    assert r.text == "Hello there" and r.attempts == 3
    assert (r.prompt_tokens, r.completion_tokens) == (11, 2)  # from the usage chunk
    assert r.ttft_s is not None and r.ttft_s <= r.total_s
    assert handler.posts[-1]["stream_options"] == {"include_usage": True}
    assert handler.posts[-1]["max_tokens"] == 16 and handler.posts[-1]["temperature"] == 0.0


def test_persistent_5xx_and_timeouts_become_model_call_errors(fake_server):
    from tersetalk.models import OpenAICompatClient

    url, handler = fake_server
    handler.script = [(500, {"error": "x"})] * 3
    client = OpenAICompatClient(url + "/v1", "m", max_retries=2, backoff_s=0.01)
    with pytest.raises(ModelCallError, match="HTTP 500 on all 3 attempts"):
        client.chat(MSGS, GEN)
    handler.script = [("sleep", 1.0)] * 2
    slow = OpenAICompatClient(url + "/v1", "m", timeout_s=0.2, max_retries=1, backoff_s=0.01)
    with pytest.raises(ModelCallError, match=r"timeout on all 2 attempts.*models\.timeout_s"):
        slow.chat(MSGS, GEN)


def test_4xx_is_not_retried_and_404_names_the_fix(fake_server):
    from tersetalk.models import OpenAICompatClient

    url, handler = fake_server
    handler.script = [(404, {"error": {"message": 'model "m" not found'}})]
    client = OpenAICompatClient(url + "/v1", "m", max_retries=3, backoff_s=0.01)
    with pytest.raises(ModelUnavailableError, match="not found"):
        client.chat(MSGS, GEN)
    handler.script = [(400, {"error": {"message": "bad"}})]
    with pytest.raises(ModelCallError, match="HTTP 400"):
        client.chat(MSGS, GEN)
    assert handler.script == [] and len(handler.posts) == 2


# -- the embedded model (integration) -------------------------------------------------------


class Shade(enum.StrEnum):
    teal = "teal-7f"
    mauve = "mauve-3q"


class Tag(pydantic.BaseModel):
    """A schema SmolLM2 would never produce by chance: odd enum values, a code pattern."""

    code: str = pydantic.Field(pattern=r"^[A-Z]{3}-[0-9]{4}$")
    shade: Shade


TAG_PROMPT = [{"role": "user", "content": "Give a product tag for a blue mug."}]


@pytest.fixture(scope="module")
def llama():
    from tersetalk.models import LlamaCppClient

    client = LlamaCppClient(max_retries=0)
    yield client
    client.close()


@pytest.mark.integration
def test_embedded_chat_counts_tokens_and_times_the_stream(llama):
    r = llama.chat(MSGS, GenerationConfig(max_tokens=12))
    assert r.text.strip() and r.backend == "llamacpp"
    assert r.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert r.prompt_tokens > 0 and 0 < r.completion_tokens <= 12
    assert r.ttft_s is not None and 0 < r.ttft_s <= r.total_s
    assert r.completion_tokens == 1 or r.itl_s is not None
    # Streamed counts equal llama-cpp-python's own usage of the same call, non-streamed.
    llama._llm.reset()
    ref = llama._llm.create_chat_completion(
        messages=MSGS, **llama._sampling(GenerationConfig(max_tokens=12))
    )
    assert ref["choices"][0]["message"]["content"] == r.text
    assert ref["usage"]["prompt_tokens"] == r.prompt_tokens
    assert ref["usage"]["completion_tokens"] == r.completion_tokens
    assert llama.count_tokens("Name a colour.") < r.prompt_tokens  # template adds tokens


@pytest.mark.integration
def test_embedded_is_deterministic_and_history_independent(llama):
    gen = GenerationConfig(max_tokens=12, seed=7)
    a = llama.chat(MSGS, gen)
    llama.chat([{"role": "user", "content": "Something else entirely."}], gen)
    b = llama.chat(MSGS, gen)
    assert a.text == b.text and a.completion_tokens == b.completion_tokens


@pytest.mark.integration
def test_grammar_constraint_is_really_on(llama):
    """The proof: the same prompt, decoded with and without the rewritten response_format.

    Unconstrained, SmolLM2 answers in prose (or JSON of its own shape): never a Tag, whose
    enum values and code pattern it has no way to guess. Constrained, it returns a valid
    Tag on the first attempt with no retries allowed (max_retries=0), and the request
    llama.cpp received carried the schema as a json_object response_format.
    """
    gen = GenerationConfig(max_tokens=48)
    # What Instructor's JSON_SCHEMA mode sends, passed to llama.cpp as is: ignored.
    llama._llm.reset()
    unconstrained = llama._llm.create_chat_completion(
        messages=TAG_PROMPT,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "Tag", "schema": Tag.model_json_schema()},
        },
        **llama._sampling(gen),
    )["choices"][0]["message"]["content"]
    with pytest.raises(pydantic.ValidationError):
        Tag.model_validate_json(unconstrained)

    r = llama.structured(TAG_PROMPT, Tag, gen)
    assert r.attempts == 1
    tag = Tag.model_validate_json(r.text)  # the raw text itself is a valid Tag
    assert r.parsed == tag.model_dump(mode="json")
    assert r.parsed["shade"] in {"teal-7f", "mauve-3q"}
    assert llama.last_response_format == {"type": "json_object", "schema": Tag.model_json_schema()}
    assert r.prompt_tokens > 0 and r.completion_tokens > 0


@pytest.mark.integration
def test_structured_invalid_after_retries_is_a_model_call_error():
    from tersetalk.models import LlamaCppClient

    seen = []

    class Picky(pydantic.BaseModel):
        word: str

        @pydantic.field_validator("word")
        @classmethod
        def never(cls, v):
            seen.append(v)
            raise ValueError("no word is good enough")

    client = LlamaCppClient(max_retries=1)
    with pytest.raises(
        StructuredOutputError, match=r"no answer valid for Picky after 2 attempt"
    ) as info:
        client.structured(TAG_PROMPT, Picky, GenerationConfig(max_tokens=24))
    assert len(seen) == 2  # one first try + one re-ask, each decoded under the grammar
    assert info.value.attempts == 2 and info.value.cache_hit is False
    with pytest.raises(StructuredOutputError, match="cut off at max_tokens=3") as info:
        client.structured(TAG_PROMPT, Tag, GenerationConfig(max_tokens=3))
    assert info.value.attempts >= 1
    client.close()


@pytest.mark.integration
def test_embedded_calls_are_cached(llama, tmp_path):
    c = CachedClient(llama, tmp_path)
    a = c.chat(MSGS, GenerationConfig(max_tokens=8))
    b = c.chat(MSGS, GenerationConfig(max_tokens=8))
    assert (a.cache_hit, b.cache_hit) == (False, True) and a.text == b.text
    [entry] = tmp_path.glob("*/*.json")
    key = json.loads(entry.read_text())["request"]["client"]
    # keyed on the file's sha256 (memoised beside the entries), not its name and size
    assert key == {"backend": "llamacpp", "fingerprint": c.fingerprint().value}
    assert key["fingerprint"].startswith("sha256:") and c.fingerprint().kind == "file-sha256"
    assert [p.suffix for p in (tmp_path / "fingerprints").iterdir()] == [".sha256"]


@pytest.mark.integration
def test_gguf_tokenizer_matches_the_model(llama):
    from tersetalk.models.llamacpp import GGUFTokenizer, default_model_path

    text = "TerseTalk: typed single-letter lines, soft caps, overflow pointers M#."
    assert GGUFTokenizer(default_model_path()).count(text) == llama.count_tokens(text) > 0


def test_missing_model_file_is_unavailable(tmp_path):
    from tersetalk.models import LlamaCppClient

    with pytest.raises(ModelUnavailableError, match=r"model file not found.*models\.model_path"):
        LlamaCppClient(model_path=tmp_path / "nope.gguf")


@pytest.mark.integration
def test_make_client_builds_the_embedded_default_with_cache(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client = make_client(
            {"backend": "llamacpp", "model": None, "model_path": None, "n_ctx": 512,
             "threads": 1, "timeout_s": 5, "max_retries": 1, "seed": 0},
            tmp_path,
        )  # fmt: skip
    assert isinstance(client, CachedClient)
    d = client.describe()
    assert d["backend"] == "llamacpp" and d["n_threads"] == 1 and d["cache_dir"] == str(tmp_path)
    client.close()


@pytest.mark.integration
def test_prompt_longer_than_the_context_names_n_ctx():
    from tersetalk.models import LlamaCppClient

    client = LlamaCppClient(n_ctx=64, n_threads=1)
    long = [{"role": "user", "content": "word " * 200}]
    with pytest.raises(ModelCallError, match=r"does not fit .*n_ctx=64: raise models\.n_ctx"):
        client.chat(long, GenerationConfig(max_tokens=4))
    client.close()
