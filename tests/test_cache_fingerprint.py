"""The call cache keys on what the model is (its fingerprint), not where it lives.

Each test pins one property the address-based key got wrong, so it fails on that key:
the same GGUF under another path and name hits, a changed file under the same name and
size misses, a served model at another address with the same Ollama digest (or the same
llama.cpp report, listed at another time) hits. Servers are real HTTP servers on
loopback that answer like Ollama and OpenAI-compatible servers (control flow only:
nothing here is a reported number).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tersetalk.models import (
    CachedClient,
    CallResult,
    GenerationConfig,
    ModelClient,
    ModelEnvironmentError,
    ScriptedClient,
)
from tersetalk.models import fingerprint as fpmod
from tersetalk.models.cache import address_identity
from tersetalk.models.fingerprint import file_sha256, model_fingerprint

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital?"}]
GEN = GenerationConfig(max_tokens=8)


def entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*/*.json"))


# -- in-process GGUF: a double that is the llamacpp backend as the cache sees it ---------------


class FileModel(ModelClient):
    """Answers like a model loaded from ``path`` (its describe() is LlamaCppClient's)."""

    backend = "llamacpp"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.model = self.path.stem
        self.calls = 0

    def chat(self, messages, gen) -> CallResult:
        self.calls += 1
        return CallResult(text=f"answer from {self.path.name}", parsed=None, prompt_tokens=3,
                          completion_tokens=3, ttft_s=None, itl_s=None, total_s=0.0,
                          attempts=1, cache_hit=False, backend=self.backend,
                          model=self.model)  # fmt: skip

    def structured(self, messages, schema, gen) -> CallResult:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "model_path": str(self.path),
                "model_file": self.path.name, "model_size": self.path.stat().st_size}  # fmt: skip


@pytest.fixture
def weights(tmp_path) -> Path:
    path = tmp_path / "models" / "tiny.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


def test_the_same_gguf_under_another_path_and_name_hits(tmp_path, weights):
    cache = tmp_path / "calls"
    first = CachedClient(FileModel(weights), cache)
    assert not first.chat(MSGS, GEN).cache_hit
    moved = tmp_path / "elsewhere" / "renamed-copy.gguf"
    moved.parent.mkdir()
    shutil.copy(weights, moved)
    again = CachedClient(FileModel(moved), cache)
    hit = again.chat(MSGS, GEN)
    assert hit.cache_hit and again.inner.calls == 0
    assert hit.text == "answer from tiny.Q4_1.gguf"  # the answer stored for those weights
    fp = again.fingerprint()
    assert fp.kind == "file-sha256" and fp.value == f"sha256:{file_sha256(weights)}"
    assert fp.identity == {"backend": "llamacpp", "fingerprint": fp.value}  # no name, no path
    assert json.loads(entries(cache)[0].read_text())["request"]["client"] == fp.identity


def test_a_changed_gguf_under_the_same_name_and_size_misses(tmp_path, weights):
    cache = tmp_path / "calls"
    before = CachedClient(FileModel(weights), cache)
    before.chat(MSGS, GEN)
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF  # other weights, same file name, same size: the old key could not tell
    weights.write_bytes(bytes(data))
    after = CachedClient(FileModel(weights), cache)
    assert address_identity(after.inner) == address_identity(before.inner)
    assert not after.chat(MSGS, GEN).cache_hit and after.inner.calls == 1
    assert after.fingerprint().value != before.fingerprint().value
    assert len(entries(cache)) == 2


def test_the_gguf_digest_is_memoised_by_path_size_and_mtime(tmp_path, weights, monkeypatch):
    memo = tmp_path / "calls" / fpmod.FINGERPRINT_DIR
    monkeypatch.setattr(fpmod, "_file_memo", {})
    real = file_sha256(weights, memo)
    [sidecar] = memo.iterdir()
    assert sidecar.suffix == ".sha256"  # never taken for a cache entry (*/*.json)
    record = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**record, "sha256": "0" * 64}))
    monkeypatch.setattr(fpmod, "_file_memo", {})  # a new process: only the sidecar knows
    assert file_sha256(weights, memo) == "0" * 64  # read from the sidecar, not rehashed
    monkeypatch.setattr(fpmod, "_file_memo", {})
    weights.write_bytes(weights.read_bytes())  # rewritten in place: a new mtime
    assert file_sha256(weights, memo) == real and len(list(memo.iterdir())) == 2


def test_a_digest_known_in_this_process_is_memoised_in_a_new_cache_too(
    tmp_path, weights, monkeypatch
):
    monkeypatch.setattr(fpmod, "_file_memo", {})
    first, second = tmp_path / "a" / "fingerprints", tmp_path / "b" / "fingerprints"
    digest = file_sha256(weights, first)
    assert file_sha256(weights, second) == digest  # from the in-process memo
    [sidecar] = second.iterdir()  # and still written, so the next process does not rehash
    assert json.loads(sidecar.read_text())["sha256"] == digest


