"""A real HTTP server on loopback that answers like an OpenAI-compatible chat server,
well or badly, for the reliability tests (stdlib ``http.server`` in a thread).

``mode`` decides each answer of ``/v1/chat/completions``:

- ``ok``: a well-formed completion (an event stream when the request streams);
- ``empty``: ``{"choices": [{"message": {"content": ""}}]}`` whatever was asked
  (on a streamed request: a body that is not an event stream);
- ``empty_stream``: a well-formed stream whose content is empty;
- ``truncated``: an event stream cut off before its ``finish_reason``;
- ``500``: HTTP 500; ``429``: HTTP 429 with ``Retry-After: <retry_after>``;
- ``slow``: the right answer after ``delay_s`` seconds.

``fail_if`` (a substring) limits the bad modes to requests whose messages contain it;
other requests get ``ok``. ``modes`` (a list) overrides ``mode`` one request at a
time. ``/extras/tokenize`` counts whitespace-separated words. Every request's path,
body, message text and Authorization header is recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
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
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

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
                    self._json(200, {"tokens": list(range(len(words.split())))})
                    return
                if server.fail_if is not None and server.fail_if not in text:
                    mode = "ok"
                server.respond(self, mode, request)

            def _json(self, status: int, obj: Any, headers: dict | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.Handler = Handler
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- answers ----------------------------------------------------------------------
    def _content(self, request: dict[str, Any]) -> str:
        rf = request.get("response_format")
        if rf and rf.get("type") in ("json_schema", "json_object"):
            return json.dumps({"answer": self.answer})
        return self.answer

    def respond(self, h: Any, mode: str, request: dict[str, Any]) -> None:
        stream = bool(request.get("stream"))
        if mode == "500":
            h._json(500, {"error": {"message": "internal error (fake)"}})
        elif mode == "429":
            h._json(429, {"error": {"message": "slow down (fake)"}},
                    {"Retry-After": self.retry_after})  # fmt: skip
        elif mode == "empty":
            h._json(200, {"choices": [{"message": {"content": ""}}]})
        elif mode == "slow":
            time.sleep(self.delay_s)
            self._answer(h, stream, self._content(request))
        elif mode == "empty_stream":
            self._answer(h, stream, "")
        elif mode == "truncated":
            self._stream(h, [self._chunk("Par", None)], done=False)
        else:
            self._answer(h, stream, self._content(request))

    @staticmethod
    def _chunk(text: str | None, finish: str | None) -> dict[str, Any]:
        delta = {"role": "assistant"} if text is None else {"content": text}
        return {
            "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }  # fmt: skip

    def _answer(self, h: Any, stream: bool, text: str) -> None:
        usage = {"prompt_tokens": 5, "completion_tokens": max(1, len(text.split())),
                 "total_tokens": 6}  # fmt: skip
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
        data = body.encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
