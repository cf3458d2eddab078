"""TerseTalk-JSONL: typed one-letter lines, soft caps with overflow to memory.

Pure Python (pydantic only): no tokenizer or model is imported here. Token counts
default to :func:`approx_token_count`; pass a real counter as ``count_tokens``.

Wire format, one JSON array per line::

    ["r","M"]  ["g","subgoal"]  ["f","fact","M#3"]  ["u","assumption"]  ["p","step"]
    ["q","W","question"]  ["d","M#3"]  ["v","A"]  ["o","summary","M#4","extractive"]
    ["t","free text"]  ["x","key","value"]
"""

from .brief import encode_brief
from .caps import (
    DEFAULT_CAPS,
    CapCounters,
    CapResult,
    CompressHook,
    apply_caps,
    cap_line,
    validate_caps,
)
from .codec import parse_line_strict, parse_strict, serialize, serialize_line, validate_strict
from .errors import (
    CapConfigError,
    EncodingError,
    InputTypeError,
    InvalidJSONError,
    LineShapeError,
    NormalizationError,
    PayloadError,
    ProtocolError,
    StreamClosedError,
    SummarizerError,
    UnknownRefError,
    UnknownTagError,
)
from .lines import (
    LINE_TYPES,
    AssumptionLine,
    ContextLine,
    DeltaLine,
    FactLine,
    GoalLine,
    Line,
    LineBase,
    OverflowLine,
    PlanLine,
    QuestionLine,
    RoleLine,
    TextLine,
    VerdictLine,
    line_adapter,
    line_from_array,
)
from .memory import (
    DEFAULT_MAX_ENTRIES,
    DEREF_POLICIES,
    DerefPolicy,
    DerefResult,
    Memory,
    MemoryEntry,
    MemoryStats,
    dereference,
    expand_overflow,
    requested_refs,
    structural_refs,
)
from .normalize import normalize_obj
from .prose import jsonl_to_prose, line_to_prose
from .repair import REPAIR_KINDS, LenientMachine, ParseResult, parse_lenient
from .stream import StreamReader
from .summarize import (
    KNOWN_SUMMARIZERS,
    Summarizer,
    available_summarizers,
    extractive_summary,
    get_summarizer,
    register_summarizer,
    split_sentences,
    summarize,
    truncate_to_tokens,
    unregister_summarizer,
)
from .tags import CAPPABLE_TAGS, ROLES, TAGS, VERDICTS
from .tokens import TokenCounter, approx_token_count

__all__ = [
    "CAPPABLE_TAGS",
    "DEFAULT_CAPS",
    "DEFAULT_MAX_ENTRIES",
    "DEREF_POLICIES",
    "KNOWN_SUMMARIZERS",
    "LINE_TYPES",
    "REPAIR_KINDS",
    "ROLES",
    "TAGS",
    "VERDICTS",
    "AssumptionLine",
    "CapConfigError",
    "CapCounters",
    "CapResult",
    "CompressHook",
    "ContextLine",
    "DeltaLine",
    "DerefPolicy",
    "DerefResult",
    "EncodingError",
    "FactLine",
    "GoalLine",
    "InputTypeError",
    "InvalidJSONError",
    "LenientMachine",
    "Line",
    "LineBase",
    "LineShapeError",
    "Memory",
    "MemoryEntry",
    "MemoryStats",
    "NormalizationError",
    "OverflowLine",
    "ParseResult",
    "PayloadError",
    "PlanLine",
    "ProtocolError",
    "QuestionLine",
    "RoleLine",
    "StreamClosedError",
    "StreamReader",
    "Summarizer",
    "SummarizerError",
    "TextLine",
    "TokenCounter",
    "UnknownRefError",
    "UnknownTagError",
    "VerdictLine",
    "apply_caps",
    "approx_token_count",
    "available_summarizers",
    "cap_line",
    "dereference",
    "encode_brief",
    "expand_overflow",
    "extractive_summary",
    "get_summarizer",
    "jsonl_to_prose",
    "line_adapter",
    "line_from_array",
    "line_to_prose",
    "normalize_obj",
    "parse_lenient",
    "parse_line_strict",
    "parse_strict",
    "register_summarizer",
    "requested_refs",
    "serialize",
    "serialize_line",
    "split_sentences",
    "structural_refs",
    "summarize",
    "truncate_to_tokens",
    "unregister_summarizer",
    "validate_caps",
    "validate_strict",
]
