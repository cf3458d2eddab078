"""The protocol's fast paths (protocol/fast.py) give exactly what the Pydantic paths give.

Every fast path is compared with the path it replaces, on generated input
(Hypothesis, at least 200 examples each) and on the real messages the goldens
recorded: the same models (type, fields, ``model_fields_set``, field order, repr,
hash), the same arrays, and for bad input the same exception type, message and
line number. The reference paths are the Pydantic ones: ``parse_strict_reference``
and the lenient machine with the fast path switched off.
"""

from __future__ import annotations

import gzip
import json
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_protocol_properties import json_messages, messages, near_json

from tersetalk.protocol import (
    FactLine,
    LineBase,
    ProtocolError,
    StreamReader,
    fast,
    line_from_array,
    parse_lenient,
    parse_strict,
    serialize,
)
from tersetalk.protocol.codec import parse_strict_reference, validate_strict

EXAMPLES = settings(max_examples=300, deadline=None)

# -- strategies ------------------------------------------------------------------------------
_TAGS = ["r", "g", "f", "u", "p", "q", "d", "v", "o", "t", "x", "F", "fact", "", "rr"]
_ITEMS = [
    "M", "W", "C", "A", "R", "E", "m", "a", "M#3", "M#0", "M#03", "M#3\n", " M#3", "M#",
    "M#" + "9" * 18, "M#1" + "0" * 18, "M#" + "1" * 40, "#3", "3", "Paris", "", "\u2028",
    "é", "😀", "\\", '"', "\n", "M#3 ",
]  # fmt: skip
items = st.one_of(
    st.sampled_from(_ITEMS),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.sampled_from(["f", "x"]), max_size=2),
    st.dictionaries(st.sampled_from(["f", "text"]), st.sampled_from(["x", "M"]), max_size=1),
)
arrays = st.one_of(
    st.tuples(st.sampled_from(_TAGS), st.lists(items, max_size=4)).map(lambda t: [t[0], *t[1]]),
    st.lists(items, max_size=4),
    items,
)


def _real_contents() -> list[str]:
    """Every distinct message the golden transcripts recorded (real engine output)."""
    out: set[str] = set()
    for path in sorted((Path(__file__).parent / "golden" / "cases").glob("*.json.gz")):
        data = json.loads(gzip.open(path).read())
        col = data["columns"].index("messages")
        values = data["values"]
        column = values["messages"] if isinstance(values, dict) else [r[col] for r in values]
        for cell in column:
            out.update(m["content"] for m in json.loads(cell or "[]"))
    return sorted(out)


REAL = _real_contents()


def _line_state(line: LineBase) -> tuple:
    """Everything observable about a line model, for exact comparison."""
    return (
        type(line),
        list(line.__dict__.items()),
        line.model_fields_set,
        line.__pydantic_extra__,
        line.__pydantic_private__,
        repr(line),
        hash(line),
        line.model_dump(),
        line.model_dump(exclude_unset=True),
        line.model_dump_json(),
    )


def _outcome(fn, *args):
    """A comparable outcome: the lines' states, or the error's type, text and line."""
    try:
        got = fn(*args)
    except ProtocolError as exc:
        return ("error", type(exc), str(exc), exc.line_no)
    if isinstance(got, list) and got and isinstance(got[0], LineBase):
        return ("lines", [_line_state(x) for x in got])
    return ("value", got)


@contextmanager
def fast_paths_off():
    """Every fast path answers "not decided here": the Pydantic paths run alone."""
    with (
        mock.patch.object(fast, "parse_line", lambda raw, lenient=False: None),
        mock.patch.object(fast, "parse_block", lambda data, lenient=False: None),
        mock.patch.object(fast, "parse_message", lambda data, lenient=False: None),
        mock.patch.object(fast, "check_message", lambda data: None),
        mock.patch.object(fast, "check_block", lambda data, message=False: None),
    ):
        yield


# -- one line ---------------------------------------------------------------------------------
@EXAMPLES
@given(arrays)
@example(["f", "Paris", "M#3\n"])
@example(["f", "Paris", None])
@example(["o", "s", "M#1", "]"])
@example(["r", "M", "W"])
def test_build_line_equals_line_from_array(arr):
    fast_line = fast.build_line(arr)
    try:
        reference = line_from_array(arr)
    except ProtocolError:
        assert fast_line is None
        return
    if fast_line is not None:  # None is allowed: the caller then runs line_from_array
        assert _line_state(fast_line) == _line_state(reference)


