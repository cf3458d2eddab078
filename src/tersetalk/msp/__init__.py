"""The Minimal Signaling Protocol: natural language <-> a strict Minimal Signal.

An encoder turns a message into ``{intent, target, params, constraints, state,
priority}`` (plus version, trace id, timestamp, parent id) with constrained
structured output; a decoder turns a signal back into prose in a requested style;
a semantic judge compares original and decoded text with MiniLM. Remote
providers go through a rate limiter with retries and backoff.
"""

from tersetalk.msp.codec import MSPDecoder, MSPEncoder
from tersetalk.msp.config import MSPConfig, load_msp_config, parse_msp_config
from tersetalk.msp.errors import (
    DecoderError,
    EncoderError,
    JudgeError,
    MSPConfigError,
    MSPError,
    RateLimitError,
)
from tersetalk.msp.judge import DEFAULT_THRESHOLD, SemanticJudge
from tersetalk.msp.pipeline import MSPPipeline, compression_ratio
from tersetalk.msp.ratelimit import RateLimitConfig, RateLimitedClient, RateLimiter
from tersetalk.msp.schema import (
    INTENTS,
    PRIORITIES,
    MinimalSignal,
    MSPJudgeResult,
    PipelineMetrics,
    PipelineResult,
    SignalDraft,
    deterministic_trace_id,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "INTENTS",
    "PRIORITIES",
    "DecoderError",
    "EncoderError",
    "JudgeError",
    "MSPConfig",
    "MSPConfigError",
    "MSPDecoder",
    "MSPEncoder",
    "MSPError",
    "MSPJudgeResult",
    "MSPPipeline",
    "MinimalSignal",
    "PipelineMetrics",
    "PipelineResult",
    "RateLimitConfig",
    "RateLimitError",
    "RateLimitedClient",
    "RateLimiter",
    "SemanticJudge",
    "SignalDraft",
    "compression_ratio",
    "deterministic_trace_id",
    "load_msp_config",
    "parse_msp_config",
]
