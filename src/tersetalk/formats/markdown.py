"""Markdown payloads: each GFM table re-encoded where that is cheaper, the rest untouched.

Why only the tables: prose, lists and code in a Markdown tool response are already
what a model reads best; the tables are where the tokens go (padding, pipes, dashes).
Each table becomes the array of its rows (``tree.table_to_json``) and goes through the
same solver as a JSON body. The chosen encoding replaces the table's source lines
inside a fenced block whose info string names the format and the table's layout
(``tt:mckp | csv ~pc|---|--:|``: the delimiter row as it was, whether cells are padded
to its widths, how the header is aligned), so the document stays Markdown.

Lossless means the bytes: :func:`decode_markdown` turns an encoded document back into
the exact source text, and a table is replaced only when rendering its decoded rows
with that layout gives back its source lines byte for byte. What cannot come back is
declined and stays as it is: a row with more or fewer cells than the header, a ``|``
inside a code span, a table in a list or a quote, uneven padding, a line of prose that
GFM reads as a row, and any text that looks like a unified diff (a ``diff --git`` or
``@@`` hunk line, ``---``/``+++`` file lines, a ``+|``/``-|`` table line), where
turning the table into a block would no longer be a patch. The whole document is
checked once more at the end: if it does not decode to the source, nothing is replaced.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

from tersetalk.core.tokens import count_tokens
from tersetalk.formats.encoders import FormatDecodeError
from tersetalk.formats.solver import Encoding, decode, encode
from tersetalk.formats.tree import Table, TreeError, markdown_parser, table_to_json, to_python

FENCE_PREFIX = "tt:"  # fenced blocks this module wrote: ```tt:mckp | csv ~pc|---|---|
#: the opening line of a block this module wrote (the fence, then the info string)
_OPENER = re.compile(r"^(`{3,})tt:(.*)$")
#: a GFM delimiter row with a pipe at each end: ``|---|:--:|``, ``| --- | ---: |``
_DELIMITER = re.compile(r"^\|(?: *:?-+:? *\|)+$")
#: lines that make a text a unified diff (or a diff of a table)
_DIFF_LINE = re.compile(r"^(?:diff --git |@@ -\d|--- \S|\+\+\+ \S|[+-]\|)")
#: the layout marker between the format and the delimiter row in the info string
LAYOUT_MARK = " ~"


@dataclass(frozen=True)
class TableSpan:
    """A GFM table and the source lines it occupies (``start`` inclusive, ``end`` exclusive)."""

    start: int
    end: int
    table: Table


@lru_cache(maxsize=1)
def _block_parser() -> MarkdownIt:
    """:func:`markdown_parser` without the inline pass: the tables, their line ranges
    and their cells' source text are block-level, and parsing each cell's inline
    content (emphasis, links, code spans) into tokens nobody reads was half the time."""
    return markdown_parser().disable("inline")


def table_spans(text: str) -> list[TableSpan]:
    """Every GFM table of ``text`` with its line range, as markdown-it sees them."""
    tokens = _block_parser().parse(text)
    spans: list[TableSpan] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "table_open" and tok.map:
            header: list[str] = []
            rows: list[tuple[str, ...]] = []
            row: list[str] = []
            in_head = False
            j = i + 1
            while tokens[j].type != "table_close":
                t = tokens[j]
                if t.type == "thead_open":
                    in_head = True
                elif t.type == "thead_close":
                    in_head = False
                elif t.type == "tr_open":
                    row = []
                elif t.type == "inline":
                    row.append(t.content)
                elif t.type == "tr_close":
                    if in_head:
                        header = row
                    else:
                        rows.append(tuple(row))
                j += 1
            spans.append(TableSpan(tok.map[0], tok.map[1], Table(tuple(header), tuple(rows))))
            i = j
        i += 1
    return spans


@dataclass(frozen=True)
class MarkdownEncoding:
    """A Markdown payload with its tables re-encoded."""

    text: str
    tokens: int
    source_tokens: int
    tokenizer: str
    tables: int  # GFM tables in the source
    replaced: int  # tables whose encoding was cheaper and replaced them
    encodings: tuple[Encoding, ...]
    #: tables kept because they would not come back byte for byte
    declined: int = 0
    #: why the whole text was kept as it came (a diff, ...), None if it was not
    declined_why: str | None = None


def _fence(body: str) -> str:
    fence = "```"
    while fence in body:
        fence += "`"
    return fence


def declines(text: str) -> str | None:
    """Why no table of ``text`` may be re-encoded, or None: a unified diff (replacing
    its table lines would break the patch), or a block that looks like one this module
    writes (decoding could not tell the two apart)."""
    for line in text.split("\n"):
        if _DIFF_LINE.match(line):
            return "it looks like a unified diff"
        if _OPENER.match(line):
            return f"it holds a fenced block whose info string starts {FENCE_PREFIX!r}"
    return None


# --- the layout of a table -----------------------------------------------------------


def _segments(delimiter: str) -> list[str]:
    return delimiter[1:-1].split("|")


def _widths(delimiter: str, padded: bool) -> list[int] | None:
    """Each column's padded width (0 without padding), or None if ``delimiter`` has
    no width to read (spaces on one side of its dashes only)."""
    if not padded:
        return [0] * len(_segments(delimiter))
    out = []
    for seg in _segments(delimiter):
        core = seg.strip(" ")
        if seg == core:
            out.append(len(seg) - 2)
        elif seg == f" {core} ":
            out.append(len(core))
        else:
            return None
    return out


def _aligns(delimiter: str) -> list[str]:
    out = []
    for seg in _segments(delimiter):
        core = seg.strip(" ")
        left, right = core.startswith(":"), core.endswith(":")
        out.append("c" if left and right else "r" if right else "l")
    return out


def _just(text: str, width: int, align: str) -> str:
    if align == "r":
        return text.rjust(width)
    if align == "c":
        return text.center(width)
    return text.ljust(width)


def _row(cells: list[str], widths: list[int], aligns: list[str], space: str = " ") -> str:
    parts = [
        space + _just(c.replace("|", "\\|"), w, a) + space
        for c, w, a in zip(cells, widths, aligns, strict=True)
    ]
    return "|" + "|".join(parts) + "|"


def render_table(header: list[str], rows: list[list[str]], layout: str) -> list[str]:
    """The source lines of a table from its cells and its layout (``pc|---|--:|``: the
    padding ``p`` (cells padded to the delimiter's widths), ``n`` (one space each side)
    or ``t`` (no space: ``|a|b|``), the header alignment ``c`` (as its column) or ``l``
    (left), then the delimiter row as it was). Raises FormatDecodeError on a bad layout."""
    pad, head, delimiter = layout[:1], layout[1:2], layout[2:]
    if pad not in ("p", "n", "t") or head not in ("c", "l") or not _DELIMITER.match(delimiter):
        raise FormatDecodeError(f"markdown: table layout {layout[:60]!r} is not one this writes")
    widths = _widths(delimiter, pad == "p")
    aligns = _aligns(delimiter)
    if widths is None or any(len(r) != len(aligns) for r in [header, *rows]):
        raise FormatDecodeError(
            f"markdown: table layout {layout[:60]!r} does not fit {len(header)} columns"
        )
    head_aligns = aligns if head == "c" else ["l"] * len(aligns)
    space = "" if pad == "t" else " "
    return [_row(header, widths, head_aligns, space), delimiter,
            *(_row(r, widths, aligns, space) for r in rows)]  # fmt: skip


def table_layout(lines: list[str], table: Table) -> str | None:
    """The layout that renders ``table``'s cells back to exactly ``lines`` (its source),
    or None if there is none (the table cannot come back byte for byte)."""
    if len(lines) != 2 + len(table.rows) or not _DELIMITER.match(lines[1]):
        return None
    delimiter = lines[1]
    header, rows = list(table.header), [list(r) for r in table.rows]
    for pad, head in itertools.product("pnt", "cl"):
        layout = f"{pad}{head}{delimiter}"
        try:
            if render_table(header, rows, layout) == lines:
                return layout
        except FormatDecodeError:
            continue
    return None


# --- encoding and decoding a document ------------------------------------------------------


def encode_markdown(
    text: str,
    encoder: str = "mckp",
    *,
    tokenizer: str = "o200k_base",
    spans: list[TableSpan] | None = None,
    source_tokens: int | None = None,
) -> MarkdownEncoding:
    """``text`` with every table whose ``encoder`` encoding is cheaper replaced by it,
    where the table comes back byte for byte (see the module docstring).

    ``spans`` (``table_spans(text)``) and ``source_tokens`` (``text``'s tokens under
    ``tokenizer``) may be given by a caller that has them already, so a large document
    is not parsed or counted twice."""
    if spans is None:
        spans = table_spans(text)
    why = declines(text) if spans else None
    lines = text.split("\n")
    out: list[str] = []
    done = 0
    declined = 0
    encodings: list[Encoding] = []
    for span in spans if why is None else ():
        try:
            node = table_to_json(span.table)
        except TreeError:  # a repeated header cell: no record form, keep the table
            continue
        if not node.items:
            continue
        source = lines[span.start : span.end]
        layout = table_layout(source, span.table)
        if layout is None:
            declined += 1
            continue
        enc = encode(node, encoder, tokenizer=tokenizer)
        head, body = _split_format(enc.text)
        fence = _fence(body)
        block = [f"{fence}{FENCE_PREFIX}{head}{LAYOUT_MARK}{layout}", *body.split("\n"), fence]
        if count_tokens("\n".join(block), tokenizer) >= count_tokens("\n".join(source), tokenizer):
            continue
        out += lines[done : span.start] + block
        done = span.end
        encodings.append(enc)
    out += lines[done:]
    new = "\n".join(out)
    if encodings:
        try:
            exact = decode_markdown(new) == text
        except (ValueError, TreeError):
            exact = False
        if not exact:  # fail closed: the document as it came
            new, declined, encodings = text, declined + len(encodings), []
            why = "its re-encoding does not decode to the same text"
    return MarkdownEncoding(
        text=new,
        tokens=count_tokens(new, tokenizer),
        source_tokens=count_tokens(text, tokenizer) if source_tokens is None else source_tokens,
        tokenizer=tokenizer,
        tables=len(spans),
        replaced=len(encodings),
        encodings=tuple(encodings),
        declined=declined,
        declined_why=why,
    )


def _split_format(text: str) -> tuple[str, str]:
    """The format hint's body (``mckp | csv``; ``json`` without a hint) and the payload."""
    first, _, rest = text.partition("\n")
    if first.startswith("> [encoded: ") and first.endswith("]"):
        return first[len("> [encoded: ") : -1], rest
    return "json", text


def _info(info: str) -> tuple[str, str | None]:
    """The format and the layout (None: a block written without one) of an info string."""
    fmt, mark, layout = info.rpartition(LAYOUT_MARK)
    if not mark:
        return info.strip(), None
    return fmt.strip(), layout


def _decode_block(fmt: str, body: str) -> Any:
    return decode(body if fmt == "json" else f"> [encoded: {fmt}]\n{body}")


def encoded_markdown(text: str) -> bool:
    """Whether ``text`` holds a block :func:`encode_markdown` writes (a ``tt:`` fence)."""
    return any(_OPENER.match(line) for line in text.split("\n"))


def decode_markdown(text: str) -> str:
    """The exact source of a document :func:`encode_markdown` wrote: each of its blocks
    rendered back to the table's lines. Raises FormatDecodeError for a block that cannot
    be (one without a layout, or whose rows are not the table's string cells)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _OPENER.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence = m.group(1)
        try:
            end = lines.index(fence, i + 1)
        except ValueError:
            raise FormatDecodeError(f"markdown: the block at line {i + 1} is not closed") from None
        fmt, layout = _info(m.group(2))
        if layout is None:
            raise FormatDecodeError(
                f"markdown: the block at line {i + 1} names no table layout, so its table's "
                "source cannot be restored (decode_tables reads its rows)"
            )
        rows = _decode_block(fmt, "\n".join(lines[i + 1 : end]))
        if not (isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows)):
            raise FormatDecodeError(f"markdown: the block at line {i + 1} is not table rows")
        header = list(rows[0])
        cells = [list(r.values()) for r in rows]
        if any(list(r) != header for r in rows) or not all(
            isinstance(c, str) for c in [*header, *itertools.chain(*cells)]
        ):
            raise FormatDecodeError(
                f"markdown: the block at line {i + 1} holds rows other than a table's text cells"
            )
        out += render_table(header, cells, layout)
        i = end + 1
    return "\n".join(out)


def decode_tables(text: str) -> list[Any]:
    """The tables of a Markdown payload (source or encoded) as lists of row objects, in order."""
    out: list[Any] = []
    tokens = markdown_parser().parse(text)
    spans = {s.start: s for s in table_spans(text)}
    for tok in tokens:
        if tok.type == "fence" and tok.info.startswith(FENCE_PREFIX):
            fmt, _ = _info(tok.info[len(FENCE_PREFIX) :])
            body = tok.content[:-1] if tok.content.endswith("\n") else tok.content
            out.append(_decode_block(fmt, body))
        elif tok.type == "table_open" and tok.map and tok.map[0] in spans:
            try:
                out.append(to_python(table_to_json(spans[tok.map[0]].table)))
            except TreeError:
                out.append(None)  # a repeated header: kept as is, no record form
    return out
