"""The speed paths against the paths they replace (no timing here).

:mod:`tersetalk.protocol.fast` reads a block without a newline with one unwrapped
orjson call and assembles models in one loop written out by arity; the strict
:class:`~tersetalk.protocol.StreamReader` parses a canonical block inside ``feed``.
Each is compared here with the Pydantic path (``line_from_array``,
``parse_strict_reference``) on generated canonical and non-canonical input: the
same models in every observable respect, the same arrays, the same errors.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_protocol_fast import REAL, _line_state, _outcome, _strict_cases, arrays, fast_paths_off
from test_protocol_properties import lines_st, messages

from tersetalk.protocol import (
    LineBase,
    ProtocolError,
    StreamClosedError,
    StreamReader,
    fast,
    line_from_array,
    parse_strict,
    serialize,
)
from tersetalk.protocol.codec import parse_strict_reference

EXAMPLES = settings(max_examples=300, deadline=None)

#: Arrays of a block: mostly canonical lines, some anything (as a JSON decoder returns them).
block_arrays = st.lists(
    st.one_of(lines_st.map(lambda x: x.to_array()), lines_st.map(lambda x: x.to_array()), arrays),
    max_size=6,
)


def _decoded(value):
    """``value`` as a JSON decoder returns it (lists, exact types), or a skip."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return None


def _reference(arr) -> LineBase | None:
    try:
        return line_from_array(arr)
    except ProtocolError:
        return None


# -- one loop for every tag ---------------------------------------------------------------------
@EXAMPLES
@given(block_arrays)
@example([["f", "a", "M#3"], ["x", "k", "v"], ["o", "s", "M#1", "m"], ["d", "M#2"]])
@example([["q", "Z", "why"], ["v", "X"], ["r", "M", "W"]])
@example([["o", "s", "M#0", "m"], ["f", "a", "#3"]])
def test_assemble_is_all_or_nothing_and_equals_line_from_array(arrs):
    arrs = [a for a in map(_decoded, arrs) if a is not None]
    wrapped = [[a] for a in arrs]
    built = fast.build_lines(wrapped)
    reference = [_reference(a) for a in arrs]
    if built is None:  # refused: the caller then runs line_from_array, which decides
        assert fast.check_lines(wrapped) is None
        return
    assert None not in reference
    assert [_line_state(x) for x in built] == [_line_state(x) for x in reference]
    assert fast.check_lines(wrapped) == [x.to_array() for x in reference]


@EXAMPLES
@given(messages)
def test_every_canonical_block_is_assembled(lines):
    """Complete, not just safe: canonical lines of every tag never fall back."""
    wrapped = [[json.loads(json.dumps(x.to_array()))] for x in lines]
    built = fast.build_lines(wrapped)
    assert built is not None and built == lines
    assert _states(built) == _states([line_from_array(a) for (a,) in wrapped])
    assert fast.check_lines(wrapped) == [x.to_array() for x in lines]
    # lenient: references longer than 18 digits are not its canonical form
    lenient = fast.build_lines(wrapped, lenient=True)
    long_ref = any(len(getattr(x, "ref", None) or "") > 20 for x in lines)
    assert (lenient is None) == long_ref
    if lenient is not None:
        assert lenient == built


@EXAMPLES
@given(block_arrays)
def test_check_lines_accepts_exactly_what_build_lines_accepts(arrs):
    wrapped = [[a] for a in map(_decoded, arrs)]
    built = fast.build_lines(wrapped)
    checked = fast.check_lines(wrapped)
    assert (built is None) == (checked is None)
    if built is not None:
        assert checked == [x.to_array() for x in built]


@pytest.mark.parametrize(
    "wrapped",
    [[[]], [["f", "a"], ["g", "b"]], ["x"], [{"f": "a"}], [3], [[[]]], [[["f"]]], [[[1, 2]]]],
)
def test_wrappers_that_do_not_hold_one_line_are_refused(wrapped):
    assert fast.build_lines(wrapped) is None and fast.check_lines(wrapped) is None


# -- blocks: one line unwrapped, several wrapped ------------------------------------------------
@EXAMPLES
@given(_strict_cases())
@example('["f","a"]')
@example(b'  ["f","a"]\t')
@example('["f","a"],["g","b"]')
@example("")
def test_parse_block_equals_the_pydantic_path(data):
    got = fast.parse_block(data)
    if got is not None:
        assert [_line_state(x) for x in got] == _outcome(parse_strict_reference, data)[1]
    if got is not None:
        # one orjson call over the block decides as parse_line does line by line
        nl = b"\n" if isinstance(data, bytes) else "\n"
        assert _states(got) == _states([fast.parse_line(raw) for raw in data.split(nl)])


def _states(lines):
    return None if lines is None else [_line_state(x) for x in lines]


#: Blocks that one orjson call over joined lines could misread: a string or array across a
#: newline, two values on a line, blank lines, CRLF, a line closing its neighbour's wrapper.
_JOINED = [
    '["f","x"],["g"\n"y"]',
    '["f","x"],["g","y"]\n["t","z"]',
    '["f","a"]\n,["g","b"]',
    '["f","x"]]\n[["g","y"]',
    '["x","k",{"a":["x"]\n,"b":"y"}]',
    '["f","a"] \n["g","b"]',
    '["f","a\\"]\n["g","b"]',
    '["f","x"]\n]',
    '[["f","x"]\n]',
    '["f","x"]\n',
    '["f","x"]\n\n["g","y"]',
    '["f","x"]\r\n["g","y"]',
    '["f","a"]\n["g","b"]],[["t","c"]',
]


