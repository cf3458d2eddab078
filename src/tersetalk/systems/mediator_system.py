"""``mediator``: the Manager's message goes through the mediator before the Worker sees it.

Manager -> mediator (compress to a token budget, recursively; extract typed
semantic keys; optionally judge them) -> Worker. The Worker and the Critic then
talk as in ``freeform``, with the mediated message as the brief. The mediator's
own model calls (summarizer, LLM extractor, LLM judge) are logged as calls of
the roles ``mediator_compress`` / ``mediator_extract`` / ``mediator_judge``, so
usage and timing include them. Records carry the passes, the keys and the judge
result in ``counters`` (numeric ones also as ``c_mediator_*`` columns).

In a workflow run the mediator also writes its JSONL trace (the design's trace
schema, one record per mediated message, wall-clock fields included) next to the
run file: ``results/<model>/runs/<task>/mediator/<variant>.parquet`` gets
``<variant>.trace.jsonl`` (:func:`trace_file`). A fresh run starts the file over; a
resumed run appends to it, so each finished example has exactly one record.
``trace: false`` turns it off; ``trace_dir`` sends it to a folder of one's own
instead. ``metadata: true`` (variant ``with_metadata``) delivers the design's
metadata line to Agent B before the keys.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.context import RunContext
from tersetalk.agents.engine import Dialogue
from tersetalk.agents.roles import Brief, render_brief
from tersetalk.encoders.prepare import prepared_compressor_inputs
from tersetalk.mediator import (
    Mediator,
    MediatorConfig,
    TraceWriter,
    make_token_counter,
    parse_mediator_config,
)
from tersetalk.mediator.compressors import make_compressor
from tersetalk.mediator.extractors import make_extractor
from tersetalk.mediator.judges import make_judge
from tersetalk.mediator.pipeline import MediatorResult
from tersetalk.models.recording import CallRecorder
from tersetalk.systems import register

#: fixed namespace: message ids derive from (seed, example id), never from the clock
_NS = uuid.UUID("6f1c7d2e-3a7b-4f5e-9c1d-2b8e4a6f0c11")


class MediatorSettings(BaseModel):
    """The knobs of one ``mediator`` variant (``systems.mediator.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(64, gt=0, description="stage-1 token budget (cl100k_base by default)")
    recursion_limit: int = Field(3, gt=0, description="most compression passes per message")
    min_reduction: float = Field(0.05, ge=0.0, lt=1.0)
    compressor: Literal["model", "distilbart", "llmlingua", "truncate"] = "model"
    tokenizer: Literal["cl100k_base", "o200k_base", "model"] = "cl100k_base"
    summary_max_tokens: int = Field(96, gt=0)
    distilbart_path: str | None = None
    llmlingua: dict[str, Any] = Field(default_factory=dict)
    compression: bool = True
    extraction: bool = True
    extractor: Literal["rule", "llm"] = "rule"
    judge: bool = True
    judge_kind: Literal["embedding", "llm"] = "embedding"
    judge_threshold: float = Field(0.5, ge=0.0, le=1.0)
    #: prefix the Worker's message with schema version and compression statistics
    #: (the design's metadata; about 15 tokens per message)
    metadata: bool = False
    #: error: a failing stage makes the example an error row; passthrough: the Worker
    #: gets the original brief and the record says the mediator failed
    on_error: Literal["error", "passthrough"] = "error"
    #: write the JSONL trace next to the run file (``<variant>.trace.jsonl``)
    trace: bool = True
    #: a folder for ``mediator_trace.jsonl`` instead (e.g. for ``tersetalk mediator``)
    trace_dir: str | None = None

    @model_validator(mode="after")
    def _judge_needs_keys(self) -> MediatorSettings:
        if self.judge and not self.extraction:
            raise ValueError("judge: true needs extraction: true (the judge checks the keys)")
        return self

    def to_config(self, trace_file: Path | None = None) -> MediatorConfig:
        """The mediator's configuration; ``trace_file`` is where the run's trace goes
        when no ``trace_dir`` is set."""
        trace: dict[str, Any] = {"dir": self.trace_dir}
        if self.trace_dir is None and trace_file is not None:
            trace = {"dir": str(trace_file.parent), "filename": trace_file.name}
        return parse_mediator_config(
            {
                "compression": {
                    "enabled": self.compression, "token_budget": self.budget,
                    "recursion_limit": self.recursion_limit,
                    "min_reduction": self.min_reduction, "tokenizer": self.tokenizer,
                    "compressor": self.compressor,
                    "summary_max_tokens": self.summary_max_tokens,
                    "distilbart_path": self.distilbart_path, "llmlingua": self.llmlingua,
                },
                "semantic_keys": {"enabled": self.extraction, "extractor": self.extractor},
                "judge": {"enabled": self.judge, "kind": self.judge_kind,
                          "threshold": self.judge_threshold},
                "trace": trace,
                "deliver_metadata": self.metadata,
            },
            where="systems.mediator variant",
        )  # fmt: skip


def trace_file(run_out: str | Path) -> Path:
    """The trace beside a run file: ``<name>.parquet`` -> ``<name>.trace.jsonl``."""
    run_out = Path(run_out)
    return run_out.with_name(run_out.name.removesuffix(".parquet") + ".trace.jsonl")


def _run_trace(settings: MediatorSettings, ctx: RunContext) -> Path | None:
    """The run's trace file (started over unless the run resumes), or None."""
    run_out = ctx.shared.get("run_out")
    if not settings.trace or settings.trace_dir is not None or run_out is None:
        return None
    path = trace_file(run_out)
    if not ctx.shared.get("run_resumed", False):
        path.unlink(missing_ok=True)  # a fresh run: no records of an earlier one
    return path


def _build(settings: MediatorSettings, ctx: RunContext) -> tuple[Mediator, CallRecorder]:
    cfg = settings.to_config(_run_trace(settings, ctx))
    rec = CallRecorder(ctx.client, "mediator")
    count = make_token_counter(cfg.compression.tokenizer, ctx.client)
    gen = ctx.gen
    compressor = (make_compressor(cfg.compression, rec.with_role("mediator_compress"), gen, count)
                  if cfg.compression.enabled else None)  # fmt: skip
    extractor = (make_extractor(cfg.semantic_keys, rec.with_role("mediator_extract"), gen)
                 if cfg.semantic_keys.enabled else None)  # fmt: skip
    judge = (make_judge(cfg.judge, rec.with_role("mediator_judge"), gen)
             if cfg.judge.enabled else None)  # fmt: skip
    writer = TraceWriter(cfg.trace_path()) if cfg.trace_path() else None
    return Mediator(cfg, compressor, extractor, judge, count, trace_writer=writer), rec


def message_id(seed: int, example_id: str) -> str:
    """A stable id for the Manager -> Worker message of one example."""
    return str(uuid.uuid5(_NS, f"{seed}/{example_id}/M-W"))


def counters_of(res) -> dict[str, Any]:
    """The deterministic record fields of one mediation (no clock, no durations)."""
    out: dict[str, Any] = {
        "mediator_message_id": res.message_id,
        "mediator_original_tokens": res.original_tokens,
        "mediator_error": str(res.error) if res.error else None,
        "mediator_warnings": [str(w) for w in res.warnings],
    }
    if res.compression is not None:
        c = res.compression
        out.update(
            mediator_passes=c.passes, mediator_final_tokens=c.final_tokens,
            mediator_ratio=round(c.total_ratio, 6), mediator_stop_reason=c.stop_reason,
            mediator_pass_log=[p.as_dict() for p in c.log],
            mediator_input_truncated=c.input_truncated,
        )  # fmt: skip
    if res.extraction is not None:
        e = res.extraction
        out.update(
            mediator_n_keys=len(e.keys), mediator_schema_version=e.schema_version,
            mediator_keys=[k.model_dump(mode="json") for k in e.keys],
            mediator_extractor_raw=e.raw_output,
        )  # fmt: skip
    if res.judge is not None:
        j = res.judge
        out.update(mediator_judge_passed=j.passed, mediator_judge_confidence=j.confidence,
                   mediator_judge_issues=list(j.issues))  # fmt: skip
    if res.error is None:
        out["mediator_delivered_tokens"] = res.delivered_tokens
    return out


class MediatorCodec(ProseCodec):
    """Prose, with the Manager's brief passed through the mediator first.

    The mediator's own model calls are logged when the brief is written, so they come
    first in the record's calls, before the Worker's.
    """

    result: MediatorResult | None = None

    def write_brief(self, brief: Brief) -> str:
        settings, ctx = self.settings, self.ctx
        mediator, rec = ctx.resource(
            "mediator:" + settings.model_dump_json(), lambda: _build(settings, ctx)
        )
        rec.drain()  # calls of an earlier example that failed are not this example's
        original = render_brief(brief)
        res = mediator.process(original, message_id(ctx.gen.seed, str(self.example["example_id"])))
        if res.error is not None and (settings.on_error == "error" or res.error.server_fault):
            res.raise_for_error()
        for role, call in rec.drain():
            self.conv.log_call(role, call)  # same call-log format as the agents' calls
        self.result = res
        return res.delivered_text if res.error is None else original

    def counters(self, d: Dialogue) -> dict[str, Any]:
        res = self.result
        return {**counters_of(res), "mediator_passthrough": res.error is not None}


def mediator_inputs(settings: MediatorSettings) -> dict[str, list[str]]:
    """The prepared LLMLingua folder when the mediator compresses with LLMLingua."""
    if settings.compression and settings.compressor == "llmlingua":
        return prepared_compressor_inputs([settings.llmlingua.get("model")])
    return {}


register("mediator", codec=MediatorCodec, settings=MediatorSettings, inputs=mediator_inputs)

__all__ = ["MediatorCodec", "MediatorSettings", "counters_of", "message_id", "trace_file"]
