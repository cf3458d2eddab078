"""A conversation between roles: the messages sent and the model calls made.

Every message is counted where it is sent, by both tiktoken encodings and the
model's own tokenizer, so token totals per role and direction fall out of the
transcript rather than being estimated afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tersetalk.core.events import on_message_sent
from tersetalk.core.tokens import count_tokens
from tersetalk.models import CallResult, GenerationConfig, ModelClient
from tersetalk.models.base import StructuredOutputError
from tersetalk.models.tokenizers import TokensUnavailableError


@dataclass
class Conversation:
    client: ModelClient
    messages: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)

    def send(self, sender: str, receiver: str, kind: str, content: str) -> dict:
        msg = {
            "turn": len(self.messages),
            "sender": sender,
            "receiver": receiver,
            "kind": kind,
            "content": content,
            "bytes": len(content.encode("utf-8")),
            "tokens_cl100k": count_tokens(content, "cl100k_base"),
            "tokens_o200k": count_tokens(content, "o200k_base"),
            "tokens_model": self._model_tokens(content),
        }
        self.messages.append(msg)
        on_message_sent(msg)  # the run's live events (a no-op unless a run publishes)
        return msg

    def _model_tokens(self, content: str) -> int | None:
        """The message's tokens by the model's own tokenizer, or None (missing) when the
        model's tokens cannot be counted here (a hosted API with no tokenize endpoint and
        no ``models.tokenizer``): the run file's ``tokens_model_source`` says why."""
        try:
            return self.client.count_tokens(content)
        except TokensUnavailableError:
            return None

    def log_call(self, role: str, result: CallResult) -> None:
        """Record a model call made on behalf of ``role`` (tokens, timing, cache hit).

        The backend's ``extra`` provenance (``usage_source``, ``transport_tries``,
        ``response_format``, ``finish_reason``, ...) is kept in the entry, so that a
        response-format fallback or unknown usage stays visible in the run's output.
        The named fields below win over an ``extra`` key of the same name.
        """
        self.calls.append(
            {
                **result.extra,
                "role": role,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "ttft_s": result.ttft_s,
                "itl_s": result.itl_s,
                "total_s": result.total_s,
                "attempts": result.attempts,
                "cache_hit": result.cache_hit,
            }
        )

    def ask(self, role: str, messages: list[dict], gen: GenerationConfig) -> str:
        """A free-text model call on behalf of ``role``."""
        result = self.client.chat(messages, gen)
        self.log_call(role, result)
        return result.text

    def log_failed_call(self, role: str, error: StructuredOutputError) -> None:
        """Record a structured call whose answer failed (schema-invalid, cut off).

        Its attempts were real model work, so it is a call like any other: it counts
        in ``n_model_calls`` and keeps the error text. Its token usage and timing
        were not reported with the error, so usage is "unknown" (``-1``, which makes
        the record's usage totals unknown rather than too low) and timing is absent
        (``total_s`` 0.0, since ``t_model_s`` is a plain sum; TTFT/ITL ``None``).
        """
        self.calls.append(
            {
                "role": role,
                "prompt_tokens": -1,
                "completion_tokens": -1,
                "ttft_s": None,
                "itl_s": None,
                "total_s": 0.0,
                "attempts": error.attempts,
                "cache_hit": error.cache_hit,
                "usage_source": "unknown: structured call failed",
                "error": str(error),
            }
        )

    def ask_structured(self, role: str, messages: list[dict], schema, gen: GenerationConfig):
        """A structured model call on behalf of ``role``.

        A :class:`StructuredOutputError` is logged as a failed call, then re-raised
        for the caller to handle (e.g. fall back to free generation).
        """
        try:
            result = self.client.structured(messages, schema, gen)
        except StructuredOutputError as exc:
            self.log_failed_call(role, exc)
            raise
        self.log_call(role, result)
        return result