@EXAMPLES
@given(st.sampled_from(["r", "g", "f", "u", "p", "q", "d", "v", "o", "t", "x"]), st.data())
def test_build_line_accepts_every_canonical_line(tag, data):
    """The fast path is not just safe but complete: every valid line takes it."""
    line = data.draw(messages.filter(lambda ls: any(x.tag == tag for x in ls)))
    line = next(x for x in line if x.tag == tag)
    arr = json.loads(json.dumps(line.to_array()))
    built = fast.build_line(arr)
    assert built is not None and built == line
    assert _line_state(built) == _line_state(line_from_array(arr))
    assert fast.check_lines([[arr]]) == [arr]


@EXAMPLES
@given(arrays)
@example(["r", "A"])
@example(["q", "A", "x"])
@example(["v", "M"])
@example(["f", "x", None])
@example(["f", "x", ""])
@example(["f", "x", "M#3\n"])
@example(["d", "M#03"])
@example(["g", "a", "b"])
@example(["o", "s", "M#1"])
@example(["x", "k"])
@example(["t", 1])
@example(["g", "\ud800"])
def test_check_lines_accepts_what_build_lines_accepts(arr):
    built = fast.build_lines([[arr]])
    checked = fast.check_lines([[arr]])
    assert (built is None) == (checked is None)
    if built is not None:
        assert checked == [built[0].to_array()]
    # the text path declares the same checks as msgspec types: it must decide alike on
    # what orjson reads (orjson refuses a lone surrogate, so neither path sees one)
    for text in (json.dumps(arr), json.dumps(arr, ensure_ascii=False)):
        try:
            want = fast.check_lines([[orjson.loads(text)]])
        except orjson.JSONDecodeError:
            want = None
        assert fast.check_block(text) == want


@EXAMPLES
@given(arrays)
def test_lenient_builders_only_take_lines_normalisation_keeps(arr):
    """A line the lenient fast path takes is what parse_lenient made of it before."""
    line = fast.build_line(arr, lenient=True)
    if line is None:
        return
    text = json.dumps(arr, ensure_ascii=False)
    with fast_paths_off():
        reference = parse_lenient(text)
    assert reference.canonical_lines == 1 and not reference.repairs
    assert [_line_state(x) for x in reference.lines] == [_line_state(line)]


# -- whole messages ---------------------------------------------------------------------------
_PATHOLOGICAL = [
    # a newline inside a string when the message is read as one array: must not merge
    '["o","s","M#1","]\n["]\n["t","x"],["t","y"]',
    '["f","a"\n"b"]\n["t","x"],["t","y"]',
    '["f","a"],["f","b"]\n["g","c"]',
    # a line that closes its wrapper and opens another: two wrappers from one line
    '["t","x"]],[["t","y"]',
    '["g","a"]\n["t","x"]],[["t","y"]\n["f","b"]',
    # ...and with a string across a newline, which only the raw newline refuses
    '["f","a\nb"]\n["t","x"]],[["t","y"]',
    '["f","a"]\n\n["g","b"]',
    '["f","a"]\r\n["g","b"]\r\n',
    '["f","a"]\n',
    '["f","a"]\n\n',
    '  ["f","a"]  \n\t["g","b"]',
    "\ufeff" + '["f","a"]',
    '["f","\\ud800"]',
    '["f","\\ud83d\\ude00"]',
    '["f",NaN]',
    '["f","a"]\n[]',
    '[["f","a"]]',
    '["f","a","M#' + "1" * 30 + '"]',
    '["d","M#' + "7" * 19 + '"]',
    "[" * 70 + "]" * 70,
    "",
    "\n",
    '["f","a"]\n["g","b"',
]


def _strict_cases():
    texts = st.one_of(
        messages.map(serialize),
        messages.map(lambda ls: serialize(ls) + "\n"),
        messages.map(lambda ls: serialize(ls).replace("\n", "\r\n")),
        near_json,
        json_messages,
        st.sampled_from(REAL),
        st.sampled_from(_PATHOLOGICAL),
    )
    return st.one_of(texts, texts.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary())


@EXAMPLES
@given(_strict_cases())
@example(b'["f","caf\xc3"]')
def test_parse_strict_equals_the_pydantic_path(text):
    assert _outcome(parse_strict, text) == _outcome(parse_strict_reference, text)


