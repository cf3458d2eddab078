"""The one interface every model backend implements, its errors, and its result record.

Why one small interface: systems and agents must not care whether a message went to
the embedded llama.cpp model, an OpenAI-compatible server or a scripted test double.
Everything a reported number depends on (token counts by the model's own tokenizer,
timing, attempts, whether the answer came from the call cache) travels in
:class:`CallResult`, so the run records can be written without backend-specific code.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import pydantic

__all__ = [
    "CallResult",
    "GenerationConfig",
    "ModelAuthError",
    "ModelCallError",
    "ModelClient",
    "ModelEnvironmentError",
    "ModelError",
    "ModelIdentityError",
    "ModelUnavailableError",
    "StructuredOutputError",
    "TransientModelError",
    "caused_by",
    "check_messages",
    "is_transient",
]


class ModelError(Exception):
    """Base of every error raised by :mod:`tersetalk.models`.

    Messages say what failed, where (backend, model, URL or file) and how to fix it.
    """


class ModelEnvironmentError(ModelError):
    """Something that is not about the example failed: the server's side requests
    (its model listing, its tokenize endpoint), the tokenizer that counts tokens, the
    server's usage report, the backend's settings.

    Such an error would fail every example alike, so it is never recorded as the
    example's error row: the run stops, keeps what is finished, writes no run file and
    ``tersetalk run`` exits 2 with the message, which says what to fix
    (:func:`tersetalk.pipeline.runner.stopping_fault` is where a run decides).
    """


class ModelUnavailableError(ModelEnvironmentError):
    """The model cannot be reached at all: server down, model not pulled, file missing."""


class ModelAuthError(ModelUnavailableError):
    """The server refused our credentials (HTTP 401 or 403).

    A subclass of :class:`ModelUnavailableError` on purpose: a wrong or missing key
    fails every call the same way, so each place that stops on an unreachable model
    (the runner, the mediator, the MSP codec, the format study) stops on it too,
    instead of turning every example into an error row of a run that looks finished.
    The message names the environment variable the key was read from
    (``models.api_key_env``), or says that none is set.
    """


class ModelIdentityError(ModelEnvironmentError):
    """What the model is cannot be told, or the configured name is not what is served.

    The configured model name is not among the ones the server lists, the name is one
    only another backend serves, or nothing identifies the weights (no digest, no
    description, no declared fingerprint) and weak identity was not allowed. Results
    and cached answers would be filed under the wrong model, so the run stops; the
    message says how to fix it.
    """


class ModelCallError(ModelError):
    """A call reached the model but failed after all retries.

    Timeouts, server errors, or structured output that stayed schema-invalid.
    """


class TransientModelError(ModelCallError):
    """A call failed for a reason that may pass: the server timed out, lost the
    connection, answered HTTP 5xx or 429, or sent a reply that is not a well-formed
    completion (a body that is not an event stream, a stream cut off before its
    ``finish_reason``, no choices).

    Never cached. The runner does not keep such an example as an error row: the job
    fails after checkpointing the finished examples, and a rerun redoes only the
    failed ones (see :func:`is_transient`).
    """


def caused_by(
    exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first error of type ``kind`` among ``exc`` and the errors it was raised from.

    Walks ``__cause__``/``__context__`` (bounded, cycle-safe), because callers such as
    the mediator's judge or the MSP codec wrap model errors in their own types.
    """
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(seen) < 32 and all(cur is not e for e in seen):
        if isinstance(cur, kind):
            return cur
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a :class:`TransientModelError` (see :func:`caused_by`)."""
    return caused_by(exc, TransientModelError) is not None


class StructuredOutputError(ModelCallError):
    """A structured call's answer itself failed: schema-invalid after every retry, or
    cut off at ``max_tokens``.

    Kept apart from transport, timeout and server errors because it is a property of
    the model's answer: at temperature 0 with a seed the same request fails the same
    way again, so the call cache stores it (a forced rerun then makes no model call),
    and the run record logs the call, since its attempts were real model work.
    ``attempts`` is how many times the model was asked; ``cache_hit`` says whether
    this error was replayed from the call cache rather than produced by the model now.
    """

    def __init__(self, message: str, attempts: int, cache_hit: bool = False) -> None:
        super().__init__(message)
        self.attempts = int(attempts)
        self.cache_hit = bool(cache_hit)

    def __reduce__(self) -> tuple[Any, ...]:
        # keep attempts/cache_hit across pickling (e.g. to or from a worker process)
        return (type(self), (str(self), self.attempts, self.cache_hit))


@dataclass(frozen=True)
class GenerationConfig:
    """Sampling parameters of one call.

    Frozen so it can be shared between agents and hashed into the call-cache key.
    Temperature 0 (greedy) is the project default: results must be reproducible.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = ()
    #: ask for a JSON object (``response_format={"type": "json_object"}``) without a
    #: schema: the TerseTalk ``json`` enforcement mode
    json_mode: bool = False

    def __post_init__(self) -> None:
        # Accept a list from YAML/JSON config, but store a tuple so the object stays hashable.
        if not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.max_tokens < 1:
            raise ModelError(
                f"GenerationConfig.max_tokens must be >= 1, got {self.max_tokens}: "
                "set a positive generation budget"
            )
        if self.temperature < 0:
            raise ModelError(f"GenerationConfig.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ModelError(f"GenerationConfig.top_p must be in (0, 1], got {self.top_p}")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``stop`` as a list), used for cache keys and logs."""
        return {
            "temperature": float(self.temperature),
            "top_p": float(self.top_p),
            "max_tokens": int(self.max_tokens),
            "seed": int(self.seed),
            "stop": list(self.stop),
            "json_mode": bool(self.json_mode),
        }


@dataclass
class CallResult:
    """What one model call produced and cost.

    ``prompt_tokens``/``completion_tokens`` are counted by the model's own tokenizer (or
    the server's usage report); ``-1`` means the backend could not report them, never a
    guess. For structured calls they are summed over all attempts, because retries are
    real cost. ``ttft_s``/``itl_s`` are only set for streamed calls.
    """

    text: str
    parsed: dict[str, Any] | None
    prompt_tokens: int
    completion_tokens: int
    ttft_s: float | None
    itl_s: float | None
    total_s: float
    attempts: int
    cache_hit: bool
    backend: str
    model: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallResult:
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(data) - {"extra"}
        if missing:
            raise ModelError(f"CallResult.from_dict: missing fields {sorted(missing)}")
        return cls(**{k: v for k, v in data.items() if k in names})


def check_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fail early, with a clear message, on malformed chat messages.

    Returns plain ``{"role", "content"}`` dicts (copies), the common denominator of
    every backend, so a caller's extra keys cannot silently change a cache key.
    """
    if not isinstance(messages, list) or not messages:
        raise ModelError("messages must be a non-empty list of {'role', 'content'} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ModelError(f"messages[{i}] must be a dict with 'role' and 'content', got {m!r}")
        if m["role"] not in ("system", "user", "assistant"):
            raise ModelError(
                f"messages[{i}].role must be system, user or assistant, got {m['role']!r}"
            )
        if not isinstance(m["content"], str):
            raise ModelError(f"messages[{i}].content must be a string")
        out.append({"role": m["role"], "content": m["content"]})
    return out


class ModelClient(ABC):
    """A chat model behind one interface.

    ``chat`` returns free text (streamed where the backend can, for TTFT/ITL);
    ``structured`` returns an answer validated against a Pydantic model, with the
    decoder constrained by the model's JSON schema wherever the backend supports it.
    """

    backend: str
    model: str

    @abstractmethod
    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        """Free-text completion of a chat."""

    @abstractmethod
    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: type[pydantic.BaseModel],
        gen: GenerationConfig,
    ) -> CallResult:
        """Completion validated against ``schema``; ``parsed`` holds its ``model_dump()``."""

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` under the model's own tokenizer (no BOS/template)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Provenance for logs: backend, model, and base_url or model_path."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release resources (threads, sockets, model memory). Safe to call twice."""

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
