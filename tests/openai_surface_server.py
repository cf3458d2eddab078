"""A real model behind exactly the surface of the OpenAI API, on loopback.

``python tests/openai_surface_server.py --port N [--model_alias NAME]`` serves the
embedded SmolLM2 through llama-cpp-python's server (as
:mod:`tersetalk.models.llamacpp_server` starts it: no weight repacking, an empty KV
cache per request), with every route taken away but the two the OpenAI API and the
hosted providers share: ``POST /v1/chat/completions`` (streamed or not,
``stream_options`` as the server reads it) and ``GET /v1/models``. No tokenize endpoint,
no ``/props``, no extras: what a run meets when it points at a hosted API.

Every other path answers 404, as the OpenAI API does for a route it does not have.
"""

from __future__ import annotations

import argparse
import sys

#: the routes the OpenAI API and hosted OpenAI-compatible providers have in common
OPENAI_ROUTES = {("POST", "/v1/chat/completions"), ("GET", "/v1/models")}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model_alias", default="hosted-model")
    ap.add_argument("--n_threads", type=int, default=1)
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

    async def openai_surface_only(scope, receive, send):  # an ASGI app in front of it
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
