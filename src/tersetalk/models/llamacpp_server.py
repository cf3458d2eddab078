"""``python -m tersetalk.models.llamacpp_server``: llama-cpp-python's OpenAI-compatible
server (``llama_cpp.server``, same arguments) with three changes for this project:

- the model is loaded without weight repacking, which segfaults on AMX CPUs (see
  :func:`tersetalk.models.llamacpp.without_weight_repacking`);
- every request starts from an empty KV cache: an answer then never depends on which
  requests came before it. Stock ``llama_cpp.server`` reuses the longest prefix the
  previous request left in the cache, the previous answer's tokens included, and
  re-evaluates the last prompt token alone when the whole prompt is cached. A token
  evaluated alone takes another kernel than one in a batch of 2 or more and gets other
  logits (measured in :mod:`tersetalk.models.llamacpp`, which explains it and reuses
  prefixes only where the bits stay the same), so the same request could get another
  answer depending on what ran before: with several requests in flight, on their
  arrival order. ``--reuse_prefix`` restores the stock behaviour;
- ``GET /v1/models`` lists each served file's ``sha256`` and name (``file``) beside its
  id, so a client knows which weights answer under an alias (``--model_alias``): the
  results folder and the call cache key on that digest (:mod:`tersetalk.models.identity`).
  Stock ``llama_cpp.server`` lists the alias alone, and other weights served under the
  same alias would get the old model's cached answers. Each file is hashed once, before
  the server starts listening (about 0.12 s per 100 MB);
- ``--interrupt_requests`` defaults to False. Stock ``llama_cpp.server`` stops a
  streaming answer as soon as another request waits (and ends the stream without a
  ``finish_reason``), so clients with several requests in flight would keep cutting
  each other off; the client sees a malformed reply and retries.

llama-cpp-python's server runs one request at a time per model (a lock around the
model); several examples in flight overlap only the client's own work unless several
server processes share the load (see ``tersetalk bench concurrency``).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from tersetalk.models.fingerprint import file_sha256
from tersetalk.models.llamacpp import without_weight_repacking

__all__ = [
    "ListingWithDigests",
    "fresh_kv_per_request",
    "report_file_digests",
    "server_argv",
    "served_files",
    "with_digests",
]

log = logging.getLogger(__name__)


def served_files(model_settings: Any) -> dict[str, dict[str, str]]:
    """alias -> ``{"file": name, "sha256": hex}`` of each model file the server serves
    (llama-cpp-python's ``ModelSettings``: ``model`` the path, ``model_alias`` the id it
    lists, the path itself when no alias is given). A file not on disk is left out."""
    out: dict[str, dict[str, str]] = {}
    for settings in model_settings or []:
        path = getattr(settings, "model", None)
        alias = getattr(settings, "model_alias", None) or path
        if isinstance(path, str) and os.path.isfile(path):
            out[str(alias)] = {"file": Path(path).name, "sha256": file_sha256(path)}
            log.info("serving %s as %r: sha256 %s", path, alias, out[str(alias)]["sha256"])
    return out


def with_digests(listing: Any, files: dict[str, dict[str, str]]) -> Any:
    """``GET /v1/models``'s reply with each listed model's ``file`` and ``sha256`` added."""
    data = listing.get("data") if isinstance(listing, dict) else None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and entry.get("id") in files:
            entry.update(files[entry["id"]])
    return listing


class ListingWithDigests:
    """ASGI wrapper: the app's ``GET /v1/models`` reply passes through :func:`with_digests`;
    every other request goes through untouched."""

    def __init__(self, app: Any, files: dict[str, dict[str, str]]) -> None:
        self.app = app
        self.files = files

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (scope.get("type"), scope.get("method"), scope.get("path")) != (
            "http", "GET", "/v1/models"
        ):  # fmt: skip
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def rewrite(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            if start.get("status") == 200:
                try:
                    body = json.dumps(with_digests(json.loads(body), self.files)).encode()
                except ValueError:
                    pass  # not JSON: sent as it came
            headers = [
                (k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"
            ]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewrite)


def report_file_digests() -> None:
    """Make ``llama_cpp.server``'s ``create_app`` return its app wrapped in
    :class:`ListingWithDigests`, with the digests of the files it serves. Idempotent."""
    import llama_cpp.server.app as server_app

    original = server_app.create_app
    if getattr(original, "_tersetalk_digests", False):
        return

    def create_app(*args: Any, **kwargs: Any) -> Any:
        app = original(*args, **kwargs)
        settings = kwargs.get("model_settings") or (args[1] if len(args) > 1 else None)
        if not settings:  # read from a config file inside create_app: ask the proxy
            proxy = getattr(server_app, "_llama_proxy", None)
            settings = list(getattr(proxy, "_model_settings_dict", {}).values())
        return ListingWithDigests(app, served_files(settings))

    create_app._tersetalk_digests = True  # type: ignore[attr-defined]
    server_app.create_app = create_app  # type: ignore[assignment]


def fresh_kv_per_request() -> None:
    """Make every later ``Llama.generate`` with ``reset=True`` start from an empty cache.

    ``reset`` is llama-cpp-python's own flag for "this is a new prompt" (it then looks
    for a reusable prefix); the wrapper forgets the cached tokens first, so there is
    none. Idempotent.
    """
    import llama_cpp

    original = llama_cpp.Llama.generate
    if getattr(original, "_tersetalk_fresh", False):
        return
    # where ``reset`` sits among the arguments after ``tokens``, should one pass it so
    at = list(inspect.signature(original).parameters).index("reset") - 2

    def generate(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Any:
        reset = kwargs.get("reset", args[at] if len(args) > at else True)
        if reset:
            self.reset()
        return original(self, tokens, *args, **kwargs)

    generate._tersetalk_fresh = True  # type: ignore[attr-defined]
    llama_cpp.Llama.generate = generate  # type: ignore[method-assign]


def server_argv(argv: list[str]) -> tuple[list[str], bool]:
    """``llama_cpp.server``'s arguments from ours, and whether to reuse prefixes."""
    reuse = "--reuse_prefix" in argv
    out = [a for a in argv if a != "--reuse_prefix"]
    if not any(a == "--interrupt_requests" or a.startswith("--interrupt_requests=") for a in out):
        out += ["--interrupt_requests", "False"]
    return out, reuse


if __name__ == "__main__":
    sys.argv[1:], reuse_prefix = server_argv(sys.argv[1:])
    without_weight_repacking()
    report_file_digests()
    if not reuse_prefix:
        fresh_kv_per_request()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
