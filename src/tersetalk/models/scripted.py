"""A scripted model double for unit tests of control flow ONLY.

It replays canned answers so tests of agents, systems, the call cache and error
handling run in milliseconds without a model. Its token counts are a whitespace
split and its timings are zero: nothing it returns may ever become a reported number.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import pydantic

from .base import (
    CallResult,
    GenerationConfig,
    ModelCallError,
    ModelClient,
    StructuredOutputError,
    check_messages,
)

__all__ = ["ScriptedClient"]

#: f(messages) | f(messages, gen) | f(messages, gen, schema_or_None) -> answer text
Responder = Callable[..., str]


def _arity(fn: Callable[..., Any]) -> int:
    """How many of (messages, gen, schema) the responder takes (1 to 3)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 3
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return max(1, min(3, len(positional)))


class ScriptedClient(ModelClient):
    """Test double: answers come from a list (consumed in order) or a callable.

    ``responses`` is a list of strings, popped one per model attempt (an ``Exception``
    instance in the list is raised instead), or a callable ``f(messages)``,
    ``f(messages, gen)`` or ``f(messages, gen, schema_or_None)`` returning the answer
    (it may raise, to test error paths). For ``structured`` calls an answer that is
    not valid JSON for the schema counts as a failed attempt and the next answer is
    used, up to ``max_retries`` retries, mimicking Instructor; then
    :class:`StructuredOutputError` is raised (as the real backends do). Every call is
    recorded in ``calls``.

    For unit tests of control flow only; never use it for a number we report.
    """

    backend = "scripted"

    def __init__(
        self,
        responses: list[str | Exception] | Responder,
        model: str = "scripted",
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.max_retries = max_retries
        self._responses = responses if callable(responses) else list(responses)
        self._arity = _arity(responses) if callable(responses) else 0
        self.calls: list[dict[str, Any]] = []

    def _next(
        self,
        messages: list[dict[str, Any]],
        gen: GenerationConfig,
        schema: type[pydantic.BaseModel] | None,
    ) -> str:
        if callable(self._responses):
            args = (messages, gen, schema)[: self._arity]
            answer: str | Exception = self._responses(*args)
        else:
            if not self._responses:
                raise ModelCallError(
                    "ScriptedClient ran out of scripted responses: give the test more answers"
                )
            answer = self._responses.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        messages = check_messages(messages)
        self.calls.append({"kind": "chat", "messages": messages, "gen": gen})
        t0 = time.perf_counter()
        text = self._next(messages, gen, None)
        return CallResult(
            text=text,
            parsed=None,
            prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),
            completion_tokens=self.count_tokens(text),
            ttft_s=0.0,
            itl_s=0.0,
            total_s=time.perf_counter() - t0,
            attempts=1,
            cache_hit=False,
            backend=self.backend,
            model=self.model,
        )

    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: type[pydantic.BaseModel],
        gen: GenerationConfig,
    ) -> CallResult:
        messages = check_messages(messages)
        self.calls.append(
            {"kind": "structured", "messages": messages, "gen": gen, "schema": schema}
        )
        t0 = time.perf_counter()
        completion_tokens = 0
        last_error: Exception | None = None
        for attempt in range(1, self.max_retries + 2):
            text = self._next(messages, gen, schema)
            completion_tokens += self.count_tokens(text)
            try:
                obj = schema.model_validate_json(text)
            except pydantic.ValidationError as exc:
                last_error = exc
                continue
            return CallResult(
                text=text,
                parsed=obj.model_dump(mode="json"),
                prompt_tokens=attempt * sum(self.count_tokens(m["content"]) for m in messages),
                completion_tokens=completion_tokens,
                ttft_s=None,
                itl_s=None,
                total_s=time.perf_counter() - t0,
                attempts=attempt,
                cache_hit=False,
                backend=self.backend,
                model=self.model,
            )
        raise StructuredOutputError(
            f"scripted model: answer not valid for {schema.__name__} after "
            f"{self.max_retries + 1} attempts: {last_error}",
            attempts=self.max_retries + 1,
        )

    def count_tokens(self, text: str) -> int:
        """Whitespace word count: a stand-in, not a tokenizer."""
        return len(text.split())

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "note": "test double"}