def test_an_unreadable_gguf_is_a_weak_fingerprint_that_says_so(tmp_path, weights):
    client = FileModel(weights)
    size = weights.stat().st_size
    client.describe = lambda: {"backend": "llamacpp", "model": client.model,  # type: ignore[method-assign]
                               "model_path": str(tmp_path / "gone.gguf"),
                               "model_file": "gone.gguf", "model_size": size}  # fmt: skip
    fp = model_fingerprint(client)
    assert fp.weak and fp.value == "weak:llamacpp:tiny.Q4_1@gone.gguf"
    assert "cannot be read" in fp.source and fp.source.startswith("weak:")
    assert fp.identity == address_identity(client)  # the key entries had before


@pytest.mark.integration
def test_the_embedded_model_under_another_name_hits(tmp_path):
    from tersetalk.models import LlamaCppClient
    from tersetalk.models.llamacpp import default_model_path

    other = tmp_path / "same-weights.gguf"  # another path and name (a symlink is resolved)
    try:
        os.link(default_model_path(), other)
    except OSError:  # another filesystem
        shutil.copy(default_model_path(), other)
    cache = tmp_path / "calls"
    gen = GenerationConfig(max_tokens=4)
    with CachedClient(LlamaCppClient(n_ctx=512, max_retries=0), cache) as first:
        a = first.chat(MSGS, gen)
    with CachedClient(LlamaCppClient(model_path=other, n_ctx=512, max_retries=0), cache) as again:
        b = again.chat(MSGS, gen)
        assert again.describe()["model_file"] == "same-weights.gguf"
        assert again.describe()["model_fingerprint"].startswith("sha256:")
    assert not a.cache_hit and b.cache_hit and a.text == b.text
    assert len(entries(cache)) == 1


# -- served models: real HTTP servers on loopback --------------------------------------------


class Served:
    """An Ollama / OpenAI-compatible server: ``tags`` is Ollama's /api/tags listing,
    ``models`` the /v1/models data (``created`` stamped per request when None, as vLLM
    and llama.cpp do), ``props`` llama.cpp's /props; ``get_status`` overrides GETs of
    /v1/models. Chat answers are ``answer``, streamed with usage; ``posts`` counts them."""

    def __init__(self, answer: str = "Paris") -> None:
        self.answer = answer
        self.tags: list[dict] = []
        self.models: list[dict] = []
        self.props: dict | None = None
        self.get_status = 200
        self.gets: list[str] = []
        self.posts = 0
        served = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body, ctype="application/json"):
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                served.gets.append(self.path)
                if self.path == "/api/tags":
                    self._send(200, {"models": served.tags})
                elif self.path == "/v1/models":
                    if served.get_status != 200:
                        self._send(served.get_status, {"error": "no listing"})
                        return
                    data = [{**m, "created": m.get("created") or int(time.time() * 1000)}
                            for m in served.models]  # fmt: skip
                    self._send(200, {"object": "list", "data": data})
                elif self.path == "/props" and served.props is not None:
                    self._send(200, served.props)
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                served.posts += 1
                chunks = [
                    {"choices": [{"index": 0, "delta": {"content": served.answer}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1,
                                              "total_tokens": 6}},
                ]  # fmt: skip
                sse = "".join(
                    "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk",
                                            "created": 0, "model": "m", **c}) + "\n\n"
                    for c in chunks
                ) + "data: [DONE]\n\n"  # fmt: skip
                self._send(200, sse, "text/event-stream")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made: list[Served] = []

    def make(answer: str = "Paris") -> Served:
        made.append(Served(answer))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def ollama(server: Served, model: str):
    from tersetalk.models import OllamaClient

    return OllamaClient(model, host=server.root, backoff_s=0.01, tokenizer=lambda t: 1)


def openai(server: Served, model: str, **kw):
    from tersetalk.models import OpenAICompatClient

    return OpenAICompatClient(f"{server.root}/v1", model, backoff_s=0.01,
                              tokenizer=lambda t: 1, sleep=lambda s: None, **kw)  # fmt: skip


DIGEST = "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a"


