"""The sampled search's table path: a long array of flat records laid out without a tree.

A tool's large results are most often rows: a database query, a listing, an API's page
of objects, each object with the same keys. The knapsack (:mod:`tersetalk.formats.solver`)
lays such an array out by building a node per value and weighing every option of every
subtree; its sampled search (``sample=``) already gives up laying a long list out item
by item once its first items, extrapolated, cost more than a table. For a 100 KB array
the tree and the weighing of options the table then beats were most of the MCP proxy's
time per result.

This path takes an array the sampled search treats as long (more than twice its sample)
whose records hold only scalars and lists of scalars under the same keys. It asks the
knapsack about the first :data:`HEAD_ROWS` records only (a table's header pays more with
every row, so a head laid out as a table stands for the whole array) and, where that
head's cheapest layout is a table, writes the whole array's tables straight from the
values:

- the container's ``csv`` and ``markdown_table`` blocks (cells written as the container
  writes them: :func:`tersetalk.formats.container.inline`), and the single ``csv``
  format where every cell is a scalar its cells carry;
- the container's tables again with the records' string prefixes named once, where the
  knapsack's alias layer (:func:`tersetalk.formats.aliases.choose_among`, over every
  string value) finds prefixes worth naming;
- each text counted whole, as it would be sent (the hint lines included), in the count
  helper process where one runs (:mod:`tersetalk.core.counter`) while the shortest csv
  is read back here;
- the cheapest read back whole with :func:`tersetalk.formats.solver.decode` and compared
  with the values (:func:`tersetalk.formats.tree.same_value`); one that does not read
  back is passed over for the next. Among equal counts the knapsack's order holds:
  without aliases first, blocks before the single format.

Where the head's layout is anything else (JSON, a list item by item, TOON), or no table
reads back, the answer is None and the caller runs the knapsack on the whole. Like the
sampled search, this may miss a cheaper layout the head does not show; what is sent is
lossless either way. On the MB-5 payloads (4 to 100 KiB), rows of scalars, rows with
aliased paths and the one long flat array of the tool-response corpora, it sends the
sampled knapsack's very text (tests/test_formats_records.py), in about a third of its
time at 100 KiB.
"""

from __future__ import annotations

import math
from typing import Any

from tersetalk.core import counter
from tersetalk.core.tokens import count_tokens, count_tokens_aside
from tersetalk.formats import aliases as A
from tersetalk.formats import hints as H
from tersetalk.formats.container import _reads_back_bare, _table, compact_json
from tersetalk.formats.encoders import format_cell, parse_cell
from tersetalk.formats.tree import from_python, same_value

#: the knapsack's root options this path writes (a head laid out so is a table)
OPTIONS = ("csv", "markdown_table", "single:csv")
_SCALARS = (str, int, bool, type(None))


def _scalar(x: Any) -> bool:
    kind = type(x)
    return kind in _SCALARS or (kind is float and math.isfinite(x))


def flat_records(value: Any, min_items: int) -> tuple[str, ...] | None:
    """The keys of ``value`` if it is a list of at least ``min_items`` objects with the
    same keys in the same order, every value a JSON scalar or a list of scalars (a
    table's cell each); else None. The values are what ``json.loads`` returns."""
    if type(value) is not list or len(value) < min_items:
        return None
    first = value[0]
    if type(first) is not dict or not first or not all(type(k) is str for k in first):
        return None
    keys = tuple(first)
    n = len(keys)
    for row in value:
        if type(row) is not dict or len(row) != n or tuple(row) != keys:
            return None
        for v in row.values():
            if type(v) is list:
                if not all(map(_scalar, v)):
                    return None
            elif not _scalar(v):
                return None
    return keys


def _cell_rows(value: list[dict[str, Any]]) -> list[list[str]]:
    """Each record's cells as the container writes them (:func:`tersetalk.formats.
    container.inline`: a string bare where it reads back so, else JSON), each distinct
    string's decided once."""
    strings: dict[str, str] = {}

    def cell(x: Any) -> str:
        if type(x) is str:
            text = strings.get(x)
            if text is None:
                text = strings[x] = x if _reads_back_bare(x) else compact_json(x)
            return text
        return compact_json(x)

    return [list(map(cell, row.values())) for row in value]


def _single_cells(rows: list[dict[str, Any]]) -> list[list[str]] | None:
    """The single ``csv`` format's cells, or None where a value is no scalar a cell
    carries back as itself (the format's own eligibility rule)."""
    out = []
    memo: dict[tuple[type, Any], bool] = {}
    for row in rows:
        cells = []
        for v in row.values():
            if type(v) is list:
                return None
            text = format_cell(v)
            key = (type(v), repr(v))
            ok = memo.get(key)
            if ok is None:
                try:
                    ok = memo[key] = same_value(parse_cell(text), v)
                except ValueError:
                    ok = memo[key] = False
            if not ok:
                return None
            cells.append(text)
        out.append(cells)
    return out


