"""One typed tree for the two kinds of payload agents pass around: JSON and Markdown.

Why one tree: the format-adaptive encoder chooses an encoding per subtree, and one
solver should work on a GitHub API body and on a README with tables alike. JSON
becomes object / array / scalar nodes whose scalars keep their JSON type (a string
``"12"`` and a number ``12`` are different data, and so are ``null`` and ``""``).
Markdown becomes section / table / list / blockquote / code-fence / paragraph
nodes, parsed by markdown-it-py with its GFM table rule: no hand-written Markdown
parsing, so the tree sees a table exactly where a renderer would.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeAlias

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

JSONScalar: TypeAlias = str | int | float | bool | None


class TreeError(ValueError):
    """A payload that cannot become a tree (not JSON data, a non-finite number, ...)."""


class TreeDepthError(TreeError):
    """JSON nested deeper than :data:`MAX_DEPTH`: refused before anything recurses on it."""


#: How deep a JSON payload may nest (arrays and objects). The tree, the solver, the
#: encoders and Python's JSON decoder all recurse once or more per level, so without a
#: fixed bound a payload a few hundred levels deep ends in RecursionError, at a depth
#: that depends on the caller's stack. Every encoder handles this bound with
#: room to spare (measured: the first failures are near 250 levels); real API payloads
#: nest about ten levels.
MAX_DEPTH = 100

# Strings (possibly unterminated) are matched whole so brackets inside them do not count.
_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{]+|[\]}]+', re.S)


#: a JSON number literal (RFC 8259), its fraction and exponent as groups 1 and 2
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", re.ASCII)


def json_number(text: str) -> int | float | None:
    """The number ``json.loads`` reads from ``text`` where ``text`` is exactly a JSON
    number (an int without fraction or exponent, else a float), else None. Python's own
    ``int``/``float`` read it as the JSON decoder does (a table's cells are read this
    way by the thousand, and ``json.loads`` per cell was a tenth of a read-back)."""
    if text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1):
        return int(text)  # the most common number in a table: a plain integer
    m = _NUMBER.fullmatch(text)
    if m is None:
        return None
    return float(text) if m.group(1) or m.group(2) else int(text)


def json_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when brackets outside strings in ``text`` nest deeper than ``limit``.

    A linear scan without recursion, run before a recursive decoder sees the text. For
    text that ``json.loads`` accepts it is exactly the value's nesting depth; for
    anything else a deterministic estimate (the decoder then refuses it anyway).
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _NESTING.finditer(text):
        first = text[match.start()]
        if first in "[{":
            depth += match.end() - match.start()
            if depth > limit:
                return True
        elif first != '"':
            depth = max(0, depth - (match.end() - match.start()))
    return False


def _too_deep(what: str) -> TreeDepthError:
    return TreeDepthError(
        f"{what} nests deeper than {MAX_DEPTH} levels of arrays/objects, the most the "
        "format encoders follow; flatten the payload or send its deep part as a JSON string"
    )


# --- JSON nodes ------------------------------------------------------------------

_first = itemgetter(0)


@dataclass(frozen=True)
class Scalar:
    """A JSON scalar; ``value`` keeps its JSON type (str, int, float, bool or None)."""

    value: JSONScalar


@dataclass(frozen=True)
class Object:
    """A JSON object: ordered (key, child) pairs, keys unique."""

    items: tuple[tuple[str, Node], ...]

    def keys(self) -> tuple[str, ...]:
        return tuple(map(_first, self.items))


@dataclass(frozen=True)
class Array:
    """A JSON array."""

    items: tuple[Node, ...]


# --- Markdown nodes --------------------------------------------------------------


@dataclass(frozen=True)
class Paragraph:
    """A paragraph (or raw HTML block): its source text, inline markup kept."""

    text: str


@dataclass(frozen=True)
class CodeFence:
    """A fenced or indented code block; ``info`` is the fence's info string."""

    info: str
    code: str