def test_an_ollama_model_at_two_addresses_with_one_digest_hits(tmp_path, servers):
    a, b = servers("from a"), servers("from b")
    a.tags = [{"model": "mistral:instruct", "name": "mistral:instruct", "digest": DIGEST}]
    b.tags = [{"model": "mine:latest", "name": "mine:latest", "digest": DIGEST},
              {"model": "other:latest", "name": "other:latest", "digest": "f" * 64}]  # fmt: skip
    cache = tmp_path / "calls"
    first = CachedClient(ollama(a, "mistral:instruct"), cache)
    assert first.chat(MSGS, GEN).text == "from a" and a.posts == 1
    # another server, another name, the same digest: the same model
    same = CachedClient(ollama(b, "mine"), cache)
    hit = same.chat(MSGS, GEN)
    assert hit.cache_hit and hit.text == "from a" and b.posts == 0
    fp = same.fingerprint()
    assert (fp.kind, fp.value) == ("ollama-digest", f"ollama:{DIGEST}")
    assert "mine" in fp.source and fp.identity == {"backend": "ollama", "fingerprint": fp.value}
    # the same address, another digest: other weights
    other = CachedClient(ollama(b, "other"), cache)
    assert not other.chat(MSGS, GEN).cache_hit and b.posts == 1


def test_an_ollama_model_pulled_again_with_new_weights_misses(tmp_path, servers):
    a = servers()
    a.tags = [{"model": "mistral:instruct", "name": "mistral:instruct", "digest": DIGEST}]
    cache = tmp_path / "calls"
    CachedClient(ollama(a, "mistral:instruct"), cache).chat(MSGS, GEN)
    a.tags = [{"model": "mistral:instruct", "name": "mistral:instruct", "digest": "b" * 64}]
    again = CachedClient(ollama(a, "mistral:instruct"), cache)
    assert not again.chat(MSGS, GEN).cache_hit and a.posts == 2


LLAMACPP_META = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": 8192, "n_embd": 576,
                 "n_params": 134515008, "size": 98319360}  # fmt: skip


def test_a_llamacpp_server_report_at_two_addresses_hits_whenever_listed(tmp_path, servers):
    a, b = servers("from a"), servers("from b")
    for s, n_ctx in ((a, 512), (b, 4096)):  # n_ctx is a serving setting, not the weights
        s.models = [{"id": "smol", "object": "model", "owned_by": "llamacpp", "created": None,
                     "meta": {**LLAMACPP_META, "n_ctx": n_ctx}}]  # fmt: skip
    cache = tmp_path / "calls"
    first = CachedClient(openai(a, "smol"), cache)
    first.chat(MSGS, GEN)
    time.sleep(0.01)  # the listings are stamped with different times ("created")
    again = CachedClient(openai(b, "smol"), cache)
    assert again.chat(MSGS, GEN).cache_hit and b.posts == 0
    fp = again.fingerprint()
    assert fp.kind == "server-report" and fp.value == first.fingerprint().value
    assert "meta" in fp.source and "not a content hash" in fp.source
    assert "/props" in a.gets  # llama.cpp's server was asked where its file is
    # other weights behind the same name: llama.cpp reports another size
    b.models[0]["meta"] = {**LLAMACPP_META, "size": 1}
    other = CachedClient(openai(b, "smol"), cache)
    assert not other.chat(MSGS, GEN).cache_hit and b.posts == 1


def test_a_server_that_reports_a_local_file_is_keyed_on_the_files_sha256(
    tmp_path, servers, weights
):
    a, b = servers(), servers()
    a.models = [{"id": "alias", "object": "model", "owned_by": "llamacpp", "meta": LLAMACPP_META}]
    a.props = {"model_alias": "alias", "model_path": str(weights)}
    copy = tmp_path / "copy.gguf"
    shutil.copy(weights, copy)
    b.models = [{"id": str(copy), "object": "model", "owned_by": "me"}]  # llama-cpp-python
    cache = tmp_path / "calls"
    first = CachedClient(openai(a, "alias"), cache)
    first.chat(MSGS, GEN)
    again = CachedClient(openai(b, str(copy)), cache)
    assert again.chat(MSGS, GEN).cache_hit and b.posts == 0
    fp = again.fingerprint()
    assert fp.value == f"sha256:{file_sha256(weights)}" == first.fingerprint().value
    assert "/props model_path" in first.fingerprint().source and "id" in fp.source


def test_a_server_that_reports_nothing_identifying_is_weak_and_says_so(tmp_path, servers):
    a, b = servers("from a"), servers("from b")
    for s in (a, b):
        s.models = [{"id": "m", "object": "model", "owned_by": "me"}]
    cache = tmp_path / "calls"
    first = CachedClient(openai(a, "m"), cache)
    first.chat(MSGS, GEN)
    fp = first.fingerprint()
    assert fp.weak and fp.value == f"weak:openai:m@{a.root}/v1"
    only = "(only created, id, object, owned_by)"
    assert f"reports nothing that identifies the weights {only}" in fp.source
    # the key is the one entries had before fingerprints: they still hit
    assert fp.identity == address_identity(first.inner) == {
        "backend": "openai", "model": "m", "base_url": f"{a.root}/v1"}  # fmt: skip
    # and with nothing to go on, another address is not assumed to be the same model
    other = CachedClient(openai(b, "m"), cache)
    assert not other.chat(MSGS, GEN).cache_hit and b.posts == 1