#: the records the knapsack is asked about before a long array is written as a table
HEAD_ROWS = 4


def head_option(rows: list[Any], tokenizer: str) -> str:
    """The knapsack's root option for ``rows``, an array's first :data:`HEAD_ROWS`
    records (its exact search, string-prefix aliases left to the whole array)."""
    from tersetalk.formats.solver import solve

    enc = solve(from_python(rows), tokenizer=tokenizer, aliases=False)
    return enc.choices[0][1]


def _strings(value: list[dict[str, Any]]) -> list[str]:
    """The string values of the records in document order (keys excluded)."""
    out = []
    for row in value:
        for v in row.values():
            if type(v) is str:
                out.append(v)
            elif type(v) is list:
                out += [x for x in v if type(x) is str]
    return out


def _aliased(value: list[dict[str, Any]], table: dict[str, str]) -> list[dict[str, Any]]:
    """The records with every string value that starts with a chosen prefix aliased."""
    rewrite = A.rewriter(table)

    def one(v: Any) -> Any:
        if type(v) is str:
            return rewrite(v)
        if type(v) is list:
            return [rewrite(x) if type(x) is str else x for x in v]
        return v

    return [{k: one(v) for k, v in row.items()} for row in value]


def _tables(header: list[str], value: list[dict[str, Any]], prelude: list[str],
            ) -> list[tuple[str, str]]:  # fmt: skip
    """(option, text as sent) of each table that can carry the records: the container's
    csv and Markdown blocks, the single csv format; ``prelude``: alias hint lines, after
    the format hint."""
    rows = _cell_rows(value)
    bodies = [("csv", H.encoded("mckp", "csv"), _table(header, rows, "csv"))]
    try:  # a Markdown cell is one trimmed line
        bodies.append(("markdown_table", H.encoded("mckp", "markdown_table"),
                       _table(header, rows, "markdown_table")))  # fmt: skip
    except ValueError:
        pass
    single = _single_cells(value)
    if single is not None:
        bodies.append(("single:csv", H.encoded("csv"), _table(header, single, "csv")))
    return [(option, "\n".join([hint, *prelude, body])) for option, hint, body in bodies]


def encode_records(value: list[dict[str, Any]], keys: tuple[str, ...], *, tokenizer: str,
                   known: dict[str, int] | None = None) -> Any:  # fmt: skip
    """The lossless :class:`tersetalk.formats.solver.Encoding` of a long array of flat
    records (``keys``: :func:`flat_records`) as the cheapest table that reads back, or
    None where the knapsack should lay it out (see the module's docstring). ``known``:
    token counts made elsewhere, given the new ones."""
    from tersetalk.formats.solver import Encoding, decode

    # asked first, answered by the count helper process where one runs (its answer is
    # needed only once the tables are written and read back), else here
    head = value[:HEAD_ROWS]
    asked = counter.call(head_option, head, tokenizer)
    if asked is None and head_option(head, tokenizer) not in OPTIONS:
        return None
    known = {} if known is None else known

    def count(text: str) -> int:
        n = known.get(text)
        if n is None:
            n = known[text] = count_tokens(text, tokenizer)
        return n

    header = list(keys)
    strings = _strings(value)
    table = A.choose_among(strings, count) if any("/" in s for s in strings) else {}
    try:
        texts = _tables(header, value, [])
        plain = len(texts)
        if table:  # the knapsack's alias layer: the tables again with the prefixes named
            aliased = _tables(header, _aliased(value, table), A.hint_lines(table))
            texts += [(option, text) for option, text in aliased]
    except ValueError:  # an int past Python's int-to-str digit limit
        return None
    # every text counted elsewhere (the count helper, else threads) while the shortest
    # csv (most often the cheapest text: a Markdown table of the same cells is about as
    # long, and dearer by its pipes) is read back here: the same answer, only sooner
    pending = [(t, count_tokens_aside(t, tokenizer))
               for t in dict.fromkeys(t for _, t in texts if t not in known)]  # fmt: skip
    read: dict[str, bool] = {}

    def reads_back(text: str) -> bool:
        if text not in read:
            try:
                read[text] = same_value(decode(text), value)
            except ValueError:
                read[text] = False
        return read[text]

    reads_back(min((t for option, t in texts if option != "markdown_table"), key=len))
    for t, result in pending:
        known[t] = result()
    if asked is not None and asked() not in OPTIONS:
        return None
    # the cheapest first; among equals, the knapsack's order (without aliases first,
    # blocks before single formats)
    ranked = sorted(range(len(texts)), key=lambda i: (known[texts[i][1]], i))
    leaves = sum(len(v) or 1 if type(v) is list else 1 for row in value for v in row.values())
    for i in ranked:
        option, text = texts[i]
        if reads_back(text):
            return Encoding(text, "mckp", "exact", known[text], tokenizer, None, float(leaves),
                            float(leaves), True, (("$", option),),
                            aliases=len(table) if i >= plain else 0, read_back=True)  # fmt: skip
    return None
