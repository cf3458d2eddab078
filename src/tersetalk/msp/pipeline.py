"""encode -> signal -> decode -> judge, with metrics.

``compression_ratio = signal_tokens / original_tokens`` where the signal is counted
in the wire form that travels (``core`` by default). Decoding and judging are
optional (``judge=None``): a system that only needs the signal skips the extra
model call, and then the decoded text and the verdict are absent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from tersetalk.msp.codec import MSPDecoder, MSPEncoder
from tersetalk.msp.errors import EncoderError
from tersetalk.msp.judge import SemanticJudge
from tersetalk.msp.schema import PipelineMetrics, PipelineResult

__all__ = ["MSPPipeline", "compression_ratio"]


def compression_ratio(signal_tokens: int, original_tokens: int) -> float:
    """Signal tokens per original token (below 1 means the signal is smaller)."""
    if original_tokens <= 0:
        raise EncoderError("Input cannot be empty: the original has no tokens")
    return signal_tokens / original_tokens


class MSPPipeline:
    def __init__(
        self,
        encoder: MSPEncoder,
        decoder: MSPDecoder | None = None,
        judge: SemanticJudge | None = None,
        count_tokens: Callable[[str], int] | None = None,
        tokenizer: str = "cl100k_base",
        wire: str = "core",
    ) -> None:
        if judge is not None and decoder is None:
            raise ValueError("the semantic judge compares decoded text: give a decoder too")
        if count_tokens is None:
            from tersetalk.core.tokens import count_tokens as tiktoken_count

            def count_tokens(text: str) -> int:
                return tiktoken_count(text, tokenizer)

        self.encoder, self.decoder, self.judge = encoder, decoder, judge
        self.count_tokens = count_tokens
        self.tokenizer = tokenizer
        self.wire = wire

    def process(
        self,
        text: str,
        style: str = "professional",
        *,
        trace_id: str | None = None,
        parent_id: str | None = None,
        timestamp: datetime | None = None,
    ) -> PipelineResult:
        t0 = time.perf_counter()
        signal = self.encoder.encode(text, trace_id=trace_id, parent_id=parent_id,
                                     timestamp=timestamp)  # fmt: skip
        t1 = time.perf_counter()
        decoded = self.decoder.decode(signal, style) if self.decoder is not None else None
        t2 = time.perf_counter()
        verdict = self.judge.evaluate(text, decoded, signal) if self.judge is not None else None
        t3 = time.perf_counter()
        signal_text = signal.wire(self.wire)
        original_tokens = self.count_tokens(text)
        signal_tokens = self.count_tokens(signal_text)
        metrics = PipelineMetrics(
            original_tokens=original_tokens,
            signal_tokens=signal_tokens,
            decoded_tokens=self.count_tokens(decoded) if decoded is not None else 0,
            compression_ratio=compression_ratio(signal_tokens, original_tokens),
            latency_ms=(t3 - t0) * 1000.0,
            encode_ms=(t1 - t0) * 1000.0,
            decode_ms=(t2 - t1) * 1000.0,
            judge_ms=(t3 - t2) * 1000.0,
            tokenizer=self.tokenizer,
        )
        return PipelineResult(original_text=text, signal=signal, signal_text=signal_text,
                              wire=self.wire, decoded_text=decoded, judge=verdict,
                              metrics=metrics, trace_id=signal.trace_id,
                              timestamp=signal.timestamp)  # fmt: skip
