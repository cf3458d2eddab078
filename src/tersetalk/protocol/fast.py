"""The strict parser's fast path: orjson, a tag dispatch table, models built directly.

Nearly every message on the wire is canonical, and for a canonical line the strict
parser's answer is known without Pydantic: the tag picks the line type, and the
payload items must be exactly ``str`` (roles and verdicts one of three letters,
references ``M#n``). This module checks exactly that over orjson's output and builds
the line model without running the model's validators. It never decides a line it
is unsure of: anything else -- bad JSON, a wrong type, a blank line, CRLF, a
surrogate, deep nesting -- makes it answer ``None``, and the caller runs the
line-by-line parser of :mod:`.codec`, which raises the very errors it always did.

Why the answers are the same as Pydantic's:

* orjson accepts a subset of what ``json.loads`` accepts (it refuses NaN, lone
  surrogates, integers beyond 64 bits), and where both accept they give the same
  value; its strings are valid Unicode, so the lone-surrogate validator of
  :class:`~.lines.LineBase` could never fire;
* the checks below are those of :func:`~.lines.line_from_array` and the models:
  strict ``str`` (orjson's strings are exact ``str``), ``Literal`` roles and
  verdicts, and the reference pattern (``fullmatch``, as Rust's ``$`` is the end
  of the text, unlike Python's);
* a model is assembled the way pydantic-core assembles one: ``__dict__`` with every
  field in definition order, ``__pydantic_fields_set__`` naming the payload fields
  given (never ``tag``, which is a default), no extra, no private state.

A whole message (or a stream's block of complete lines) is parsed with one orjson
call: each line is wrapped in brackets and the newlines kept, ``[[line1],\n[line2]]``
(``"\n"`` replaced by ``"],\n["``). That is sound once the result has ``n + 1``
wrappers for ``n`` newlines and each wrapper holds exactly one flat array of
strings: a raw newline cannot sit inside a JSON string, so the ``],`` before each
newline and the ``[`` after it are structural; the ``]`` cannot close a line's array
(the ``,[`` after it would put a second item into a wrapper) nor the outer array
(text would follow it), so it closes a wrapper; the ``n`` newlines are then ``n``
separators between ``n + 1`` wrappers -- all of them -- and wrapper ``i`` holds
exactly line ``i``, one JSON value with at most blanks around it, which
``json.loads`` reads as the same array. Tests check all of this against the
Pydantic path with Hypothesis.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from .lines import (
    LINE_TYPES,
    ContextLine,
    DeltaLine,
    FactLine,
    LineBase,
    OverflowLine,
    QuestionLine,
    RoleLine,
    VerdictLine,
)
from .tags import REF_PATTERN, ROLES, VERDICTS

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError

#: ``REF_PATTERN`` without its anchors, matched whole (Rust's ``$`` has no newline
#: allowance; Python's would accept "M#3\n").
_REF = re.compile(REF_PATTERN.removeprefix("^").removesuffix("$")).fullmatch
_REF_LENIENT = re.compile(r"M#[1-9][0-9]{0,17}").fullmatch
_ROLES = frozenset(ROLES)
_VERDICTS = frozenset(VERDICTS)


def _slot_setter(name: str) -> Callable[[Any, Any], None]:
    """The C-level setter of a BaseModel slot (``__dict__`` or a ``__pydantic_*__``)."""
    for klass in LineBase.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name].__set__
    raise AttributeError(name)  # pragma: no cover - pydantic changed its layout


_new = object.__new__
_set_dict = _slot_setter("__dict__")
_set_fields_set = _slot_setter("__pydantic_fields_set__")
_set_extra = _slot_setter("__pydantic_extra__")
_set_private = _slot_setter("__pydantic_private__")


def _make(cls: type[LineBase], values: dict[str, Any], given: set[str]) -> LineBase:
    line = _new(cls)
    _set_dict(line, values)
    _set_fields_set(line, given)
    _set_extra(line, None)
    _set_private(line, None)
    return line


# -- one builder per tag: the model for a canonical array, or None -----------------------
# The arrays come from orjson (lists of str, int, float, bool, None, list, dict); the
# caller has checked that ``a`` is a non-empty list whose first item is the tag.


def _text_builder(cls: type[LineBase]) -> Callable[[list], LineBase | None]:
    tag = cls.model_fields["tag"].default

    def build(a: list) -> LineBase | None:
        if len(a) == 2:
            text = a[1]
            if text.__class__ is str:
                line = _new(cls)
                _set_dict(line, {"tag": tag, "text": text})
                _set_fields_set(line, {"text"})
                _set_extra(line, None)
                _set_private(line, None)
                return line
        return None

    return build


def _builders(ref_ok: Callable[[str], Any]) -> dict[str, Callable[[list], LineBase | None]]:
    """The dispatch table: tag -> builder; ``ref_ok`` decides which references pass."""

    def fact(a: list) -> LineBase | None:
        n = len(a)
        text = a[1] if n > 1 else None
        if text.__class__ is not str:
            return None
        if n == 2:
            return _make(FactLine, {"tag": "f", "text": text, "ref": None}, {"text"})
        if n == 3:
            ref = a[2]
            if ref.__class__ is str and ref_ok(ref):
                return _make(FactLine, {"tag": "f", "text": text, "ref": ref}, {"text", "ref"})
        return None

    def role(a: list) -> LineBase | None:
        if len(a) == 2:
            who = a[1]
            if who.__class__ is str and who in _ROLES:
                return _make(RoleLine, {"tag": "r", "role": who}, {"role"})
        return None

    def question(a: list) -> LineBase | None:
        if len(a) == 3:
            to, text = a[1], a[2]
            if to.__class__ is str and to in _ROLES and text.__class__ is str:
                return _make(QuestionLine, {"tag": "q", "to": to, "text": text}, {"to", "text"})
        return None

    def delta(a: list) -> LineBase | None:
        if len(a) == 2:
            ref = a[1]
            if ref.__class__ is str and ref_ok(ref):
                return _make(DeltaLine, {"tag": "d", "ref": ref}, {"ref"})
        return None

    def verdict(a: list) -> LineBase | None:
        if len(a) == 2:
            code = a[1]
            if code.__class__ is str and code in _VERDICTS:
                return _make(VerdictLine, {"tag": "v", "verdict": code}, {"verdict"})
        return None

    def overflow(a: list) -> LineBase | None:
        if len(a) == 4:
            summary, ref, method = a[1], a[2], a[3]
            if (
                summary.__class__ is str
                and ref.__class__ is str
                and method.__class__ is str
                and ref_ok(ref)
            ):
                return _make(
                    OverflowLine,
                    {"tag": "o", "summary": summary, "ref": ref, "method": method},
                    {"summary", "ref", "method"},
                )
        return None

    def context(a: list) -> LineBase | None:
        if len(a) == 3:
            key, value = a[1], a[2]
            if key.__class__ is str and value.__class__ is str:
                return _make(
                    ContextLine, {"tag": "x", "key": key, "value": value}, {"key", "value"}
                )
        return None

    table = {
        "r": role,
        "g": _text_builder(LINE_TYPES["g"]),
        "f": fact,
        "u": _text_builder(LINE_TYPES["u"]),
        "p": _text_builder(LINE_TYPES["p"]),
        "q": question,
        "d": delta,
        "v": verdict,
        "o": overflow,
        "t": _text_builder(LINE_TYPES["t"]),
        "x": context,
    }
    assert set(table) == set(LINE_TYPES)
    return table


#: What the strict parser accepts.
_BUILDERS = _builders(_REF)
#: Canonical lines that lenient normalisation maps to themselves. It is the strict
#: table but for references: normalisation reads at most 18 digits after ``M#``
#: (longer ones are not references to it), so those lines take the lenient path.
_LENIENT_BUILDERS = _builders(_REF_LENIENT)


def _reject(a: list) -> None:
    return None


# -- the same checks without building models (validated canonical arrays) ---------------
def _text_ok(a: list) -> bool:
    return len(a) == 2 and a[1].__class__ is str


def _fact_ok(a: list) -> bool:
    n = len(a)
    if n == 2:
        return a[1].__class__ is str
    return n == 3 and a[1].__class__ is str and a[2].__class__ is str and _REF(a[2]) is not None


def _role_ok(a: list) -> bool:
    return len(a) == 2 and a[1].__class__ is str and a[1] in _ROLES


def _question_ok(a: list) -> bool:
    return len(a) == 3 and a[1].__class__ is str and a[1] in _ROLES and a[2].__class__ is str


def _delta_ok(a: list) -> bool:
    return len(a) == 2 and a[1].__class__ is str and _REF(a[1]) is not None


def _verdict_ok(a: list) -> bool:
    return len(a) == 2 and a[1].__class__ is str and a[1] in _VERDICTS


def _overflow_ok(a: list) -> bool:
    return (
        len(a) == 4
        and a[1].__class__ is str
        and a[2].__class__ is str
        and a[3].__class__ is str
        and _REF(a[2]) is not None
    )


def _context_ok(a: list) -> bool:
    return len(a) == 3 and a[1].__class__ is str and a[2].__class__ is str


_CHECKS: dict[str, Callable[[list], bool]] = {
    "r": _role_ok,
    "g": _text_ok,
    "f": _fact_ok,
    "u": _text_ok,
    "p": _text_ok,
    "q": _question_ok,
    "d": _delta_ok,
    "v": _verdict_ok,
    "o": _overflow_ok,
    "t": _text_ok,
    "x": _context_ok,
}
assert set(_CHECKS) == set(LINE_TYPES)


def _never(a: list) -> bool:
    return False


# -- entry points --------------------------------------------------------------------------
def build_line(a: Any, *, lenient: bool = False) -> LineBase | None:
    """The line model for one JSON value if it is a canonical line, else ``None``.

    ``a`` must come from a JSON decoder (plain lists, exact ``str``); for such values
    a non-``None`` answer equals ``line_from_array(a)`` (``lenient``: also what
    lenient normalisation makes of ``a``, unchanged and counted canonical).
    """
    if a.__class__ is not list or not a:
        return None
    tag = a[0]
    if tag.__class__ is not str:
        return None
    return (_LENIENT_BUILDERS if lenient else _BUILDERS).get(tag, _reject)(a)


#: Two-item lines whose one payload item is free text: the common case, built inline.
_FREE_TEXT: dict[str, tuple[type[LineBase], str]] = {
    t: (LINE_TYPES[t], LINE_TYPES[t].model_fields["tag"].default) for t in ("g", "u", "p", "t")
}
_FREE_TEXT_TAGS = frozenset((*_FREE_TEXT, "f"))


def build_lines(wrapped: list, *, lenient: bool = False) -> list[LineBase] | None:
    """Models for every ``[array]`` of :func:`load_lines`, or ``None`` if one is not a line.

    The loop builds the commonest lines (free text, facts without a reference)
    inline, saving two calls per line; every other line goes through its builder.
    A tag that is no string either matches no key or raises TypeError (unhashable),
    and an empty array IndexError: both mean "not a line" here.
    """
    get = (_LENIENT_BUILDERS if lenient else _BUILDERS).get
    free_text = _FREE_TEXT.get
    new, set_dict, set_fields_set = _new, _set_dict, _set_fields_set
    set_extra, set_private = _set_extra, _set_private
    out: list[LineBase] = []
    append = out.append
    try:
        for (a,) in wrapped:  # ValueError unless each wrapper holds exactly one value
            if a.__class__ is list and len(a) == 2:
                tag, text = a
                if text.__class__ is str:
                    if tag == "f":
                        line = new(FactLine)
                        set_dict(line, {"tag": "f", "text": text, "ref": None})
                        set_fields_set(line, {"text"})
                        set_extra(line, None)
                        set_private(line, None)
                        append(line)
                        continue
                    spec = free_text(tag)
                    if spec is not None:
                        cls, tag = spec
                        line = new(cls)
                        set_dict(line, {"tag": tag, "text": text})
                        set_fields_set(line, {"text"})
                        set_extra(line, None)
                        set_private(line, None)
                        append(line)
                        continue
            if a.__class__ is not list:
                return None
            line = get(a[0], _reject)(a)
            if line is None:
                return None
            append(line)
    except (ValueError, TypeError, IndexError):
        return None
    return out


def check_lines(wrapped: list) -> list[list[str]] | None:
    """The arrays of :func:`load_lines`'s wrappers if each is a canonical line, else ``None``.

    Accepts exactly what :func:`build_lines` accepts, without building models.
    """
    get = _CHECKS.get
    free_text = _FREE_TEXT_TAGS
    out: list[list[str]] = []
    append = out.append
    try:
        for (a,) in wrapped:
            if a.__class__ is list and len(a) == 2:
                tag, text = a
                if text.__class__ is str and tag in free_text:
                    append(a)
                    continue
            if a.__class__ is not list or not get(a[0], _never)(a):
                return None
            append(a)
    except (ValueError, TypeError, IndexError):
        return None
    return out


def parse_line(raw: str | bytes, *, lenient: bool = False) -> LineBase | None:
    """One physical line (without its ``\\n``) if it is canonical, else ``None``."""
    try:
        value = _loads(raw)
    except _JSONDecodeError:
        return None
    return build_line(value, lenient=lenient)


def load_lines(data: str | bytes) -> list | None:
    """Each physical line's JSON value, wrapped (``[[v1], [v2], ...]``), in one orjson call.

    ``data`` is lines joined by ``\\n`` (a final ``\\n`` makes a last, blank line).
    ``None`` means "not decided here" -- a line that is not JSON, or ``data`` not
    ``str``/``bytes``; a wrapper may still hold zero or several values (a blank
    line, two values on one line), which the callers refuse. See the module
    docstring for why one call is sound.
    """
    if data.__class__ is str:
        nl, head, joined, tail = "\n", "[[", "],\n[", "]]"
    elif data.__class__ is bytes:
        nl, head, joined, tail = b"\n", b"[[", b"],\n[", b"]]"
    else:
        return None
    text = head + data.replace(nl, joined) + tail
    try:
        wrapped = _loads(text)
    except _JSONDecodeError:
        return None
    # each newline grew by 3 characters: the count of newlines without another pass
    return wrapped if len(wrapped) == (len(text) - len(data) - 4) // 3 + 1 else None


def _message_body(data: Any) -> Any:
    """A message without its final newline: ``"a\\n"`` is one line, not two."""
    if data.__class__ is str:
        return data[:-1] if data.endswith("\n") else data
    if data.__class__ is bytes:
        return data[:-1] if data.endswith(b"\n") else data
    return data


def parse_block(data: str | bytes, *, lenient: bool = False) -> list[LineBase] | None:
    """Models for every physical line of ``data`` if all are canonical, else ``None``."""
    wrapped = load_lines(data)
    return None if wrapped is None else build_lines(wrapped, lenient=lenient)


def parse_message(data: str | bytes, *, lenient: bool = False) -> list[LineBase] | None:
    """Every line of a canonical message as models, or ``None`` (not decided here)."""
    return parse_block(_message_body(data), lenient=lenient)


def check_message(data: str | bytes) -> list[list[str]] | None:
    """The validated canonical arrays of a canonical message, or ``None``."""
    wrapped = load_lines(_message_body(data))
    return None if wrapped is None else check_lines(wrapped)
