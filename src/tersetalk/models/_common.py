"""Helpers shared by the real backends: stream timing, the Instructor call, and the one
``structured`` path every Instructor backend runs (:class:`InstructorClient`).

Kept private: the public surface is :mod:`tersetalk.models.base`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from abc import abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pydantic

from .base import (
    CallResult,
    GenerationConfig,
    ModelCallError,
    ModelClient,
    ModelError,
    StructuredOutputError,
    check_messages,
)

__all__ = [
    "REPLACEMENT_CHAR",
    "InstructorClient",
    "StructuredOutcome",
    "replace_escaped_lone_surrogates",
    "replace_lone_surrogates",
    "run_instructor",
    "stream_timing",
    "usage_of",
]

#: what a lone surrogate in a reply becomes (the Unicode replacement character)
REPLACEMENT_CHAR = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
#: one JSON escape: ``\\uXXXX`` (group 1) or a backslash and any other character
_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.S)


def replace_lone_surrogates(value: Any) -> tuple[Any, int]:
    """``value`` with every lone surrogate (in strings, dict keys and values, lists)
    replaced by U+FFFD, and how many were replaced.

    Why: a JSON reply may carry an escaped half of a surrogate pair (``"\\ud800"``);
    Python decodes it into a ``str`` that cannot be encoded as UTF-8, so the call cache,
    the run checkpoint and the Parquet file would all fail to write the answer. A pair
    whose halves arrived in two stream chunks is joined into its character first; each
    surrogate still alone is replaced by exactly one U+FFFD, the same way in every
    backend and in the cache, so a cached answer equals the one first returned.
    """
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:  # the common case: nothing to do
            return value, 0
        # first join pairs split across stream chunks (two decoded halves side by side)
        joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return _SURROGATE.subn(REPLACEMENT_CHAR, joined)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for k, v in value.items():
            k2, n1 = replace_lone_surrogates(k)
            v2, n2 = replace_lone_surrogates(v)
            out[k2] = v2
            total += n1 + n2
        return (out, total) if total else (value, 0)
    if isinstance(value, list | tuple):
        items = [replace_lone_surrogates(v) for v in value]
        total = sum(n for _, n in items)
        if not total:
            return value, 0
        return type(value)(v for v, _ in items), total
    return value, 0


def stream_timing(
    chunk_times: list[float], completion_tokens: int
) -> tuple[float | None, float | None]:
    """TTFT and mean inter-token latency from the arrival times of content chunks.

    ``chunk_times`` are seconds since the request was sent, one per chunk that carried
    text. TTFT is the first of them. Mean ITL is the decode time after the first token
    divided by the number of tokens that followed it, ``(t_last - t_first) / (n - 1)``
    (the usual "time per output token"); it uses the token count, not the chunk count,
    because a chunk may carry several tokens (multi-byte characters, held-back stop
    text). When the token count is unknown (``-1``) the chunk count stands in.
    """
    if not chunk_times:
        return None, None
    ttft = chunk_times[0]
    n = completion_tokens if completion_tokens > 0 else len(chunk_times)
    if n < 2:
        return ttft, None
    return ttft, (chunk_times[-1] - chunk_times[0]) / (n - 1)


def usage_of(response: Any) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) of an OpenAI-style response; -1 when absent."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return -1, -1
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return (
        int(prompt) if prompt is not None else -1,
        int(completion) if completion is not None else -1,
    )


@dataclass
class StructuredOutcome:
    obj: pydantic.BaseModel
    text: str
    responses: list[Any] = field(default_factory=list)

    @property
    def attempts(self) -> int:
        return len(self.responses)

    def usage(self) -> tuple[int, int]:
        """Usage summed over every attempt (retries are real cost); -1 if any is unknown."""
        prompt = completion = 0
        for r in self.responses:
            p, c = usage_of(r)
            if p < 0 or c < 0:
                return -1, -1
            prompt += p
            completion += c
        return prompt, completion


def _content(response: Any) -> str:
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError):
        return ""


def run_instructor(
    raw_create: Callable[..., Any],
    messages: list[dict[str, Any]],
    schema: type[pydantic.BaseModel],
    call_kwargs: dict[str, Any],
    max_retries: int,
    where: str,
) -> StructuredOutcome:
    """Run one structured call through Instructor's JSON_SCHEMA mode.

    ``raw_create`` is an OpenAI-style ``create(**kwargs) -> ChatCompletion``; it
    receives Instructor's request (with ``response_format``) and may rewrite it so the
    backend really constrains decoding. Every call of ``raw_create`` is one attempt;
    counting them here is exact, whereas hooks would only see what Instructor emits.
    Library errors never escape: an answer that stays schema-invalid after the retries
    or is cut off at ``max_tokens`` becomes :class:`StructuredOutputError` (a property
    of the answer, which the call cache stores); anything else becomes
    :class:`ModelCallError` (or the :class:`ModelError` that ``raw_create`` raised, e.g.
    the server went away).
    """
    import instructor
    from instructor.core import IncompleteOutputException, InstructorRetryException

    responses: list[Any] = []

    def counted_create(*args: Any, **kwargs: Any) -> Any:
        response = raw_create(*args, **kwargs)
        responses.append(response)
        return response

    create = instructor.patch(create=counted_create, mode=instructor.Mode.JSON_SCHEMA)
    try:
        obj = create(
            messages=messages,
            response_model=schema,
            max_retries=max_retries,
            **call_kwargs,
        )
    except ModelError:
        raise
    except IncompleteOutputException as exc:
        raise StructuredOutputError(
            f"{where}: the {schema.__name__} answer was cut off at "
            f"max_tokens={call_kwargs.get('max_tokens')} (partial output: "
            f"{_content(exc.last_completion)[:200]!r}); raise the generation budget "
            "(GenerationConfig.max_tokens) or simplify the schema",
            attempts=max(1, len(responses)),
        ) from exc
    except InstructorRetryException as exc:
        cause = exc.__cause__
        if isinstance(cause, ModelError):
            raise cause from cause.__cause__  # keep its own cause (e.g. the openai error)
        # every call of raw_create is one attempt; Instructor's own count stands in
        # only if none was seen
        attempts = len(responses) or int(exc.n_attempts or 1)
        if isinstance(cause, IncompleteOutputException):
            raise StructuredOutputError(
                f"{where}: the {schema.__name__} answer was cut off at "
                f"max_tokens={call_kwargs.get('max_tokens')}; raise "
                "GenerationConfig.max_tokens or simplify the schema",
                attempts=attempts,
            ) from exc
        last = _content(exc.last_completion) if exc.last_completion is not None else ""
        raise StructuredOutputError(
            f"{where}: no answer valid for {schema.__name__} after {exc.n_attempts} "
            f"attempt(s) ({max_retries} retries); last error: {str(cause or exc)[:300]}; "
            f"last output: {last[:200]!r}. Raise models.max_retries, the generation "
            "budget, or use a stronger model",
            attempts=attempts,
        ) from exc
    except Exception as exc:  # any other library error: wrap, never leak
        raise ModelCallError(
            f"{where}: structured call failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not responses:
        raise ModelCallError(f"{where}: Instructor returned without calling the model")
    return StructuredOutcome(obj=obj, text=_content(responses[-1]), responses=responses)


def replace_escaped_lone_surrogates(text: str) -> tuple[str, int]:
    """JSON ``text`` with every escaped lone surrogate (``\\ud800`` as six characters, not
    followed or preceded by its other half) written ``\\ufffd`` instead, and how many.

    Why: a structured answer is JSON text the model wrote; pydantic's JSON parser
    refuses an escaped lone surrogate ("unexpected end of hex escape"), so the answer
    would fail as schema-invalid and be cached as the model's error, although the same
    text with a raw surrogate is repaired by :func:`replace_lone_surrogates`. Escapes
    are read left to right, so an escaped backslash (``\\\\ud800``) is not taken for one.
    """
    if "\\u" not in text:
        return text, 0
    escapes = [m for m in _JSON_ESCAPE.finditer(text) if m.group(1)]
    parts: list[str] = []
    last = n = i = 0
    while i < len(escapes):
        m = escapes[i]
        cp = int(m.group(1), 16)
        nxt = escapes[i + 1] if i + 1 < len(escapes) else None
        if (
            0xD800 <= cp <= 0xDBFF
            and nxt is not None
            and nxt.start() == m.end()
            and (0xDC00 <= int(nxt.group(1), 16) <= 0xDFFF)
        ):
            i += 2  # a pair: one character
            continue
        if 0xD800 <= cp <= 0xDFFF:
            parts += [text[last : m.start()], "\\ufffd"]
            last, n = m.end(), n + 1
        i += 1
    return ("".join([*parts, text[last:]]), n) if n else (text, 0)


class InstructorClient(ModelClient):
    """A backend whose structured calls go through :func:`run_instructor`.

    Why one ``structured``: the llama.cpp and OpenAI-compatible backends differ only in
    how a request is sent (``_raw_create``), what holds for the whole call (a lock, a
    deadline clock: ``_structured_scope``) and what their ``extra`` says; timing, usage
    summed over attempts, the lone-surrogate backstop and the result record are the
    same, so they are written once, here.
    """

    max_retries: int
    #: where a replaced lone surrogate is logged (the backend's own logger)
    _log: ClassVar[logging.Logger] = logging.getLogger(__name__)

    @abstractmethod
    def _raw_create(self, **kwargs: Any) -> Any:
        """OpenAI-style ``create(**kwargs) -> ChatCompletion`` for Instructor: how the
        backend sends one attempt (see :func:`run_instructor`)."""

    @abstractmethod
    def _sampling(self, gen: GenerationConfig) -> dict[str, Any]:
        """The request's sampling arguments for ``gen``."""

    @abstractmethod
    def _where(self) -> str:
        """Backend and model, for messages."""

    @abstractmethod
    def _structured_extra(self, prompt_tokens: int) -> dict[str, Any]:
        """The backend's ``CallResult.extra`` of a structured call that just ended."""

    def _structured_scope(self) -> AbstractContextManager[Any]:
        """What holds for the whole call, re-asks included; the call is timed inside it."""
        return contextlib.nullcontext()

    def _surrogates_sent(self) -> int:
        """Lone surrogates ``_raw_create`` already replaced during the call just ended."""
        return 0

    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: type[pydantic.BaseModel],
        gen: GenerationConfig,
    ) -> CallResult:
        messages = check_messages(messages)
        with self._structured_scope():
            t0 = time.perf_counter()
            outcome = run_instructor(
                self._raw_create,
                messages,
                schema,
                self._sampling(gen),
                self.max_retries,
                self._where(),
            )
            total = time.perf_counter() - t0
        prompt_tokens, completion_tokens = outcome.usage()
        # the backstop for text that reached the result without passing a backend's own
        # replacement (a re-ask, a tool call); a no-op on text without surrogates
        text, n_text = replace_lone_surrogates(outcome.text)
        parsed, n_parsed = replace_lone_surrogates(outcome.obj.model_dump(mode="json"))
        n_replaced = self._surrogates_sent() + n_text + n_parsed
        extra = self._structured_extra(prompt_tokens)
        if n_replaced:
            extra["surrogates_replaced"] = n_replaced
            self._log.warning(
                "%s: %d lone surrogate(s) in the reply replaced by U+FFFD",
                self._where(),
                n_replaced,
            )
        return self._result(
            text, parsed, (prompt_tokens, completion_tokens), (None, None, total),
            outcome.attempts, extra,
        )  # fmt: skip

    def _result(
        self,
        text: str,
        parsed: dict[str, Any] | None,
        tokens: tuple[int, int],
        timing: tuple[float | None, float | None, float],
        attempts: int,
        extra: dict[str, Any],
    ) -> CallResult:
        """The record of a call this backend just made: (prompt, completion) ``tokens``,
        (TTFT, ITL, total) ``timing``; never a cache hit (the call cache says so itself)."""
        return CallResult(
            text=text,
            parsed=parsed,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            ttft_s=timing[0],
            itl_s=timing[1],
            total_s=timing[2],
            attempts=attempts,
            cache_hit=False,
            backend=self.backend,
            model=self.model,
            extra=extra,
        )
