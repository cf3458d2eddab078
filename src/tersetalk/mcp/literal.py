"""Structured text a server prints as a Python literal, read without running it.

``mcp-server-sqlite`` answers a query with ``str(list_of_dicts)``:
``[{'id': 1, 'name': 'x', 'score': None}]``. That is not JSON (single quotes, ``None``,
``True``), yet it is exactly as structured. :func:`parse_literal` reads such text with
:func:`ast.literal_eval` (which evaluates literals only, never calls anything) and
accepts it only if every value is one JSON can hold the same way: dicts with string
keys, lists, strings, ints, finite floats, booleans and None. Tuples, sets, bytes,
complex numbers and NaN have no exact JSON form, so such text stays text.

Whatever a server prints is hostile input: the text is refused before parsing if it is
longer than ``max_chars`` or nests deeper than :data:`tersetalk.formats.tree.MAX_DEPTH`
(Python's parser would otherwise exhaust the stack), and any parser failure means
"not a literal".
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from tersetalk.formats.tree import MAX_DEPTH

# quoted strings are matched whole so brackets inside them do not count
_NESTING = re.compile(r"'(?:[^'\\\n]|\\.)*'?|\"(?:[^\"\\\n]|\\.)*\"?|[\[{(]|[\]})]", re.S)


def _too_deep(text: str, limit: int) -> bool:
    depth = 0
    for m in _NESTING.finditer(text):
        tok = m.group(0)
        if tok in "[{(":
            depth += 1
            if depth > limit:
                return True
        elif tok in "]})":
            depth -= 1
    return False


def _json_like(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if v is None or isinstance(v, (bool, int, str)):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                return False
            continue
        if isinstance(v, list):
            stack.extend(v)
            continue
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                return False
            stack.extend(v.values())
            continue
        return False  # tuple, set, bytes, complex, ...
    return True


def parse_literal(text: str, *, max_chars: int = 4_000_000) -> list | dict | None:
    """The list or dict ``text`` is the Python literal of, or None if it is not one."""
    body = text.strip()
    if not body or body[0] not in "[{" or len(body) > max_chars:
        return None
    if _too_deep(body, MAX_DEPTH):
        return None
    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, (list, dict)) or not _json_like(value):
        return None
    return value
