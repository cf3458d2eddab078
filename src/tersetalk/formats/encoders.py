"""Lossless encoders with decoders, each eligible only where it loses nothing.

Why "eligible": the solver picks, per subtree, the cheapest encoding; an encoding
that drops a key, turns a number into a string or null into ``""`` would look cheap
and be wrong. So every encoder declares the node shapes it carries (``_shape_ok``)
and then checks the round trip on the node itself (``decode(encode(node))`` must be
``to_python(node)``, types and key order included). Anything unexpected, including
an exception inside the library, makes the encoder ineligible: it fails closed.

Scalars in cell formats (``csv``, ``markdown_table``, ``kv``) are written one way
and read back by one rule (``format_cell`` / ``parse_cell``): ``null`` is the empty
cell, ``true``/``false`` are booleans, a JSON number is a number, anything else is
a string. A string that would read back as something else (``"12"``, ``"true"``,
``""``) makes its node ineligible for those formats; JSON and TOON still carry it.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, ClassVar

import toon

from tersetalk.formats.tree import (
    Array,
    JSONScalar,
    Node,
    Object,
    Scalar,
    Table,
    is_json,
    json_number,
    parse_markdown,
    records_keys,
    same_value,
    to_python,
)


class FormatDecodeError(ValueError):
    """Text that is not a valid encoding of the named format."""


def format_cell(value: JSONScalar) -> str:
    """A scalar as cell text: null -> "", booleans as true/false, numbers as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return value


