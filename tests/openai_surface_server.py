"""A real model behind exactly the surface of the OpenAI API, on loopback.

``python tests/openai_surface_server.py --port N [--model_alias NAME]`` serves the
embedded SmolLM2 through llama-cpp-python's server (as
:mod:`tersetalk.models.llamacpp_server` starts it: no weight repacking, an empty KV
cache per request), with every route taken away but the two the OpenAI API and the
hosted providers share: ``POST /v1/chat/completions`` (streamed or not,
``stream_options`` as the server reads it) and ``GET /v1/models``. No tokenize endpoint,
no ``/props``, no extras: what a run meets when it points at a hosted API.

Every other path answers 404, as the OpenAI API does for a route it does not have.
``--tokenize vllm`` adds the one extra route vLLM's server has for counting:
``POST /tokenize`` taking ``{"model", "prompt", "add_special_tokens"}`` and answering
``{"count", "max_model_len", "tokens"}`` (the model's own tokenizer, vocab-only).
``--ollama`` adds what an Ollama server has besides its ``/v1``: ``GET /api/tags`` (the
model listed with a digest) and ``POST /api/show`` (its Modelfile, ``FROM`` the GGUF on
this machine, as a local Ollama's is).
"""

from __future__ import annotations

import argparse
import json
import sys

#: the routes the OpenAI API and hosted OpenAI-compatible providers have in common
OPENAI_ROUTES = {("POST", "/v1/chat/completions"), ("GET", "/v1/models")}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model_alias", default="hosted-model")
    ap.add_argument("--n_threads", type=int, default=1)
    ap.add_argument("--tokenize", choices=["none", "vllm"], default="none")
    ap.add_argument("--ollama", action="store_true")
    args = ap.parse_args(argv)

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    from tersetalk.models.llamacpp import default_model_path, without_weight_repacking
    from tersetalk.models.llamacpp_server import fresh_kv_per_request

    without_weight_repacking()
    fresh_kv_per_request()
    app = create_app(
        server_settings=ServerSettings(host="127.0.0.1", port=args.port, interrupt_requests=False),
        model_settings=[
            ModelSettings(
                model=str(default_model_path()),
                model_alias=args.model_alias,
                n_ctx=4096,
                n_threads=args.n_threads,
                verbose=False,
            )
        ],
    )

    if args.tokenize == "vllm":  # vLLM lists the served model's path as its root
        from tersetalk.models.llamacpp_server import ListingWithDigests

        app = ListingWithDigests(app, {args.model_alias: {"root": str(default_model_path())}})

    vocab = None
    if args.tokenize == "vllm":
        from tersetalk.models.llamacpp import _load_llama

        vocab = _load_llama(default_model_path(), vocab_only=True, verbose=False)

    async def vllm_tokenize(receive, send):
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        req = json.loads(body)
        if not isinstance(req.get("prompt"), str):  # vLLM validates the request: a 400
            await answer(send, {"object": "error", "message": "prompt: Field required",
                                "type": "BadRequestError", "code": 400}, status=400)  # fmt: skip
            return
        ids = vocab.tokenize(req["prompt"].encode("utf-8"), add_bos=False, special=False)
        await answer(send, {"count": len(ids), "max_model_len": 4096, "tokens": ids})

    gguf = default_model_path()
    ollama_routes = {
        ("GET", "/api/tags"): {"models": [{
            "name": args.model_alias, "model": args.model_alias, "size": gguf.stat().st_size,
            "digest": "0" * 64, "modified_at": "2026-01-01T00:00:00Z",
        }]},
        ("POST", "/api/show"): {"modelfile": f"FROM {gguf}\n", "parameters": "",
                                "template": "{{ .Prompt }}"},
    } if args.ollama else {}  # fmt: skip

    async def answer(send, doc, status=200):
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": json.dumps(doc).encode()})

    async def openai_surface_only(scope, receive, send):  # an ASGI app in front of it
        if vocab is not None and scope.get("path") == "/tokenize" and scope["method"] == "POST":
            await vllm_tokenize(receive, send)
            return
        if scope["type"] == "http" and (scope["method"], scope["path"]) in ollama_routes:
            await answer(send, ollama_routes[(scope["method"], scope["path"])])
            return
        if scope["type"] == "http" and (scope["method"], scope["path"]) not in OPENAI_ROUTES:
            body = b'{"error": {"message": "not found", "type": "invalid_request_error"}}'
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    uvicorn.run(openai_surface_only, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
