"""Which model a config means, told by what serves it: the backend check and the results key.

Two checks keep results from being filed under a model that did not make them:

- :func:`check_backend`: a model name that only another backend than the configured one
  serves is refused before anything runs (an Ollama ``name:tag`` with the in-process
  ``llamacpp`` backend would run the embedded SmolLM2; a GGUF file given to Ollama as a
  model name is no model Ollama has);
- :func:`served_results_key`: the folder of a served model's results
  (``results/<key>/``) ends in the first eight hex digits of the fingerprint the server
  reports (:mod:`.fingerprint`), so other weights under the same name get another folder.
  A config that names the folder (``models.key``: then other weights need another key;
  the rows and the cache key still follow the weights), declares the model's identity
  (``models.key`` with ``models.fingerprint``) or accepts a weak one
  (``models.allow_weak_identity``) keeps that key (else the name made path-safe) as it
  is, and the server is not asked while planning.
  A server that cannot be reached while planning (a dry run without it) leaves the
  name-based key, with a warning (the rows and the cache key still carry the fingerprint
  the run is served with). The in-process ``llamacpp`` backend keeps its name-based key:
  the embedded default's folder stays ``smollm2-135m-instruct``; its rows and cache key
  carry the file's sha256.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import ModelIdentityError, ModelUnavailableError
from .fingerprint import FINGERPRINT_DIR, IdentityPolicy, model_fingerprint

__all__ = ["SERVER_BACKENDS", "backend_mismatch", "check_backend", "served_results_key"]

#: the backends whose model is served (asked over HTTP) rather than loaded in this process
SERVER_BACKENDS = ("openai", "ollama")

#: an Ollama model name with a tag (``llama3.1:8b``, ``library/qwen2.5:14b-instruct``)
log = logging.getLogger(__name__)

_OLLAMA_TAGGED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._-]*")


def backend_mismatch(cfg: dict[str, Any]) -> str | None:
    """Why ``cfg``'s model name is one only another backend serves, or None."""
    backend = cfg.get("backend", "llamacpp")
    model = cfg.get("model")
    if not isinstance(model, str) or not model:
        return None
    if backend == "llamacpp":
        if _OLLAMA_TAGGED.fullmatch(model):
            return (
                f"models.model {model!r} is an Ollama model name (name:tag), but models.backend "
                "is llamacpp, which runs the GGUF file in models.model_path in this process "
                "(null: the embedded SmolLM2) and would file its results under that name; set "
                "models.backend: ollama (models.base_url: your Ollama host if it is not "
                "http://localhost:11434), or models.model_path to the model's GGUF file"
            )
        if "://" in model:
            return (
                f"models.model {model!r} is a URL, but models.backend is llamacpp (a GGUF file "
                "run in this process); set models.backend: openai and models.base_url to the "
                "server's URL ending in /v1, with models.model the name it serves"
            )
    if backend == "ollama" and (model.lower().endswith(".gguf") or Path(model).is_absolute()):
        return (
            f"models.model {model!r} is a file, but models.backend is ollama, which serves the "
            "models it has pulled by name (ollama list); set models.backend: llamacpp with "
            "models.model_path to the file, or serve it (python -m tersetalk.models."
            "llamacpp_server --model <file> --model_alias <name>) with models.backend: openai"
        )
    return None


def check_backend(cfg: dict[str, Any]) -> None:
    """Raise :class:`ModelIdentityError` when only another backend serves ``cfg``'s model."""
    why = backend_mismatch(cfg)
    if why is not None:
        raise ModelIdentityError(why)


_key_memo: dict[str, str] = {}
_key_lock = threading.Lock()


def served_results_key(
    models: dict[str, Any],
    base: str,
    cache_dir: str | Path | None = None,
    *,
    make_client: Callable[[dict[str, Any]], Any],
) -> str:
    """The results folder name of ``models`` (a validated ``models`` section) whose
    name-based key is ``base`` (:func:`tersetalk.core.paths.model_key`); ``make_client``
    builds the client that asks the server (:func:`tersetalk.models.make_client`, passed
    in: the package imports this module).

    A served model without ``models.key``, a declared identity or the weak opt-in:
    ``<base>-<8 hex>``, the hex naming the fingerprint the server reports (a key the
    config sets is the folder as it is: a sensitivity model's too); the server is asked once per
    process (the file digest memoised under ``<cache_dir>/calls/fingerprints``). Raises
    :class:`ModelIdentityError` (a :class:`~.base.ModelError`) when nothing identifies
    the served model, the name is not served, or the server cannot be asked.
    """
    check_backend(models)
    if models.get("backend", "llamacpp") not in SERVER_BACKENDS or models.get("key"):
        return base
    policy = IdentityPolicy.from_config(models)
    if policy.declared or policy.allow_weak:
        return base
    memo_key = json.dumps([models, base, str(cache_dir)], sort_keys=True, default=str)
    with _key_lock:
        known = _key_memo.get(memo_key)
    if known is not None:
        return known
    from tersetalk.core.paths import MAX_KEY

    client = None
    try:
        client = make_client(models)
        ping = getattr(client, "ping", None)
        if callable(ping):
            ping()
        memo = Path(cache_dir) / "calls" / FINGERPRINT_DIR if cache_dir is not None else None
        key = f"{base[: MAX_KEY - 9].rstrip('-._')}-{model_fingerprint(client, memo).short}"
    except ModelUnavailableError as exc:
        # no server to ask while planning (a dry run, a server started later): the
        # name-based folder, said loudly; the rows and the cache key still carry the
        # fingerprint the server reports when the run asks it
        log.warning(
            "the %s server of model %r cannot be asked which weights it serves (%s): "
            "results go to results/%s/ for now; start the server before planning to have "
            "its results filed under the weights it serves",
            models.get("backend"), models.get("model"), exc, base,
        )  # fmt: skip
        key = base
    finally:
        close = getattr(client, "close", None)
        if callable(close):
            close()
    with _key_lock:
        _key_memo[memo_key] = key
    return key
