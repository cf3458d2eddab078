"""Ollama: checked through its native API, then spoken to through its /v1 API.

Why both: Ollama's OpenAI-compatible ``/v1`` API gives the same streaming, usage and
structured-output path as every other server (see :mod:`.openai_compat`), while the
native API (``/api/tags``) can tell "server not running" from "model not pulled" up
front, so a run fails at startup with the exact command that fixes it instead of
mid-way. The native requests (``/api/tags``, ``/api/show``) are side requests, bounded
and retried like a call (:meth:`.OpenAICompatClient._side`).

An Ollama behind an authenticating proxy gets its key from ``models.api_key_env``
like any server (sent as a Bearer token on both APIs); a refused key (HTTP 401/403)
stops the run at that first check with :class:`ModelAuthError`, not with the
misleading "not running". Everything the OpenAI-compatible path guards against (a
body that is not JSON, a trickling reply, an oversized reply) is guarded here too,
since the calls go through it.

The model's fingerprint for the call cache is Ollama's digest of it
(:meth:`OllamaClient.model_digest`), so the same pulled model hits its entries under
another name or at another address, and a new pull of other weights misses them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import ModelAuthError, ModelEnvironmentError, ModelError, ModelUnavailableError
from .credentials import check_base_url, refused_key_message
from .openai_compat import OpenAICompatClient, StructuredFormat

__all__ = ["DEFAULT_OLLAMA_HOST", "OllamaClient"]

DEFAULT_OLLAMA_HOST = "http://localhost:11434"


def _same_model(wanted: str, available: str) -> bool:
    # Ollama names without a tag mean ":latest".
    def norm(name: str) -> str:
        return name if ":" in name else f"{name}:latest"

    return norm(wanted) == norm(available)


class OllamaClient(OpenAICompatClient):
    """An Ollama model via ``{host}/v1``, after checking server and model with ``ollama``.

    ``count_tokens`` uses the model's own tokenizer: Ollama has no tokenize endpoint,
    so unless ``tokenizer``/``tokenizer_gguf`` is given, the client asks Ollama where the
    model's GGUF blob is (``ollama show``) and loads its vocabulary only; this works
    when Ollama runs on this machine.
    """

    backend = "ollama"

    def __init__(
        self,
        model: str,
        host: str = DEFAULT_OLLAMA_HOST,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        *,
        check: bool = True,
        stream: bool = True,
        structured_format: StructuredFormat = "auto",
        tokenizer: Callable[[str], int] | None = None,
        tokenizer_gguf: str | Path | None = None,
        tokenizer_spec: str | None = None,
        max_wait_s: float = 120.0,
        deadline_s: float | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        if not model:
            raise ModelError(
                "the Ollama backend needs a model name: set models.model (e.g. mistral:instruct)"
            )
        check_base_url(host)  # before it is printed anywhere
        host = (host or DEFAULT_OLLAMA_HOST).rstrip("/")
        if host.endswith("/v1"):
            host = host[: -len("/v1")]
        self.host = host
        self._api_key = api_key or None
        self.api_key_env = api_key_env or None
        self._digests: dict[str, str] | None = None  # name -> digest, from the last listing
        super().__init__(
            base_url=f"{host}/v1",
            model=model,
            api_key=self._api_key or "ollama",
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            stream=stream,
            structured_format=structured_format,
            tokenizer=tokenizer,
            tokenizer_gguf=tokenizer_gguf,
            tokenizer_spec=tokenizer_spec,
            max_wait_s=max_wait_s,
            deadline_s=deadline_s,
            api_key_env=api_key_env,
        )
        if check:
            self.check(model, timeout_s)

    def _down_message(self) -> str:
        return (
            f"Ollama is not running at {self.host}: start it with `ollama serve` (and "
            f"`ollama pull {self.model}`), or fix models.base_url"
        )

    def _tags(self, timeout_s: float) -> list[dict[str, Any]]:
        """The entries of Ollama's model listing (``GET /api/tags``), asked as a side
        request (bounded and retried like a call, see :meth:`OpenAICompatClient._side`).

        Raises :class:`ModelAuthError` for a refused key, :class:`ModelUnavailableError`
        when no Ollama answers, :class:`ModelEnvironmentError` when it keeps failing or
        answers with something that is not a listing.
        """
        url = f"{self.host}/api/tags"
        reply = self._side("GET", url, "Ollama's model listing", timeout_s=timeout_s)
        if reply.status in (401, 403):
            raise ModelAuthError(refused_key_message(
                f"Ollama at {self.host}", self.api_key_env, reply.status, reply.text,
                "OLLAMA_API_KEY", self._bearer_key(),
            ))  # fmt: skip
        if reply.status != 200:
            raise ModelUnavailableError(
                f"{self._down_message()} (GET {url}: HTTP {reply.status}: "
                f"{self._masked(reply.text[:200])})"
            )
        try:
            models = reply.json()["models"]
            if not (isinstance(models, list) and all(isinstance(m, dict) for m in models)):
                raise TypeError(f"models is {type(models).__name__}, not a list of objects")
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelEnvironmentError(
                f"GET {url}: not an Ollama model listing ({exc}); check that models.base_url "
                "points at Ollama"
            ) from exc
        return models

    def _list_models(self, timeout_s: float) -> list[str]:
        """The names of the models Ollama has (``/api/tags``); remembers their digests."""
        models = self._tags(timeout_s)
        named = [(str(m.get("model") or m.get("name") or ""), m.get("digest")) for m in models]
        self._digests = {name: str(digest) for name, digest in named if name and digest}
        return [name for name, _ in named if name]

    def check(self, model: str, timeout_s: float = 10.0) -> None:
        """Raise :class:`ModelUnavailableError` unless Ollama runs and has ``model``."""
        names = self._list_models(min(timeout_s, 10.0))
        if not any(_same_model(model, n) for n in names):
            have = ", ".join(sorted(names)) or "none"
            raise ModelUnavailableError(
                f"model {model!r} is not pulled in the Ollama at {self.host}: run "
                f"`ollama pull {model}` (models present: {have})"
            )

    def model_digest(self) -> str:
        """Ollama's digest of the model (``/api/tags``), the model's fingerprint (see
        :mod:`.fingerprint`): a hash of its manifest, so it changes with the weights,
        template or parameters and not with the name or the server's address.

        Taken from the startup check's listing, or listed now; raises
        :class:`ModelError` when Ollama cannot be asked or gives none for the model, and
        :class:`ModelEnvironmentError` when its listing keeps failing.
        """
        if self._digests is None or not any(_same_model(self.model, n) for n in self._digests):
            try:
                self._list_models(min(self.timeout_s, 10.0))
            except ModelUnavailableError as exc:  # no Ollama to ask, or no key for it
                raise ModelError(f"Ollama at {self.host} did not list its models ({exc})") from exc
        for name, digest in (self._digests or {}).items():
            if _same_model(self.model, name):
                return digest
        raise ModelError(f"Ollama at {self.host} lists no digest for {self.model!r}")

    def _gguf_blob(self) -> Path | None:
        """The model's GGUF file, when Ollama's ``/api/show`` names one readable here."""
        url = f"{self.host}/api/show"
        reply = self._side("POST", url, "Ollama's model details", json={"model": self.model},
                           timeout_s=min(self.timeout_s, 10.0))  # fmt: skip
        try:
            shown = reply.json() if reply.status == 200 else None
        except ValueError:
            return None
        modelfile = shown.get("modelfile") if isinstance(shown, dict) else None
        if not isinstance(modelfile, str):
            return None
        match = re.search(r"^FROM\s+(\S+)", modelfile, flags=re.MULTILINE)
        if match and Path(match.group(1)).is_file():
            return Path(match.group(1))
        return None

    #: Ollama names its model file itself (:meth:`_gguf_blob`), not through /props
    _find_served_model_file = False

    _no_tokenizer_reason = (
        "Ollama has no tokenize endpoint, its GGUF file is not readable here and "
        "models.tokenizer is not set"
    )

    def count_tokens(self, text: str) -> int:
        if (
            self._tokenizer is None
            and self._tokenizer_gguf is None
            and self._tokenizer_spec is None
            and self._tokens_missing is None
        ):
            blob = self._gguf_blob()  # Ollama on this machine: its model file counts
            if blob is None:
                self._tokens_missing = f"missing: {self._no_tokenizer_reason}"
            else:
                self._tokenizer_gguf = blob
        return super().count_tokens(text)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "host": self.host}
