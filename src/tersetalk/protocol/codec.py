"""Canonical serialisation and strict parsing of TerseTalk-JSONL.

One JSON array per line, compact separators, UTF-8 kept as is (``ensure_ascii=False``
saves tokens on non-ASCII text). Lines are split on ``\\n`` only -- never with
``str.splitlines``, which would also split on U+2028 and friends that JSON leaves
unescaped inside strings. Blank lines are ignored; a trailing ``\\r`` (CRLF) is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator

import tersetalk.protocol.fast as _fast  # not "from . import": that names the package

from .errors import EncodingError, InputTypeError, InvalidJSONError
from .lines import LineBase, line_from_array

_JSON_BLANK = " \t\r"

#: How deep a line's JSON may nest. A canonical line is one flat array and the lenient
#: shapes (objects, ``{"lines": [...]}``, structured context values) stay far shallower.
#: Deeper input is refused before any recursive parser sees it: Python's JSON decoder,
#: ``ast`` and the line code all recurse, and whether they hit the recursion limit
#: depends on how deep the caller's stack already is -- so without a fixed bound the
#: stream reader and the whole-message parser could give different answers.
MAX_DEPTH = 64

# Strings (possibly unterminated) are matched whole so brackets inside them do not count.
_JSON_NESTING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{]+|[\]}]+', re.S)
_PY_NESTING_RE = re.compile(
    r"""'[^'\\]*(?:\\.[^'\\]*)*'?|"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{(]+|[\]})]+""", re.S
)


def exceeds_depth(
    text: str, start: int = 0, end: int | None = None, *, python: bool = False
) -> bool:
    """True when brackets outside strings in ``text[start:end]`` nest deeper than MAX_DEPTH.

    A linear scan without recursion, cheap when there are few brackets at all. For
    text that ``json.loads`` accepts it measures exactly the value's nesting depth;
    for anything else it is a deterministic estimate. ``python=True`` also counts
    parentheses and single-quoted strings (for Python literals).
    """
    end = len(text) if end is None else end
    openers = "[{(" if python else "[{"
    if sum(text.count(ch, start, end) for ch in openers) <= MAX_DEPTH:
        return False
    depth = 0
    for match in (_PY_NESTING_RE if python else _JSON_NESTING_RE).finditer(text, start, end):
        first = text[match.start()]
        if first in openers:
            depth += match.end() - match.start()
            if depth > MAX_DEPTH:
                return True
        elif first not in "\"'":
            depth = max(0, depth - (match.end() - match.start()))
    return False


def serialize_line(line: LineBase) -> str:
    """One line in canonical compact form, e.g. ``["f","Paris is in France","M#3"]``."""
    return json.dumps(line.to_array(), ensure_ascii=False, separators=(",", ":"))


def serialize(lines: Iterable[LineBase]) -> str:
    """A whole message: canonical lines joined by ``\\n``, without a trailing newline.

    No trailing newline because every token on the wire is counted; readers treat the
    end of the message as the end of the last line.
    """
    out = []
    for line in lines:
        if not isinstance(line, LineBase):
            raise InputTypeError(
                "serialize() takes line models", snippet=repr(line), fix="use normalize_obj()"
            )
        out.append(serialize_line(line))
    return "\n".join(out)


def physical_lines(data: str | bytes | bytearray) -> Iterator[tuple[int, str | bytes]]:
    """Yield ``(1-based line number, raw line)`` split on ``\\n`` with ``\\r`` kept."""
    if isinstance(data, str):
        parts: list = data.split("\n")
    elif isinstance(data, bytes | bytearray | memoryview):
        parts = bytes(data).split(b"\n")
    else:
        raise InputTypeError(
            "a message must be str or bytes", snippet=type(data).__name__, fix="pass text"
        )
    # "a\n" is one line, not two: the empty remainder after a final newline is no line.
    if parts and not parts[-1]:
        parts.pop()
    yield from enumerate(parts, start=1)


def decode_strict(raw: bytes, line_no: int) -> str:
    """Decode one line's bytes as UTF-8 or raise :class:`EncodingError`."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"invalid UTF-8 at byte {exc.start} of the line ({exc.reason})",
            line_no=line_no,
            snippet=repr(raw[max(0, exc.start - 10) : exc.start + 10]),
            fix="send UTF-8 text",
        ) from None


def parse_line_strict(raw: str, line_no: int) -> LineBase | None:
    """Parse one physical line strictly; ``None`` for a blank line.

    A canonical line takes the fast path (:mod:`.fast`); anything else goes through
    :func:`parse_line_reference`, which decides and words every error.
    """
    line = _fast.parse_line(raw)
    return line if line is not None else parse_line_reference(raw, line_no)


def parse_line_reference(raw: str, line_no: int) -> LineBase | None:
    """The Pydantic path of :func:`parse_line_strict`: ``json.loads`` and the line models."""
    if raw.endswith("\r"):
        raw = raw[:-1]
    body = raw.strip(_JSON_BLANK)
    if not body:
        return None
    if body[0] in "[{" and exceeds_depth(body):
        raise InvalidJSONError(
            f"JSON nested deeper than {MAX_DEPTH} levels",
            line_no=line_no,
            snippet=raw,
            fix="write one flat JSON array [tag, payload...] per line; send nested data as text",
        )
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        # JSONDecodeError is a ValueError; huge ints and deep nesting raise the others.
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise InvalidJSONError(
            f"not a JSON value ({reason})",
            line_no=line_no,
            snippet=raw,
            fix="write one JSON array per line, or use parse_lenient()",
        ) from None
    return line_from_array(value, line_no=line_no)


def _parse_lines(text: str | bytes, parse_line: Callable[[str, int], LineBase | None]) -> list:
    out: list[LineBase] = []
    for line_no, raw in physical_lines(text):
        if isinstance(raw, bytes):
            raw = decode_strict(raw, line_no)
        line = parse_line(raw, line_no)
        if line is not None:
            out.append(line)
    return out


def parse_strict(text: str | bytes) -> list[LineBase]:
    """Parse a canonical message; raise a :class:`ProtocolError` on the first bad line.

    Accepts objects, long tag names and the like only via :func:`parse_lenient`; here a
    line must already be ``[tag, payload...]`` with the exact payload types. A
    canonical message is read in one orjson call (:mod:`.fast`); any other goes line
    by line, so the first bad line raises exactly what :func:`parse_strict_reference`
    raises.
    """
    lines = _fast.parse_message(text)
    return lines if lines is not None else _parse_lines(text, parse_line_strict)


def parse_strict_reference(text: str | bytes) -> list[LineBase]:
    """:func:`parse_strict` without the fast path: ``json.loads`` and Pydantic per line.

    The definition the fast path is tested against; not for production use.
    """
    return _parse_lines(text, parse_line_reference)


def validate_strict(text: str | bytes) -> list[list[str]]:
    """Check a message exactly as :func:`parse_strict` does, without building models.

    Returns each line's canonical array (``[line.to_array() for line in
    parse_strict(text)]``) and raises the same error for the same first bad line.
    For consumers that only read the payloads (field extraction, counting).
    """
    arrays = _fast.check_block(text, True)
    if arrays is not None:
        return arrays
    return [line.to_array() for line in _parse_lines(text, parse_line_strict)]
