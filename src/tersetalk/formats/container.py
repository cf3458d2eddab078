"""The ``mckp`` container: one text in which every subtree carries its own format.

Why a container: the knapsack chooses a format per subtree, so the emitted text
mixes them (an object's scalar fields as ``key: value`` lines, its main array as a
CSV block, a nested object as inline JSON). The container is the smallest grammar
that says where each part starts and ends and which format it is in, so the whole
text decodes back to the exact JSON value:

- **inline values** (one line): a scalar written bare when it reads back as itself
  (``42``, ``true``, ``null``, ``open``), else as JSON (``"42"``, ``""``,
  ``"a\\nb"``); any object or array as compact JSON (``{"a":1}``, ``[]``).
- an **object** block: one line per key, ``key: <inline>`` or ``key (<fmt>):``
  followed by the child's block indented by one space (one space costs no
  token under o200k_base: `` login`` is one token, ``  login`` two).
- an **array** block: one line per item, ``- <inline>`` or ``- (<fmt>):`` with
  the item's block indented below it.
- **monolithic** blocks: ``csv`` (records, cells inline), ``markdown_table``
  (records, cells inline), ``toon``, ``json_pretty`` and ``text`` (a string with
  newlines, as is) inside a ``key (<fmt>):`` header.
- **path tables** ``csv_paths`` and ``markdown_paths``: an array of objects whose
  values nest or whose keys differ between rows, one column per dotted key path
  (``account.username``; a ``\\``, ``.`` or ``=`` inside a key escaped by ``\\``),
  cells inline, the empty cell for a key the row does not have (see
  :mod:`tersetalk.formats.pathtable`). ``markdown_paths`` is a Markdown table.
  ``csv_paths`` is one line per row, cells separated by commas: a cell that starts
  with ``"``, ``[`` or ``{`` is one JSON value read whole (so its commas do not
  split), any other runs to the next comma (a bare string holding a comma is written
  as JSON). Its first line is the header, a column name per cell (as JSON if it is
  empty, starts with ``"`` or holds a comma); a column whose value is the same in
  every row (two or more rows) is written once, ``name=<cell>`` in the header, and
  has no cell in the rows. No row line is empty.

Every line of a nested block carries its parent's indent plus one space, so a
block ends where the indent ends; nothing inside a block is interpreted by the
enclosing level. The root block's format is named by the format hint
(``> [encoded: mckp]`` ...), see :mod:`tersetalk.formats.hints`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable
from typing import Any

import toon

from tersetalk.formats import pathtable as PT
from tersetalk.formats.encoders import FormatDecodeError
from tersetalk.formats.tree import (
    MAX_DEPTH,
    Array,
    Node,
    Scalar,
    json_depth_exceeds,
    json_number,
    records_keys,
    same_value,
    to_python,
)

INDENT = " "

#: formats a nested block can be in (the ``(fmt)`` of a header line)
BLOCK_FORMATS = ("kv", "list", "csv", "markdown_table", "csv_paths", "markdown_paths", "toon",
                 "json_pretty", "text")  # fmt: skip
#: blocks of one table with a column per key path (:mod:`tersetalk.formats.pathtable`)
PATH_TABLES = ("csv_paths", "markdown_paths")

_HEADER = re.compile(r"^(.*) \(([a-z_]+)\):$", re.DOTALL)
_ITEM_HEADER = re.compile(r"^- \(([a-z_]+)\):$")


# --- inline values ---------------------------------------------------------------


#: ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``'s encoder, built
#: once (the solver renders every subtree: a new encoder per call was a tenth of its time)
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_STRING = json.encoder.encode_basestring  # what that encoder writes for a str
_CONSTANTS = {None: "null", True: "true", False: "false"}


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``; a scalar is
    written the way that encoder writes it, without building its iterator."""
    kind = type(value)
    if kind is str:
        return _STRING(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if kind is bool or value is None:
        return _CONSTANTS[value]
    return _COMPACT.encode(value)


def parse_inline(text: str) -> Any:
    """An inline value back to JSON: JSON where it starts like JSON, else a bare scalar."""
    if text == "null":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text[:1].isalpha():  # no number or JSON starts with a letter: most bare strings
        return text
    number = json_number(text)
    if number is not None:
        return number
    if text[:1] in ('"', "{", "["):
        if json_depth_exceeds(text):
            raise FormatDecodeError(f"mckp: inline JSON {text[:40]!r}... nests too deep")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatDecodeError(f"mckp: inline JSON {text[:40]!r}...: {exc}") from exc
    return text


def inline(node: Node) -> str:
    """The one-line form of a JSON node: bare where that reads back exactly, else JSON."""
    if isinstance(node, Scalar):
        value = node.value
        if isinstance(value, str) and _reads_back_bare(value):
            return value
        return compact_json(value)  # numbers, booleans, null: JSON is already bare
    return compact_json(to_python(node))


def _reads_back_bare(text: str) -> bool:
    """Whether the string ``text`` written bare reads back as itself (:func:`parse_inline`)."""
    if not text or text[0] in '"{[' or "\n" in text or "\r" in text or text != text.strip():
        return False
    if text[0].isalpha():  # parse_inline's first cases: the three constants, then itself
        return text not in ("null", "true", "false")
    return same_value(parse_inline(text), text)


# --- keys ------------------------------------------------------------------------


def key_ok(key: str) -> bool:
    """Whether a key can head a container line and be read back unchanged."""
    return (
        key != ""  # its block header " (fmt):" would read as an indented line
        and ": " not in key
        and "\n" not in key
        and "\r" not in key
        and key == key.strip()
        and not key.startswith(("- ", "> ", "-\t"))
        and key not in ("-",)
        and not key.endswith(":")
        and not _HEADER.match(key + ":")
    )


# --- monolithic blocks -------------------------------------------------------------


def cell_rows(node: Array, cell: Callable[[Node], str]) -> list[list[str]]:
    """A table's rows: each record's values as ``cell`` writes them."""
    return [[cell(v) for _, v in item.items] for item in node.items]  # type: ignore[union-attr]


def render_block(
    node: Node,
    fmt: str,
    cell: Callable[[Node], str] = inline,
    rows: Callable[[Array], list[list[str]]] | None = None,
) -> str:
    """A monolithic block (no trailing newline); raises ValueError if ``fmt`` can't carry it.

    ``cell``: :func:`inline`, or a function that gives what it gives (the solver's, which
    writes each value once for all the tables it renders); ``rows``: a table's rows of
    cells as ``cell`` writes them, where the caller keeps them for every table format."""
    if fmt == "json_pretty":
        return json.dumps(to_python(node), indent=2, ensure_ascii=False)
    if fmt == "toon":
        return toon.encode(to_python(node))
    if fmt == "text":
        if not (isinstance(node, Scalar) and isinstance(node.value, str)):
            raise ValueError("text carries strings only")
        return node.value
    if fmt in ("csv", "markdown_table"):
        keys = records_keys(node)
        if keys is None:
            raise ValueError(f"{fmt} carries arrays of objects with the same keys only")
        assert isinstance(node, Array)
        return _table(list(keys), rows(node) if rows else cell_rows(node, cell), fmt)
    if fmt in PATH_TABLES:
        flat = PT.flatten(node)
        if flat is None:
            raise ValueError(
                f"{fmt} carries non-empty arrays of objects whose keys agree on one order only"
            )
        paths, cells = flat
        names = [PT.path_text(p) for p in paths]
        rows = [["" if c is PT.ABSENT else cell(c) for c in row] for row in cells]
        if fmt == "markdown_paths":
            return _table(names, rows, fmt)
        return _csv_paths(names, rows)
    raise ValueError(f"{fmt!r} is not a monolithic block format")


def _csv_paths(names: list[str], rows: list[list[str]]) -> str:
    """The csv_paths text: a column with the same value in every row (of two or more)
    is written once, as ``name=value`` in the header, and has no cell in the rows."""
    const = [
        len(rows) > 1 and col[0] != "" and all(c == col[0] for c in col)
        for col in zip(*rows, strict=True)
    ]
    if all(const):  # rows need a cell each: a table of equal rows keeps its columns
        const = [False] * len(names)
    lines = [",".join(_value_cell(c) for c, k in zip(row, const, strict=True) if not k)
             for row in rows]  # fmt: skip
    if "" in lines and any(const):
        # a row line must not be empty (that would end the block, or the text): a
        # constant is in every row, so keeping the first one in the rows fills each line
        const[const.index(True)] = False
        lines = [",".join(_value_cell(c) for c, k in zip(row, const, strict=True) if not k)
                 for row in rows]  # fmt: skip
    if "" in lines:
        raise ValueError("csv_paths: a row with no key at all has no line")
    header = [
        _name_cell(n) + ("=" + _value_cell(rows[0][j]) if const[j] else "")
        for j, n in enumerate(names)
    ]
    return "\n".join([",".join(header), *lines])


def _name_cell(name: str) -> str:
    """A csv_paths column name (its ``=`` are escaped): as is, or a JSON string if empty,
    starting with a quote or holding a comma or line break."""
    if not name or name[0] == '"' or any(c in name for c in ",\n\r"):
        return compact_json(name)
    return name


def _value_cell(text: str) -> str:
    """A csv_paths cell: the inline value, a bare string holding a comma as JSON (JSON
    cells are read whole, so their commas do not split the row)."""
    if text[:1] in ('"', "[", "{") or "," not in text:
        return text
    return compact_json(text)


_DECODER = json.JSONDecoder()


def _cell_end(line: str, i: int) -> int:
    """Where the csv_paths value cell starting at ``i`` ends: a cell that starts like
    JSON is read whole (its commas do not split), any other runs to the next comma."""
    if i < len(line) and line[i] in '"[{':
        try:
            return _DECODER.raw_decode(line, i)[1]
        except json.JSONDecodeError as exc:
            raise FormatDecodeError(f"mckp: csv_paths cell {line[i : i + 40]!r}: {exc}") from exc
    end = line.find(",", i)
    return len(line) if end < 0 else end


def _next_cell(line: str, end: int) -> int:
    """The start of the cell after the one ending at ``end`` (-1 at the line's end)."""
    if end == len(line):
        return -1
    if line[end] != ",":
        raise FormatDecodeError(f"mckp: csv_paths: {line[end : end + 40]!r} follows a cell")
    return end + 1


def _split_cells(line: str) -> list[str]:
    """A csv_paths row's cells (texts of inline values; empty: absent)."""
    if '"' not in line and "[" not in line and "{" not in line:
        return line.split(",")  # no cell is read whole: every comma splits
    if json_depth_exceeds(line):
        raise FormatDecodeError(f"mckp: csv_paths row {line[:40]!r}... nests too deep")
    cells, i = [], 0
    while i >= 0:
        end = _cell_end(line, i)
        cells.append(line[i:end])
        i = _next_cell(line, end)
    return cells


def _split_header(line: str) -> list[tuple[str, str | None]]:
    """A csv_paths header: (column name, the constant's cell text or None) per column."""
    if json_depth_exceeds(line):
        raise FormatDecodeError(f"mckp: csv_paths header {line[:40]!r}... nests too deep")
    out: list[tuple[str, str | None]] = []
    i = 0
    while i >= 0:
        if line[i : i + 1] == '"':
            try:
                name, end = _DECODER.raw_decode(line, i)
            except json.JSONDecodeError as exc:
                raise FormatDecodeError(f"mckp: csv_paths column {line[i:][:40]!r}") from exc
            if not isinstance(name, str):
                raise FormatDecodeError(f"mckp: csv_paths column {line[i:end]!r} is no name")
        else:
            end = i
            while end < len(line) and line[end] not in ",=":
                end += 2 if line[end] == "\\" else 1
            end = min(end, len(line))
            name = line[i:end]
        const = None
        if line[end : end + 1] == "=":
            start = end + 1
            end = _cell_end(line, start)
            const = line[start:end]
        out.append((name, const))
        i = _next_cell(line, end)
    return out


def _table(header: list[str], rows: list[list[str]], fmt: str) -> str:
    """A header and rows of cell texts as CSV or as a Markdown table (no trailing newline)."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        return buf.getvalue()[:-1]
    lines = [
        "|" + "|".join(_md(k) for k in header) + "|",
        "|" + "|".join("-" for _ in header) + "|",
    ]
    lines += ["|" + "|".join(_md(c) for c in row) + "|" for row in rows]
    return "\n".join(lines)


def _md(text: str) -> str:
    if "\n" in text or "\r" in text or text != text.strip():
        raise ValueError("a Markdown cell is one trimmed line")
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _md_unescape(cell: str) -> str:
    out, i = [], 0
    while i < len(cell):
        if cell[i] == "\\" and i + 1 < len(cell) and cell[i + 1] in "\\|":
            out.append(cell[i + 1])
            i += 2
        else:
            out.append(cell[i])
            i += 1
    return "".join(out)


def _md_split(line: str) -> list[str]:
    if not (line.startswith("|") and line.endswith("|")) or len(line) < 2:
        raise FormatDecodeError(f"markdown_table: row {line[:40]!r} is not |-delimited")
    cells, cur, i, body = [], [], 0, line[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur))
    return [_md_unescape(c) for c in cells]


def parse_block(text: str, fmt: str) -> Any:
    """A monolithic block back to its JSON value."""
    if fmt == "json_pretty":
        if json_depth_exceeds(text):
            raise FormatDecodeError(f"mckp: json_pretty block nests deeper than {MAX_DEPTH}")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatDecodeError(f"mckp: json_pretty block: {exc}") from exc
    if fmt == "toon":
        try:
            return toon.decode(text)
        except Exception as exc:  # the library's own error types
            raise FormatDecodeError(f"mckp: toon block: {exc}") from exc
    if fmt == "text":
        return text
    if fmt == "csv":
        try:
            rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
        except csv.Error as exc:
            raise FormatDecodeError(f"mckp: csv block: {exc}") from exc
    elif fmt == "csv_paths":
        lines = text.split("\n")
        columns = _split_header(lines[0])
        varying = [j for j, (_, const) in enumerate(columns) if const is None]
        rows = [[name for name, _ in columns]]
        for n, line in enumerate(lines[1:], start=2):
            cells = _split_cells(line)
            if len(cells) != len(varying):
                raise FormatDecodeError(
                    f"mckp: csv_paths row {n} has {len(cells)} cells, header {len(varying)}"
                )
            row = [const or "" for _, const in columns]
            for j, cell in zip(varying, cells, strict=True):
                row[j] = cell
            rows.append(row)
    elif fmt in ("markdown_table", "markdown_paths"):
        lines = text.split("\n")
        if len(lines) < 2:
            raise FormatDecodeError("mckp: markdown_table block without a header")
        rows = [_md_split(lines[0])] + [_md_split(x) for x in lines[2:]]
    else:
        raise FormatDecodeError(f"mckp: unknown block format {fmt!r}")
    if not rows:
        raise FormatDecodeError(f"mckp: {fmt} block without a header")
    header = rows[0]
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise FormatDecodeError(
                f"mckp: {fmt} row {i} has {len(row)} cells, header {len(header)}"
            )
    if fmt in PATH_TABLES:
        return _parse_paths(header, rows[1:], fmt)
    if not header or len(rows) < 2:
        return [{k: parse_inline(c) for k, c in zip(header, row, strict=True)} for row in rows[1:]]
    # column by column (the rows are all as long as the header: checked above), the same
    # records as a dict per row built cell by cell, with fewer steps of Python per cell
    columns = [list(map(parse_inline, column)) for column in zip(*rows[1:], strict=True)]
    return [dict(zip(header, values, strict=True)) for values in zip(*columns, strict=True)]


def _parse_paths(header: list[str], rows: list[list[str]], fmt: str) -> list[Any]:
    if not header:
        raise FormatDecodeError(f"mckp: {fmt} block without columns")
    try:
        paths = [PT.parse_path(h) for h in header]
        cells = [[PT.ABSENT if c == "" else parse_inline(c) for c in row] for row in rows]
        return PT.unflatten(paths, cells)
    except PT.PathTableError as exc:
        raise FormatDecodeError(f"mckp: {fmt} block: {exc}") from exc


def block_ok(node: Node, fmt: str) -> bool:
    """Whether ``fmt`` carries ``node`` losslessly as a block (checked by round trip)."""
    try:
        return same_value(parse_block(render_block(node, fmt), fmt), to_python(node))
    except Exception:  # fail closed
        return False


# --- reading a container back ------------------------------------------------------


def indent_lines(text: str, depth: int) -> list[str]:
    prefix = INDENT * depth
    return [prefix + line for line in text.split("\n")]


def _block_extent(lines: list[str], start: int, depth: int) -> int:
    """The index after the last line of the block at ``depth`` starting at ``start``."""
    prefix = INDENT * depth
    end = start
    while end < len(lines) and lines[end].startswith(prefix):
        end += 1
    return end


def _strip(lines: list[str], depth: int) -> str:
    n = len(INDENT) * depth
    return "\n".join(line[n:] for line in lines)


def parse_container(lines: list[str], fmt: str, depth: int = 0) -> Any:
    """Decode the block ``lines`` (already cut to the block, indent ``depth``) in ``fmt``.

    Each nested block is one recursive call, so blocks deeper than ``MAX_DEPTH`` (more
    than any encoded payload has) are refused before they could exhaust the stack.
    """
    if depth > MAX_DEPTH:
        raise FormatDecodeError(
            f"mckp: blocks nest deeper than {MAX_DEPTH} levels, more than any encoded payload; "
            "decode only what `tersetalk formats encode` wrote"
        )
    if fmt not in ("kv", "list"):
        return parse_block(_strip(lines, depth), fmt)
    prefix = INDENT * depth
    out_obj: dict[str, Any] = {}
    out_list: list[Any] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        if not raw.startswith(prefix) or raw[len(prefix) : len(prefix) + 1] == " ":
            raise FormatDecodeError(f"mckp: line {raw[:40]!r} is not at indent {depth}")
        line = raw[len(prefix) :]
        if fmt == "list":
            m = _ITEM_HEADER.match(line)
            if m:
                end = _block_extent(lines, i + 1, depth + 1)
                out_list.append(parse_container(lines[i + 1 : end], m.group(1), depth + 1))
                i = end
                continue
            if not line.startswith("- "):
                raise FormatDecodeError(f"mckp: list item {line[:40]!r} does not start with '- '")
            out_list.append(parse_inline(line[2:]))
            i += 1
            continue
        key, sep, rest = line.partition(": ")
        if sep:
            if key in out_obj:
                raise FormatDecodeError(f"mckp: key {key!r} repeated")
            out_obj[key] = parse_inline(rest)
            i += 1
            continue
        m = _HEADER.match(line)
        if not m:
            raise FormatDecodeError(
                f"mckp: line {line[:40]!r} is neither 'key: value' nor 'key (fmt):'"
            )
        key, sub = m.group(1), m.group(2)
        if key in out_obj:
            raise FormatDecodeError(f"mckp: key {key!r} repeated")
        end = _block_extent(lines, i + 1, depth + 1)
        out_obj[key] = parse_container(lines[i + 1 : end], sub, depth + 1)
        i = end
    return out_list if fmt == "list" else out_obj