@dataclass(frozen=True)
class Table:
    """A GFM table: header cells and rows of cells (source text, ``\\|`` unescaped)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class ListBlock:
    """A bullet or ordered list; each item is the sequence of blocks inside it."""

    ordered: bool
    items: tuple[tuple[Node, ...], ...]


@dataclass(frozen=True)
class Blockquote:
    """A blockquote: in tool responses it carries metadata (hints), so it costs nothing."""

    children: tuple[Node, ...]


@dataclass(frozen=True)
class Section:
    """A heading and the blocks up to the next heading of the same or a higher level."""

    level: int
    heading: str
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Document:
    """A Markdown document: the blocks before the first heading, then its sections."""

    children: tuple[Node, ...]


JSONNode: TypeAlias = Scalar | Object | Array
Node: TypeAlias = (
    Scalar
    | Object
    | Array
    | Paragraph
    | CodeFence
    | Table
    | ListBlock
    | Blockquote
    | Section
    | Document
)


# --- JSON ------------------------------------------------------------------------


def from_python(value: Any) -> JSONNode:
    """The tree of a JSON value (what ``json.loads`` returns).

    Raises TreeError for anything JSON cannot hold: NaN/infinity, non-string keys,
    tuples, sets or other objects; TreeDepthError beyond :data:`MAX_DEPTH`.
    """
    return _from_python(value, 1)


def _from_python(value: Any, depth: int) -> JSONNode:
    """The tree of ``value``, whose lists and objects start at nesting level ``depth``:
    deeper than :data:`MAX_DEPTH` is refused where it is met, so the recursion here
    never goes past it (one walk checks the depth and builds the tree)."""
    if value is None or isinstance(value, bool | int | str):
        return Scalar(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TreeError(f"{value!r} is not a JSON number; JSON has no NaN or infinity")
        return Scalar(value)
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        raise _too_deep("the value")
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise TreeError(f"object key {k!r} is not a string; JSON keys are strings")
        return Object(tuple((k, _from_python(v, depth + 1)) for k, v in value.items()))
    if isinstance(value, list):
        return Array(tuple(_from_python(v, depth + 1) for v in value))
    raise TreeError(f"{type(value).__name__} is not JSON data; pass what json.loads returns")


def parse_json(text: str) -> JSONNode:
    """Parse JSON text into a tree (NaN/Infinity literals are refused).

    Nesting beyond :data:`MAX_DEPTH` raises TreeDepthError.
    """
    return parse_json_value(text)[0]


def parse_json_value(text: str) -> tuple[JSONNode, Any]:
    """:func:`parse_json`'s tree and the value ``json.loads`` read (what ``to_python``
    of the tree gives, without walking it again).

    The depth is checked as the tree is built: ``json.loads`` itself stops at Python's
    recursion limit with RecursionError (refused here as too deep), well before its C
    stack is at risk, and anything deeper than :data:`MAX_DEPTH` but within that limit
    is refused by the walk that builds the tree (a scan of the text first cost as much
    as the parse and the walk together on a 100 KB payload)."""

    value = load_json(text)
    try:
        return _from_python(value, 1), value
    except TreeDepthError:
        raise _too_deep("the JSON") from None


def _refuse(const: str) -> Any:
    raise TreeError(f"{const} is not JSON; the payload must be standard JSON")


def load_json(text: str) -> Any:
    """``json.loads(text)`` for standard JSON only: NaN/Infinity literals, text that is
    no JSON and nesting past Python's recursion limit raise TreeError. The value is not
    checked against :data:`MAX_DEPTH` (:func:`from_python` does that as it builds the
    tree)."""
    try:
        return json.loads(text, parse_constant=_refuse)
    except RecursionError:
        raise _too_deep("the JSON") from None
    except ValueError as exc:  # JSONDecodeError, and an integer past Python's digit limit
        raise TreeError(f"not JSON: {str(exc)[:200]}") from exc


def to_python(node: Node) -> Any:
    """The JSON value of a JSON tree (the inverse of ``from_python``).

    A Markdown table gives a list of objects keyed by its header (cells as strings),
    if its header cells are unique; other Markdown nodes have no JSON value.
    """
    if isinstance(node, Scalar):
        return node.value
    if isinstance(node, Object):
        return {k: to_python(v) for k, v in node.items}
    if isinstance(node, Array):
        return [to_python(v) for v in node.items]
    if isinstance(node, Table):
        return to_python(table_to_json(node))
    raise TreeError(f"a {type(node).__name__} node has no JSON value; only JSON trees do")


def is_json(node: Node) -> bool:
    """Whether ``node`` is a JSON tree all the way down."""
    if isinstance(node, Scalar):
        return True
    if isinstance(node, Object):
        return all(is_json(v) for _, v in node.items)
    if isinstance(node, Array):
        return all(is_json(v) for v in node.items)
    return False


def table_to_json(table: Table) -> Array:
    """A Markdown table as an array of flat objects keyed by the header, cells as strings.

    Why: so a Markdown table enters the same solver as a JSON array of records.
    Raises TreeError if two header cells are equal (the keys would collide).
    """
    if len(set(table.header)) != len(table.header):
        raise TreeError(f"table header {table.header!r} repeats a column name")
    return Array(
        tuple(
            Object(tuple((k, Scalar(c)) for k, c in zip(table.header, row, strict=True)))
            for row in table.rows
        )
    )


def records_keys(node: Node) -> tuple[str, ...] | None:
    """Keys of a non-empty array of objects that all have the same keys in order: the
    shape a table (CSV, Markdown) can carry, one row per object."""
    if not isinstance(node, Array) or not node.items:
        return None
    first = node.items[0]
    if not isinstance(first, Object) or not first.items:
        return None
    keys = first.keys()
    for item in node.items:
        if not isinstance(item, Object) or item.keys() != keys:
            return None
    return keys


#: JSON text of a value for :func:`same_value`'s first check (keys as they are, no
#: NaN: a value that needs either is not JSON data and is compared the long way)
_EXACT = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False,
                          skipkeys=False, separators=(",", ":"))  # fmt: skip


def exact_text(value: Any) -> str | None:
    """The JSON text :func:`same_value` writes a container as (None where it cannot),
    for a caller that compares several values with one and writes it once."""
    try:
        return _EXACT.encode(value)
    except (TypeError, ValueError, RecursionError):
        return None


def same_value(a: Any, b: Any, b_text: str | None = None) -> bool:
    """Strict equality of JSON values: types, key order and float sign included.

    Python's ``==`` says ``True == 1 == 1.0`` and ``0.0 == -0.0``; for a lossless
    round trip those are all data loss.

    Two containers are first compared whole in C: equal by ``==`` and written as the
    same JSON text, they are the same value (the text tells ``true`` from ``1`` from
    ``1.0``, ``0.0`` from ``-0.0`` and one key order from another, and ``==`` tells
    apart what the text would write alike: a key ``1`` from a key ``"1"``). Where that
    check fails (or cannot be made) the values are compared node by node, so it only
    ever shortens a True. A 100 KB value: 2 ms instead of 5. (The values are what a
    JSON or literal parser returns: a subclass of ``str`` or ``int`` inside a container
    would pass for its base type there.) ``b_text``: ``exact_text(b)``, where the
    caller has it.
    """
    if type(a) is not type(b):
        return False
    if type(a) is dict or type(a) is list:
        try:
            if a == b and _EXACT.encode(a) == (b_text or _EXACT.encode(b)):
                return True
        except (TypeError, ValueError, RecursionError):
            pass
        return _same(a, b)
    return _same(a, b)


def _same(a: Any, b: Any) -> bool:
    """:func:`same_value`, node by node."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


