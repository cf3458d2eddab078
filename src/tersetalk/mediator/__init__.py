"""The mediator of Mediated Minimal-Signaling: Agent A -> mediator -> Agent B.

Stage 1 compresses a message to a token budget (recursively, with early stop);
stage 2 turns it into typed semantic keys; an optional judge checks the keys
against the original. Every stage emits events and each message leaves one JSONL
trace record. See :func:`build_mediator` and :class:`Mediator`.
"""

from tersetalk.mediator.compression import (
    CompressionEngine,
    CompressionPass,
    CompressionResult,
    Compressor,
    make_token_counter,
)
from tersetalk.mediator.config import (
    MediatorConfig,
    MediatorFile,
    load_mediator_config,
    load_mediator_file,
    parse_mediator_config,
    parse_mediator_file,
)
from tersetalk.mediator.errors import (
    CompressionError,
    CompressorUnavailableError,
    ExtractionError,
    JudgeError,
    KeyValidationError,
    MediatorConfigError,
    MediatorError,
    PipelineError,
)
from tersetalk.mediator.events import (
    CollectingEmitter,
    EventBus,
    EventEmitter,
    NullEmitter,
    PipelineEvent,
    PipelineEventPayload,
)
from tersetalk.mediator.extractors import (
    ExtractionResult,
    LLMExtractor,
    RuleBasedExtractor,
    SemanticKeyExtractor,
)
from tersetalk.mediator.judges import EmbeddingJudge, Judge, JudgeResult, LLMJudge
from tersetalk.mediator.keys import (
    SCHEMA_VERSION,
    KeyType,
    SemanticKey,
    SemanticKeySet,
    keys_from_json,
    keys_to_json,
    render_keys,
)
from tersetalk.mediator.pipeline import Mediator, MediatorResult, aggregate_stats, build_mediator
from tersetalk.mediator.trace import TraceWriter, read_trace, trace_problems

__all__ = [
    "SCHEMA_VERSION",
    "CollectingEmitter",
    "CompressionEngine",
    "CompressionError",
    "CompressionPass",
    "CompressionResult",
    "Compressor",
    "CompressorUnavailableError",
    "EmbeddingJudge",
    "EventBus",
    "EventEmitter",
    "ExtractionError",
    "ExtractionResult",
    "Judge",
    "JudgeError",
    "JudgeResult",
    "KeyType",
    "KeyValidationError",
    "LLMExtractor",
    "LLMJudge",
    "Mediator",
    "MediatorConfig",
    "MediatorConfigError",
    "MediatorError",
    "MediatorFile",
    "MediatorResult",
    "NullEmitter",
    "PipelineError",
    "PipelineEvent",
    "PipelineEventPayload",
    "RuleBasedExtractor",
    "SemanticKey",
    "SemanticKeyExtractor",
    "SemanticKeySet",
    "TraceWriter",
    "aggregate_stats",
    "build_mediator",
    "keys_from_json",
    "keys_to_json",
    "load_mediator_config",
    "load_mediator_file",
    "make_token_counter",
    "parse_mediator_config",
    "parse_mediator_file",
    "read_trace",
    "render_keys",
    "trace_problems",
]
