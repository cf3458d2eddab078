"""A real HTTP server on loopback that answers like an OpenAI-compatible chat server,
well or badly, for the reliability tests (stdlib ``http.server`` in a thread).

``mode`` decides each answer of ``/v1/chat/completions``:

- ``ok``: a well-formed completion (an event stream when the request streams);
- ``empty``: ``{"choices": [{"message": {"content": ""}}]}`` whatever was asked
  (on a streamed request: a body that is not an event stream);
- ``empty_stream``: a well-formed stream whose content is empty;
- ``truncated``: an event stream cut off before its ``finish_reason``;
- ``500``: HTTP 500; ``429``: HTTP 429 with ``Retry-After: <retry_after>``;
- ``slow``: the right answer after ``delay_s`` seconds;
- ``401``/``403``: the server refuses the API key (also on ``GET``, e.g. Ollama's
  ``/api/tags``);
- ``bad_json``: HTTP 200, ``Content-Type: application/json``, a body cut off mid-JSON;
- ``trickle``: a well-formed answer of ``trickle_n`` words, written in ``trickle_n``
  pieces ``trickle_s`` seconds apart (one word per event when streaming); with
  ``trickle_n=2`` and a long ``trickle_s`` it sends a first piece and then hangs;
- ``huge``: a well-formed answer of about ``huge_bytes`` bytes (built once by
  :meth:`FakeServer.prepare_huge`, so building it is not counted as the client's).

``chunked`` sends every body with chunked transfer encoding, without a
``Content-Length``. ``sent`` records, per body written, how many bytes went out and
whether all of them did (a client that stops reading makes a write fail).

Two more chat modes: ``tool_call``, a well-formed answer made of a tool call and no
text; ``echo_400``/``echo_500``, that status with an error body quoting the request's
``Authorization`` and ``X-Api-Key`` headers, as some proxies do. ``usage`` (a dict)
replaces the usage report of well-formed answers.

``fail_if`` (a substring) limits the bad modes to requests whose messages contain it;
other requests get ``ok``. ``modes`` (a list) overrides ``mode`` one request at a
time. ``/extras/tokenize`` counts whitespace-separated words. Every request's path,
body, message text and Authorization header is recorded in ``requests``.

Side requests (every ``GET``: ``/v1/models``, llama.cpp's ``/props``, Ollama's
``/api/tags``; and the ``POST``s to a tokenize endpoint or ``/api/show``) answer
well unless ``side_mode`` (or ``side_modes``, one request at a time) says:

- ``500``: HTTP 500; ``echo_500``: HTTP 500 quoting the request's headers, as above;
- ``403``: HTTP 403, as a gateway answers a path it does not have;
- ``trickle``: the right answer, one byte every ``trickle_s`` seconds;
- ``gzip``: a gzip bomb (``Content-Encoding: gzip``) that inflates to ``bomb_bytes``.

``side_fail_path`` (a substring) limits ``side_mode`` to the paths that contain it.
``owned_by`` sets the listed model's ``owned_by`` (``llamacpp`` makes a client ask
``/props``, which names ``props_model_path``); ``sha256`` the file digest listed with it,
as ``python -m tersetalk.models.llamacpp_server`` lists one (None: no digest, nothing
identifies the model). Ollama's ``/api/tags`` lists ``fake:latest`` with a digest.
Each side request's method, path and Authorization and Connection headers are recorded
in ``side_requests``.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeServer:
    def __init__(self, answer: str = "Paris") -> None:
        self.answer = answer
        self.mode = "ok"
        self.modes: list[str] = []
        self.fail_if: str | None = None
        self.retry_after = "3"
        self.delay_s = 2.0
        self.chunked = False
        self.trickle_s = 1.0
        self.trickle_n = 60
        self.huge_bytes = 20 * 2**20
        self._huge: dict[bool, bytes] = {}
        self.usage: dict[str, Any] | None = None
        self.side_mode = "ok"
        self.side_modes: list[str] = []
        self.side_fail_path: str | None = None
        self.bomb_bytes = 64 * 2**20
        self.owned_by: str | None = None
        self.props_model_path = "/nonexistent/model.gguf"
        #: the served file's sha256 listed in GET /v1/models, as
        #: ``python -m tersetalk.models.llamacpp_server`` lists it (None: not listed)
        self.sha256: str | None = "5" * 64
        self.side_requests: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if server.mode in ("401", "403"):
                    server.respond(self, server.mode, {})
                    return
                if self.path.startswith("/api/tags"):  # Ollama's native model listing
                    body = {"models": [{"name": "fake:latest", "model": "fake:latest",
                                        "digest": "6" * 64}]}  # fmt: skip
                elif self.path.startswith("/props"):  # llama.cpp's server properties
                    body = {"model_path": server.props_model_path}
                else:
                    entry: dict[str, Any] = {"id": "fake", "object": "model"}
                    if server.owned_by is not None:
                        entry["owned_by"] = server.owned_by
                    if server.sha256 is not None:
                        entry.update(file="fake.gguf", sha256=server.sha256)
                    body = {"object": "list", "data": [entry]}
                server.side(self, body)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = json.loads(body)
                text = "\n".join(str(m.get("content")) for m in request.get("messages", []))
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "body": body.decode("utf-8", "replace"),
                            "text": text,
                            "authorization": self.headers.get("Authorization"),
                        }
                    )
                    mode = server.modes.pop(0) if server.modes else server.mode
                if self.path.endswith("/tokenize"):
                    words = request.get("input") or request.get("content") or ""
                    server.side(self, {"tokens": list(range(len(words.split())))})
                    return
                if self.path.startswith("/api/show"):  # Ollama's model details
                    server.side(self, {"modelfile": "FROM /nonexistent/blob\n"})
                    return
                if server.fail_if is not None and server.fail_if not in text:
                    mode = "ok"
                server.respond(self, mode, request)

            def _json(self, status: int, obj: Any, headers: dict | None = None) -> None:
                server.send(self, status, "application/json", json.dumps(obj).encode(), headers)

        self.Handler = Handler
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.fake = self  # type: ignore[attr-defined]  # for the static helpers
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def start(self) -> FakeServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # a trickling or hanging handler gives up at once
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- side requests ----------------------------------------------------------------
    def side(self, h: Any, body: Any) -> None:
        """Answer a side request with ``body`` (JSON), or as ``side_mode`` says."""
        with self._lock:
            self.side_requests.append({
                "method": h.command, "path": h.path,
                "authorization": h.headers.get("Authorization"),
                "connection": h.headers.get("Connection"),
            })  # fmt: skip
            mode = self.side_modes.pop(0) if self.side_modes else self.side_mode
        if self.side_fail_path is not None and self.side_fail_path not in h.path:
            mode = "ok"
        data = json.dumps(body).encode()
        if mode == "500":
            h._json(500, {"error": {"message": "internal error (fake)"}})
        elif mode == "403":  # a gateway that refuses any path it does not have
            h._json(403, {"message": "Missing Authentication Token"})
        elif mode.startswith("echo_"):
            self._echo(h, int(mode.removeprefix("echo_")))
        elif mode == "trickle":
            pieces = [data[i : i + 1] for i in range(len(data))]
            self.send(h, 200, "application/json", data, pieces=pieces, pause_s=self.trickle_s)
        elif mode == "gzip":
            self.send(h, 200, "application/json", self.gzip_bomb(), {"Content-Encoding": "gzip"})
        else:
            self.send(h, 200, "application/json", data)

    def gzip_bomb(self) -> bytes:
        """A gzip body (some 64 KB) that inflates to ``bomb_bytes`` bytes of JSON."""
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip format
        parts = [packer.compress(b'{"data": "')]
        block = b" " * 2**20
        parts += [packer.compress(block) for _ in range(max(1, self.bomb_bytes // len(block)))]
        parts.append(packer.compress(b'"}') + packer.flush())
        return b"".join(parts)

    def _echo(self, h: Any, status: int) -> None:
        said = (f"bad request; headers: Authorization: {h.headers.get('Authorization')}, "
                f"X-Api-Key: {h.headers.get('X-Api-Key')}")  # fmt: skip
        h._json(status, {"error": {"message": said, "type": "invalid_request_error"}})

    # -- answers ----------------------------------------------------------------------
    def _content(self, request: dict[str, Any]) -> str:
        rf = request.get("response_format")
        if rf and rf.get("type") in ("json_schema", "json_object"):
            # ensure_ascii=False: a surrogate in the answer reaches the client as one
            # JSON escape in the body, as a server's encoder would send it
            return json.dumps({"answer": self.answer}, ensure_ascii=False)
        return self.answer

    def prepare_huge(self, n_bytes: int | None = None) -> None:
        """Build the ``huge`` answers (streamed and not) of about ``n_bytes`` bytes."""
        n = n_bytes or self.huge_bytes
        piece = "word " * 200  # 1000 characters per event
        events = [self._chunk(piece, None) for _ in range(max(1, n // 1200))]
        events.append(self._chunk(None, "stop"))
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in events) + "data: [DONE]\n\n"
        self._huge[True] = body.encode()
        self._huge[False] = json.dumps({
            "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "word " * (n // 5)}}],
        }).encode()  # fmt: skip

    def send(
        self,
        h: Any,
        status: int,
        content_type: str,
        data: bytes,
        headers: dict | None = None,
        pieces: list[bytes] | None = None,
        pause_s: float = 0.0,
    ) -> None:
        """Write one response: whole, or ``pieces`` with ``pause_s`` between them."""
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        if self.chunked:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        record = {"bytes": len(data), "written": 0, "complete": False}
        with self._lock:
            self.sent.append(record)
        view = memoryview(data)
        parts = pieces or [view[i : i + 65536] for i in range(0, len(data), 65536)]
        try:
            for i, part in enumerate(parts):
                if i and pause_s and self._stopping.wait(pause_s):
                    return
                if self.chunked:
                    h.wfile.write(f"{len(part):x}\r\n".encode() + bytes(part) + b"\r\n")
                else:
                    h.wfile.write(part)
                h.wfile.flush()
                record["written"] += len(part)
            if self.chunked:
                h.wfile.write(b"0\r\n\r\n")
                h.wfile.flush()
            record["complete"] = True
        except OSError:  # the client stopped reading and went away
            h.close_connection = True

    def respond(self, h: Any, mode: str, request: dict[str, Any]) -> None:
        stream = bool(request.get("stream"))
        if mode in ("401", "403"):
            h._json(int(mode), {"error": {
                "message": "Incorrect API key provided (fake)", "type": "invalid_request_error",
                "code": "invalid_api_key"}})  # fmt: skip
        elif mode == "bad_json":
            self.send(h, 200, "application/json", b'{"id": "c1", "choices": [{"index": 0, "mes')
        elif mode == "trickle":
            self._trickle(h, stream, request)
        elif mode == "huge":
            if stream not in self._huge:
                self.prepare_huge()
            kind = "text/event-stream" if stream else "application/json"
            self.send(h, 200, kind, self._huge[stream])
        elif mode == "500":
            h._json(500, {"error": {"message": "internal error (fake)"}})
        elif mode == "429":
            h._json(429, {"error": {"message": "slow down (fake)"}},
                    {"Retry-After": self.retry_after})  # fmt: skip
        elif mode == "empty":
            h._json(200, {"choices": [{"message": {"content": ""}}]})
        elif mode.startswith("echo_"):
            self._echo(h, int(mode.removeprefix("echo_")))
        elif mode == "tool_call":
            self._tool_call(h, stream)
        elif mode == "slow":
            time.sleep(self.delay_s)
            self._answer(h, stream, self._content(request))
        elif mode == "empty_stream":
            self._answer(h, stream, "")
        elif mode == "truncated":
            self._stream(h, [self._chunk("Par", None)], done=False)
        else:
            self._answer(h, stream, self._content(request))

    def _trickle(self, h: Any, stream: bool, request: dict[str, Any]) -> None:
        words = [f"w{i} " for i in range(self.trickle_n)]
        if stream:
            events = [self._chunk(w, None) for w in words[:-1]]
            events.append(self._chunk(words[-1], "stop"))
            pieces = [f"data: {json.dumps(c)}\n\n".encode() for c in events]
            pieces[-1] += b"data: [DONE]\n\n"
            kind = "text/event-stream"
        else:
            body = json.dumps({
                "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "".join(words)}}],
            }).encode()  # fmt: skip
            step = max(1, -(-len(body) // self.trickle_n))
            pieces = [body[i : i + step] for i in range(0, len(body), step)]
            kind = "application/json"
        self.send(h, 200, kind, b"".join(pieces), pieces=pieces, pause_s=self.trickle_s)

    @staticmethod
    def _chunk(text: str | None, finish: str | None) -> dict[str, Any]:
        delta = {"role": "assistant"} if text is None else {"content": text}
        return {
            "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }  # fmt: skip

    def _tool_call(self, h: Any, stream: bool) -> None:
        call = {"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "France"}'}}  # fmt: skip
        if stream:
            chunks = [
                {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]},
                              "finish_reason": None}]},
                self._chunk(None, "tool_calls"),
            ]  # fmt: skip
            self._stream(h, chunks, done=True)
            return
        h._json(200, {
            "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None,
                                     "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        })  # fmt: skip

    def _answer(self, h: Any, stream: bool, text: str) -> None:
        usage = {"prompt_tokens": 5, "completion_tokens": max(1, len(text.split())),
                 "total_tokens": 6}  # fmt: skip
        if self.usage is not None:
            usage = self.usage
        if stream:
            chunks = [self._chunk(text, None)] if text else []
            chunks.append(self._chunk(None, "stop"))
            chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                           "model": "fake", "choices": [], "usage": usage})  # fmt: skip
            self._stream(h, chunks, done=True)
            return
        h._json(200, {
            "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        })  # fmt: skip

    @staticmethod
    def _stream(h: Any, chunks: list[dict[str, Any]], done: bool) -> None:
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
        if done:
            body += "data: [DONE]\n\n"
        h.server.fake.send(h, 200, "text/event-stream", body.encode())
