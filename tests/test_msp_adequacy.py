"""MSP semantic adequacy (design: similarity >= 0.80 AND intent and target present in the
decoded text), its properties, and the end-to-end verdict through the pipeline.

Scripted model doubles stand in for encoder and decoder (control flow only); the
similarity comes from a fixed fake embedder so each property can pick it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.core.tokens import count_tokens
from tersetalk.models import ScriptedClient
from tersetalk.msp import (
    INTENTS,
    PRIORITIES,
    MinimalSignal,
    MSPDecoder,
    MSPEncoder,
    MSPPipeline,
    SemanticJudge,
    SignalDraft,
)
from tersetalk.msp.codec import DECODER_PROMPT
from tersetalk.msp.judge import INTENT_STEMS, mentions, target_words

word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9)
targets = st.lists(st.one_of(word, st.integers(0, 9999).map(str)), min_size=1, max_size=5).map(
    " ".join
)
filler = st.lists(word, max_size=12).map(" ".join)
inflections = {
    "ANALYZE": ["analyze", "Analysis", "analysing"],
    "GENERATE": ["generate", "generating", "Generation"],
    "EVALUATE": ["evaluate", "evaluation"],
    "TRANSFORM": ["transform", "Transformed"],
    "QUERY": ["query", "queries", "queried"],
    "RESPOND": ["respond", "Response"],
    "DELEGATE": ["delegate", "delegated"],
    "REPORT": ["report", "Reporting"],
}


class FakeEmbedder:
    def __init__(self, sim: float) -> None:
        self.sim = sim

    def similarity(self, a: str, b: str) -> float:
        return self.sim


def signal(intent: str, target: str) -> MinimalSignal:
    return MinimalSignal(intent=intent, target=target, trace_id="t")


def without_stems(text: str) -> str:
    """``text`` with every word that starts with any intent's stem removed."""
    return " ".join(w for w in text.split()
                    if not any(w.lower().startswith(s) for s in INTENT_STEMS.values()))  # fmt: skip


# MSP property 4, as checked: a decoded text mentioning intent and target is seen to
@given(st.sampled_from(INTENTS), targets, filler, filler, st.data())
def test_text_mentioning_intent_and_target_is_recognised(intent, target, before, after, data):
    form = data.draw(st.sampled_from(inflections[intent]))
    shout = data.draw(st.booleans())
    decoded = f"{before} {form} the {target.upper() if shout else target}. {after}"
    found = mentions(signal(intent, target), decoded)
    assert found.intent_present and found.target_present and found.ok
    assert found.target_coverage == 1.0 and found.missing_target_words == ()


@given(st.sampled_from(INTENTS), targets, filler)
def test_a_missing_intent_or_target_word_is_caught(intent, target, rest):
    sig = signal(intent, target)
    rest = without_stems(rest)
    # the intent never named: intent absent whatever else is there
    assert not mentions(sig, f"{rest} {target}").intent_present or any(
        w.startswith(INTENT_STEMS[intent]) for w in target.lower().split()
    )
    # one target word dropped (every occurrence): target absent, coverage below 1
    wanted = sorted(target_words(target))
    dropped = wanted[0]
    kept = " ".join(w for w in f"{rest} {target}".split() if w.lower() != dropped)
    found = mentions(sig, f"{inflections[intent][0]} {kept}")
    assert not found.target_present and dropped in found.missing_target_words
    assert found.target_coverage == pytest.approx((len(wanted) - 1) / len(wanted), abs=1e-6)


def test_mentions_examples():
    sig = signal("QUERY", "the capital of France")
    assert mentions(sig, "Query: what is the capital of France?").ok
    paraphrase = mentions(sig, "Ask for France's main city.")
    assert not paraphrase.intent_present and not paraphrase.target_present
    assert paraphrase.missing_target_words == ("capital",)  # "France" is there
    assert target_words("the one") == {"one"} and target_words("The") == {"the"}
    assert target_words("?") == set() and mentions(signal("QUERY", "?"), "a query").ok


# adequacy = similarity >= threshold AND intent AND target, each failure named
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.booleans(), st.booleans(),
       st.sampled_from(INTENTS), targets)  # fmt: skip
def test_adequacy_needs_similarity_and_both_mentions(sim, threshold, say_intent, say_target,
                                                      intent, target):  # fmt: skip
    sig = signal(intent, target)
    words = [inflections[intent][0]] if say_intent else []
    words += [target] if say_target else []
    decoded = " ".join(words) or "nothing relevant"
    res = SemanticJudge(threshold, embedder=FakeEmbedder(sim)).evaluate("orig", decoded, sig)
    found = mentions(sig, decoded)
    assert res.intent_present == found.intent_present
    assert res.target_present == found.target_present
    assert res.similarity_passed == (res.similarity_score >= threshold)
    assert res.passed == (res.similarity_passed and found.ok)
    assert bool(res.issues) == (not res.passed)
    assert any(i.startswith("Intent missing") for i in res.issues) == (not found.intent_present)
    assert any(i.startswith("Target missing") for i in res.issues) == (not found.target_present)
    # without the signal, similarity alone decides (two texts compared)
    plain = SemanticJudge(threshold, embedder=FakeEmbedder(sim)).evaluate("orig", decoded)
    assert plain.passed == plain.similarity_passed and plain.intent_present is None


# the end-to-end bound: through encode -> decode -> judge, the similarity stays in [0, 1],
# the verdict is the adequacy rule, and the ratio is signal tokens over original tokens
drafts = st.builds(SignalDraft, intent=st.sampled_from(INTENTS), target=targets,
                   priority=st.sampled_from(PRIORITIES))  # fmt: skip


@given(drafts, st.text(min_size=1, max_size=200).filter(str.strip), st.floats(-1.0, 1.0),
       st.booleans(), st.booleans())  # fmt: skip
def test_end_to_end_verdict_and_bounds(draft, text, sim, say_intent, say_target):
    decoded = " ".join(([inflections[draft.intent][0]] if say_intent else [])
                       + ([draft.target] if say_target else [])) or "unrelated words"  # fmt: skip
    client = ScriptedClient(lambda m, g, schema: draft.model_dump_json() if schema else decoded)
    judge = SemanticJudge(0.8, embedder=FakeEmbedder(sim))
    res = MSPPipeline(MSPEncoder(client), MSPDecoder(client), judge).process(text, trace_id="e")
    j, m = res.judge, res.metrics
    assert 0.0 <= j.similarity_score <= 1.0 and 0.0 <= j.confidence <= 1.0
    found = mentions(res.signal, res.decoded_text)
    assert j.passed == (j.similarity_score >= 0.8 and found.ok)
    assert j.intent_present == found.intent_present and j.target_present == found.target_present
    assert m.original_tokens > 0 and m.compression_ratio == m.signal_tokens / m.original_tokens
    assert m.decoded_tokens == count_tokens(res.decoded_text)


# the decoder asks for the mentions that adequacy checks, for any signal
@given(st.sampled_from(INTENTS), targets)
def test_decoder_prompt_carries_intent_and_target(intent, target):
    sig = signal(intent, target)
    seen: list[str] = []

    def model(messages, gen, schema):
        seen.append(messages[-1]["content"])
        return f"{inflections[intent][0]} {target}"

    out = MSPDecoder(ScriptedClient(model)).decode(sig)
    assert mentions(sig, out).ok
    prompt = seen[0]
    assert intent in prompt and re.search(re.escape(target), prompt)
    assert "Mention the intent, the target" in DECODER_PROMPT
