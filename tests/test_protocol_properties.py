"""Hypothesis properties of the TerseTalk-JSONL protocol package."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from tersetalk.protocol import (
    CAPPABLE_TAGS,
    AssumptionLine,
    ContextLine,
    DeltaLine,
    FactLine,
    GoalLine,
    LineBase,
    Memory,
    NormalizationError,
    OverflowLine,
    PlanLine,
    ProtocolError,
    QuestionLine,
    RoleLine,
    StreamReader,
    TextLine,
    VerdictLine,
    apply_caps,
    approx_token_count,
    dereference,
    expand_overflow,
    extractive_summary,
    normalize_obj,
    parse_lenient,
    parse_strict,
    serialize,
    split_sentences,
    truncate_to_tokens,
)

# -- strategies ------------------------------------------------------------------------
# Text deliberately includes newlines, CR, U+2028, quotes, backslashes, emoji and
# things that look like protocol syntax, so escaping and line splitting are exercised.
_SPICE = ["\n", "\r", "\r\n", "\u2028", '"', "\\", "😀", "é", "M#3", '["f","x"]', "```", "\t", " "]
texts = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(st.sampled_from(_SPICE), st.text(max_size=6)), max_size=8).map("".join),
)
words = st.sampled_from(
    "Paris France capital tower river the a is of in 1889 built Eiffel museum year".split()
)
sentences = st.lists(words, min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".")
long_texts = st.lists(sentences, min_size=1, max_size=8).map(" ".join)
any_text = st.one_of(texts, long_texts)
roles = st.sampled_from(["M", "W", "C"])
refs = st.integers(min_value=1, max_value=10**12).map(lambda n: f"M#{n}")

lines_st = st.one_of(
    roles.map(lambda r: RoleLine(role=r)),
    any_text.map(lambda t: GoalLine(text=t)),
    st.builds(lambda t, r: FactLine(text=t, ref=r), any_text, st.none() | refs),
    any_text.map(lambda t: AssumptionLine(text=t)),
    any_text.map(lambda t: PlanLine(text=t)),
    st.builds(lambda r, t: QuestionLine(to=r, text=t), roles, any_text),
    refs.map(lambda r: DeltaLine(ref=r)),
    st.sampled_from("ARE").map(lambda v: VerdictLine(verdict=v)),
    st.builds(lambda s, r, m: OverflowLine(summary=s, ref=r, method=m), texts, refs, texts),
    any_text.map(lambda t: TextLine(text=t)),
    st.builds(lambda k, v: ContextLine(key=k, value=v), texts, any_text),
)
messages = st.lists(lines_st, max_size=8)

# Near-JSON: fragments of the wire syntax glued together at random.
_FRAGMENTS = [
    *'[ ] { } : , " "f" "r" "q" "o" "x" "M" "W" "fact" "goal" "tag" "type" "text"'.split(),
    *'"accept" M# M#3 3 null true \' ``` ```json Paris é 😀 \\ \\u12 Goal: Fact:'.split(),
    *'["r","M"] {"f":"x"} ["q","W","Why?"]'.split(),
    '["f","Paris is in France","M#3"]', "Fact: x",
    "\n", "\r\n", " ", "\ufeff", "\x00", "\t",
]  # fmt: skip
near_json = st.lists(st.sampled_from(_FRAGMENTS), max_size=30).map("".join)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from(list("rgfupqdvotxMWCARE")),
    st.sampled_from(
        "fact goal manager worker accept revise M#3 #4 text to ref id content type tag".split()
    ),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(
                st.sampled_from(
                    "f tag type text to id role verdict x q facts content key value ref".split()
                ),
                st.text(max_size=5),
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)

json_messages = st.lists(st.tuples(json_values, st.sampled_from([None, 1, 2])), max_size=5).map(
    lambda vs: "\n".join(json.dumps(v, indent=i, ensure_ascii=False) for v, i in vs)
)


def counters():
    """Token counters with different granularity (the protocol must work with any)."""
    return st.sampled_from(
        [approx_token_count, len, lambda s: len(s.encode("utf-8")) // 4, lambda s: len(s.split())]
    )


# -- canonical round trip ----------------------------------------------------------------
@given(messages)
def test_serialize_then_parse_strict_is_identity(lines):
    text = serialize(lines)
    assert parse_strict(text) == lines
    assert parse_strict(text.encode("utf-8")) == lines
    # one physical line per line, compact separators
    if lines:
        assert len(text.split("\n")) == len(lines)
        assert all(not s.startswith("[ ") and '", "' not in s[:6] for s in text.split("\n"))


@given(messages)
def test_lenient_parser_accepts_canonical_text_unchanged(lines):
    result = parse_lenient(serialize(lines))
    assert result.lines == lines
    assert result.repairs == {}
    assert result.errors == []
    assert result.canonical_lines == len(lines)


@given(lines_st)
def test_canonical_array_round_trips_through_json(line):
    arr = json.loads(json.dumps(line.to_array()))
    assert normalize_obj(arr) == line
    assert normalize_obj(line.model_dump()) == line


# -- normalisation is idempotent ------------------------------------------------------------
@given(json_values)
@example({"q": []})
@example({"role": "manager", "content": "hi"})
def test_normalize_obj_is_idempotent(obj):
    try:
        line = normalize_obj(obj, default_addressee="W")
    except NormalizationError:
        return
    assert isinstance(line, LineBase)
    assert normalize_obj(line) is line
    assert normalize_obj(line.to_array()) == line
    assert normalize_obj(json.loads(json.dumps(line.to_array()))) == line


@given(st.one_of(near_json, messages.map(serialize), json_messages))
def test_lenient_parse_is_idempotent_on_its_output(text):
    first = parse_lenient(text).lines
    second = parse_lenient(serialize(first))
    assert second.lines == first
    assert second.repairs == {}


# -- robustness: only our own errors ----------------------------------------------------------
@given(st.one_of(st.binary(max_size=200), near_json, near_json.map(str.encode), json_messages))
def test_lenient_parser_never_raises(data):
    result = parse_lenient(data)
    assert all(isinstance(line, LineBase) for line in result.lines)
    assert all(isinstance(err, ProtocolError) and err.line_no for err in result.errors)
    serialize(result.lines).encode("utf-8")  # whatever it salvaged can be sent as UTF-8


@given(st.one_of(st.binary(max_size=200), near_json, near_json.map(str.encode), st.text()))
def test_strict_parser_raises_only_protocol_errors(data):
    try:
        lines = parse_strict(data)
    except ProtocolError as exc:
        assert exc.line_no is not None and exc.line_no >= 1
        assert str(exc).startswith(f"line {exc.line_no}:")
    else:
        assert serialize(lines) == "\n".join(
            json.dumps(json.loads(s), ensure_ascii=False, separators=(",", ":"))
            for s in (data if isinstance(data, str) else data.decode()).split("\n")
            if s.strip(" \t\r")
        )


# -- caps and overflow ----------------------------------------------------------------------
caps_st = st.dictionaries(st.sampled_from(CAPPABLE_TAGS), st.integers(0, 25), max_size=7)


@given(messages, caps_st, counters(), st.sampled_from(["extractive", "truncation"]))
def test_every_payload_fits_its_cap_or_overflowed(lines, caps, count, summarizer):
    memory = Memory()
    result = apply_caps(lines, caps, memory=memory, summarizer=summarizer, count_tokens=count)
    assert len(result.lines) == len(lines)
    new_overflow = 0
    for before, after in zip(lines, result.lines, strict=True):
        if before.tag not in caps:
            assert after == before
            continue
        if after is before or after == before:
            assert count(before.capped_text) <= caps[before.tag]
        else:
            assert isinstance(after, OverflowLine)
            assert count(after.summary) <= caps[before.tag]
            assert after.method.split("+")[0] == summarizer
            new_overflow += 1
    c = result.counters
    assert c.overflow_lines == new_overflow == len(memory)
    assert c.total_lines == len(lines)
    expected_density = 1 - new_overflow / len(lines) if lines else 1.0
    assert c.density == pytest.approx(expected_density)
    assert sum(c.overflow_by_tag.values()) == new_overflow


@given(messages, caps_st, counters())
def test_overflow_loses_nothing(lines, caps, count):
    memory = Memory()
    before_ids = set(memory.ids())
    result = apply_caps(lines, caps, memory=memory, count_tokens=count)
    created = [
        (orig, new)
        for orig, new in zip(lines, result.lines, strict=True)
        if isinstance(new, OverflowLine) and new.ref not in before_ids and new != orig
    ]
    for orig, new in created:
        assert memory.get(new.ref) == orig.capped_text
    deref = dereference(result.lines, memory, "always", count_tokens=count)
    for orig, new in created:
        assert deref.texts[new.ref] == orig.capped_text
    # only refs that came out of this store are missing, never the ones just created
    assert not {new.ref for _, new in created} & set(deref.missing)
    assert expand_overflow([n for _, n in created], memory) == [o for o, _ in created]


@given(messages, st.integers(0, 10))
def test_compress_hook_used_only_when_it_fits(lines, cap):
    caps = {tag: cap for tag in CAPPABLE_TAGS}

    def halve(text: str, target: int) -> str:
        return text[: len(text) // 2]

    memory = Memory()
    result = apply_caps(lines, caps, memory=memory, compress=halve, count_tokens=len)
    for before, after in zip(lines, result.lines, strict=True):
        if before.tag not in caps or len(before.capped_text) <= cap:
            assert after == before
        elif len(before.capped_text) // 2 <= cap:
            assert type(after) is type(before)
            assert after.capped_text == before.capped_text[: len(before.capped_text) // 2]
        else:
            assert isinstance(after, OverflowLine) and len(after.summary) <= cap
    assert result.counters.compressed_lines + result.counters.overflow_lines <= len(lines)


# -- memory -------------------------------------------------------------------------------
@given(st.integers(1, 12), st.lists(st.text(max_size=10), max_size=40))
def test_memory_is_bounded_and_evicts_oldest_first(bound, texts_):
    memory = Memory(max_entries=bound)
    ids = [memory.put(t) for t in texts_]
    assert ids == [f"M#{i}" for i in range(1, len(texts_) + 1)]
    assert len(memory) == min(bound, len(texts_))
    kept = ids[-bound:] if texts_ else []
    assert memory.ids() == kept
    for ref, text in zip(ids, texts_, strict=True):
        assert (ref in memory) == (ref in kept)
        if ref in kept:
            assert memory.get(ref) == text
    stats = memory.stats()
    assert stats.entries == len(kept)
    assert stats.evictions == max(0, len(texts_) - bound)
    assert stats.bytes == sum(len(t.encode()) for t in (texts_[-bound:] if texts_ else []))


@given(st.integers(1, 5), st.lists(st.text(max_size=10), min_size=1, max_size=20))
def test_memory_reset_leaves_nothing(bound, texts_):
    memory = Memory(max_entries=bound)
    old = [memory.put(t) for t in texts_]
    memory.reset()
    assert len(memory) == 0 and memory.ids() == []
    assert all(ref not in memory for ref in old)
    stats = memory.stats()
    assert (stats.entries, stats.bytes, stats.evictions, stats.puts) == (0, 0, 0, 0)
    assert memory.put("fresh") == "M#1"  # ids restart: examples are independent


# -- streaming ------------------------------------------------------------------------------
@st.composite
def chunked(draw, payloads):
    data = draw(payloads)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return data, [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


stream_payloads = st.one_of(
    messages.map(lambda ls: serialize(ls).encode()),
    messages.map(lambda ls: serialize(ls).replace("\n", "\r\n").encode() + b"\r\n"),
    near_json.map(str.encode),
    json_messages.map(str.encode),
    st.binary(max_size=120),
)


@given(chunked(stream_payloads))
def test_stream_reader_matches_whole_message_parser(case):
    data, chunks = case
    reader = StreamReader()
    got = []
    for chunk in chunks:
        got += reader.feed(chunk)
    got += reader.close()
    whole = parse_lenient(data)
    assert got == whole.lines
    assert reader.result().repairs == whole.repairs
    assert reader.result().canonical_lines == whole.canonical_lines


@given(chunked(stream_payloads))
def test_strict_stream_reader_matches_parse_strict(case):
    data, chunks = case
    try:
        expected = parse_strict(data)
    except ProtocolError as exc:
        expected = exc
    reader = StreamReader(strict=True)
    got = []
    try:
        for chunk in chunks:
            got += reader.feed(chunk)
        got += reader.close()
    except ProtocolError as exc:
        assert isinstance(expected, ProtocolError)
        assert type(exc) is type(expected) and exc.line_no == expected.line_no
        return
    assert got == expected


@given(messages, st.integers(1, 7))
def test_stream_yields_each_line_as_soon_as_its_newline_arrives(lines, step):
    assume(lines)
    data = (serialize(lines) + "\n").encode()
    reader = StreamReader()
    seen = 0
    for i in range(0, len(data), step):
        chunk = data[i : i + step]
        seen += len(reader.feed(chunk))
        complete = data[: i + len(chunk)].count(b"\n")
        assert seen == complete
    assert reader.close() == []


# -- summarizers ------------------------------------------------------------------------------
def _bumpy(text: str) -> int:
    """A counter that is not monotone in prefixes (a text ending in 'e' costs extra)."""
    return approx_token_count(text) + (4 if text.endswith("e") else 0)


@given(any_text, st.integers(0, 30), st.sampled_from([approx_token_count, len, _bumpy]))
def test_summarizers_always_fit_and_only_use_the_source(text, target, count):
    cut = truncate_to_tokens(text, target, count)
    assert count(cut) <= target
    assert text.strip().startswith(cut) or cut == text
    summary = extractive_summary(text, target, count)
    assert count(summary) <= target
    if summary != text and summary:
        source = split_sentences(text)
        # whole sentences in their original order, or a prefix of one (the fallback)
        rest = summary
        for sentence in source:
            if rest == sentence or rest.startswith(sentence + " "):
                rest = rest[len(sentence) :].lstrip(" ")
        assert rest == "" or any(s.startswith(summary) for s in source), (summary, source)