def parse_cell(text: str) -> JSONScalar:
    """Cell text back to a scalar, the inverse of ``format_cell`` where it is one."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    number = json_number(text)
    return text if number is None else number


def cell_survives(node: Node) -> bool:
    """Whether a node is a scalar whose cell text reads back as the same value."""
    if not isinstance(node, Scalar):
        return False
    try:
        return same_value(parse_cell(format_cell(node.value)), node.value)
    except ValueError:  # e.g. an int beyond Python's int-to-str digit limit
        return False


#: the last node :func:`_records` answered for, and its answer, as one tuple (read and
#: replaced whole, so threads never pair one node with another's answer): a format's
#: shape check and its encoding ask it of the same node in turn, and each pass reads
#: every cell (the node is held, so it is never another node at the same address)
_LAST_RECORDS: tuple[Any, tuple[str, ...] | None] = (None, None)


def _records(node: Node) -> tuple[str, ...] | None:
    """The common keys of a non-empty array of flat objects with identical keys."""
    global _LAST_RECORDS
    last = _LAST_RECORDS
    if last[0] is node:
        return last[1]
    keys = _records_of(node)
    _LAST_RECORDS = (node, keys)
    return keys


def _records_of(node: Node) -> tuple[str, ...] | None:
    keys = records_keys(node)
    if keys is None:
        return None
    assert isinstance(node, Array)
    if not all(cell_survives(v) for item in node.items for _, v in item.items):  # type: ignore[union-attr]
        return None
    return keys


class Encoder:
    """An encoding: ``encode(node) -> str``, ``decode(text) -> JSON value``.

    Subclasses set ``name`` and ``lossless`` and implement ``_shape_ok``,
    ``_encode`` and ``decode``. ``eligible`` is the contract the solver relies on:
    True only if ``decode(encode(node))`` is exactly ``to_python(node)``.
    """

    name: ClassVar[str]
    lossless: ClassVar[bool] = True

    def _shape_ok(self, node: Node) -> bool:
        raise NotImplementedError

    def _encode(self, node: Node) -> str:
        raise NotImplementedError

    def decode(self, text: str) -> Any:
        raise NotImplementedError

    def eligible(self, node: Node) -> bool:
        """Whether this encoder carries ``node`` without losing anything (fails closed)."""
        try:
            if not self._shape_ok(node):
                return False
            return same_value(self.decode(self._encode(node)), to_python(node))
        except Exception:  # any failure means "not eligible", never a crash
            return False

    def encode(self, node: Node) -> str:
        """The encoding of ``node``; raises ValueError where it is not eligible."""
        if not self.eligible(node):
            raise ValueError(
                f"encoder {self.name!r} cannot carry this {type(node).__name__} losslessly;"
                " pick one of eligible_encoders(node)"
            )
        return self._encode(node)

    def __repr__(self) -> str:
        return f"<encoder {self.name}>"


class JsonPretty(Encoder):
    """JSON indented by two spaces: the verbose baseline tools usually return."""

    name = "json_pretty"
    indent: ClassVar[int | None] = 2
    separators: ClassVar[tuple[str, str] | None] = None

    def _shape_ok(self, node: Node) -> bool:
        return is_json(node)

    def _encode(self, node: Node) -> str:
        return json.dumps(
            to_python(node), indent=self.indent, separators=self.separators, ensure_ascii=False
        )

    def decode(self, text: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatDecodeError(f"{self.name}: not JSON: {exc}") from exc


class JsonCompact(JsonPretty):
    """JSON without any optional whitespace: the baseline every saving is measured on."""

    name = "json_compact"
    indent = None
    separators = (",", ":")


class Csv(Encoder):
    """CSV (stdlib dialect, RFC 4180 quoting, LF line ends) for arrays of flat records."""

    name = "csv"

    def _shape_ok(self, node: Node) -> bool:
        return _records(node) is not None

    def _encode(self, node: Node) -> str:
        assert isinstance(node, Array)
        keys = _records(node)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(keys)
        for item in node.items:
            assert isinstance(item, Object)
            writer.writerow([format_cell(v.value) for _, v in item.items])  # type: ignore[union-attr]
        return buf.getvalue()

    def decode(self, text: str) -> Any:
        try:
            rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
        except csv.Error as exc:
            raise FormatDecodeError(f"csv: {exc}") from exc
        if not rows:
            raise FormatDecodeError("csv: no header row")
        header, body = rows[0], rows[1:]
        if len(set(header)) != len(header):
            raise FormatDecodeError(f"csv: header {header!r} repeats a column")
        out = []
        for i, row in enumerate(body, start=2):
            if len(row) != len(header):
                raise FormatDecodeError(f"csv: row {i} has {len(row)} cells, header {len(header)}")
            out.append({k: parse_cell(c) for k, c in zip(header, row, strict=True)})
        return out


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


class MarkdownTable(Encoder):
    """A GFM pipe table for arrays of flat records; read back with markdown-it-py."""

    name = "markdown_table"

    def _shape_ok(self, node: Node) -> bool:
        keys = _records(node)
        if keys is None:
            return False
        # a cell is one line, and GFM trims a cell's surrounding whitespace
        texts = list(keys)
        assert isinstance(node, Array)
        texts += [format_cell(v.value) for it in node.items for _, v in it.items]  # type: ignore[union-attr]
        return all("\n" not in t and "\r" not in t and t == t.strip() for t in texts)

    def _encode(self, node: Node) -> str:
        assert isinstance(node, Array)
        keys = _records(node) or ()
        lines = [
            "| " + " | ".join(_md_cell(k) for k in keys) + " |",
            "|" + "|".join("---" for _ in keys) + "|",
        ]
        for item in node.items:
            cells = [_md_cell(format_cell(v.value)) for _, v in item.items]  # type: ignore[union-attr]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def decode(self, text: str) -> Any:
        blocks = parse_markdown(text).children
        if len(blocks) != 1 or not isinstance(blocks[0], Table):
            raise FormatDecodeError("markdown_table: the text is not exactly one GFM table")
        table = blocks[0]
        if len(set(table.header)) != len(table.header):
            raise FormatDecodeError(f"markdown_table: header {table.header!r} repeats a column")
        return [
            {k: parse_cell(c) for k, c in zip(table.header, row, strict=True)} for row in table.rows
        ]


class KeyValue(Encoder):
    """``key: value`` lines for a flat object of scalars (a record's cheapest form)."""

    name = "kv"

    def _shape_ok(self, node: Node) -> bool:
        if not isinstance(node, Object) or not node.items:
            return False
        for k, v in node.items:
            if not cell_survives(v):
                return False
            text = format_cell(v.value)  # type: ignore[union-attr]
            if ": " in k or "\n" in k or "\n" in text:
                return False
        return True

    def _encode(self, node: Node) -> str:
        assert isinstance(node, Object)
        return "\n".join(f"{k}: {format_cell(v.value)}" for k, v in node.items)  # type: ignore[union-attr]

    def decode(self, text: str) -> Any:
        out: dict[str, Any] = {}
        for i, line in enumerate(text.split("\n"), start=1):
            key, sep, value = line.partition(": ")
            if not sep:
                raise FormatDecodeError(f"kv: line {i} has no ': ' separator: {line!r}")
            if key in out:
                raise FormatDecodeError(f"kv: key {key!r} repeated on line {i}")
            out[key] = parse_cell(value)
        return out


class Toon(Encoder):
    """TOON (spec v4.0) via python-toon, which passes the spec's conformance fixtures."""

    name = "toon"

    def _shape_ok(self, node: Node) -> bool:
        return is_json(node)

    def _encode(self, node: Node) -> str:
        return toon.encode(to_python(node))

    def decode(self, text: str) -> Any:
        try:
            return toon.decode(text)
        except toon.ToonDecodeError as exc:
            raise FormatDecodeError(f"toon: {exc}") from exc


class Text(Encoder):
    """A string scalar as is: prose needs no quotes or escapes."""

    name = "text"

    def _shape_ok(self, node: Node) -> bool:
        return isinstance(node, Scalar) and isinstance(node.value, str)

    def _encode(self, node: Node) -> str:
        assert isinstance(node, Scalar) and isinstance(node.value, str)
        return node.value

    def decode(self, text: str) -> Any:
        return text


ENCODERS: dict[str, Encoder] = {
    e.name: e
    for e in (JsonPretty(), JsonCompact(), Csv(), MarkdownTable(), KeyValue(), Toon(), Text())
}


def get_encoder(name: str) -> Encoder:
    """The registered encoder ``name``; the error lists the known names."""
    try:
        return ENCODERS[name]
    except KeyError:
        raise KeyError(f"unknown encoder {name!r}; known: {', '.join(ENCODERS)}") from None


def eligible_encoders(node: Node) -> list[str]:
    """Names of the encoders that carry ``node`` losslessly, in registry order."""
    return [name for name, enc in ENCODERS.items() if enc.eligible(node)]