# --- Markdown --------------------------------------------------------------------


def markdown_parser() -> MarkdownIt:
    """CommonMark with the GFM table rule: the one parser every Markdown path uses."""
    return MarkdownIt("commonmark").enable("table")


def _inline(node: SyntaxTreeNode) -> str:
    return "".join(c.content for c in node.children if c.type == "inline")


def _cells(tr: SyntaxTreeNode) -> tuple[str, ...]:
    return tuple(_inline(cell) for cell in tr.children)


def _block(node: SyntaxTreeNode) -> Node | None:
    """One block of the syntax tree (headings are grouped by the caller)."""
    t = node.type
    if t == "paragraph":
        return Paragraph(_inline(node))
    if t in ("fence", "code_block"):
        return CodeFence(node.info.strip() if t == "fence" else "", node.content)
    if t == "html_block":
        return Paragraph(node.content)
    if t == "table":
        header: tuple[str, ...] = ()
        rows: list[tuple[str, ...]] = []
        for part in node.children:
            for tr in part.children:
                if part.type == "thead":
                    header = _cells(tr)
                else:
                    rows.append(_cells(tr))
        return Table(header, tuple(rows))
    if t in ("bullet_list", "ordered_list"):
        return ListBlock(
            t == "ordered_list",
            tuple(_blocks(item.children) for item in node.children),
        )
    if t == "blockquote":
        return Blockquote(_blocks(node.children))
    if t == "hr":
        return None
    raise TreeError(f"unexpected Markdown block {t!r}")


def _blocks(nodes: list[SyntaxTreeNode]) -> tuple[Node, ...]:
    """Blocks in order, each heading opening a Section that nests by level."""
    root: list[Node] = []
    # stack of (level, heading, children) for the open sections
    stack: list[tuple[int, str, list[Node]]] = []

    def close_to(level: int) -> None:
        while stack and stack[-1][0] >= level:
            lvl, heading, children = stack.pop()
            sec = Section(lvl, heading, tuple(children))
            (stack[-1][2] if stack else root).append(sec)

    for n in nodes:
        if n.type == "heading":
            level = int(n.tag[1:])
            close_to(level)
            stack.append((level, _inline(n), []))
            continue
        block = _block(n)
        if block is not None:
            (stack[-1][2] if stack else root).append(block)
    close_to(0)
    return tuple(root)


def parse_markdown(text: str) -> Document:
    """Parse Markdown (CommonMark + GFM tables) into a Document tree."""
    tree = SyntaxTreeNode(markdown_parser().parse(text))
    return Document(_blocks(tree.children))


def walk(node: Node):
    """Every node of the tree, depth first, parents before children."""
    yield node
    if isinstance(node, Object):
        for _, v in node.items:
            yield from walk(v)
    elif isinstance(node, Array):
        for v in node.items:
            yield from walk(v)
    elif isinstance(node, Section | Document | Blockquote):
        for v in node.children:
            yield from walk(v)
    elif isinstance(node, ListBlock):
        for item in node.items:
            for v in item:
                yield from walk(v)