@pytest.mark.parametrize("text", _JOINED)
def test_joined_blocks_are_read_as_line_by_line(text):
    for data in (text, text.encode()):
        assert _outcome(parse_strict, data) == _outcome(parse_strict_reference, data)
        got = fast.parse_block(data)
        assert got is None or _states(got) == _states(parse_strict_reference(data))


@EXAMPLES
@given(messages)
def test_canonical_messages_take_the_fast_path(lines):
    text = serialize(lines)
    got = fast.parse_message(text)
    if not lines:
        assert got is None  # an empty message is one blank line: the slow path decides
        return
    assert got is not None and _states(got) == _states(parse_strict_reference(text))
    assert _states(fast.parse_message(text.encode() + b"\n")) == _states(got)
    assert fast.check_message(text) == [x.to_array() for x in lines]


@EXAMPLES
@given(messages)
def test_the_benchmarks_floor_assembles_the_same_models(lines):
    """``assemble_trusted`` (MB-1/MB-2's floor) builds what the parser builds, unchecked."""
    arrays = [json.loads(json.dumps(x.to_array())) for x in lines]
    assert _states(fast.assemble_trusted(arrays)) == _states([line_from_array(a) for a in arrays])


# -- the strict stream reader ------------------------------------------------------------------
@st.composite
def chunkings(draw):
    data = draw(_strict_cases())
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    size = draw(st.sampled_from([1, 2, 3, 7, 64, 512, 4096]))
    return data, [data[i : i + size] for i in range(0, len(data), size)]


def _read(chunks, *, strict=True):
    reader = StreamReader(strict=strict)
    got: list = []
    try:
        for chunk in chunks:
            got += reader.feed(chunk)
        got += reader.close()
    except ProtocolError as exc:
        return ("error", type(exc), str(exc), exc.line_no, _states(got))
    result = reader.result()
    assert _states(result.lines) == _states(got) and reader.pending_bytes == 0
    return ("lines", _states(got), result.canonical_lines)


@EXAMPLES
@given(chunkings())
def test_strict_reader_at_fixed_chunk_sizes_equals_the_pydantic_path(case):
    data, chunks = case
    got = _read(chunks)
    with fast_paths_off():
        assert got == _read(chunks)
    try:
        whole = ("lines", _states(parse_strict_reference(data)))
    except ProtocolError as exc:
        whole = ("error", type(exc), str(exc), exc.line_no)
    # the same lines, or the same first bad line and the same error
    assert whole == (got[:2] if got[0] == "lines" else got[:4])


@pytest.mark.parametrize("size", [1, 64, 512, 4096])
def test_strict_reader_on_the_real_messages(size):
    data = "".join(t + "\n" for t in REAL if _outcome(parse_strict_reference, t)[0] != "error")
    data = data.encode()
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    want = _states(parse_strict_reference(data))
    assert len(want) > 100 and _read(chunks) == ("lines", want, len(want))


def _read_any(chunks, *, strict: bool, arrays: bool):
    """What a reader gives for these chunks: its lines and result, or the error."""
    reader = StreamReader(strict=strict, arrays=arrays)
    got: list = []
    try:
        for chunk in chunks:
            got += reader.feed(chunk)
        got += reader.close()
    except ProtocolError as exc:  # the lines before the bad one are kept
        return ("error", type(exc), str(exc), exc.line_no, got, _states(reader.result().lines))
    result = reader.result()
    return ("lines", got, result.repairs, result.canonical_lines, _states(result.lines))


@EXAMPLES
@given(chunkings(), st.booleans())
def test_array_reader_gives_the_arrays_of_the_model_reader(case, strict):
    """``arrays=True``: the same lines as arrays, the same errors at the same line and
    the same result, for any chunking, strict or lenient; with the fast paths off too."""
    _, chunks = case
    got = _read_any(chunks, strict=strict, arrays=True)
    models = _read_any(chunks, strict=strict, arrays=False)
    assert all(a.__class__ is list for a in got[1 if got[0] == "lines" else 4])
    if models[0] == "lines":
        assert got == ("lines", [x.to_array() for x in models[1]], *models[2:])
    else:
        assert got == (*models[:4], [x.to_array() for x in models[4]], models[5])
    with fast_paths_off():
        assert _read_any(chunks, strict=strict, arrays=True) == got


@pytest.mark.parametrize("size", [1, 64, 4096])
def test_array_reader_on_the_real_messages_never_builds_a_model(size, monkeypatch):
    data = "".join(t + "\n" for t in REAL if _outcome(parse_strict_reference, t)[0] != "error")
    data = data.encode()
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    want = [x.to_array() for x in parse_strict_reference(data)]
    monkeypatch.setattr(fast, "parse_block", None)  # the model path must not be reached
    reader = StreamReader(strict=True, arrays=True)
    got = [a for c in chunks for a in reader.feed(c)] + reader.close()
    assert len(want) > 100 and got == want


def test_feed_after_close_is_refused_before_the_type_is_checked():
    reader = StreamReader(strict=True)
    reader.close()
    with pytest.raises(StreamClosedError):
        reader.feed(42)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="feed\\(\\) takes bytes"):
        StreamReader(strict=True).feed(42)  # type: ignore[arg-type]