@pytest.mark.parametrize("status", [404, 501])
def test_a_server_without_a_listing_is_weak_and_answers_anyway(tmp_path, servers, status):
    a = servers()
    a.get_status = status
    client = CachedClient(openai(a, "m", max_retries=2), tmp_path / "calls")
    assert client.chat(MSGS, GEN).text == "Paris"
    fp = client.fingerprint()
    assert fp.weak and f"HTTP {status}" in fp.source and "listing could not be read" in fp.source
    assert a.gets.count("/v1/models") == 1  # a server without a listing is not asked again


def test_a_listing_that_keeps_failing_stops_instead_of_weakening_the_key(tmp_path, servers):
    """A busy server's listing (503) is asked again like a call; if it never answers,
    what the model is cannot be told: the run stops rather than key the cache weakly."""
    a = servers()
    a.get_status = 503
    client = CachedClient(openai(a, "m", max_retries=2), tmp_path / "calls")
    with pytest.raises(ModelEnvironmentError, match="HTTP 503"):
        client.chat(MSGS, GEN)
    assert a.gets.count("/v1/models") == 3


def test_building_a_cached_client_contacts_no_server(tmp_path, servers):
    a = servers()
    a.models = [{"id": "m", "object": "model", "owned_by": "me"}]
    client = CachedClient(openai(a, "m"), tmp_path / "calls")
    assert a.gets == [] and "model_fingerprint" not in client.describe()
    client.chat(MSGS, GEN)
    assert a.gets == ["/v1/models"] and client.describe()["model_fingerprint"].startswith("weak:")
    client.chat(MSGS, GEN)
    assert a.gets == ["/v1/models"]  # worked out once


# -- the scripted double: its script ------------------------------------------------------


def test_a_scripted_double_is_keyed_on_its_script(tmp_path):
    cache = tmp_path / "calls"
    CachedClient(ScriptedClient(["Paris"]), cache).chat(MSGS, GEN)
    same = CachedClient(ScriptedClient(["Paris"]), cache)
    assert same.chat(MSGS, GEN).cache_hit
    other = CachedClient(ScriptedClient(["Lyon"]), cache)
    assert other.chat(MSGS, GEN).text == "Lyon"  # another script: not the same model
    assert same.fingerprint().kind == "script" and "1 scripted answers" in same.fingerprint().source

    def responder(messages):
        return "Paris"

    def other_responder(messages):
        return "Lyon"

    a = model_fingerprint(ScriptedClient(responder))
    assert a.value == model_fingerprint(ScriptedClient(responder)).value
    assert a.value != model_fingerprint(ScriptedClient(other_responder)).value
    assert "responder" in a.source and "not of its state" in a.source


def test_a_fingerprint_is_kept_for_the_clients_life(tmp_path):
    client = ScriptedClient(["one", "two"])
    fp = model_fingerprint(client)
    client.chat(MSGS, GEN)  # the script is being used up
    assert model_fingerprint(client) is fp
    assert model_fingerprint(CachedClient(client, tmp_path)).value == fp.value


# -- the rows record it --------------------------------------------------------------------


def test_every_run_row_records_the_fingerprint(tmp_path, base_config, repo):
    from tersetalk.core.records import deterministic_columns
    from tersetalk.pipeline.config import run_spec
    from tersetalk.pipeline.runner import run
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=2,
                   calibration_n=0, seed=3)  # fmt: skip
    ev.to_parquet(tmp_path / "sample.parquet")
    base_config["cache_dir"] = str(tmp_path / "cache")
    spec = run_spec(base_config, "gsm8k", "freeform", "default")
    spec["pipeline"]["max_error_share"] = 1.0  # every row is an error row here

    def flaky(messages):
        if "Critic" in messages[0]["content"]:
            raise RuntimeError("no critic today")  # an error row records it too
        return "Answer: 4"

    client = CachedClient(ScriptedClient(flaky), tmp_path / "cache" / "calls")
    df = run(spec, tmp_path / "sample.parquet", tmp_path / "run.parquet", client=client,
             progress=False)  # fmt: skip
    fp = client.fingerprint()
    assert df["error"].notna().all()
    assert (df["model_fingerprint"] == fp.value).all() and fp.value.startswith("script:")
    assert (df["model_fingerprint_source"] == fp.source).all()
    assert {"model_fingerprint", "model_fingerprint_source"} <= set(deterministic_columns(df))
