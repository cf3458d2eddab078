"""Hypothesis properties of the mediator (the Mediated Minimal-Signaling design's list).

Fakes stand in for models here: these tests check control flow and invariants,
never a number we report.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tersetalk.mediator import (
    CollectingEmitter,
    CompressionEngine,
    Compressor,
    ExtractionResult,
    Judge,
    JudgeError,
    JudgeResult,
    KeyType,
    KeyValidationError,
    Mediator,
    MediatorConfigError,
    PipelineEvent,
    RuleBasedExtractor,
    SemanticKey,
    SemanticKeyExtractor,
    TraceWriter,
    aggregate_stats,
    keys_from_json,
    keys_to_json,
    make_token_counter,
    parse_mediator_config,
    read_trace,
    trace_problems,
)
from tersetalk.mediator.compressors import TruncationCompressor
from tersetalk.mediator.judges import EmbeddingJudge
from tersetalk.mediator.pipeline import MediatorResult

# the profile's counts (tests/conftest.py); some properties use tmp_path_factory
PROP = settings(suppress_health_check=[*settings.default.suppress_health_check,
                                       HealthCheck.function_scoped_fixture])  # fmt: skip
count = make_token_counter("cl100k_base")
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)
words = st.lists(st.sampled_from(
    "the store sold 12 units must report goal state today Paris 1941 question why "
    "how many apples please answer never at most in order to currently".split()),
    min_size=0, max_size=120).map(" ".join)  # fmt: skip


class ScriptCompressor(Compressor):
    """Returns outputs drawn by Hypothesis: shorter, equal, longer or empty."""

    name = "script"

    def __init__(self, outputs: list[str]):
        self.outputs = list(outputs)
        self.calls = 0

    def compress(self, text: str, target_tokens: int | None = None) -> str:
        self.calls += 1
        if not self.outputs:
            return text
        return self.outputs.pop(0)


class CountingExtractor(SemanticKeyExtractor):
    name = "counting"

    def __init__(self, fail: bool = False):
        self.inputs: list[str] = []
        self.fail = fail

    def extract(self, text: str) -> ExtractionResult:
        self.inputs.append(text)
        if self.fail:
            raise RuntimeError("extractor exploded")
        return RuleBasedExtractor().extract(text)


class CountingJudge(Judge):
    name = "counting"

    def __init__(self, fail: bool = False):
        self.calls = 0
        self.fail = fail

    def evaluate(self, original, keys) -> JudgeResult:
        self.calls += 1
        if self.fail:
            raise JudgeError("judge exploded")
        return JudgeResult(passed=True, confidence=0.9, issues=[], judge=self.name)


def mediator(
    budget=20, limit=3, compressor=None, extractor=None, judge=None, *, compression=True,
    extraction=True, judging=False, emitter=None, writer=None,
):  # fmt: skip
    cfg = parse_mediator_config({
        "compression": {"enabled": compression, "token_budget": budget, "recursion_limit": limit,
                        "compressor": "truncate"},
        "semantic_keys": {"enabled": extraction},
        "judge": {"enabled": judging},
    })  # fmt: skip
    compressor = compressor or TruncationCompressor(count)
    extractor = extractor or CountingExtractor()
    return Mediator(cfg, compressor, extractor, judge or CountingJudge(), count, emitter, writer)


# Property 1: token count consistency
@PROP
@given(texts, st.sampled_from(["cl100k_base", "o200k_base"]))
def test_token_count_is_consistent_and_non_negative(text, name):
    counter = make_token_counter(name)
    n = counter(text)
    assert isinstance(n, int) and n >= 0
    assert counter(text) == n


# Property 2: compression never increases tokens; Property 3: termination; Property 4: completeness
@PROP
@given(words, st.lists(texts | words, max_size=8), st.integers(1, 60), st.integers(1, 6),
       st.floats(0.0, 0.9))  # fmt: skip
def test_engine_never_grows_terminates_and_is_complete(text, outputs, budget, limit, min_red):
    comp = ScriptCompressor(outputs)
    res = CompressionEngine(comp, count, budget, limit, min_red).compress_to_budget(text)
    assert res.final_tokens <= res.original_tokens
    assert res.final_tokens == count(res.text)  # the reported size is the text's size
    assert res.original_tokens == count(text)
    assert 0 <= res.passes <= limit and comp.calls == res.passes == len(res.log)
    for p in res.log:
        assert p.accepted == (p.output_tokens < p.input_tokens and p.output_tokens > 0)
        assert p.ratio >= 0
    assert res.text is not None and isinstance(res.log, list)
    assert res.stop_reason in ("within_budget", "budget_met", "recursion_limit", "no_reduction")
    if res.original_tokens <= budget:
        assert res.passes == 0 and res.text == text
    if res.stop_reason == "budget_met":
        assert res.final_tokens <= budget


# Property 5: compressor substitutability
class Halving(Compressor):
    name = "halving"

    def compress(self, text, target_tokens=None):
        return text[: len(text) // 2]


class Identity(Compressor):
    name = "identity"

    def compress(self, text, target_tokens=None):
        return text


class Growing(Compressor):
    name = "growing"

    def compress(self, text, target_tokens=None):
        return text + " and then some more words"


class ViaModel(Compressor):
    """The model summarizer with a scripted double in place of the model."""

    name = "model-scripted"

    def __init__(self):
        from tersetalk.mediator.compressors import ModelSummarizer
        from tersetalk.models import ScriptedClient

        self.inner = ModelSummarizer(ScriptedClient(lambda m: m[-1]["content"][:40]))

    def compress(self, text, target_tokens=None):
        return self.inner.compress(text, target_tokens)


@PROP
@given(words, st.sampled_from([Halving, Identity, Growing, ViaModel, "truncate"]),
       st.integers(1, 40))  # fmt: skip
def test_any_compressor_can_be_swapped_in(text, kind, budget):
    comp = TruncationCompressor(count) if kind == "truncate" else kind()
    res = mediator(budget=budget, compressor=comp).process(text)
    assert res.ok, res.error
    assert res.compression.final_tokens <= res.compression.original_tokens


# Property 6: extraction follows compression, exactly once per run
@PROP
@given(words, st.integers(1, 40), st.booleans())
def test_extraction_called_once_with_the_compressed_text(text, budget, judging):
    ext = CountingExtractor()
    res = mediator(budget=budget, extractor=ext, judging=judging).process(text)
    assert ext.inputs == [res.compression.text]


# Property 7: extraction result schema conformance
@PROP
@given(texts | words)
def test_rule_extractor_output_conforms(text):
    res = RuleBasedExtractor().extract(text)
    assert res.schema_version
    assert all(isinstance(k, SemanticKey) and isinstance(k.type, KeyType) for k in res.keys)
    assert all(k.value for k in res.keys)
    assert keys_from_json(keys_to_json(res.keys)).keys == res.keys
    json.loads(res.raw_output)  # the debug output is JSON too


# Property 8: serialisation round trip
key_st = st.builds(SemanticKey, type=st.sampled_from(list(KeyType)),
                   value=st.text(min_size=1, max_size=80))  # fmt: skip


@PROP
@given(st.lists(key_st, max_size=12))
def test_keys_json_round_trip(keys):
    text = keys_to_json(keys)
    back = keys_from_json(text)
    assert back.keys == keys and back.schema_version == "1.0"


# Property 9: invalid input rejected
bad_key = st.one_of(
    st.fixed_dictionaries({"type": st.text().filter(lambda s: s not in KeyType.__members__),
                           "value": st.text(min_size=1)}),
    st.fixed_dictionaries({"type": st.sampled_from([t.value for t in KeyType]),
                           "value": st.just("")}),
    st.fixed_dictionaries({"type": st.sampled_from([t.value for t in KeyType])}),
    st.fixed_dictionaries({"type": st.sampled_from([t.value for t in KeyType]),
                           "value": st.text(min_size=1), "extra": st.integers()}),
    st.integers(), st.text(),
)  # fmt: skip


@PROP
@given(st.lists(key_st.map(lambda k: k.model_dump(mode="json")), max_size=4), bad_key,
       st.integers(0, 4))  # fmt: skip
def test_invalid_keys_are_rejected_with_a_path(good, bad, pos):
    items = list(good)
    items.insert(min(pos, len(items)), bad)
    with pytest.raises(KeyValidationError) as err:
        keys_from_json(json.dumps({"schema_version": "1.0", "keys": items}))
    assert "keys[" in str(err.value)


@PROP
@given(st.one_of(st.text(), st.integers().map(str), st.just("[]"), st.just('{"keys": []}'),
                 st.just('{"schema_version": "2.0", "keys": []}')))  # fmt: skip
def test_non_conforming_documents_rejected(doc):
    try:
        data = json.loads(doc)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and data.get("schema_version") == "1.0":
        return
    with pytest.raises(KeyValidationError):
        keys_from_json(doc)


# Property 10: judge invoked exactly when enabled
@PROP
@given(words, st.booleans())
def test_judge_called_exactly_when_enabled(text, enabled):
    judge = CountingJudge()
    res = mediator(judge=judge, judging=enabled).process(text)
    assert judge.calls == (1 if enabled else 0)
    assert (res.judge is not None) == enabled


# Property 11: judge result completeness and bounds
class FakeEmbedder:
    def __init__(self, sim):
        self.sim = sim

    def similarity(self, a, b):
        return self.sim


@PROP
@given(words, st.floats(-1.0, 1.0), st.floats(0.0, 1.0))
def test_embedding_judge_result_bounds(text, sim, threshold):
    keys = RuleBasedExtractor().extract(text).keys
    res = EmbeddingJudge(threshold, embedder=FakeEmbedder(sim)).evaluate(text, keys)
    assert isinstance(res.passed, bool) and isinstance(res.issues, list)
    assert 0.0 <= res.confidence <= 1.0
    if res.confidence < threshold:
        assert not res.passed


@PROP
@given(st.one_of(st.floats(allow_nan=True), st.integers(-5, 5), st.text(max_size=3)))
def test_judge_result_rejects_out_of_range_confidence(conf):
    ok = isinstance(conf, int | float) and not isinstance(conf, bool) and 0 <= conf <= 1
    if ok:
        assert JudgeResult(True, conf, []).confidence == conf
    else:
        with pytest.raises(JudgeError):
            JudgeResult(True, conf, [])


# Property 12: configuration validation
@PROP
@given(st.integers(-1000, 0), st.sampled_from(["token_budget", "recursion_limit",
                                               "max_recursion"]))  # fmt: skip
def test_non_positive_budget_or_limit_rejected(value, key):
    with pytest.raises(MediatorConfigError) as err:
        parse_mediator_config({"compression": {key: value}})
    msg = str(err.value)
    assert "compression." in msg and "greater than 0" in msg and "fix:" in msg


@PROP
@given(st.integers(1, 500), st.integers(1, 20), st.booleans(), st.booleans())
def test_valid_configs_accepted(budget, limit, comp, keys):
    cfg = parse_mediator_config({"compression": {"token_budget": budget, "recursion_limit": limit,
                                                 "enabled": comp},
                                 "semantic_keys": {"enabled": keys}})  # fmt: skip
    assert cfg.compression.token_budget == budget and cfg.compression.recursion_limit == limit


# Property 13: trace completeness; Property 14: no message silently dropped
@PROP
@given(st.lists(st.tuples(words, st.sampled_from(["ok", "compressor", "extractor", "judge"])),
                min_size=1, max_size=5))  # fmt: skip
def test_every_message_is_delivered_or_reported_and_traced(tmp_path_factory, messages):
    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    writer = TraceWriter(path)
    emitter = CollectingEmitter()
    results = []
    for text, fault in messages:

        class Boom(Compressor):
            def compress(self, text, target_tokens=None):
                raise RuntimeError("compressor exploded")

        m = mediator(budget=3, compressor=Boom() if fault == "compressor" else None,
                     extractor=CountingExtractor(fail=fault == "extractor"),
                     judge=CountingJudge(fail=fault == "judge"), judging=True,
                     emitter=emitter, writer=writer)  # fmt: skip
        res = m.process(text)
        results.append(res)
        if fault in ("ok", "judge"):
            assert res.ok and res.delivered_text is not None
            if fault == "judge":
                assert res.warnings and res.warnings[0].stage == "judge"
        elif fault == "compressor" and count(text) <= 3:
            assert res.ok  # within budget: the compressor is never called
        else:
            assert not res.ok and res.error.stage in ("compression", "extraction")
            assert res.error.message
    records = read_trace(path)
    assert len(records) == len(messages)  # one trace line per message, failures included
    for rec, res in zip(records, results, strict=True):
        assert trace_problems(rec) == [], rec
        assert rec["message_id"] == res.message_id
        for p in (rec["compression"] or {}).get("passes", []):
            assert {"input_tokens", "output_tokens", "ratio"} <= set(p)
    ends = [e for e in emitter.events if e.event in (PipelineEvent.PIPELINE_COMPLETE,
                                                     PipelineEvent.PIPELINE_ERROR)]  # fmt: skip
    assert {e.message_id for e in ends} == {r.message_id for r in results}


# Property 15: aggregate ratio = sum of final / sum of original
@PROP
@given(st.lists(st.tuples(st.integers(1, 10_000), st.floats(0.0, 1.0)), min_size=1,
                max_size=20))  # fmt: skip
def test_aggregate_ratio_is_sum_final_over_sum_original(sizes):
    from tersetalk.mediator import CompressionResult

    results = []
    for orig, frac in sizes:
        final = int(orig * frac)
        results.append(MediatorResult(
            message_id="m", original_text="", original_tokens=orig,
            compression=CompressionResult(text="", original_tokens=orig, final_tokens=final,
                                          passes=1)))  # fmt: skip
    stats = aggregate_stats(results)
    expected = sum(int(o * f) for o, f in sizes) / sum(o for o, _ in sizes)
    assert stats["aggregate_ratio"] == pytest.approx(expected)
    assert stats["messages"] == len(sizes)