@EXAMPLES
@given(_strict_cases())
# where msgspec's JSON-lines reader differs from a line split (it reads values one after
# another, whatever blanks lie between: "\r", blank lines, values side by side), where a
# comma join alone would be fooled (a newline in a string), and msgspec's own edges (a
# struct read from an object, a default, a str's lone surrogate)
@example('["g","a"]\r["g","b"]')
@example('["g","a"]\r\n["g","b"]\r')
@example('["g","a"]\n\n["g","b"]')
@example('["g","a"]\n \t\n["g","b"]')
@example(' ["g","a"]\t\n\r["g","b"] ')
@example("\n")
@example(" ")
@example('{"type":"g","text":"a"}')
@example('["f","x",null]')
@example('["f","x",""]')
@example('["g","a","b"]')
@example('["g","a"],["g","b"]')
@example('["o","s","M#1","m","extra"]')
@example('["d","M#3\\n"]')
@example('["g","\ud800"]')
@example('["g","a\n b"]')  # joined by a comma this would be one valid line
@example('["g","a\nb"]\n["g","c"]')
@example('["g","a"]\n["f","\udfff","M#1"]')
def test_validate_strict_equals_arrays_of_the_pydantic_path(text):
    want = _outcome(lambda t: [x.to_array() for x in parse_strict_reference(t)], text)
    assert _outcome(validate_strict, text) == want


@EXAMPLES
@given(_strict_cases())
def test_parse_lenient_equals_the_pydantic_path(text):
    got = parse_lenient(text)
    with fast_paths_off():
        want = parse_lenient(text)
    assert [_line_state(x) for x in got.lines] == [_line_state(x) for x in want.lines]
    assert got.repairs == want.repairs
    assert got.canonical_lines == want.canonical_lines
    assert [(type(e), str(e)) for e in got.errors] == [(type(e), str(e)) for e in want.errors]


@pytest.mark.parametrize("text", _PATHOLOGICAL)
def test_pathological_messages(text):
    assert _outcome(parse_strict, text) == _outcome(parse_strict_reference, text)


def test_real_messages_agree_and_mostly_take_the_fast_path():
    fast_hits = 0
    for text in REAL:
        assert _outcome(parse_strict, text) == _outcome(parse_strict_reference, text), text
        fast_hits += fast.parse_message(text) is not None
    strict_ok = sum(_outcome(parse_strict_reference, t)[0] != "error" for t in REAL)
    assert len(REAL) > 100 and fast_hits == strict_ok - sum(t.strip() == "" for t in REAL)


def test_fast_models_behave_like_validated_ones():
    built = fast.build_line(["f", "Paris", "M#3"])
    ref = FactLine(text="Paris", ref="M#3")
    assert built == ref and hash(built) == hash(ref)
    assert built.model_copy(update={"text": "Lyon"}) == ref.model_copy(update={"text": "Lyon"})
    import pickle

    assert pickle.loads(pickle.dumps(built)) == ref
    with pytest.raises(Exception) as fast_exc:
        built.text = "x"
    with pytest.raises(Exception) as ref_exc:
        ref.text = "x"
    assert type(fast_exc.value) is type(ref_exc.value)


# -- streams ----------------------------------------------------------------------------------
@st.composite
def chunked(draw):
    data = draw(_strict_cases())
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return data, [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _stream(strict: bool, chunks: list[bytes]):
    reader = StreamReader(strict=strict)
    got: list = []
    try:
        for chunk in chunks:
            got += reader.feed(chunk)
        got += reader.close()
    except ProtocolError as exc:
        return ("error", type(exc), str(exc), exc.line_no, [_line_state(x) for x in got])
    result = reader.result()
    return ("lines", [_line_state(x) for x in got], result.repairs, result.canonical_lines)


@EXAMPLES
@given(chunked())
def test_stream_readers_equal_the_pydantic_path(case):
    data, chunks = case
    for strict in (True, False):
        got = _stream(strict, chunks)
        with fast_paths_off():
            want = _stream(strict, chunks)
        assert got == want


def test_stream_reader_keeps_only_the_unterminated_tail():
    reader = StreamReader(strict=True)
    assert reader.feed(b'["f","a"]\n["g"') == [FactLine(text="a")]
    assert reader.pending_bytes == len(b'["g"')
    assert reader.feed(bytearray(b',"b"]\n')) == parse_strict('["g","b"]')
    assert reader.pending_bytes == 0
    assert reader.feed(memoryview(b'["t","c"]')) == [] and reader.close() == parse_strict(
        '["t","c"]'
    )
