"""Example-based tests of the TerseTalk-JSONL protocol package."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import tersetalk.protocol
from tersetalk.protocol import (
    DEFAULT_CAPS,
    REPAIR_KINDS,
    CapConfigError,
    ContextLine,
    DeltaLine,
    EncodingError,
    FactLine,
    GoalLine,
    InvalidJSONError,
    LineShapeError,
    Memory,
    NormalizationError,
    OverflowLine,
    ParseResult,
    PayloadError,
    PlanLine,
    ProtocolError,
    QuestionLine,
    RoleLine,
    StreamClosedError,
    StreamReader,
    SummarizerError,
    TextLine,
    UnknownRefError,
    UnknownTagError,
    VerdictLine,
    apply_caps,
    approx_token_count,
    dereference,
    encode_brief,
    expand_overflow,
    extractive_summary,
    get_summarizer,
    jsonl_to_prose,
    normalize_obj,
    parse_lenient,
    parse_strict,
    register_summarizer,
    serialize,
    summarize,
    truncate_to_tokens,
    unregister_summarizer,
    validate_caps,
)

# -- wire format ------------------------------------------------------------------------------


def test_serialize_is_compact_and_keeps_unicode():
    lines = [
        RoleLine(role="M"),
        FactLine(text="Paris is in France", ref="M#3"),
        QuestionLine(to="W", text="Which year?"),
        OverflowLine(summary="short summary", ref="M#4", method="extractive"),
        ContextLine(key="units", value="dollars"),
        FactLine(text="café ☕"),
    ]
    assert serialize(lines) == (
        '["r","M"]\n["f","Paris is in France","M#3"]\n["q","W","Which year?"]\n'
        '["o","short summary","M#4","extractive"]\n["x","units","dollars"]\n["f","café ☕"]'
    )


def test_line_separator_characters_stay_inside_their_line():
    lines = [TextLine(text="a\u2028b\x85c\nd"), VerdictLine(verdict="A")]
    text = serialize(lines)
    assert text.count("\n") == 1
    assert parse_strict(text) == lines


def test_parse_strict_skips_blank_lines_and_accepts_crlf():
    assert parse_strict('["r","W"]\r\n\r\n  \n["v","R"]\r\n') == [
        RoleLine(role="W"),
        VerdictLine(verdict="R"),
    ]


@pytest.mark.parametrize(
    ("text", "error", "line_no"),
    [
        ('["r","M"]\n["f","unclosed', InvalidJSONError, 2),
        ('["r","M"]\n\n{"f":"x"}', LineShapeError, 3),
        ("[3]", LineShapeError, 1),
        ('["r","M"]\n["z","x"]', UnknownTagError, 2),
        ('["fact","x"]', UnknownTagError, 1),
        ('["r"]', PayloadError, 1),
        ('["f","x","M#3","extra"]', PayloadError, 1),
        ('["q","X","hi"]', PayloadError, 1),
        ('["v","accept"]', PayloadError, 1),
        ('["d","3"]', PayloadError, 1),
        ('["f","x",null]', PayloadError, 1),
        ('["g",5]', PayloadError, 1),
    ],
)
def test_parse_strict_errors_name_the_line(text, error, line_no):
    with pytest.raises(error) as info:
        parse_strict(text)
    assert info.value.line_no == line_no
    assert str(info.value).startswith(f"line {line_no}: ")


def test_parse_strict_rejects_invalid_utf8_with_line_number():
    with pytest.raises(EncodingError) as info:
        parse_strict(b'["r","M"]\n["g","ok"]\n["t","\xff"]')
    assert info.value.line_no == 3


def test_errors_are_protocol_errors_and_picklable():
    with pytest.raises(ProtocolError) as info:
        parse_strict('["r","M"]\n["z"]')
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is UnknownTagError
    assert (copy.line_no, copy.problem, str(copy)) == (2, info.value.problem, str(info.value))
    assert issubclass(CapConfigError, ValueError)


# -- normalisation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"f": "Paris is in France"}, ["f", "Paris is in France"]),
        ({"tag": "f", "text": "Paris", "id": "M#12"}, ["f", "Paris", "M#12"]),
        ({"type": "fact", "content": "Paris"}, ["f", "Paris"]),
        (["fact", "Paris", "M#3"], ["f", "Paris", "M#3"]),
        (["goal", "Find the capital"], ["g", "Find the capital"]),
        (["question", "worker", "Which year?"], ["q", "W", "Which year?"]),
        (["q", "Which year?", "critic"], ["q", "C", "Which year?"]),
        ({"question": "Why?", "to": "manager"}, ["q", "M", "Why?"]),
        (["verdict", "accept"], ["v", "A"]),
        ({"verdict": "Revise"}, ["v", "R"]),
        (["v", "escalate"], ["v", "E"]),
        (["role", "manager"], ["r", "M"]),
        ({"role": "Critic"}, ["r", "C"]),
        (["R", "worker"], ["r", "W"]),
        (["d", 7], ["d", "M#7"]),
        ({"delta": "m#07"}, ["d", "M#7"]),
        (["o", "sum", "#4"], ["o", "sum", "M#4", "unknown"]),
        ({"x": {"units": "dollars"}}, ["x", "units", "dollars"]),
        (["context", "budget", 12], ["x", "budget", "12"]),
        (["assumption", "no leap year"], ["u", "no leap year"]),
        (["plan", "look up", "then add"], ["p", "look up then add"]),
        (["f", "the total is", 42], ["f", "the total is 42"]),
        ("just text", ["t", "just text"]),
        (FactLine(text="kept").model_dump(), ["f", "kept"]),
    ],
)
def test_normalize_obj_maps_plausible_shapes(obj, expected):
    line = normalize_obj(obj)
    assert line.to_array() == expected
    assert normalize_obj(line) is line
    assert normalize_obj(line.to_array()) == line


@pytest.mark.parametrize(
    "obj",
    [
        [],
        ["zz", "x"],
        [1, "x"],
        ["q", "no addressee"],
        ["v", "maybe"],
        ["r", "boss"],
        {"role": "M", "text": "ambiguous"},
        {"f": "x", "colour": "red"},
        3.5,
        None,
    ],
)
def test_normalize_obj_rejects_what_fits_no_shape(obj):
    with pytest.raises(NormalizationError):
        normalize_obj(obj)


def test_question_without_addressee_uses_the_default():
    assert normalize_obj(["q", "Why?"], default_addressee="W") == QuestionLine(to="W", text="Why?")
    assert parse_lenient('{"question": "Why?"}', default_addressee="C").lines == [
        QuestionLine(to="C", text="Why?")
    ]


# -- mixed formats: one example per repair kind -------------------------------------------------


def _lines(text):
    return [line.to_array() for line in parse_lenient(text).lines]


REPAIR_CASES = [
    ("bom", '\ufeff["r","M"]', [["r", "M"]]),
    ("code_fence", '```json\n["r","M"]\n```', [["r", "M"]]),
    (
        "prose",
        'Sure, here it is:\n["r","M"]\nHope it helps',
        [["t", "Sure, here it is:"], ["r", "M"], ["t", "Hope it helps"]],
    ),
    (
        "key_value",
        "Goal: find the year\nVerdict: accept.\nQuestion for the Worker: which?",
        [["g", "find the year"], ["v", "A"], ["q", "W", "which?"]],
    ),
    ("normalized", '{"tag":"f","text":"Paris","id":"M#12"}', [["f", "Paris", "M#12"]]),
    (
        "json_array",
        '[["r","M"],["g","Find it"],{"f":"x"}]',
        [["r", "M"], ["g", "Find it"], ["f", "x"]],
    ),
    (
        "container",
        '{"role":"manager","goal":"G","facts":["a","b"]}',
        [["r", "M"], ["g", "G"], ["f", "a"], ["f", "b"]],
    ),
    ("multiline_json", '{\n  "tag": "f",\n  "text": "multi"\n}', [["f", "multi"]]),
    ("concatenated_json", '["r","M"] ["g","x"]', [["r", "M"], ["g", "x"]]),
    (
        "embedded_json",
        'I think ["f","Paris"] is right',
        [["t", "I think"], ["f", "Paris"], ["t", "is right"]],
    ),
    ("trailing_comma", '["f","a"],\n["f","b"],', [["f", "a"], ["f", "b"]]),
    ("python_literal", "['f', 'Paris', None]", [["f", "Paris"]]),
    ("control_chars", '["f","tab\there"]', [["f", "tab\there"]]),
    ("truncated_line", '["r","M"]\n["f","Paris is in Fr', [["r", "M"], ["f", "Paris is in Fr"]]),
    ("split_extra", '["v","R","the year is wrong"]', [["v", "R"], ["t", "the year is wrong"]]),
    ("invalid_line", '["zz","unknown"]', [["t", '["zz","unknown"]']]),
]


def test_every_repair_kind_has_an_example():
    assert {kind for kind, _, _ in REPAIR_CASES} | {"invalid_utf8"} == set(REPAIR_KINDS)


@pytest.mark.parametrize(
    ("kind", "text", "expected"), REPAIR_CASES, ids=[c[0] for c in REPAIR_CASES]
)
def test_each_repair_kind(kind, text, expected):
    result = parse_lenient(text)
    assert [line.to_array() for line in result.lines] == expected
    assert result.repairs.get(kind, 0) >= 1, result.repairs
    assert not result.clean


def test_invalid_utf8_is_replaced_on_its_own_line_only():
    result = parse_lenient(b'["r","M"]\n["t","caf\xe9"]\n["v","A"]')
    assert [line.to_array() for line in result.lines] == [
        ["r", "M"],
        ["t", "caf\ufffd"],
        ["v", "A"],
    ]
    assert result.repairs == {"invalid_utf8": 1}
    assert result.canonical_lines == 3


def test_pretty_printed_array_of_lines_and_truncated_end():
    text = '```\n[\n  ["r","W"],\n  ["f","Paris"],\n  ["v","A"\n'
    result = parse_lenient(text)
    assert _lines(text) == [["r", "W"], ["f", "Paris"], ["v", "A"]]
    assert result.repairs == {
        "code_fence": 1,
        "json_array": 1,
        "multiline_json": 1,
        "truncated_line": 1,
    }


def test_truncated_line_in_the_middle_does_not_swallow_the_next_line():
    assert _lines('["f","Paris is in Fr\n["v","A"]') == [["f", "Paris is in Fr"], ["v", "A"]]


def test_unsalvageable_json_is_kept_verbatim_with_an_error():
    result = parse_lenient('["r","M"]\n{"colour": "red"}')
    assert [line.to_array() for line in result.lines] == [["r", "M"], ["t", '{"colour": "red"}']]
    assert len(result.errors) == 1 and result.errors[0].line_no == 2
    assert isinstance(result.errors[0], NormalizationError)
    assert result.compliance == 0.5


def test_parse_result_counters_have_stable_keys():
    clean = parse_lenient('["r","M"]').counters()
    messy = parse_lenient("hello").counters()
    assert clean.keys() == messy.keys()
    assert clean["parse_compliance"] == 1.0 and messy["parse_repair_prose"] == 1
    assert ParseResult().compliance == 1.0


def test_lenient_parse_of_prose_only_message():
    result = parse_lenient("The answer is 42.\n\nDone.")
    assert result.lines == [TextLine(text="The answer is 42."), TextLine(text="Done.")]
    assert result.repairs == {"prose": 2}


# -- summarizers ----------------------------------------------------------------------------

TEXT = (
    "The Eiffel Tower is in Paris. It was built in 1889 for the World Fair. "
    "Paris is the capital of France. Many tourists visit the tower every year."
)


def test_truncation_keeps_the_longest_fitting_word_prefix():
    assert truncate_to_tokens(TEXT, 6) == "The Eiffel Tower is in Paris"
    assert approx_token_count(truncate_to_tokens(TEXT, 7)) <= 7
    assert truncate_to_tokens(TEXT, 0) == ""
    assert truncate_to_tokens("short", 5) == "short"
    assert truncate_to_tokens("abcdefghij", 4, len) == "abcd"  # cut inside a long word


def test_extractive_picks_central_sentences_in_original_order():
    summary = extractive_summary(TEXT, 14)
    assert summary == "The Eiffel Tower is in Paris. Paris is the capital of France."
    assert approx_token_count(summary) <= 14
    assert extractive_summary(TEXT, 14) == summary  # deterministic
    assert extractive_summary(TEXT, 100) == TEXT


def test_extractive_falls_back_to_truncating_the_best_sentence():
    summary = extractive_summary(TEXT, 4)
    assert summary == "The Eiffel Tower is"
    assert extractive_summary("", 3) == ""


def test_summarize_truncates_an_overshooting_summarizer_and_says_so():
    def verbose(text, target, count):
        return text + " and more"

    summary, method = summarize(TEXT, 5, summarizer=verbose)
    assert approx_token_count(summary) <= 5
    assert method == "verbose+truncation"
    with pytest.raises(SummarizerError):
        summarize(TEXT, 5, summarizer=lambda t, n, c: 3)
    with pytest.raises(SummarizerError, match="unknown summarizer"):
        summarize(TEXT, 5, summarizer="nope")


def test_llmlingua_slot_is_empty_until_registered():
    unregister_summarizer("llmlingua")
    with pytest.raises(SummarizerError, match="register_summarizer"):
        get_summarizer("llmlingua")
    calls = []

    def fake_lingua(text, target, count):
        calls.append(target)
        return "Eiffel Tower Paris 1889"

    register_summarizer("llmlingua", fake_lingua)
    try:
        memory = Memory()
        result = apply_caps([FactLine(text=TEXT)], {"f": 8}, memory=memory, summarizer="llmlingua")
        assert result.lines == [
            OverflowLine(summary="Eiffel Tower Paris 1889", ref="M#1", method="llmlingua")
        ]
        assert calls == [8]
        with pytest.raises(SummarizerError, match="already registered"):
            register_summarizer("llmlingua", lambda t, n, c: t)
    finally:
        unregister_summarizer("llmlingua")


# -- caps -----------------------------------------------------------------------------------


def test_apply_caps_overflows_to_memory_with_a_fitting_summary():
    memory = Memory()
    lines = [
        RoleLine(role="M"),
        GoalLine(text=TEXT),
        FactLine(text=TEXT, ref="M#9"),
        PlanLine(text="add"),
    ]
    result = apply_caps(lines, {"f": 10, "p": 1}, memory=memory)
    assert result.lines[:2] == lines[:2] and result.lines[3] == lines[3]
    over = result.lines[2]
    assert isinstance(over, OverflowLine) and over.ref == "M#1" and over.method == "extractive"
    assert approx_token_count(over.summary) <= 10
    assert memory.get("M#1") == TEXT
    assert expand_overflow(result.lines, memory) == lines  # the fact's own ref comes back too
    c = result.counters
    assert (c.total_lines, c.overflow_lines, c.density) == (4, 1, 0.75)
    assert c.overflow_by_tag == {"f": 1} and c.lines_by_tag["o"] == 1
    flat = c.as_dict()
    assert flat["overflow_f"] == 1 and flat["lines_o"] == 1 and flat["overflow_q"] == 0


def test_default_caps_and_no_caps():
    long_fact = FactLine(text=" ".join(["word"] * 40))
    assert apply_caps([long_fact], None, memory=Memory()).counters.overflow_lines == 1
    assert apply_caps([long_fact], {}, memory=Memory()).lines == [long_fact]
    assert DEFAULT_CAPS == {"f": 30, "p": 20, "q": 30}


def test_compress_hook_is_preferred_when_it_fits():
    memory = Memory()
    result = apply_caps(
        [FactLine(text=TEXT, ref="M#2")],
        {"f": 5},
        memory=memory,
        compress=lambda text, cap: "Eiffel Tower Paris",
    )
    assert result.lines == [FactLine(text="Eiffel Tower Paris", ref="M#2")]
    assert result.counters.compressed_by_tag == {"f": 1} and len(memory) == 0
    result = apply_caps(
        [FactLine(text=TEXT)], {"f": 5}, memory=memory, compress=lambda text, cap: text
    )
    assert isinstance(result.lines[0], OverflowLine) and len(memory) == 1


@pytest.mark.parametrize(
    "caps", [{"r": 3}, {"o": 3}, {"fact": 3}, {"f": -1}, {"f": 2.5}, {"f": True}]
)
def test_bad_cap_config_is_rejected(caps):
    with pytest.raises(CapConfigError):
        validate_caps(caps)


# -- memory and dereferencing ----------------------------------------------------------------


def test_memory_reports_evicted_and_unknown_refs():
    memory = Memory(max_entries=2)
    a, b, c = (memory.put(t) for t in ("one", "two", "three"))
    assert (a, b, c) == ("M#1", "M#2", "M#3")
    with pytest.raises(UnknownRefError, match="evicted"):
        memory.get("M#1")
    with pytest.raises(UnknownRefError, match="no such"):
        memory.get("M#99")
    assert memory.stats().as_dict() == {
        "memory_entries": 2,
        "memory_bytes": 8,
        "memory_evictions": 1,
        "memory_puts": 3,
    }
    with pytest.raises(ProtocolError):
        Memory(max_entries=0)


def test_dereference_policies():
    memory = Memory()
    r1 = memory.put("full text one")
    r2 = memory.put("full text two words")
    message = [
        RoleLine(role="M"),
        OverflowLine(summary="one", ref=r1, method="extractive"),
        FactLine(text="fact", ref=r2),
    ]
    asks = [QuestionLine(to="M", text=f"What exactly is in {r2}?"), DeltaLine(ref="M#77")]

    always = dereference(message, memory, "always")
    assert always.texts == {r1: "full text one", r2: "full text two words"}
    assert always.derefs == 2 and always.reinjected_tokens == 7 and always.missing == []
    assert always.lines == [
        ContextLine(key=r1, value="full text one"),
        ContextLine(key=r2, value="full text two words"),
    ]

    cond = dereference(message, memory, "conditional", requests=asks)
    assert cond.texts == {r2: "full text two words"}
    assert cond.missing == ["M#77"]
    assert cond.counters() == {"deref_count": 1, "deref_tokens": 4, "deref_missing": 1}
    assert dereference(message, memory, "conditional").derefs == 0

    never = dereference(message, memory, "never", requests=asks)
    assert (never.derefs, never.reinjected_tokens, never.texts) == (0, 0, {})
    with pytest.raises(ProtocolError):
        dereference(message, memory, "sometimes")


def test_question_mentions_need_the_exact_ref():
    memory = Memory()
    for i in range(12):
        memory.put(f"text {i}")
    asks = [QuestionLine(to="M", text="see M#1 and M#12, not XM#3 or M#40")]
    assert list(dereference([], memory, "conditional", requests=asks).texts) == ["M#1", "M#12"]


# -- prose ----------------------------------------------------------------------------------


def test_jsonl_to_prose():
    lines = [
        RoleLine(role="M"),
        GoalLine(text="Find the capital"),
        FactLine(text="Paris is in France", ref="M#3"),
        PlanLine(text="check"),
        PlanLine(text="answer"),
        QuestionLine(to="W", text="Which city?"),
        VerdictLine(verdict="A"),
        ContextLine(key="units", value="km"),
        OverflowLine(summary="short", ref="M#4", method="extractive"),
        DeltaLine(ref="M#2"),
        TextLine(text="  free   text "),
    ]
    assert jsonl_to_prose(lines) == (
        "Role: Manager. Goal: Find the capital. Fact: Paris is in France. (source M#3) "
        "Plan step 1: check. Plan step 2: answer. Question for the Worker: Which city? "
        "Verdict: accept. Context: units = km. Summary (extractive; full text in M#4): short. "
        "This refers to earlier content M#2. free text"
    )
    assert jsonl_to_prose('["r","C"]\n["v","revise"]') == "Role: Critic. Verdict: revise."
    assert jsonl_to_prose([GoalLine(text="  ")]) == ""


def test_prose_key_values_parse_back_to_the_same_lines():
    lines = [
        RoleLine(role="W"),
        GoalLine(text="Find it."),
        FactLine(text="It is here."),
        QuestionLine(to="C", text="Right?"),
        VerdictLine(verdict="E"),
    ]
    prose_lines = "\n".join(jsonl_to_prose([line]) for line in lines)
    assert parse_lenient(prose_lines).lines == lines


# -- streaming ------------------------------------------------------------------------------


def test_stream_yields_first_line_before_the_message_ends():
    reader = StreamReader()
    assert reader.feed(b'["r","M"]\n["g","Find') == [RoleLine(role="M")]
    assert reader.pending_bytes == len(b'["g","Find')
    assert reader.feed(b' it"]') == []
    assert reader.close() == [GoalLine(text="Find it")]
    assert reader.close() == []
    with pytest.raises(StreamClosedError):
        reader.feed(b"more")


def test_stream_handles_split_multibyte_characters_crlf_and_blank_lines():
    data = '["f","caf\u00e9 \U0001f600"]\r\n\r\n["v","A"]\r\n'.encode()
    split = data.index("\U0001f600".encode()) + 2  # inside the 4-byte emoji
    reader = StreamReader(strict=True)
    got = reader.feed(data[:split]) + reader.feed(data[split:]) + reader.close()
    assert got == [FactLine(text="café \U0001f600"), VerdictLine(verdict="A")]
    for size in (1, 2, 3):
        reader = StreamReader()
        got = []
        for i in range(0, len(data), size):
            got += reader.feed(data[i : i + size])
        assert got + reader.close() == parse_lenient(data).lines


def test_strict_stream_raises_on_the_bad_line_as_soon_as_it_is_complete():
    reader = StreamReader(strict=True)
    assert reader.feed(b'["r","M"]\n') == [RoleLine(role="M")]
    with pytest.raises(UnknownTagError) as info:
        reader.feed(b'["z","x"]\n["v","A"]')
    assert info.value.line_no == 2


def test_stream_holds_back_a_multiline_value_until_it_closes():
    reader = StreamReader()
    assert reader.feed(b"{\n") == []
    assert reader.feed(b'"f": "Paris"\n') == []
    assert reader.feed(b"}\n") == [FactLine(text="Paris")]
    assert reader.result().repairs == {"multiline_json": 1, "normalized": 1}


# -- the Manager's brief ----------------------------------------------------------------------


def test_encode_brief_builds_and_caps_the_manager_message():
    memory = Memory()
    lines, counters = encode_brief(
        "Find the capital",
        ["Paris is in France.", TEXT],
        "Which city is the capital of France?",
        role="manager",
        caps={"f": 12, "q": 30},
        memory=memory,
    )
    assert [line.tag for line in lines] == ["r", "g", "f", "o", "q"]
    assert lines[0] == RoleLine(role="M") and lines[4].to == "W"
    assert lines[3].ref == "M#1" and memory.get("M#1") == TEXT
    assert counters.lines_by_tag == {"r": 1, "g": 1, "f": 1, "o": 1, "q": 1}
    assert counters.overflow_by_tag == {"f": 1}
    assert counters.density == pytest.approx(0.8)
    assert json.loads(serialize(lines).split("\n")[3])[2] == "M#1"


def test_encode_brief_without_question_or_caps():
    lines, counters = encode_brief("G", [], None, caps={})
    assert lines == [RoleLine(role="M"), GoalLine(text="G")]
    assert counters.density == 1.0
    with pytest.raises(ProtocolError):
        encode_brief("G", [], None, role="boss")


def test_importing_the_protocol_stays_light():
    code = (
        "import sys, tersetalk.protocol; "
        "heavy = [m for m in ('tiktoken', 'torch', 'transformers', 'numpy', 'llmlingua', "
        "'tersetalk.core.tokens') if m in sys.modules]; print(heavy)"
    )
    src = str(Path(tersetalk.protocol.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"


def test_merge_facts_pays_the_line_syntax_once_and_keeps_pointers():
    from tersetalk.protocol import Memory, encode_brief, serialize
    from tersetalk.protocol.brief import merge_fact_lines
    from tersetalk.protocol.lines import FactLine, QuestionLine

    facts = ["Paris is in France.", "It has 2 million people.", "word " * 80, "Lyon too."]
    caps = {"f": 30, "q": 30}
    each, _ = encode_brief(None, facts, "Where?", caps=caps, memory=Memory(), role_line=False)
    merged, _ = encode_brief(
        None, facts, "Where?", caps=caps, memory=Memory(), role_line=False, merge_facts=True
    )
    f_each = [x for x in each if isinstance(x, FactLine)]
    f_merged = [x for x in merged if isinstance(x, FactLine)]
    # the over-cap fact becomes an o line with its M# pointer, and merging stops there
    assert [x.tag for x in each] == ["f", "f", "o", "f", "q"]
    assert [x.tag for x in merged] == ["f", "o", "f", "q"]
    assert len(f_each) == 3 and len(f_merged) == 2
    assert f_merged[0].text == "Paris is in France. It has 2 million people."
    assert f_merged[1].text == "Lyon too."
    assert isinstance(merged[-1], QuestionLine)
    assert len(serialize(merged)) < len(serialize(each))
    assert merge_fact_lines([]) == []


def test_a_question_without_its_mark_reads_as_a_question_in_prose():
    from tersetalk.protocol import jsonl_to_prose

    # the brief may leave the "?" to the q tag (question_mark: tag); prose puts it back
    assert jsonl_to_prose('["q","W","Which city"]') == "Question for the Worker: Which city?"
    assert jsonl_to_prose('["q","W","Which city?"]') == "Question for the Worker: Which city?"
    assert jsonl_to_prose('["f","Paris is big"]') == "Fact: Paris is big."
