"""The OpenAI-compatible path end to end, against llama-cpp-python's own server.

Ollama's /v1 API is the same protocol; there is no Ollama binary on the build machines,
so ``python -m llama_cpp.server`` (extra ``llama-cpp-python[server]``) serving the
embedded SmolLM2 stands in for it. The server is started on a free 127.0.0.1 port for
this module and stopped afterwards.
"""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
import socket
import subprocess
import sys
import time

import httpx
import pydantic
import pytest

from tersetalk.models import GenerationConfig, ModelUnavailableError, make_client

#: what llama_cpp.server imports beyond llama-cpp-python itself; the main install brings
#: them (pyproject: llama-cpp-python[server]), so these tests never skip for want of them
SERVER_DEPS = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")

pytestmark = pytest.mark.integration


def test_the_main_install_brings_the_local_server():
    """The README's local-server command works after the README's main install
    (`pip install -e '.[workflow]'`): the workflow extra requires llama-cpp-python[server],
    and `python -m llama_cpp.server --help` imports the whole server."""
    required = [r.replace(" ", "") for r in importlib.metadata.requires("tersetalk") or []]
    assert any(r.startswith("llama-cpp-python[server]") and 'extra=="workflow"' in r
               for r in required), required  # fmt: skip
    assert not [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
    res = subprocess.run(
        [sys.executable, "-m", "llama_cpp.server", "--help"], capture_output=True, text=True
    )
    assert res.returncode == 0 and "--model" in res.stdout, res.stderr[-2000:]


MSGS = [{"role": "user", "content": "Name a colour."}]
ALIAS = "smollm2"


class Shade(enum.StrEnum):
    teal = "teal-7f"
    mauve = "mauve-3q"


class Tag(pydantic.BaseModel):
    code: str = pydantic.Field(pattern=r"^[A-Z]{3}-[0-9]{4}$")
    shade: Shade


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tersetalk.models.llamacpp import default_model_path

    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [
        sys.executable, "-m", "tersetalk.models.llamacpp_server",  # llama_cpp.server, no repacking
        "--model", str(default_model_path()), "--model_alias", ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "1", "--seed", "0",
    ]  # fmt: skip
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({proc.returncode}):\n{log.read_text()}")
            try:
                if httpx.get(base + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not come up:\n{log.read_text()}")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cfg(base_url: str, **extra) -> dict:
    return {"backend": "openai", "model": ALIAS, "base_url": base_url, "timeout_s": 60,
            "max_retries": 2, "seed": 0, **extra}  # fmt: skip


def test_streamed_chat_through_the_server(server):
    client = make_client(cfg(server), None)
    with pytest.warns(UserWarning, match="no token usage in its stream"):
        r = client.chat(MSGS, GenerationConfig(max_tokens=12))
    assert r.text.strip() and r.backend == "openai" and r.model == ALIAS
    assert r.ttft_s is not None and 0 < r.ttft_s <= r.total_s
    # llama_cpp.server ignores stream_options.include_usage: recorded as unknown, not guessed
    assert (r.prompt_tokens, r.completion_tokens) == (-1, -1)
    assert r.extra["usage_source"] == "unavailable"
    assert client.describe()["usage_source"].startswith("unavailable")


def test_non_streamed_usage_matches_the_in_process_tokenizer(server):
    from tersetalk.models import LlamaCppClient

    served = make_client(cfg(server, stream=False), None)
    r = served.chat(MSGS, GenerationConfig(max_tokens=12))
    assert r.ttft_s is None and 0 < r.completion_tokens <= 12
    local = LlamaCppClient(n_ctx=2048, n_threads=1)
    try:
        # same model, same chat template: the server's usage is the model's own count
        assert r.prompt_tokens == local.chat(MSGS, GenerationConfig(max_tokens=1)).prompt_tokens
        text = "Overflow pointers M# keep messages short."
        assert served.count_tokens(text) == local.count_tokens(text) > 0  # /extras/tokenize
    finally:
        local.close()


def test_structured_output_is_schema_constrained_through_the_server(server):
    client = make_client(cfg(server, max_retries=0), None)
    assert client.structured_format == "auto"
    prompt = [{"role": "user", "content": "Give a product tag for a blue mug."}]
    r = client.structured(prompt, Tag, GenerationConfig(max_tokens=48))
    # llama_cpp.server rejects response_format json_schema (HTTP 500, literal_error);
    # the client switched to json_object+schema, and with no retries allowed the first
    # answer is a valid Tag: the grammar was on.
    assert client.structured_format == "json_object_schema"
    assert r.attempts == 1 and Tag.model_validate_json(r.text).model_dump(mode="json") == r.parsed
    assert r.prompt_tokens > 0 and r.completion_tokens > 0
    assert r.extra["transport_tries"] == 1  # the rejected format is not a transport retry
    # a second call goes straight to the working format: no rejected request, and the
    # grammar is on again. (Its answer may differ from the first: the server reuses the
    # evaluated prompt prefix, and that changes the logits slightly; seen on this machine.)
    again = client.structured(prompt, Tag, GenerationConfig(max_tokens=48))
    assert again.extra["transport_tries"] == 1 and again.attempts == 1
    assert Tag.model_validate(again.parsed).model_dump(mode="json") == again.parsed


def test_side_requests_reach_the_real_server(server):
    """The model listing and the tokenize endpoint go through the bounded side-request
    path (a connection of their own, identity encoding) and still read a real server."""
    client = make_client(cfg(server, stream=False), None)
    report = client.model_report()
    assert report["entry"]["id"] == ALIAS and ALIAS in client.ping()
    assert client.count_tokens("one two three") > 0
    assert client._tokenize_route == "/extras/tokenize"  # llama-cpp-python's endpoint


def test_server_gone_after_contact_is_unavailable(server):
    client = make_client(cfg(server), None)
    client.ping()
    client._client = client._client.with_options(base_url=f"http://127.0.0.1:{free_port()}/v1")
    client.backoff_s = 0.01
    with pytest.raises(
        ModelUnavailableError, match=r"3 attempts failed.*tersetalk\.models\.llamacpp_server"
    ):
        client.chat(MSGS, GenerationConfig(max_tokens=4))
