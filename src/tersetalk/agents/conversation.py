"""A conversation between roles: the messages sent and the model calls made.

Every message is counted where it is sent, by both tiktoken encodings and the
model's own tokenizer, so token totals per role and direction fall out of the
transcript rather than being estimated afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tersetalk.models import CallResult, GenerationConfig, ModelClient
from tersetalk.tokens import count_tokens

ROLES = {"M": "manager", "W": "worker", "C": "critic"}


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
            "tokens_model": self.client.count_tokens(content),
        }
        self.messages.append(msg)
        return msg

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

    def ask_structured(self, role: str, messages: list[dict], schema, gen: GenerationConfig):
        result = self.client.structured(messages, schema, gen)
        self.log_call(role, result)
        return result
