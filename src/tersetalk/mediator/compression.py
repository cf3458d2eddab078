"""Stage 1: compress a message to a token budget, recursively, with early stop.

The engine counts tokens with a configurable tokenizer. Over budget, it asks the
compressor for a shorter text, and asks again while the result is still over
budget and fewer than ``recursion_limit`` passes were made. It stops early when a
pass saves less than ``min_reduction`` of its input. A pass whose output is not
shorter (or is empty) is logged and rejected, so the final text never has more
tokens than the original: compression can only help or do nothing.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from tersetalk.mediator.errors import CompressionError, MediatorConfigError, MediatorError
from tersetalk.mediator.events import EventEmitter, NullEmitter, PipelineEvent, PipelineEventPayload

__all__ = [
    "CompressionEngine",
    "CompressionPass",
    "CompressionResult",
    "Compressor",
    "TokenCounter",
    "make_token_counter",
]

log = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]

#: why compression stopped
STOP_REASONS = ("disabled", "within_budget", "budget_met", "recursion_limit", "no_reduction")


class Compressor(ABC):
    """Turns a text into a shorter one. Implementations are swapped by config only."""

    name: str = "compressor"

    @abstractmethod
    def compress(self, text: str, target_tokens: int | None = None) -> str:
        """A shorter version of ``text``; ``target_tokens`` is a hint, not a promise."""

    def describe(self) -> dict:
        return {"name": self.name}

    def pass_notes(self) -> dict:
        """Facts about the most recent :meth:`compress` call that belong in the pass
        log, e.g. ``{"input_truncated": True, ...}`` when the compressor could only read
        part of its input. Empty by default; the engine copies it into the pass."""
        return {}


def make_token_counter(name: str, client=None) -> TokenCounter:
    """``cl100k_base`` / ``o200k_base`` (tiktoken, offline) or ``model`` (the client's own)."""
    if name == "model":
        if client is None:
            raise MediatorConfigError(
                "compression.tokenizer=model needs a model client; use cl100k_base instead"
            )
        return client.count_tokens
    if name in ("cl100k_base", "o200k_base"):
        from tersetalk.core.tokens import count_tokens

        return lambda text: count_tokens(text, name)
    raise MediatorConfigError(
        f"compression.tokenizer: unknown tokenizer {name!r}; use cl100k_base, o200k_base or model"
    )


@dataclass(frozen=True)
class CompressionPass:
    """One pass: its input and output sizes, ratio = output / input, and whether it was kept.

    ``input_truncated`` says the compressor saw only a prefix of its input (its
    context window is shorter than the text), so the output summarises that prefix;
    ``notes`` holds the compressor's details (e.g. how many of its tokens it kept).
    """

    index: int
    input_tokens: int
    output_tokens: int
    ratio: float
    accepted: bool
    input_truncated: bool = False
    notes: dict = field(default_factory=dict, hash=False, compare=True)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class CompressionResult:
    """What stage 1 returns: the final text, its sizes, the passes and why it stopped."""

    text: str
    original_tokens: int
    final_tokens: int
    passes: int
    log: list[CompressionPass] = field(default_factory=list)
    stop_reason: str = "within_budget"
    compressor: str = ""

    @property
    def total_ratio(self) -> float:
        return self.final_tokens / self.original_tokens if self.original_tokens else 1.0

    @property
    def input_truncated(self) -> bool:
        """Did any pass feed the compressor more than it could read?"""
        return any(p.input_truncated for p in self.log)

    def as_dict(self) -> dict:
        return {
            "passes": [p.as_dict() for p in self.log],
            "n_passes": self.passes,
            "final_text": self.text,
            "final_tokens": self.final_tokens,
            "original_tokens": self.original_tokens,
            "total_ratio": round(self.total_ratio, 6),
            "stop_reason": self.stop_reason,
            "compressor": self.compressor,
            "input_truncated": self.input_truncated,
        }


class CompressionEngine:
    """Recursive compression to a budget (stage 1)."""

    def __init__(
        self,
        compressor: Compressor,
        count_tokens: TokenCounter,
        token_budget: int,
        recursion_limit: int,
        min_reduction: float = 0.05,
        emitter: EventEmitter | None = None,
    ) -> None:
        if token_budget < 1:
            raise MediatorConfigError(
                f"compression.token_budget must be a positive integer, got {token_budget}"
            )
        if recursion_limit < 1:
            raise MediatorConfigError(
                f"compression.recursion_limit must be a positive integer, got {recursion_limit}"
            )
        if not 0 <= min_reduction < 1:
            raise MediatorConfigError(
                f"compression.min_reduction must be in [0, 1), got {min_reduction}"
            )
        self.compressor = compressor
        self.count_tokens = count_tokens
        self.token_budget = token_budget
        self.recursion_limit = recursion_limit
        self.min_reduction = min_reduction
        self.emitter = emitter or NullEmitter()

    def _emit(self, event: PipelineEvent, message_id: str, **data) -> None:
        try:
            self.emitter.emit(PipelineEventPayload(event, message_id, data))
        except Exception as exc:  # noqa: BLE001 - observers never stop a message
            log.warning("event emitter failed on %s: %s", event.value, exc)

    def _pass_notes(self, name: str) -> dict:
        getter = getattr(self.compressor, "pass_notes", None)
        if getter is None:  # a duck-typed compressor without the base class
            return {}
        notes = getter()
        if not isinstance(notes, dict):
            raise CompressionError(f"compressor {name!r} returned pass notes that are not a dict")
        return dict(notes)

    def compress_to_budget(self, text: str, message_id: str = "") -> CompressionResult:
        original = self.count_tokens(text)
        name = getattr(self.compressor, "name", type(self.compressor).__name__)
        self._emit(PipelineEvent.COMPRESSION_START, message_id, tokens=original,
                   budget=self.token_budget, compressor=name)  # fmt: skip
        current, tokens = text, original
        passes: list[CompressionPass] = []
        if original <= self.token_budget:
            reason = "within_budget"
        else:
            while True:
                if len(passes) >= self.recursion_limit:
                    reason = "recursion_limit"
                    break
                try:
                    out = self.compressor.compress(current, target_tokens=self.token_budget)
                except MediatorError:
                    raise
                except Exception as exc:
                    raise CompressionError(
                        f"compressor {name!r} failed on pass {len(passes) + 1} "
                        f"({type(exc).__name__}: {exc}); check the compressor's model, or set "
                        "compression.compressor to another implementation"
                    ) from exc
                if not isinstance(out, str):
                    raise CompressionError(
                        f"compressor {name!r} returned {type(out).__name__}, not text"
                    )
                notes = self._pass_notes(name)
                out_tokens = self.count_tokens(out) if out.strip() else 0
                accepted = bool(out.strip()) and out_tokens < tokens
                step = CompressionPass(
                    index=len(passes) + 1,
                    input_tokens=tokens,
                    output_tokens=out_tokens,
                    ratio=round(out_tokens / tokens, 6) if tokens else 1.0,
                    accepted=accepted,
                    input_truncated=bool(notes.get("input_truncated", False)),
                    notes=notes,
                )
                if step.input_truncated:
                    log.warning("message %s: compressor %r read only part of pass %d's input "
                                "(%s)", message_id, name, step.index, notes)  # fmt: skip
                passes.append(step)
                self._emit(PipelineEvent.COMPRESSION_PASS, message_id, **step.as_dict())
                if not accepted:
                    reason = "no_reduction"
                    break
                saved = (tokens - out_tokens) / tokens
                current, tokens = out, out_tokens
                if tokens <= self.token_budget:
                    reason = "budget_met"
                    break
                if saved < self.min_reduction:
                    reason = "no_reduction"
                    break
        result = CompressionResult(text=current, original_tokens=original, final_tokens=tokens,
                                   passes=len(passes), log=passes, stop_reason=reason,
                                   compressor=name)  # fmt: skip
        self._emit(PipelineEvent.COMPRESSION_COMPLETE, message_id, original_tokens=original,
                   final_tokens=tokens, passes=len(passes), stop_reason=reason)  # fmt: skip
        return result
