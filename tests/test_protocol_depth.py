"""Deep nesting and very long lines: the parsers answer the same at any stack depth.

Python's JSON decoder, ``ast`` and the line code recurse, and whether they reach the
recursion limit depends on how deep the caller's stack already is. The stream reader
calls the parser from a different depth than :func:`parse_lenient`, so before the
nesting bound (``MAX_DEPTH``) the two could disagree near depth 1,000, and
``parse_lenient('[' * 992 + '1' + ']' * 992)`` raised ``RecursionError``. These tests
fuzz nesting up to depth 100,000 and lines up to 10 MB: only the package's own errors,
the same lines for any chunking, and the same lines from deeper in the stack.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.protocol import (
    InvalidJSONError,
    ProtocolError,
    StreamReader,
    TextLine,
    parse_lenient,
    parse_strict,
)
from tersetalk.protocol.codec import MAX_DEPTH, exceeds_depth

DEEP_STACK = 500  # extra frames under the parser for the stack-independence checks
DEPTHS = [
    1,
    2,
    MAX_DEPTH - 1,
    MAX_DEPTH,
    MAX_DEPTH + 1,
    100,
    500,
    900,
    950,
    980,
    985,
    988,
    990,
    991,
    992,
    993,
    995,
    1000,
    1024,
    1100,
    5000,
    100_000,
]

# (opener, closer) pairs that nest; a shape repeats one of them ``depth`` times.
_NESTS = {
    "array": ("[", "]"),
    "tagged": ('["f",', "]"),
    "object": ('{"a":', "}"),
    "lines": ('{"lines":[', "]}"),
}
_CORES = {"array": "1", "tagged": '"x"', "object": "1", "lines": '["f","x"]'}


def nested(kind: str, depth: int, *, closed: bool = True) -> str:
    opener, closer = _NESTS[kind]
    return opener * depth + _CORES[kind] + (closer * depth if closed else "")


def at_stack_depth(frames: int, fn, *args, **kwargs):
    """Call ``fn`` with ``frames`` more Python frames beneath it."""
    if frames <= 0:
        return fn(*args, **kwargs)
    return at_stack_depth(frames - 1, fn, *args, **kwargs)


def chunkings(data: bytes, seed: int = 0) -> list[list[bytes]]:
    """Several ways to cut ``data``: whole, random sizes (fixed seed), 1 byte if small."""
    rng = random.Random(seed)
    out = [[data]]
    for top in (7, 4096, 1 << 20) if len(data) <= 1 << 20 else (65536, 1 << 20):
        chunks, i = [], 0
        while i < len(data):
            n = rng.randint(1, top)
            chunks.append(data[i : i + n])
            i += n
        out.append(chunks)
    if len(data) <= 4096:
        out.append([data[i : i + 1] for i in range(len(data))])
    return out


def stream(chunks: list[bytes], **kwargs):
    reader = StreamReader(**kwargs)
    got = []
    for chunk in chunks:
        got += reader.feed(chunk)
    got += reader.close()
    return got, reader.result()


def assert_consistent(text: str | bytes) -> None:
    """parse_lenient never raises, and every chunking and stack depth gives its answer."""
    whole = parse_lenient(text)
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    for chunks in chunkings(data):
        got, result = stream(chunks)
        assert got == whole.lines
        assert result.repairs == whole.repairs
        assert result.canonical_lines == whole.canonical_lines
        assert [e.problem for e in result.errors] == [e.problem for e in whole.errors]
    deep = at_stack_depth(DEEP_STACK, parse_lenient, text)
    assert deep.lines == whole.lines and deep.repairs == whole.repairs
    deep_stream, _ = at_stack_depth(DEEP_STACK, stream, [data])
    assert deep_stream == whole.lines


# -- (a) the reported reproduction ---------------------------------------------------------
def test_issue_reproduction_returns_a_result():
    text = "[" * 992 + "1" + "]" * 992
    result = parse_lenient(text)
    assert result.lines == [TextLine(text=text)]
    assert result.repairs == {"invalid_line": 1}
    assert f"deeper than {MAX_DEPTH}" in result.errors[0].problem


# -- (b) depth sweep ------------------------------------------------------------------------
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("kind", sorted(_NESTS))
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "truncated"])
def test_depth_sweep_stream_matches_whole_at_any_stack_depth(kind, depth, closed):
    text = nested(kind, depth, closed=closed)
    assert_consistent(text)
    assert_consistent(text.encode())
    # Around other lines: the deep line neither swallows nor disturbs its neighbours.
    message = f'["g","before"]\nGoal: x\n{text}\n["f","after","M#2"]\n'
    assert_consistent(message)
    lines = parse_lenient(message).lines
    assert lines[:2] == parse_lenient('["g","before"]\nGoal: x').lines
    if closed or depth > MAX_DEPTH:
        assert lines[-1].to_array() == ["f", "after", "M#2"]


@pytest.mark.parametrize("depth", [d for d in DEPTHS if d > MAX_DEPTH])
@pytest.mark.parametrize("kind", sorted(_NESTS))
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "truncated"])
def test_too_deep_line_is_kept_verbatim_with_an_error(kind, depth, closed):
    text = nested(kind, depth, closed=closed)
    result = parse_lenient(text)
    assert result.lines == [TextLine(text=text)]
    assert result.repairs == {"invalid_line": 1}
    assert len(result.errors) == 1 and result.errors[0].line_no == 1


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 992, 5000])
def test_deep_python_literal_and_pretty_printed_json(depth):
    assert_consistent("[" * depth + "'f'" + "]" * depth)  # Python literal path
    assert_consistent("[" * depth + "None" + "]" * depth)
    assert_consistent("\n".join(["["] * depth + ['"x"'] + ["]"] * depth))  # multi-line
    assert_consistent("prose [" + "[" * depth + '"f","x"' + "]" * depth + "] more")  # embedded
    assert_consistent('["f","a"] ' + nested("tagged", depth))  # concatenated


def test_values_within_the_bound_still_parse():
    # A context value nested MAX_DEPTH - 1 levels inside the line stays structured JSON.
    value = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    text = f'["x","k",{value}]'
    assert parse_lenient(text).lines[0].to_array() == ["x", "k", value]
    assert_consistent(text)
    assert exceeds_depth("[" * MAX_DEPTH) is False
    assert exceeds_depth("[" * (MAX_DEPTH + 1)) is True
    assert exceeds_depth('["' + "[" * 1000 + '"]') is False  # brackets inside a string
    assert exceeds_depth("[" + "[1]," * 1000 + "1]") is False  # wide, not deep


# -- (c) strict parsing raises only the package's own errors --------------------------------
def strict_outcome(text):
    try:
        return parse_strict(text)
    except ProtocolError as exc:
        return type(exc), exc.line_no, exc.problem


@pytest.mark.parametrize("depth", [d for d in DEPTHS if d > 2])
@pytest.mark.parametrize("kind", sorted(_NESTS))
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "truncated"])
def test_strict_parsers_raise_protocol_errors_on_deep_input(kind, depth, closed):
    text = '["r","M"]\n' + nested(kind, depth, closed=closed)
    expected = strict_outcome(text)
    assert isinstance(expected, tuple) and issubclass(expected[0], ProtocolError)
    assert expected[1] == 2
    assert at_stack_depth(DEEP_STACK, strict_outcome, text) == expected
    assert strict_outcome(text.encode()) == expected
    if depth > MAX_DEPTH:
        assert expected[0] is InvalidJSONError and f"deeper than {MAX_DEPTH}" in expected[2]
        with pytest.raises(InvalidJSONError) as info:
            parse_strict(text)
        assert info.value.fix  # says how to fix it
    for chunks in chunkings(text.encode()):
        reader = StreamReader(strict=True)
        with pytest.raises(ProtocolError) as info:
            for chunk in chunks:
                reader.feed(chunk)
            reader.close()
        assert (type(info.value), info.value.line_no, info.value.problem) == expected


# -- (d) a property over generated nesting --------------------------------------------------
# Openers for generated nesting, each with its closer (the last two are Python literals).
_PAIRS = {
    "[": "]",
    '["f",': "]",
    '{"a":': "}",
    '{"lines":[': "]}",
    '{"f":': "}",
    '["x","k",': "]",
    "(": ")",
    "['q',": "]",
}


@st.composite
def nested_messages(draw):
    pattern = draw(st.lists(st.sampled_from(sorted(_PAIRS)), min_size=1, max_size=3))
    depth = draw(
        st.one_of(
            st.integers(0, 3 * MAX_DEPTH),
            st.integers(850, 1150),
            st.sampled_from([2_000, 10_000, 100_000]),
        )
    )
    openers = (pattern * (depth // len(pattern) + 1))[:depth]
    closers = [_PAIRS[o] for o in reversed(openers)]
    keep = draw(st.one_of(st.just(len(closers)), st.integers(0, len(closers))))
    sep = draw(st.sampled_from(["", "", " ", "\n"])) if depth <= 2_000 else ""
    core = draw(st.sampled_from(['"x"', "1", '["f","x"]', "", '"unterminated', "'py'", "None"]))
    body = sep.join(openers) + sep + core + sep + sep.join(closers[:keep])
    before = draw(st.sampled_from(["", "prose ", '["g","x"]\n', "```json\n", "Goal: "]))
    after = draw(st.sampled_from(["", " tail", ",", "\n```", '\n["v","A"]', "\r\n"]))
    text = before + body + after
    if draw(st.booleans()):
        data = text.encode("utf-8")
        if draw(st.booleans()):
            cut = draw(st.integers(0, len(data)))
            data = data[:cut] + b"\xff" + data[cut:]  # a bad byte somewhere
        return data
    return text


@given(nested_messages(), st.randoms(use_true_random=False))
def test_property_nested_input_stream_matches_whole(text, rnd):
    whole = parse_lenient(text)  # never raises
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    cuts = sorted(rnd.randint(0, len(data)) for _ in range(rnd.randint(0, 12)))
    bounds = [0, *cuts, len(data)]
    got, result = stream([data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)])
    assert got == whole.lines
    assert result.repairs == whole.repairs
    deep = at_stack_depth(DEEP_STACK, parse_lenient, text)
    assert deep.lines == whole.lines and deep.repairs == whole.repairs
    outcome = strict_outcome(text)  # only ProtocolError escapes (else this test errors)
    assert at_stack_depth(DEEP_STACK, strict_outcome, text) == outcome


# -- (e) 10 MB lines -------------------------------------------------------------------------
TEN_MB = 10_000_000
_LONG = {
    "string_payload": lambda: '["f","' + "a" * TEN_MB + '"]',
    "unterminated_string": lambda: '["f","' + "a" * TEN_MB,
    "open_brackets": lambda: "[" * TEN_MB,
    "balanced_brackets": lambda: "[" * (TEN_MB // 2) + "1" + "]" * (TEN_MB // 2),
    "tagged_openers": lambda: '["f",' * (TEN_MB // 5),
    "fence_then_blanks": lambda: "```" + " " * TEN_MB + "!",
    "key_then_blanks": lambda: "a" + " " * TEN_MB + "x",
    "bracketed_prose": lambda: "see " + "[x] " * (TEN_MB // 4),
}


@pytest.mark.parametrize("name", sorted(_LONG))
def test_ten_megabyte_line(name):
    text = _LONG[name]()
    whole = parse_lenient(text)
    assert whole.lines  # nothing is dropped
    data = text.encode()
    assert parse_lenient(data).lines == whole.lines
    for chunks in chunkings(data, seed=len(name))[1:]:
        got, result = stream(chunks)
        assert got == whole.lines and result.repairs == whole.repairs
    if name == "string_payload":
        assert whole.lines[0].to_array() == ["f", "a" * TEN_MB] and whole.clean
    if name == "unterminated_string":
        assert whole.lines[0].to_array() == ["f", "a" * TEN_MB]
        assert whole.repairs == {"truncated_line": 1}
    if name in ("open_brackets", "balanced_brackets", "tagged_openers"):
        assert whole.lines == [TextLine(text=text)] and whole.repairs == {"invalid_line": 1}
    strict_outcome(text)  # parses or raises a ProtocolError, nothing else
