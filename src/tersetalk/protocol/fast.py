"""The strict parser's fast path: orjson, one pass over its output, models built directly.

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
call: each line is wrapped in brackets and the newlines kept, ``[[line1],\\n[line2]]``
(``"\\n"`` replaced by ``"],\\n["``). That is sound once the result has ``n + 1``
wrappers for ``n`` newlines and each wrapper holds exactly one flat array of
strings: a raw newline cannot sit inside a JSON string, so the ``],`` before each
newline and the ``[`` after it are structural; the ``]`` cannot close a line's array
(the ``,[`` after it would put a second item into a wrapper) nor the outer array
(text would follow it), so it closes a wrapper; the ``n`` newlines are then ``n``
separators between ``n + 1`` wrappers -- all of them -- and wrapper ``i`` holds
exactly line ``i``, one JSON value with at most blanks around it, which
``json.loads`` reads as the same array. A block without a newline is one line and
goes to orjson unwrapped. Tests check all of this against the Pydantic path with
Hypothesis.

Validation without models (:func:`check_block`, :func:`check_message`, behind
``validate_strict`` and the array stream reader) declares the same checks as msgspec
types and lets msgspec's JSON-lines decoder run them in C; orjson then reads the
arrays with the limit's own one call. On the real messages that takes about a fifth
less time than the Python check loop over orjson's output (:func:`_check`, which
:func:`check_lines` keeps as the readable statement of the checks; tests hold the
two to the same answers).

Where the time goes: per line, orjson's decoding and then assembling the
model -- ``object.__new__``, the ``__dict__`` (CPython builds and drops an empty one
first) and three slot stores -- which costs more than orjson itself. pydantic-core
assembling the same models from dicts in Rust was measured slower than this, so one
loop (:func:`_assemble`) does it, with the tag dispatch written out by arity so a
line costs one ``len``, one unpacking and one or two comparisons before assembly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

import msgspec
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
#: What lenient normalisation maps to itself: it reads at most 18 digits after ``M#``
#: (longer ones are not references to it), so those lines take the lenient path.
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

#: Two-item lines whose one payload item is free text: class and its tag constant.
_FREE_TEXT: dict[str, tuple[type[LineBase], str]] = {
    t: (LINE_TYPES[t], LINE_TYPES[t].model_fields["tag"].default) for t in ("g", "u", "p", "t")
}
_FREE_TEXT_TAGS = frozenset((*_FREE_TEXT, "f"))

# The loop below knows every tag: a new line type must be added there too.
assert set(LINE_TYPES) == {*_FREE_TEXT, "f", "r", "q", "d", "v", "o", "x"}
assert [tuple(LINE_TYPES[t].model_fields) for t in "frqdvox"] == [
    ("tag", "text", "ref"),
    ("tag", "role"),
    ("tag", "to", "text"),
    ("tag", "ref"),
    ("tag", "verdict"),
    ("tag", "summary", "ref", "method"),
    ("tag", "key", "value"),
]


# -- validation without models: msgspec's typed JSON-lines decoder ----------------------------
# The checks of :func:`_check`, declared once more as msgspec types and run in C: a line is
# an array whose first item is its tag, with exactly the payload items of its type
# (``forbid_unknown_fields``: an extra item is an error, not skipped), strict ``str``
# payloads, ``Literal`` roles and verdicts, and the reference pattern. msgspec matches a
# pattern with ``re.search``, so the pattern ends in ``\Z``: "M#3\n" is not a reference.
# The fact's reference may be left off; its default is never validated, and ``null`` is
# refused (``Ref`` is not optional), as :func:`_check` refuses it.
_MsRef = Annotated[str, msgspec.Meta(pattern=REF_PATTERN.removesuffix("$") + r"\Z")]
_MsRole = Literal[ROLES]
_MsVerdict = Literal[VERDICTS]


class _MsLine(msgspec.Struct, array_like=True, forbid_unknown_fields=True, frozen=True):
    pass


def _ms_text_line(tag: str) -> type[_MsLine]:
    return msgspec.defstruct(f"_Ms_{tag}", [("text", str)], bases=(_MsLine,), tag=tag)


class _MsFact(_MsLine, tag="f"):
    text: str
    ref: _MsRef = ""


class _MsRoleLine(_MsLine, tag="r"):
    role: _MsRole


class _MsVerdictLine(_MsLine, tag="v"):
    verdict: _MsVerdict


class _MsDelta(_MsLine, tag="d"):
    ref: _MsRef


class _MsQuestion(_MsLine, tag="q"):
    to: _MsRole
    text: str


class _MsContext(_MsLine, tag="x"):
    key: str
    value: str


class _MsOverflow(_MsLine, tag="o"):
    summary: str
    ref: _MsRef
    method: str


_MS_TYPES = (
    *map(_ms_text_line, _FREE_TEXT),
    _MsFact,
    _MsRoleLine,
    _MsVerdictLine,
    _MsDelta,
    _MsQuestion,
    _MsContext,
    _MsOverflow,
)
assert sorted(t.__struct_config__.tag for t in _MS_TYPES) == sorted(LINE_TYPES)
#: Reads JSON values one after another and checks that each is a line. It does not look
#: at line ends: :func:`check_block` makes sure each value is one physical line.
_ms_lines = msgspec.json.Decoder(Union[_MS_TYPES]).decode_lines  # noqa: UP007 (a tuple of types)
_MsError = (msgspec.ValidationError, msgspec.DecodeError)


def _assemble(
    wrapped: Any,
    ref_ok: Callable[[str], Any],
    # bound once, at definition (positional defaults cost nothing per call, unlike
    # keyword-only ones or global lookups): most blocks of a stream are one line
    new: Callable[..., Any] = _new,
    set_dict: Callable[[Any, Any], None] = _set_dict,
    set_fields_set: Callable[[Any, Any], None] = _set_fields_set,
    set_extra: Callable[[Any, Any], None] = _set_extra,
    set_private: Callable[[Any, Any], None] = _set_private,
    free_text: Callable[[Any], Any] = _FREE_TEXT.get,
    roles: frozenset[str] = _ROLES,
) -> list[LineBase] | None:
    """Models for every ``[array]`` of ``wrapped``, or ``None`` if one is not a canonical line.

    ``wrapped`` comes from orjson (plain lists, exact ``str``). A wrapper that does not
    hold exactly one value raises ValueError (or TypeError) in the unpacking, a tag
    that is no string matches no key or raises TypeError (unhashable): all of them
    mean "not a line" here, as does any other shape, type or value. Each branch is one
    kind of line with its check in the guard, so a line that fails the check (an unknown
    role or verdict, a bad reference) falls through to the final "not a line".
    """
    out: list[LineBase] = []
    append = out.append
    try:
        for (a,) in wrapped:
            if a.__class__ is not list:
                return None
            n = len(a)
            if n == 2:
                tag, x = a
                if x.__class__ is not str:
                    return None
                spec = free_text(tag)
                if spec is not None:
                    cls, tag = spec
                    line = new(cls)
                    set_dict(line, {"tag": tag, "text": x})
                    given = {"text"}
                elif tag == "f":
                    line = new(FactLine)
                    set_dict(line, {"tag": "f", "text": x, "ref": None})
                    given = {"text"}
                elif tag == "r" and x in roles:
                    line = new(RoleLine)
                    set_dict(line, {"tag": "r", "role": x})
                    given = {"role"}
                elif tag == "v" and x in _VERDICTS:
                    line = new(VerdictLine)
                    set_dict(line, {"tag": "v", "verdict": x})
                    given = {"verdict"}
                elif tag == "d" and ref_ok(x):
                    line = new(DeltaLine)
                    set_dict(line, {"tag": "d", "ref": x})
                    given = {"ref"}
                else:
                    return None
            elif n == 3:
                tag, x, y = a
                if x.__class__ is not str or y.__class__ is not str:
                    return None
                if tag == "q" and x in roles:
                    line = new(QuestionLine)
                    set_dict(line, {"tag": "q", "to": x, "text": y})
                    given = {"to", "text"}
                elif tag == "f" and ref_ok(y):
                    line = new(FactLine)
                    set_dict(line, {"tag": "f", "text": x, "ref": y})
                    given = {"text", "ref"}
                elif tag == "x":
                    line = new(ContextLine)
                    set_dict(line, {"tag": "x", "key": x, "value": y})
                    given = {"key", "value"}
                else:
                    return None
            elif n == 4:
                tag, x, y, z = a
                if (
                    tag != "o"
                    or x.__class__ is not str
                    or y.__class__ is not str
                    or z.__class__ is not str
                    or not ref_ok(y)
                ):
                    return None
                line = new(OverflowLine)
                set_dict(line, {"tag": "o", "summary": x, "ref": y, "method": z})
                given = {"summary", "ref", "method"}
            else:
                return None
            set_fields_set(line, given)
            set_extra(line, None)
            set_private(line, None)
            append(line)
    except (ValueError, TypeError):
        return None
    return out


def _check(
    wrapped: Any,
    free_text: frozenset[str] = _FREE_TEXT_TAGS,
    roles: frozenset[str] = _ROLES,
    ref_ok: Callable[[str], Any] = _REF,
) -> list[list[str]] | None:
    """The arrays of ``wrapped`` if :func:`_assemble` (strict) would accept them, else ``None``."""
    out: list[list[str]] = []
    append = out.append
    try:
        for (a,) in wrapped:
            if a.__class__ is not list:
                return None
            n = len(a)
            if n == 2:
                tag, x = a
                if x.__class__ is not str:
                    return None
                if tag in free_text:
                    pass
                elif tag == "r":
                    if x not in roles:
                        return None
                elif tag == "v":
                    if x not in _VERDICTS:
                        return None
                elif tag != "d" or not ref_ok(x):
                    return None
            elif n == 3:
                tag, x, y = a
                if x.__class__ is not str or y.__class__ is not str:
                    return None
                if tag == "q":
                    if x not in roles:
                        return None
                elif tag == "f":
                    if not ref_ok(y):
                        return None
                elif tag != "x":
                    return None
            elif n == 4:
                tag, x, y, z = a
                if (
                    tag != "o"
                    or x.__class__ is not str
                    or y.__class__ is not str
                    or z.__class__ is not str
                    or not ref_ok(y)
                ):
                    return None
            else:
                return None
            append(a)
    except (ValueError, TypeError):
        return None
    return out


def assemble_trusted(arrays: Any) -> list[LineBase]:
    """Models for arrays already known to be canonical lines, checking nothing at all.

    The cost floor of any parser that returns line models: what is left
    after decoding when every check is dropped. Only the microbenchmarks use it; a
    non-canonical array gives a wrong model or an exception, never a refusal.
    """
    new, set_dict, set_fields_set = _new, _set_dict, _set_fields_set
    set_extra, set_private, free_text = _set_extra, _set_private, _FREE_TEXT
    out: list[LineBase] = []
    append = out.append
    for a in arrays:
        n = len(a)
        if n == 2:
            tag, x = a
            if tag == "f":
                line = new(FactLine)
                set_dict(line, {"tag": "f", "text": x, "ref": None})
                given = {"text"}
            elif tag in free_text:
                cls, tag = free_text[tag]
                line = new(cls)
                set_dict(line, {"tag": tag, "text": x})
                given = {"text"}
            else:
                line = new(_SINGLE[tag])
                set_dict(line, {"tag": tag, _SINGLE_FIELD[tag]: x})
                given = {_SINGLE_FIELD[tag]}
        elif n == 3:
            tag, x, y = a
            cls = _PAIR[tag]
            first, second = _PAIR_FIELDS[tag]
            line = new(cls)
            set_dict(line, {"tag": tag, first: x, second: y})
            given = {first, second}
        else:
            tag, x, y, z = a
            line = new(OverflowLine)
            set_dict(line, {"tag": "o", "summary": x, "ref": y, "method": z})
            given = {"summary", "ref", "method"}
        set_fields_set(line, given)
        set_extra(line, None)
        set_private(line, None)
        append(line)
    return out


_SINGLE = {"r": RoleLine, "v": VerdictLine, "d": DeltaLine}
_SINGLE_FIELD = {"r": "role", "v": "verdict", "d": "ref"}
_PAIR = {"q": QuestionLine, "f": FactLine, "x": ContextLine}
_PAIR_FIELDS = {"q": ("to", "text"), "f": ("text", "ref"), "x": ("key", "value")}


# -- entry points --------------------------------------------------------------------------
def build_line(a: Any, *, lenient: bool = False) -> LineBase | None:
    """The line model for one JSON value if it is a canonical line, else ``None``.

    ``a`` must come from a JSON decoder (plain lists, exact ``str``); for such values
    a non-``None`` answer equals ``line_from_array(a)`` (``lenient``: also what
    lenient normalisation makes of ``a``, unchanged and counted canonical).
    """
    lines = _assemble(((a,),), _REF_LENIENT if lenient else _REF)
    return None if lines is None else lines[0]


def build_lines(wrapped: list, *, lenient: bool = False) -> list[LineBase] | None:
    """Models for every ``[array]`` of :func:`load_lines`, or ``None`` if one is not a line."""
    return _assemble(wrapped, _REF_LENIENT if lenient else _REF)


def check_lines(wrapped: list) -> list[list[str]] | None:
    """The arrays of :func:`load_lines`'s wrappers if each is a canonical line, else ``None``.

    Accepts exactly what :func:`build_lines` accepts, without building models.
    """
    return _check(wrapped)


def parse_line(raw: str | bytes, *, lenient: bool = False) -> LineBase | None:
    """One physical line (without its ``\\n``) if it is canonical, else ``None``."""
    try:
        value = _loads(raw)
    except _JSONDecodeError:
        return None
    lines = _assemble(((value,),), _REF_LENIENT if lenient else _REF)
    return None if lines is None else lines[0]


def load_lines(data: str | bytes) -> list | None:
    """Each physical line's JSON value, wrapped (``[[v1], [v2], ...]``), in one orjson call.

    ``data`` is lines joined by ``\\n`` (a final ``\\n`` makes a last, blank line).
    ``None`` means "not decided here" -- a line that is not JSON, or ``data`` not
    ``str``/``bytes``; a wrapper may still hold zero or several values (a blank
    line, two values on one line), which the callers refuse. See the module
    docstring for why one call is sound.
    """
    if data.__class__ is str:
        text = "[[" + data.replace("\n", "],\n[") + "]]"
    elif data.__class__ is bytes:
        text = b"[[" + data.replace(b"\n", b"],\n[") + b"]]"
    else:
        return None
    try:
        wrapped = _loads(text)
    except _JSONDecodeError:
        return None
    # n newlines grew by 3 characters each and the brackets add 4: n + 1 wrappers
    return wrapped if len(wrapped) * 3 == len(text) - len(data) - 1 else None


def _load(data: Any) -> Any:
    """:func:`load_lines`, but a single line is decoded unwrapped (the same answer, cheaper).

    ``replace`` hands back the very object when there is no newline (CPython), which
    saves searching the text twice; were it a copy, the wrapped read would decide alike.
    """
    if data.__class__ is str:
        body = data.replace("\n", "],\n[")
        if body is data:
            try:
                return ((_loads(data),),)
            except _JSONDecodeError:
                return None
        text = "[[" + body + "]]"
    elif data.__class__ is bytes:
        body = data.replace(b"\n", b"],\n[")
        if body is data:
            try:
                return ((_loads(data),),)
            except _JSONDecodeError:
                return None
        text = b"[[" + body + b"]]"
    else:
        return None
    try:
        wrapped = _loads(text)
    except _JSONDecodeError:
        return None
    return wrapped if len(wrapped) * 3 == len(text) - len(data) - 1 else None  # see load_lines


def parse_block(data: str | bytes, *, lenient: bool = False) -> list[LineBase] | None:
    """Models for every physical line of ``data`` if all are canonical, else ``None``."""
    wrapped = _load(data)
    return None if wrapped is None else _assemble(wrapped, _REF_LENIENT if lenient else _REF)


def check_block(data: str | bytes, message: bool = False) -> list[list[str]] | None:
    """The validated canonical arrays of every physical line of ``data``, or ``None``.

    With ``message``, a final newline ends the last line instead of starting a blank
    one (as :func:`_body`). msgspec checks every line in C against the line types
    above (accepting what :func:`_check` accepts), then orjson reads the lines joined
    by commas -- the limit's own call -- for the arrays. msgspec reads ``data`` as JSON
    values one after another, whatever blanks (or none) lie between them, so its
    success says each value is a valid line and no newline sits in a string. The
    join then parses only if each newline lay between two top-level values, exactly
    one newline between each two: a comma put in a blank inside an array or object
    lands beside a ``[``, ``{``, ``:`` or another comma, a comma at either end or two
    in a row are not JSON, and two values with no comma between are not either. So
    the ``i``-th item is the ``i``-th line, read alike alone.
    """
    try:
        if data.__class__ is str:
            if message and data.endswith("\n"):
                data = data[:-1]
            _ms_lines(data)
            arrays = _loads("[" + data.replace("\n", ",") + "]")
        elif data.__class__ is bytes:
            if message and data.endswith(b"\n"):
                data = data[:-1]
            _ms_lines(data)
            arrays = _loads(b"[" + data.replace(b"\n", b",") + b"]")
        else:
            return None
    except (*_MsError, _JSONDecodeError, UnicodeEncodeError):  # a str's lone surrogate
        return None
    except (RecursionError, UnicodeDecodeError):
        # msgspec's own refusals of hostile input: deep nesting (``[[[...``
        # after a valid line) raises RecursionError, not a DecodeError as orjson's bound
        # does, and invalid UTF-8 in bytes raises UnicodeDecodeError. Not decided here:
        # the line-by-line parser raises the package's error for the first bad line
        # (InvalidJSONError "deeper than MAX_DEPTH", EncodingError naming the line).
        return None
    return arrays or None  # blanks only: the line-by-line parser's error


def _body(data: Any) -> Any:
    """A message without its final newline: ``"a\\n"`` is one line, not two."""
    if data.__class__ is str:
        return data[:-1] if data.endswith("\n") else data
    if data.__class__ is bytes:
        return data[:-1] if data.endswith(b"\n") else data
    return data


def parse_message(data: str | bytes, *, lenient: bool = False) -> list[LineBase] | None:
    """Every line of a canonical message as models, or ``None`` (not decided here)."""
    wrapped = _load(_body(data))
    return None if wrapped is None else _assemble(wrapped, _REF_LENIENT if lenient else _REF)


def check_message(data: str | bytes) -> list[list[str]] | None:
    """The validated canonical arrays of a canonical message, or ``None``."""
    return check_block(data, True)
