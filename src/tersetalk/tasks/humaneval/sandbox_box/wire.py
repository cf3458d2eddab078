"""Plain data across the sandbox boundary: builtin values as tagged JSON, one line each.

This file runs on both sides of the HumanEval boundary: in the judge (the dataset's
trusted tests) and in the candidate's process (model-written code), and in the host's
tests. It needs the standard library only, because the sandboxes see no site-packages.

Why a format of our own and not pickle, marshal or ``repr``: what the candidate sends
is hostile. ``pickle`` runs code on load and ``marshal`` is documented as unsafe for
crafted input; JSON carries no code, and :func:`decode` builds only exact builtin
types (``type(x) is ...`` checks, never ``==``), so an object whose ``__eq__`` always
says yes cannot cross: the judge compares values of its own making.

Scalars (None, bool, int, float, str) are JSON scalars; every container is a JSON array
whose first item is its tag: ``["l", ...]`` list, ``["t", ...]`` tuple, ``["s", ...]``
set, ``["f", ...]`` frozenset, ``["d", [k, v], ...]`` dict, ``["b", "<base64>"]``
bytes, ``["c", re, im]`` complex. A JSON object anywhere is invalid.
"""

from __future__ import annotations

import base64
import binascii
import json

MAX_DEPTH = 100  # nesting of a decoded value (HumanEval's deepest is 3)


class WireError(ValueError):
    """A value that cannot cross the boundary, or a line that is not a valid value."""


def encode(value: object, depth: int = 0) -> object:
    """``value`` as JSON-ready data; subclasses of builtins travel as their base type.

    Raises :class:`WireError` for anything that is not built from builtin values (a
    generator, a class instance, a function) or nests deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        raise WireError(f"value nests deeper than {MAX_DEPTH}")
    if value is None or type(value) is bool:  # bool has no subclasses
        return value
    if isinstance(value, str):
        return str.__str__(value)  # an exact str, also of a subclass
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, complex):
        return ["c", value.real, value.imag]
    if isinstance(value, (bytes, bytearray)):
        return ["b", base64.b64encode(bytes(value)).decode("ascii")]
    d = depth + 1
    if isinstance(value, dict):
        return ["d", *([encode(k, d), encode(v, d)] for k, v in dict.items(value))]
    for kind, tag in ((list, "l"), (tuple, "t"), (frozenset, "f"), (set, "s")):
        if isinstance(value, kind):
            return [tag, *(encode(x, d) for x in kind.__iter__(value))]
    raise WireError(f"a value of type {type(value).__name__} cannot cross the sandbox boundary")


def dumps(value: object) -> bytes:
    """One line: the encoded value followed by a newline."""
    try:
        return json.dumps(encode(value), ensure_ascii=True, allow_nan=True).encode() + b"\n"
    except (RecursionError, ValueError, TypeError) as exc:
        raise WireError(str(exc)) from None


def decode(data: object, depth: int = 0) -> object:
    """The builtin value that ``data`` (parsed JSON) encodes; :class:`WireError` if none."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nests deeper than {MAX_DEPTH}")
    t = type(data)
    if data is None or t in (bool, int, float, str):
        return data
    if t is not list or not data or type(data[0]) is not str:
        raise WireError("a container must be a JSON array that starts with its tag")
    tag, items = data[0], data[1:]
    d = depth + 1
    try:
        if tag == "l":
            return [decode(x, d) for x in items]
        if tag == "t":
            return tuple(decode(x, d) for x in items)
        if tag == "s":
            return {decode(x, d) for x in items}
        if tag == "f":
            return frozenset(decode(x, d) for x in items)
        if tag == "d":
            out = {}
            for pair in items:
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("a dict item must be a [key, value] pair")
                out[decode(pair[0], d)] = decode(pair[1], d)
            return out
        if tag == "b" and len(items) == 1 and type(items[0]) is str:
            return base64.b64decode(items[0], validate=True)
        if tag == "c" and len(items) == 2 and all(type(x) in (int, float) for x in items):
            return complex(items[0], items[1])
    except TypeError as exc:  # an unhashable set member or dict key
        raise WireError(str(exc)) from None
    except binascii.Error as exc:
        raise WireError(f"bytes: {exc}") from None
    raise WireError(f"unknown tag {tag!r} or a malformed {tag!r} value")


def loads(line: bytes) -> object:
    """The value of one line written by :func:`dumps` (or by hostile code pretending to)."""
    try:
        return decode(json.loads(line))
    except RecursionError:
        raise WireError(f"value nests deeper than {MAX_DEPTH}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, int digits
        raise WireError(str(exc)[:200]) from None


def loads_message(line: bytes) -> dict:
    """A protocol message: a JSON object whose values are left to the caller to decode."""
    try:
        msg = json.loads(line)
    except (RecursionError, ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not a JSON message: {str(exc)[:200]}") from None
    if type(msg) is not dict:
        raise WireError("a message must be a JSON object")
    return msg


def dumps_message(**fields: object) -> bytes:
    """A protocol message as one line (its values already encoded)."""
    return json.dumps(fields, ensure_ascii=True).encode() + b"\n"
