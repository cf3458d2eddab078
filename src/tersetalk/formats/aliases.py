"""Shared prefixes of string values, named once: the dictionary layer of ``mckp``.

Why: in real API responses most tokens are values, not keys or punctuation, and most
of those values are URLs that repeat one long prefix (a GitHub repository object
carries about forty ``https://api.github.com/repos/<owner>/<repo>/...`` links). No
per-subtree format can shorten a value without changing it; a prefix written once
and referred to by a two-character alias can, and the text still reads back to the
exact JSON.

The aliases travel as hints of their own, before the body::

    > [alias: $1=https://api.github.com/repos/octocat/Hello-World]

and a string value that started with that prefix is written ``$1/issues{/number}``.
Lossless by construction:

- the alias marker (``$``, else ``~``, else ``^``) is a character that starts no
  string value of the payload, so after decoding every string that starts with the
  marker and an alias digit is an alias, and no other string is touched;
- alias ids are single digits (at most nine aliases), so ``$12`` is alias 1
  followed by ``2``;
- keys are never rewritten, only string values; a prefix holds no newline and no
  ``]`` (it must fit on its hint line).

The choice is greedy and measured: candidates are the prefixes of string values that
end just before a ``/`` (URL and path segments); the one that saves the most tokens
(occurrences x tokens of the prefix, minus its hint) is taken first, strings take
the longest chosen prefix they start with. The solver then encodes the payload with
and without the aliases and keeps the cheaper text, so the layer never costs tokens.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from tersetalk.formats.tree import Array, Node, Object, Scalar

MARKERS = ("$", "~", "^")
MAX_ALIASES = 9
MIN_PREFIX_CHARS = 12
_HINT = re.compile(r"^alias: ([$~^])([1-9])=(.+)$", re.DOTALL)


def strings(node: Node) -> Iterator[str]:
    """Every string value of a JSON tree (keys excluded), in document order."""
    if isinstance(node, Scalar):
        if isinstance(node.value, str):
            yield node.value
    elif isinstance(node, Object):
        for _, child in node.items:
            yield from strings(child)
    elif isinstance(node, Array):
        for child in node.items:
            yield from strings(child)


def _marker(values: list[str]) -> str | None:
    starts = {v[:1] for v in values}
    return next((m for m in MARKERS if m not in starts), None)


def _candidates(value: str) -> Iterator[str]:
    """Prefixes of ``value`` that end just before one of its ``/`` (segment boundaries)."""
    if "\n" in value or "]" in value:
        value = re.split(r"[\n\]]", value, maxsplit=1)[0]
    start = value.find("://") + 3 if "://" in value else 0
    for i, ch in enumerate(value):
        if ch == "/" and i >= max(start, MIN_PREFIX_CHARS) and value[i - 1] != "/":
            yield value[:i]


def choose(node: Node, count: Callable[[str], int], compact: str | None = None) -> dict[str, str]:
    """``{alias: prefix}`` worth naming in this payload (empty when none saves tokens).

    ``count`` is the tokenizer's counter; an alias is kept only when the tokens its
    uses save exceed the tokens of its hint line. ``compact``, the payload's compact
    JSON where the caller has it, spares the walk over its strings when it holds no
    ``/``: every prefix ends before one (JSON text writes a string's ``/`` as it is).
    """
    if compact is not None and "/" not in compact:
        return {}
    return choose_among(list(strings(node)), count)


def choose_among(values: list[str], count: Callable[[str], int]) -> dict[str, str]:
    """:func:`choose` for a payload whose string values are ``values``, in document order."""
    marker = _marker(values)
    if marker is None or not values:
        return {}
    uses = Counter(values)
    holders: dict[str, list[str]] = {}  # prefix -> the distinct values it starts
    for v in uses:
        for c in _candidates(v):
            holders.setdefault(c, []).append(v)
    pool = sorted(c for c, vs in holders.items() if sum(uses[v] for v in vs) >= 2)
    chosen: dict[str, str] = {}
    covered: dict[str, int] = {}  # value -> tokens a chosen prefix already saves it
    while len(chosen) < MAX_ALIASES and pool:
        alias = f"{marker}{len(chosen) + 1}"
        best, best_gain = None, 0
        for c in pool:
            save = count(c) - count(alias)
            gain = sum(uses[v] * max(0, save - covered.get(v, 0)) for v in holders[c])
            gain -= count(hint_line(alias, c) + "\n")
            if gain > best_gain:
                best, best_gain = c, gain
        if best is None:
            break
        chosen[alias] = best
        save = count(best) - count(alias)
        for v in holders[best]:
            covered[v] = max(covered.get(v, 0), save)
        pool.remove(best)
    return chosen


def hint_line(alias: str, prefix: str) -> str:
    return f"> [alias: {alias}={prefix}]"


def hint_lines(table: dict[str, str]) -> list[str]:
    return [hint_line(a, p) for a, p in table.items()]


def parse(body: str) -> tuple[str, str] | None:
    """``(alias, prefix)`` of an alias hint's body, or None if it is not one."""
    m = _HINT.match(body)
    return (m.group(1) + m.group(2), m.group(3)) if m else None


def rewriter(table: dict[str, str]) -> Callable[[str], str]:
    """A string value as :func:`apply` writes it: the longest chosen prefix it starts
    with replaced by that prefix's alias."""
    ordered = sorted(table.items(), key=lambda kv: -len(kv[1]))

    def rewrite(value: str) -> str:
        for alias, prefix in ordered:  # longest prefix first
            if value.startswith(prefix):
                return alias + value[len(prefix) :]
        return value

    return rewrite


def apply(node: Node, table: dict[str, str]) -> Node:
    """The tree with every string value that starts with a chosen prefix aliased."""
    rewrite = rewriter(table)

    def walk(n: Node) -> Node:
        if isinstance(n, Scalar):
            return Scalar(rewrite(n.value)) if isinstance(n.value, str) else n
        if isinstance(n, Object):
            return Object(tuple((k, walk(v)) for k, v in n.items))
        if isinstance(n, Array):
            return Array(tuple(walk(v) for v in n.items))
        return n

    return walk(node)


def expand(value: Any, table: dict[str, str]) -> Any:
    """A decoded JSON value with its aliases expanded back to the prefixes they name."""
    if isinstance(value, str):
        head = value[:2]
        return table[head] + value[2:] if head in table else value
    if isinstance(value, dict):
        return {k: expand(v, table) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, table) for v in value]
    return value
