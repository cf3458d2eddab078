"""Hypothesis properties of MSP: strict schema, round trip, judge bounds, metrics,
error classes and the rate limiter. Scripted doubles stand in for the model."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tersetalk.models import ModelCallError, ModelUnavailableError, ScriptedClient
from tersetalk.msp import (
    INTENTS,
    PRIORITIES,
    DecoderError,
    EncoderError,
    JudgeError,
    MinimalSignal,
    MSPDecoder,
    MSPEncoder,
    MSPPipeline,
    RateLimitConfig,
    RateLimitedClient,
    RateLimiter,
    RateLimitError,
    SemanticJudge,
    SignalDraft,
    compression_ratio,
    deterministic_trace_id,
)
from tersetalk.tokens import count_tokens

PROP = settings(max_examples=100, deadline=None)
short = st.text(min_size=1, max_size=30)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), short,
                        st.floats(allow_nan=False, allow_infinity=False))  # fmt: skip
signals = st.builds(
    MinimalSignal,
    intent=st.sampled_from(INTENTS),
    target=short,
    params=st.dictionaries(short, json_scalar, max_size=4),
    constraints=st.lists(short, max_size=4),
    state=st.dictionaries(short, json_scalar, max_size=3),
    priority=st.sampled_from(PRIORITIES),
    trace_id=short,
    timestamp=st.datetimes(timezones=st.just(UTC)),
    parent_id=st.none() | short,
)


# MSP property 1/8: schema validity and JSON round trip
@PROP
@given(signals)
def test_signal_json_round_trip(sig):
    text = sig.model_dump_json()
    back = MinimalSignal.model_validate_json(text)
    assert back == sig
    for form in ("core", "traced"):
        wire = json.loads(sig.wire(form))
        assert "timestamp" not in wire  # the clock never travels into records
        assert {k: wire[k] for k in ("intent", "target", "priority")} == {
            "intent": sig.intent, "target": sig.target, "priority": sig.priority}  # fmt: skip


@PROP
@given(signals, st.text(min_size=1, max_size=12).filter(
    lambda k: k not in MinimalSignal.model_fields))  # fmt: skip
def test_signal_rejects_extra_fields(sig, extra):
    data = sig.model_dump(mode="json")
    data[extra] = 1
    with pytest.raises(ValidationError):
        MinimalSignal.model_validate(data)


@PROP
@given(signals, st.text(max_size=12).filter(lambda s: s not in INTENTS),
       st.text(max_size=12).filter(lambda s: s not in PRIORITIES))  # fmt: skip
def test_signal_rejects_unknown_intent_or_priority(sig, intent, priority):
    data = sig.model_dump(mode="json")
    with pytest.raises(ValidationError):
        MinimalSignal.model_validate({**data, "intent": intent})
    with pytest.raises(ValidationError):
        MinimalSignal.model_validate({**data, "priority": priority})


# MSP property 5: judge score bounds, passed=False below the threshold
class FakeEmbedder:
    def __init__(self, sim):
        self.sim = sim

    def similarity(self, a, b):
        return self.sim


@PROP
@given(st.floats(-1.0, 1.0), st.floats(0.0, 1.0), st.text(max_size=50), st.text(max_size=50))
def test_judge_score_in_unit_interval_and_threshold_respected(sim, threshold, a, b):
    res = SemanticJudge(threshold, embedder=FakeEmbedder(sim)).evaluate(a, b)
    assert 0.0 <= res.similarity_score <= 1.0 and 0.0 <= res.confidence <= 1.0
    if res.similarity_score < threshold:
        assert res.passed is False and res.issues
    else:
        assert res.passed is True and not res.issues


def test_judge_errors_use_the_designs_messages():
    class Broken:
        def similarity(self, a, b):
            raise RuntimeError("boom")

    with pytest.raises(JudgeError, match="Failed to compute embeddings"):
        SemanticJudge(embedder=Broken()).evaluate("a", "b")
    with pytest.raises(JudgeError, match="Failed to compute embeddings"):
        SemanticJudge(embedder=FakeEmbedder(float("nan"))).evaluate("a", "b")
    with pytest.raises(JudgeError, match="Sentence transformer model not available"):
        _ = SemanticJudge(model_path="/nonexistent/minilm").embedder


# MSP property 6: compression ratio = signal tokens / original tokens
drafts = st.builds(
    SignalDraft,
    intent=st.sampled_from(INTENTS),
    target=st.text(alphabet="abcdefgh XYZ0123", min_size=1, max_size=40),
    constraints=st.lists(st.text(alphabet="abc xyz", min_size=1, max_size=30), max_size=3),
    priority=st.sampled_from(PRIORITIES),
)


@PROP
@given(drafts, st.text(min_size=1, max_size=300).filter(lambda s: s.strip()),
       st.sampled_from(["core", "traced"]))  # fmt: skip
def test_pipeline_ratio_is_signal_over_original_tokens(draft, text, wire):
    client = ScriptedClient(lambda m, g, schema: draft.model_dump_json() if schema else "decoded")
    pipe = MSPPipeline(MSPEncoder(client), MSPDecoder(client), wire=wire)
    res = pipe.process(text, trace_id="t-1")
    m = res.metrics
    assert m.original_tokens == count_tokens(text) and m.original_tokens > 0
    assert m.signal_tokens == count_tokens(res.signal_text)
    assert m.compression_ratio == m.signal_tokens / m.original_tokens
    assert m.decoded_tokens == count_tokens("decoded")
    assert res.trace_id == "t-1" and res.signal.trace_id == "t-1"
    assert MinimalSignal.model_validate_json(res.signal.model_dump_json()) == res.signal


@PROP
@given(st.integers(0, 10_000), st.integers(1, 10_000))
def test_compression_ratio_definition(sig_tokens, orig_tokens):
    assert compression_ratio(sig_tokens, orig_tokens) == sig_tokens / orig_tokens


def test_deterministic_trace_ids():
    assert deterministic_trace_id(1, "ex") == deterministic_trace_id(1, "ex")
    assert deterministic_trace_id(1, "ex") != deterministic_trace_id(2, "ex")


# Error classes with the design's messages
def test_encoder_errors():
    ok = SignalDraft(intent="QUERY", target="x").model_dump_json()
    with pytest.raises(EncoderError, match="Input cannot be empty"):
        MSPEncoder(ScriptedClient([ok])).encode("   ")
    down = ScriptedClient([ModelUnavailableError("server down")])
    with pytest.raises(EncoderError, match="LLM service unavailable"):
        MSPEncoder(down).encode("hello")
    junk = ScriptedClient(["not json"] * 3, max_retries=2)
    with pytest.raises(EncoderError, match="Failed to parse LLM response"):
        MSPEncoder(junk).encode("hello")
    limited = ScriptedClient([ModelCallError("HTTP 429 on all 3 attempts")])
    with pytest.raises(RateLimitError):
        MSPEncoder(limited).encode("hello")


def test_decoder_errors():
    with pytest.raises(DecoderError, match="Invalid signal schema"):
        MSPDecoder(ScriptedClient(["x"])).decode({"intent": "DANCE", "target": "x"})
    with pytest.raises(DecoderError, match="Decoder produced empty output"):
        MSPDecoder(ScriptedClient(["   "])).decode(MinimalSignal(intent="QUERY", target="x"))
    with pytest.raises(DecoderError, match="LLM service unavailable"):
        MSPDecoder(ScriptedClient([ModelUnavailableError("down")])).decode(
            MinimalSignal(intent="QUERY", target="x"))  # fmt: skip


# Rate limiting: never more than N requests / T tokens in any 60 s window
class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        assert s > 0
        self.t += s


@PROP
@given(st.integers(1, 10), st.lists(st.floats(0.0, 20.0), min_size=1, max_size=40),
       st.none() | st.integers(50, 500),
       st.lists(st.integers(0, 50), min_size=40, max_size=40))  # fmt: skip
def test_rate_limiter_windows(rpm, gaps, tpm, sizes):
    clock = FakeClock()
    lim = RateLimiter(rpm, tpm, clock=clock, sleep=clock.sleep)
    stamps = []
    for gap, size in zip(gaps, sizes, strict=False):
        clock.t += gap
        lim.acquire(size)
        stamps.append((clock.t, size))
    for t, _ in stamps:
        window = [(u, s) for u, s in stamps if t - u < 60.0 - 1e-9 and u <= t]
        assert len(window) <= rpm
        if tpm is not None:
            assert sum(s for _, s in window) <= tpm


def test_rate_limited_client_retries_with_backoff_then_raises():
    sleeps: list[float] = []
    answers = [ModelCallError("HTTP 429: rate limit")] * 2 + ["fine"]
    client = RateLimitedClient(ScriptedClient(answers), RateLimitConfig(max_retries=3,
                               backoff_s=1.0), sleep=sleeps.append)  # fmt: skip
    from tersetalk.models import GenerationConfig

    assert client.chat([{"role": "user", "content": "hi"}], GenerationConfig()).text == "fine"
    assert sleeps == [1.0, 2.0] and client.retries == 2
    always = RateLimitedClient(ScriptedClient([ModelCallError("HTTP 429")] * 5),
                               RateLimitConfig(max_retries=2, backoff_s=0.5),
                               sleep=sleeps.append)  # fmt: skip
    with pytest.raises(RateLimitError, match="Rate limit exceeded"):
        always.chat([{"role": "user", "content": "hi"}], GenerationConfig())
    other = RateLimitedClient(ScriptedClient([ModelCallError("HTTP 500")]), RateLimitConfig(),
                              sleep=sleeps.append)  # fmt: skip
    with pytest.raises(ModelCallError):
        other.chat([{"role": "user", "content": "hi"}], GenerationConfig())


def test_oversized_request_is_refused_up_front():
    with pytest.raises(RateLimitError, match="tokens_per_minute"):
        RateLimiter(tokens_per_minute=100).acquire(101)


def test_signal_timestamp_defaults_to_now_utc():
    before = datetime.now(UTC)
    sig = MinimalSignal(intent="REPORT", target="x")
    assert before <= sig.timestamp <= datetime.now(UTC) and sig.version == "1.0"
