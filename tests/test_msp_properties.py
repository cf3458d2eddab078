"""Hypothesis properties of MSP: strict schema, round trip, judge bounds, metrics,
error classes and the rate limiter. Scripted doubles stand in for the model."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tersetalk.core.tokens import count_tokens
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


@given(signals, st.text(min_size=1, max_size=12).filter(
    lambda k: k not in MinimalSignal.model_fields))  # fmt: skip
def test_signal_rejects_extra_fields(sig, extra):
    data = sig.model_dump(mode="json")
    data[extra] = 1
    with pytest.raises(ValidationError):
        MinimalSignal.model_validate(data)


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


# Rate-limit detection: by HTTP status through the cause chain; text only as a fallback
class _Response:
    def __init__(self, status_code, headers=None):
        self.status_code = status_code
        self.headers = headers or {}


class _StatusError(Exception):
    def __init__(self, msg, status_code, headers=None):
        super().__init__(msg)
        self.status_code = status_code
        self.response = _Response(status_code, headers)


def _wrapped(inner: BaseException, msg="HTTP error on all 3 attempts") -> ModelCallError:
    try:
        raise ModelCallError(msg) from inner
    except ModelCallError as exc:
        return exc


def test_rate_limit_detection_uses_the_status_not_a_stray_429():
    from tersetalk.models.ratelimit import is_rate_limit_error

    # a 429 anywhere in unrelated text is not a rate limit
    assert not is_rate_limit_error(ModelCallError("prompt of 429 tokens was cut off"))
    assert not is_rate_limit_error(ModelCallError("example id 84291 failed: HTTP 500"))
    # the status decides, wherever it sits in the cause chain
    assert is_rate_limit_error(_wrapped(_StatusError("slow down", 429)))
    assert is_rate_limit_error(_StatusError("nothing textual", 429))
    # a known non-429 status wins over text that mentions rate limits
    assert not is_rate_limit_error(_wrapped(_StatusError("rate limit proxy said 502", 502)))
    # no status anywhere: only clear phrases count
    assert is_rate_limit_error(ModelCallError("429 Too Many Requests"))
    assert is_rate_limit_error(ModelCallError("provider: Rate limit reached for model"))
    assert is_rate_limit_error(ModelCallError("HTTP 429"))
    assert is_rate_limit_error(RateLimitError("Rate limit exceeded"))


def test_openai_rate_limit_error_is_recognised_by_type():
    import httpx
    import openai

    from tersetalk.models.ratelimit import is_rate_limit_error, retry_after_s

    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    resp = httpx.Response(429, headers={"retry-after": "7"}, request=req)
    err = openai.RateLimitError("quota", response=resp, body=None)
    assert is_rate_limit_error(_wrapped(err, "HTTP 429 on all 4 attempts"))
    assert retry_after_s(_wrapped(err)) == 7.0


def test_retry_after_header_forms():
    from email.utils import format_datetime

    from tersetalk.models.ratelimit import retry_after_s

    assert retry_after_s(_StatusError("x", 429, {"Retry-After": "12"})) == 12.0
    assert retry_after_s(_StatusError("x", 429, {"retry-after-ms": "1500"})) == 1.5
    when = format_datetime(datetime.fromtimestamp(1_000_030, UTC), usegmt=True)
    assert retry_after_s(_StatusError("x", 429, {"Retry-After": when}),
                         now=lambda: 1_000_000.0) == 30.0  # fmt: skip
    assert retry_after_s(_StatusError("x", 429, {"Retry-After": "soon"})) is None
    assert retry_after_s(_StatusError("x", 429)) is None


def test_rate_limited_client_honours_retry_after():
    from tersetalk.models import GenerationConfig

    msgs = [{"role": "user", "content": "hi"}]
    sleeps: list[float] = []
    refused = _wrapped(_StatusError("slow down", 429, {"Retry-After": "9"}))
    client = RateLimitedClient(ScriptedClient([refused, "fine"]),
                               RateLimitConfig(max_retries=2, backoff_s=1.0),
                               sleep=sleeps.append)  # fmt: skip
    assert client.chat(msgs, GenerationConfig()).text == "fine"
    assert sleeps == [9.0]  # the provider's wait, not the 1 s backoff
    # a stray "429" in a non-rate-limit error is raised at once, never retried
    other = RateLimitedClient(ScriptedClient([ModelCallError("answer cut at 429 tokens")]),
                              RateLimitConfig(max_retries=3), sleep=sleeps.append)  # fmt: skip
    with pytest.raises(ModelCallError, match="cut at 429"):
        other.chat(msgs, GenerationConfig())
    assert sleeps == [9.0]
    # a Retry-After beyond max_backoff_s gives up at once and says how long to wait
    far = _wrapped(_StatusError("daily quota", 429, {"Retry-After": "3600"}))
    greedy = RateLimitedClient(ScriptedClient([far, "never"]),
                               RateLimitConfig(max_retries=3, max_backoff_s=60),
                               sleep=sleeps.append)  # fmt: skip
    with pytest.raises(RateLimitError, match="3600s") as info:
        greedy.chat(msgs, GenerationConfig())
    assert info.value.retry_after_s == 3600.0 and sleeps == [9.0]


def test_the_rate_limiter_sits_under_the_call_cache(tmp_path):
    """Cache hits must not spend the provider's quota."""
    from tersetalk.models import CachedClient, GenerationConfig
    from tersetalk.systems.msp_system import rate_limited

    msgs = [{"role": "user", "content": "hi"}]
    raw = ScriptedClient(["fresh", "second"])
    warm = CachedClient(raw, tmp_path)
    warm.chat(msgs, GenerationConfig())  # an entry from an earlier run
    client = rate_limited(warm, RateLimitConfig(requests_per_minute=5))
    assert isinstance(client, CachedClient) and isinstance(client.inner, RateLimitedClient)
    assert client.inner.inner is raw and client.cache_dir == warm.cache_dir
    for _ in range(3):
        res = client.chat(msgs, GenerationConfig())
        assert res.cache_hit and res.text == "fresh"
    assert len(client.inner.limiter._events) == 0  # no quota spent on hits
    assert client.chat([{"role": "user", "content": "new"}], GenerationConfig()).text == "second"
    assert len(client.inner.limiter._events) == 1
    assert rate_limited(warm, None) is warm
    bare = rate_limited(raw, RateLimitConfig())
    assert isinstance(bare, RateLimitedClient) and bare.inner is raw


# MSP latency: emitted as t_* timing counters, kept out of the deterministic counters
def test_msp_latency_goes_to_timing_counters():
    from tersetalk.systems.msp_system import counters_of, timing_counters_of

    draft = SignalDraft(intent="QUERY", target="the capital")
    client = ScriptedClient(lambda m, g, schema: draft.model_dump_json() if schema else "decoded")
    pipe = MSPPipeline(MSPEncoder(client), MSPDecoder(client),
                       SemanticJudge(0.8, embedder=FakeEmbedder(0.9)))  # fmt: skip
    res = pipe.process("What is the capital of France?", trace_id="t-1")
    timing = timing_counters_of(res)
    assert {"t_msp_encode_ms", "t_msp_decode_ms", "t_msp_latency_ms"} <= set(timing)
    assert all(k.startswith("t_") and v >= 0 for k, v in timing.items())
    assert timing["t_msp_latency_ms"] >= timing["t_msp_encode_ms"]
    assert timing["t_msp_latency_ms"] == round(res.metrics.latency_ms, 3)
    assert not any(k.startswith("t_") or "ms" in k.split("_") for k in counters_of(res))
