"""In-response hints: one-line blockquotes that say what the payload is and what it left out.

The format-adaptive design ("In-Response Hints") defines four families, all of the form
``> [<family>: <body>]`` on a line of their own:

- reference ``> [ref: <hash8>, byte-identical]``: this payload is byte-identical to an
  earlier one in the session (L0 dedup); the earlier copy is in context. The MCP
  proxy's form also names the call that returns it, on the same line:
  ``> [ref: <hash8>, byte-identical. call tersetalk_get {"ref":"<hash8>"}]``.
- near-reference ``> [near-ref: <hash8>, $.a: 1→2]``: equal to an earlier payload but
  for the listed scalar values (``tersetalk mcp-proxy`` with ``hints.near_ref``).
- overflow ``> [+N more <what>. call <how>]``: N items/keys/characters were left out
  for the budget; ``<how>`` is the call that returns them.
- format ``> [encoded: <formats>]``: the encoding the body is in, so it can be decoded.
- metadata ``> [query: <q> | total=N | returned=M]``: the scope of the answer.

and one of this project's: alias ``> [alias: $1=<prefix>]``, a prefix that string
values written ``$1...`` start with (:mod:`tersetalk.formats.aliases`).

A hint always says what was left out and how to get it back (overflow names the
keys or the count and the path to call); its tokens count against the budget.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

HINT = re.compile(r"^> \[(.*)\]$")


def content_hash(text: str) -> str:
    """The 8-hex-digit reference of a payload: a SHA-256 prefix of its bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def reference(text: str) -> str:
    return reference_to(content_hash(text))


def reference_to(ref: str) -> str:
    """The reference hint naming an earlier payload by its 8-hex-digit hash."""
    return f"> [ref: {ref}, byte-identical]"


def retrieval_call(tool: str, ref: str) -> str:
    """``call <tool> {"ref":"<ref>"}``: the one call that returns what a hint names,
    written on the hint's own line so a reader that never saw it can fetch it."""
    return f"call {tool} {json.dumps({'ref': ref}, separators=(',', ':'))}"


def reference_call(ref: str, tool: str) -> str:
    """The reference hint that also names the call returning the body it points at."""
    return f"> [ref: {ref}, byte-identical. {retrieval_call(tool, ref)}]"


def near_reference_call(ref: str, delta: str, own: str, tool: str) -> str:
    """The near-reference hint (the earlier body ``ref`` with ``delta``), naming the call
    that returns this body whole by its own reference ``own``."""
    return f"> [near-ref: {ref}, {delta}. {retrieval_call(tool, own)}]"


def encoded(formats: str, summary: str = "") -> str:
    return f"> [encoded: {formats}{' | ' + summary if summary else ''}]"


def metadata(query: str, total: int, returned: int) -> str:
    return (
        f"> [query: {json.dumps(query, ensure_ascii=False)} | total={total} | returned={returned}]"
    )


def path_text(path: tuple[str | int, ...]) -> str:
    """A JSON path as the argument of a ``get`` call: ``$``, ``$.items[3].user``."""
    out = "$"
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
            out += f".{p}"
        else:
            out += f"[{json.dumps(p, ensure_ascii=False)}]"
    return out


def overflow_items(path: tuple[str | int, ...], kept: int, total: int) -> str:
    """Array items ``kept..total-1`` were left out."""
    return (
        f"> [+{total - kept} more items of {path_text(path)}. call get({path_text(path)}[{kept}:])]"
    )


def overflow_keys(path: tuple[str | int, ...], keys: list[str]) -> str:
    """The named keys of the object at ``path`` were left out."""
    names = ",".join(json.dumps(k, ensure_ascii=False) for k in keys)
    return f"> [+{len(keys)} more keys of {path_text(path)}: {names}. call get({path_text(path)})]"


def overflow_chars(path: tuple[str | int, ...], kept: int, total: int) -> str:
    """A string was cut after ``kept`` of its ``total`` characters."""
    return f"> [+{total - kept} more chars of {path_text(path)}. call get({path_text(path)})]"


@dataclass(frozen=True)
class Hint:
    family: str  # ref | overflow | encoded | query | alias
    body: str


def parse_hint(line: str) -> Hint | None:
    """The hint on ``line``, or None if the line is not a hint."""
    m = HINT.match(line)
    if not m:
        return None
    inner = m.group(1)
    if inner.startswith("ref: "):
        return Hint("ref", inner[5:])
    if inner.startswith("near-ref: "):
        return Hint("near-ref", inner[10:])
    if inner.startswith("encoded: "):
        return Hint("encoded", inner[9:])
    if inner.startswith("query: "):
        return Hint("query", inner[7:])
    if inner.startswith("+"):
        return Hint("overflow", inner)
    if inner.startswith("alias: "):
        return Hint("alias", inner)
    return None


def split_hints(text: str) -> tuple[list[Hint], list[str]]:
    """The leading and trailing hint lines of a payload, and the body lines between."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    head: list[Hint] = []
    while lines and (h := parse_hint(lines[0])) is not None:
        head.append(h)
        lines = lines[1:]
    tail: list[Hint] = []
    while lines and (h := parse_hint(lines[-1])) is not None:
        tail.insert(0, h)
        lines = lines[:-1]
    return head + tail, lines
