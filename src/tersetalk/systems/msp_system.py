"""``msp``: the Manager's message travels as a Minimal Signal.

Manager -> encoder (constrained structured output) -> the signal's wire form is
what the Worker receives; the Worker and the Critic then talk as in ``freeform``.
With ``judge: true`` the signal is also decoded back to prose and the semantic
judge checks semantic adequacy as MSP's design defines it: MiniLM cosine of original
vs decoded at least the threshold (0.80 by default) and intent and target both
mentioned in the decoded text (``msp_judge_passed``; the parts are
``msp_similarity_passed``, ``msp_intent_present``, ``msp_target_present``).
Encoder and decoder calls are logged as ``msp_encode`` / ``msp_decode`` calls, so
their cost and latency are in the record's usage and ``calls`` columns. Records
carry the signal, the token counts, the compression ratio and the similarity in
``counters`` (numeric ones also as ``c_msp_*`` columns). Encode, decode, judge and
total latency are ``t_msp_*_ms`` counters, which records keep in ``counters_timing``.
The trace id derives from (seed, example id) and the wall-clock timestamp stays out
of the record.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tersetalk.agents.codecs.prose import ProseCodec
from tersetalk.agents.context import RunContext
from tersetalk.agents.engine import Dialogue
from tersetalk.agents.roles import Brief, render_brief
from tersetalk.models import (
    ModelClient,
    ModelEnvironmentError,
    TransientModelError,
    caused_by,
)
from tersetalk.models.ratelimit import under_cache
from tersetalk.models.recording import CallRecorder
from tersetalk.msp import (
    MSPDecoder,
    MSPEncoder,
    MSPError,
    MSPPipeline,
    RateLimitConfig,
    RateLimitedClient,
    SemanticJudge,
    deterministic_trace_id,
)
from tersetalk.systems import register


class MSPSettings(BaseModel):
    """The knobs of one ``msp`` variant (``systems.msp.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    #: core: {intent, target, params, constraints, state, priority};
    #: traced: core + version, trace_id (and parent_id)
    wire: Literal["core", "traced"] = "core"
    #: decode the signal and score it against the original (one more model call)
    judge: bool = True
    threshold: float = Field(0.80, ge=0.0, le=1.0)
    style: str = Field("professional", min_length=1)
    encoder_max_tokens: int = Field(320, gt=0)
    decoder_max_tokens: int = Field(96, gt=0)
    tokenizer: Literal["cl100k_base", "o200k_base"] = "cl100k_base"
    #: for remote providers with quotas (e.g. a free tier); null for the local model
    rate_limit: RateLimitConfig | None = None
    #: error: an encoder/decoder/judge failure makes the example an error row;
    #: passthrough: the Worker gets the original brief and the record says why
    on_error: Literal["error", "passthrough"] = "error"


def rate_limited(client: ModelClient, limits: RateLimitConfig | None) -> ModelClient:
    """``client`` behind MSP's rate limiter, *under* the call cache (cache hits cost no quota)."""
    return under_cache(client, limits, limited=RateLimitedClient)


def _build(settings: MSPSettings, ctx: RunContext) -> tuple[MSPPipeline, CallRecorder]:
    client = rate_limited(ctx.client, settings.rate_limit)
    rec = CallRecorder(client, "msp_encode")
    encoder = MSPEncoder(rec, ctx.gen, max_tokens=settings.encoder_max_tokens)
    decoder = judge = None
    if settings.judge:
        decoder = MSPDecoder(rec.with_role("msp_decode"), ctx.gen,
                             max_tokens=settings.decoder_max_tokens)  # fmt: skip
        judge = SemanticJudge(settings.threshold)
    pipeline = MSPPipeline(encoder, decoder, judge, tokenizer=settings.tokenizer,
                           wire=settings.wire)  # fmt: skip
    return pipeline, rec


def timing_counters_of(res) -> dict[str, float]:
    """Wall-clock times of one encoding, in ms.

    Named ``t_*`` so :func:`tersetalk.pipeline.records.build_record` files them under
    ``counters_timing``, apart from the deterministic ``counters`` (a cache hit
    or a busy machine changes them; the random seed does not fix them).
    """
    m = res.metrics
    return {
        "t_msp_encode_ms": round(m.encode_ms, 3),
        "t_msp_decode_ms": round(m.decode_ms, 3),
        "t_msp_judge_ms": round(m.judge_ms, 3),
        "t_msp_latency_ms": round(m.latency_ms, 3),
    }


def counters_of(res) -> dict[str, Any]:
    """Deterministic record fields of one encoding (no timestamp, no latency)."""
    m = res.metrics
    out: dict[str, Any] = {
        "msp_signal": res.signal.model_dump(mode="json", exclude={"timestamp"}),
        "msp_intent": res.signal.intent,
        "msp_priority": res.signal.priority,
        "msp_trace_id": res.trace_id,
        "msp_wire": res.wire,
        "msp_original_tokens": m.original_tokens,
        "msp_signal_tokens": m.signal_tokens,
        "msp_compression_ratio": round(m.compression_ratio, 6),
    }
    if res.judge is not None:
        out.update(
            msp_decoded=res.decoded_text, msp_decoded_tokens=m.decoded_tokens,
            msp_similarity=res.judge.similarity_score, msp_judge_passed=res.judge.passed,
            msp_similarity_passed=res.judge.similarity_passed,
            msp_intent_present=res.judge.intent_present,
            msp_target_present=res.judge.target_present,
            msp_target_coverage=res.judge.target_coverage,
            msp_judge_issues=list(res.judge.issues),
        )  # fmt: skip
    return out


class MSPCodec(ProseCodec):
    """Prose, with the Manager's brief sent as a Minimal Signal's wire form.

    The encoder's and decoder's model calls are logged when the brief is written, so
    they come first in the record's calls, before the Worker's.
    """

    result: Any = None
    error: str | None = None

    def write_brief(self, brief: Brief) -> str:
        settings, ctx = self.settings, self.ctx
        pipeline, rec = ctx.resource("msp:" + settings.model_dump_json(),
                                     lambda: _build(settings, ctx))  # fmt: skip
        rec.drain()
        original = render_brief(brief)
        trace_id = deterministic_trace_id(ctx.gen.seed, self.example["example_id"], "M-W")
        try:
            self.result = pipeline.process(original, settings.style, trace_id=trace_id)
            delivered = self.result.signal_text
        except MSPError as exc:
            server_fault = caused_by(exc, (TransientModelError, ModelEnvironmentError))
            if settings.on_error == "error" or server_fault:
                raise  # a server fault never becomes a passthrough: retried on the next run
            self.result, delivered, self.error = None, original, f"{type(exc).__name__}: {exc}"
        for role, call in rec.drain():
            self.conv.log_call(role, call)  # same call-log format as the agents' calls
        return delivered

    def counters(self, d: Dialogue) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.result is not None:
            out.update(counters_of(self.result))
            out.update(timing_counters_of(self.result))
        out["msp_error"] = self.error
        out["msp_passthrough"] = self.error is not None
        return out


register("msp", codec=MSPCodec, settings=MSPSettings)

__all__ = ["MSPCodec", "MSPSettings", "counters_of", "rate_limited", "timing_counters_of"]
