"""The mediator: Agent A's message -> compression -> semantic keys -> judge -> Agent B.

:meth:`Mediator.process` never loses a message. Either every enabled stage ran and
the result carries what Agent B receives, or the failing stage is logged, emitted
as ``pipeline_error``, written to the trace and returned in ``result.error`` (a
judge failure is recoverable: the result is delivered with the failure in
``result.warnings``). Callers that prefer exceptions use :meth:`MediatorResult.raise_for_error`.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tersetalk.mediator.compression import (
    CompressionEngine,
    CompressionResult,
    Compressor,
    TokenCounter,
    make_token_counter,
)
from tersetalk.mediator.config import MediatorConfig
from tersetalk.mediator.errors import (
    CompressionError,
    ExtractionError,
    JudgeError,
    MediatorConfigError,
    MediatorError,
    PipelineError,
)
from tersetalk.mediator.events import EventEmitter, NullEmitter, PipelineEvent, PipelineEventPayload
from tersetalk.mediator.extractors import ExtractionResult, SemanticKeyExtractor
from tersetalk.mediator.judges import Judge, JudgeResult
from tersetalk.mediator.keys import render_keys
from tersetalk.mediator.trace import TraceWriter

__all__ = ["Mediator", "MediatorResult", "aggregate_stats", "build_mediator"]

log = logging.getLogger(__name__)


@dataclass
class MediatorResult:
    """Everything one message produced, stage by stage."""

    message_id: str
    original_text: str
    original_tokens: int
    compression: CompressionResult | None = None
    extraction: ExtractionResult | None = None
    judge: JudgeResult | None = None
    delivered_text: str = ""
    delivered_tokens: int = 0
    error: PipelineError | None = None
    warnings: list[PipelineError] = field(default_factory=list)
    duration_ms: float = 0.0
    timestamp: str = ""
    stages: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> MediatorResult:
        if self.error is not None:
            exc = {"compression": CompressionError, "extraction": ExtractionError,
                   "judge": JudgeError}.get(self.error.stage, MediatorError)  # fmt: skip
            if self.error.server_fault:  # keep it recognisable to the runner
                from tersetalk.models import ModelUnavailableError, TransientModelError

                kind = TransientModelError if self.error.transient else ModelUnavailableError
                raise exc(f"message {self.message_id}: {self.error}") from kind(self.error.message)
            raise exc(f"message {self.message_id}: {self.error}")
        return self

    def trace_record(self) -> dict[str, Any]:
        """The JSONL trace record of this message (the design's trace schema)."""
        return {
            "timestamp": self.timestamp,
            "message_id": self.message_id,
            "original": {"text": self.original_text, "tokens": self.original_tokens},
            "compression": self.compression.as_dict() if self.compression else None,
            "extraction": self.extraction.as_dict() if self.extraction else None,
            "judge": self.judge.as_dict() if self.judge else None,
            "delivered": {"text": self.delivered_text, "tokens": self.delivered_tokens},
            "duration_ms": round(self.duration_ms, 3),
            "error": self.error.as_dict() if self.error else None,
            "warnings": [w.as_dict() for w in self.warnings],
            "stages": dict(self.stages),
        }


class Mediator:
    """Runs the configured stages on each message; components are injected."""

    def __init__(
        self,
        config: MediatorConfig,
        compressor: Compressor | None,
        extractor: SemanticKeyExtractor | None,
        judge: Judge | None,
        count_tokens: TokenCounter,
        emitter: EventEmitter | None = None,
        trace_writer: TraceWriter | None = None,
    ) -> None:
        c = config
        if c.compression.enabled and compressor is None:
            raise MediatorConfigError("compression is enabled but no compressor was given")
        if c.semantic_keys.enabled and extractor is None:
            raise MediatorConfigError("semantic_keys is enabled but no extractor was given")
        if c.judge.enabled and judge is None:
            raise MediatorConfigError("judge is enabled but no judge was given")
        if c.judge.enabled and not c.semantic_keys.enabled:
            raise MediatorConfigError(
                "judge.enabled=true needs semantic_keys.enabled=true (the judge checks the "
                "keys); enable semantic_keys or disable the judge"
            )
        self.config = config
        self.compressor, self.extractor, self.judge = compressor, extractor, judge
        self.count_tokens = count_tokens
        self.emitter = emitter or NullEmitter()
        self.trace_writer = trace_writer
        self.deliver_metadata = config.deliver_metadata
        self.engine = (
            CompressionEngine(
                compressor,
                count_tokens,
                c.compression.token_budget,
                c.compression.recursion_limit,
                c.compression.min_reduction,
                self.emitter,
            )  # fmt: skip
            if compressor is not None
            else None
        )

    def _emit(self, event: PipelineEvent, message_id: str, **data: Any) -> None:
        try:
            self.emitter.emit(PipelineEventPayload(event, message_id, data))
        except Exception as exc:  # noqa: BLE001 - observers never stop a message
            log.warning("event emitter failed on %s: %s", event.value, exc)

    def render_delivery(self, comp: CompressionResult, extraction: ExtractionResult | None) -> str:
        """What Agent B receives: the keys (with schema version and compression
        statistics), or the compressed text when extraction is off."""
        if extraction is None:
            return comp.text
        body = render_keys(extraction.keys)
        if not self.deliver_metadata:
            return body
        head = (f"[keys v{extraction.schema_version}; {comp.original_tokens}->"
                f"{comp.final_tokens} tokens, {comp.passes} passes]")  # fmt: skip
        return f"{head}\n{body}" if body else head

    def process(self, message: str, message_id: str | None = None) -> MediatorResult:
        """One message through every enabled stage; see the module docstring for failures."""
        t0 = time.perf_counter()
        mid = message_id or str(uuid.uuid4())
        c = self.config
        stages = {"compression": c.compression.enabled, "extraction": c.semantic_keys.enabled,
                  "judge": c.judge.enabled}  # fmt: skip
        result = MediatorResult(message_id=mid, original_text=message, original_tokens=0,
                                timestamp=datetime.now(UTC).isoformat(), stages=stages)  # fmt: skip
        stage = "input"
        try:
            if not isinstance(message, str):
                raise MediatorError(f"message must be text, got {type(message).__name__}")
            result.original_tokens = self.count_tokens(message)
            self._emit(PipelineEvent.MESSAGE_RECEIVED, mid, tokens=result.original_tokens,
                       chars=len(message))  # fmt: skip
            stage = "compression"
            if c.compression.enabled:
                assert self.engine is not None
                comp = self.engine.compress_to_budget(message, mid)
            else:
                comp = CompressionResult(text=message, original_tokens=result.original_tokens,
                                         final_tokens=result.original_tokens, passes=0,
                                         stop_reason="disabled", compressor="none")  # fmt: skip
            result.compression = comp
            stage = "extraction"
            if c.semantic_keys.enabled:
                assert self.extractor is not None
                self._emit(PipelineEvent.EXTRACTION_START, mid, tokens=comp.final_tokens,
                           extractor=getattr(self.extractor, "name", "?"))  # fmt: skip
                extraction = self.extractor.extract(comp.text)
                result.extraction = extraction
                self._emit(PipelineEvent.EXTRACTION_COMPLETE, mid, n_keys=len(extraction.keys),
                           schema_version=extraction.schema_version)  # fmt: skip
            stage = "judge"
            if c.judge.enabled and result.extraction is not None:
                assert self.judge is not None
                self._emit(PipelineEvent.JUDGE_START, mid, judge=getattr(self.judge, "name", "?"))
                try:
                    result.judge = self.judge.evaluate(message, result.extraction.keys)
                    self._emit(PipelineEvent.JUDGE_COMPLETE, mid, **result.judge.as_dict())
                except Exception as exc:  # noqa: BLE001 - the judge is optional: warn, go on
                    warn = PipelineError.from_exception("judge", exc, recoverable=True)
                    if warn.server_fault:
                        raise  # a server fault is not "no judge": the example fails
                    result.warnings.append(warn)
                    log.warning("message %s: %s (delivered without a judge result)", mid, warn)
                    self._emit(PipelineEvent.PIPELINE_ERROR, mid, **warn.as_dict())
            stage = "delivery"
            result.delivered_text = self.render_delivery(comp, result.extraction)
            result.delivered_tokens = self.count_tokens(result.delivered_text)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, never dropped
            result.error = PipelineError.from_exception(stage, exc, recoverable=False)
            log.error("message %s: %s", mid, result.error)
            self._emit(PipelineEvent.PIPELINE_ERROR, mid, **result.error.as_dict())
        result.duration_ms = (time.perf_counter() - t0) * 1000.0
        if result.error is None:
            self._emit(PipelineEvent.PIPELINE_COMPLETE, mid,
                       original_tokens=result.original_tokens,
                       delivered_tokens=result.delivered_tokens,
                       duration_ms=round(result.duration_ms, 3))  # fmt: skip
        if self.trace_writer is not None:
            try:
                self.trace_writer.write(result.trace_record())
            except OSError as exc:
                log.error("could not write the trace of message %s to %s: %s", mid,
                          self.trace_writer.path, exc)  # fmt: skip
        return result


def build_mediator(
    config: MediatorConfig,
    client=None,
    gen=None,
    emitter: EventEmitter | None = None,
    trace_writer: TraceWriter | None = None,
    compressor: Compressor | None = None,
    extractor: SemanticKeyExtractor | None = None,
    judge: Judge | None = None,
) -> Mediator:
    """A mediator with the components the config names (any may be injected instead).

    ``client`` is the model backend used by the model summarizer, the LLM extractor
    and the LLM judge; ``gen`` their base generation settings (temperature, seed).
    """
    from tersetalk.mediator.compressors import make_compressor
    from tersetalk.mediator.extractors import make_extractor
    from tersetalk.mediator.judges import make_judge

    count = make_token_counter(config.compression.tokenizer, client)
    if compressor is None and config.compression.enabled:
        compressor = make_compressor(config.compression, client, gen, count)
    if extractor is None and config.semantic_keys.enabled:
        extractor = make_extractor(config.semantic_keys, client, gen)
    if judge is None and config.judge.enabled:
        judge = make_judge(config.judge, client, gen)
    if trace_writer is None and config.trace_path() is not None:
        trace_writer = TraceWriter(config.trace_path())
    return Mediator(config, compressor, extractor, judge, count, emitter, trace_writer)


def aggregate_stats(results: list[MediatorResult]) -> dict[str, Any]:
    """Totals over messages; the aggregate ratio is sum(final) / sum(original)."""
    done = [r for r in results if r.compression is not None]
    total_orig = sum(r.compression.original_tokens for r in done)
    total_final = sum(r.compression.final_tokens for r in done)
    judged = [r.judge for r in results if r.judge is not None]
    return {
        "messages": len(results),
        "failed": sum(1 for r in results if r.error is not None),
        "total_original_tokens": total_orig,
        "total_final_tokens": total_final,
        "aggregate_ratio": total_final / total_orig if total_orig else 1.0,
        "mean_ratio": (sum(r.compression.total_ratio for r in done) / len(done)) if done else 1.0,
        "mean_passes": (sum(r.compression.passes for r in done) / len(done)) if done else 0.0,
        "judged": len(judged),
        "judge_passed": sum(1 for j in judged if j.passed),
    }
