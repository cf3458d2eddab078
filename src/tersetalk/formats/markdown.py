"""Markdown payloads: each GFM table re-encoded where that is cheaper, the rest untouched.

Why only the tables: prose, lists and code in a Markdown tool response are already
what a model reads best; the tables are where the tokens go (padding, pipes, dashes).
Each table becomes the array of its rows (``tree.table_to_json``) and goes through the
same solver as a JSON body. The chosen encoding replaces the table's source lines
inside a fenced block whose info string names the format (``mckp | csv``, ``json``),
so the document stays Markdown and every table can be read back: a table is replaced
only when its encoding costs fewer tokens than its source lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tersetalk.formats.solver import Encoding, decode, encode
from tersetalk.formats.tree import Table, TreeError, markdown_parser, table_to_json, to_python
from tersetalk.tokens import count_tokens

FENCE_PREFIX = "tt:"  # fenced blocks this module wrote: ```tt:mckp | csv


@dataclass(frozen=True)
class TableSpan:
    """A GFM table and the source lines it occupies (``start`` inclusive, ``end`` exclusive)."""

    start: int
    end: int
    table: Table


def table_spans(text: str) -> list[TableSpan]:
    """Every GFM table of ``text`` with its line range, as markdown-it sees them."""
    tokens = markdown_parser().parse(text)
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


def _fence(body: str) -> str:
    fence = "```"
    while fence in body:
        fence += "`"
    return fence


def encode_markdown(
    text: str, encoder: str = "mckp", *, tokenizer: str = "o200k_base"
) -> MarkdownEncoding:
    """``text`` with every table whose ``encoder`` encoding is cheaper replaced by it."""
    lines = text.split("\n")
    out: list[str] = []
    done = 0
    encodings: list[Encoding] = []
    spans = table_spans(text)
    for span in spans:
        try:
            node = table_to_json(span.table)
        except TreeError:  # a repeated header cell: no record form, keep the table
            continue
        if not node.items:
            continue
        enc = encode(node, encoder, tokenizer=tokenizer)
        head, body = _split_format(enc.text)
        fence = _fence(body)
        block = [f"{fence}{FENCE_PREFIX}{head}", *body.split("\n"), fence]
        source = "\n".join(lines[span.start : span.end])
        if count_tokens("\n".join(block), tokenizer) >= count_tokens(source, tokenizer):
            continue
        out += lines[done : span.start] + block
        done = span.end
        encodings.append(enc)
    out += lines[done:]
    new = "\n".join(out)
    return MarkdownEncoding(
        text=new,
        tokens=count_tokens(new, tokenizer),
        source_tokens=count_tokens(text, tokenizer),
        tokenizer=tokenizer,
        tables=len(spans),
        replaced=len(encodings),
        encodings=tuple(encodings),
    )


def _split_format(text: str) -> tuple[str, str]:
    """The format hint's body (``mckp | csv``; ``json`` without a hint) and the payload."""
    first, _, rest = text.partition("\n")
    if first.startswith("> [encoded: ") and first.endswith("]"):
        return first[len("> [encoded: ") : -1], rest
    return "json", text


def decode_tables(text: str) -> list[Any]:
    """The tables of a Markdown payload (source or encoded) as lists of row objects, in order."""
    out: list[Any] = []
    tokens = markdown_parser().parse(text)
    spans = {s.start: s for s in table_spans(text)}
    for tok in tokens:
        if tok.type == "fence" and tok.info.startswith(FENCE_PREFIX):
            fmt = tok.info[len(FENCE_PREFIX) :].strip()
            body = tok.content[:-1] if tok.content.endswith("\n") else tok.content
            out.append(decode(body if fmt == "json" else f"> [encoded: {fmt}]\n{body}"))
        elif tok.type == "table_open" and tok.map and tok.map[0] in spans:
            try:
                out.append(to_python(table_to_json(spans[tok.map[0]].table)))
            except TreeError:
                out.append(None)  # a repeated header: kept as is, no record form
    return out
