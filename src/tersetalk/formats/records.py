"""The sampled search's table path: a long array of records laid out without a tree.

A tool's large results are most often rows: a database query, a listing, an API's page
of objects, each object with the same keys. The knapsack (:mod:`tersetalk.formats.solver`)
lays such an array out by building a node per value and weighing every option of every
subtree; its sampled search (``sample=``) already gives up laying a long list out item
by item once its first items, extrapolated, cost more than a table. For a 100 KB array
the tree and the weighing of options the table then beats were most of the MCP proxy's
time per result.

This path takes an array the sampled search treats as long (more than twice its sample)
whose records all have one shape (:func:`table_records`): the same keys in the same
order, objects in them alike, every other value a scalar, a list or an empty object. It
asks the knapsack about the first :data:`HEAD_ROWS` records only (a table's header pays
more with every row, so a head laid out as a table stands for the whole array) and,
where that head's cheapest layout is a table, writes the whole array's tables straight
from the values:

- the container's ``csv`` and ``markdown_table`` blocks (cells written as the container
  writes them: :func:`tersetalk.formats.container.inline`, a list as its JSON), or,
  where the records hold objects, its path tables ``csv_paths`` and ``markdown_paths``
  (a column per leaf's key path, :mod:`tersetalk.formats.pathtable`); where every value
  is a scalar its cells carry, the single ``csv`` format too;
- the same tables again with the records' string prefixes named once, where the
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
aliased paths, rows holding objects and the one long flat array of the tool-response
corpora, it sends the sampled knapsack's very text (tests/test_formats_records.py), in
about a third of its time at 100 KiB (flat rows) to a half (rows holding an object).
Records whose shapes differ (a key some rows lack, ``null`` where others hold an
object) go to the knapsack.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tersetalk.core import counter
from tersetalk.core.tokens import count_tokens, count_tokens_aside
from tersetalk.formats import aliases as A
from tersetalk.formats import hints as H
from tersetalk.formats import pathtable as PT
from tersetalk.formats.container import _csv_paths, _reads_back_bare, _table, compact_json
from tersetalk.formats.encoders import format_cell, parse_cell
from tersetalk.formats.tree import exact_text, from_python, same_value

#: the knapsack's root options this path writes (a head laid out so is a table)
OPTIONS = ("csv", "markdown_table", "csv_paths", "markdown_paths", "single:csv")
_SCALARS = (str, int, bool, type(None))


def _scalar(x: Any) -> bool:
    kind = type(x)
    return kind in _SCALARS or (kind is float and math.isfinite(x))


#: the deepest a record's objects, and a list in a cell, nest on this path (deeper goes
#: to the knapsack)
MAX_NEST = 8

KeyPath = tuple[str, ...]


@dataclass(frozen=True)
class Records:
    """The shape every record of a long array shares: its keys and, in document order,
    the key paths of its leaves (a scalar, a list or an empty object each; a key's own
    path where it holds one, ``(key, sub, ...)`` inside nested objects)."""

    keys: tuple[str, ...]
    paths: tuple[KeyPath, ...]

    @property
    def nests(self) -> bool:
        """Whether a record holds an object with keys (a path table's columns then
        differ from the keys)."""
        return any(len(p) > 1 for p in self.paths)


def _json_data(v: Any, depth: int) -> bool:
    """Whether ``v`` is JSON data (string keys, finite numbers) nesting at most ``depth``
    more levels: a list a cell writes as JSON."""
    kind = type(v)
    if kind is list:
        return depth > 0 and all(_json_data(x, depth - 1) for x in v)
    if kind is dict:
        return depth > 0 and all(type(k) is str and _json_data(x, depth - 1)
                                 for k, x in v.items())  # fmt: skip
    return _scalar(v)


def _leaf(v: Any) -> bool:
    """Whether ``v`` is a value a table's cell carries: a JSON scalar, a list of JSON
    data (its JSON) or an empty object."""
    kind = type(v)
    if kind is list:
        return all(map(_scalar, v)) or _json_data(v, MAX_NEST)
    return (kind is dict and not v) or _scalar(v)


def _shape(row: dict[Any, Any], depth: int) -> tuple[Any, ...] | None:
    """A record's keys in order, each with its object's shape (None for a leaf), or
    None where a value is no leaf a table's cell carries or the objects nest too deep."""
    out = []
    for k, v in row.items():
        kind = type(v)
        if kind is dict and v:
            sub = _shape(v, depth + 1) if depth < MAX_NEST else None
            if sub is None:
                return None
            out.append((k, sub))
        elif _leaf(v):
            out.append((k, None))
        else:
            return None
    return tuple(out)


def _paths(shape: tuple[Any, ...], prefix: KeyPath = ()) -> list[KeyPath] | None:
    """The leaves' key paths of a shape (None where a key is no string)."""
    out: list[KeyPath] = []
    for k, sub in shape:
        if type(k) is not str:
            return None
        if sub is None:
            out.append((*prefix, k))
        else:
            inner = _paths(sub, (*prefix, k))
            if inner is None:
                return None
            out += inner
    return out


def table_records(value: Any, min_items: int) -> Records | None:
    """The shape of ``value`` if it is a list of at least ``min_items`` objects that all
    have it: the same keys in the same order, nested objects alike (at most
    :data:`MAX_NEST` deep), every other value a JSON scalar, a list of JSON data or an
    empty object (a table's cell each); else None. The values are what ``json.loads``
    returns."""
    if type(value) is not list or len(value) < min_items:
        return None
    first = value[0]
    if type(first) is not dict or not first:
        return None
    shape = _shape(first, 1)
    paths = None if shape is None else _paths(shape)
    if paths is None:
        return None
    keys = tuple(first)
    records = Records(keys, tuple(paths))
    if not records.nests:  # flat: compared key by key, the leaves checked here
        n = len(keys)
        for row in value:
            if type(row) is not dict or len(row) != n or tuple(row) != keys:
                return None
            if not all(map(_leaf, row.values())):
                return None
    elif not all(type(row) is dict and _shape(row, 1) == shape for row in value):
        return None
    return records


def _cell_rows(rows: Iterable[Iterable[Any]]) -> list[list[str]]:
    """Each row's cells as the container writes them (:func:`tersetalk.formats.
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

    return [list(map(cell, row)) for row in rows]


def _single_cells(rows: list[dict[str, Any]]) -> list[list[str]] | None:
    """The single ``csv`` format's cells, or None where a value is no scalar a cell
    carries back as itself (the format's own eligibility rule)."""
    out = []
    memo: dict[tuple[type, Any], bool] = {}
    for row in rows:
        cells = []
        for v in row.values():
            if type(v) is list or type(v) is dict:
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


def _leaves(row: dict[str, Any]) -> list[Any]:
    """A record's leaves in document order (a path table's cells)."""
    out = []
    for v in row.values():
        if type(v) is dict and v:
            out += _leaves(v)
        else:
            out.append(v)
    return out


def _strings(value: list[dict[str, Any]]) -> list[str]:
    """The string values of the records in document order (keys excluded), as the
    knapsack's alias layer collects them (:func:`tersetalk.formats.aliases.strings`)."""
    out: list[str] = []

    def walk(v: Any) -> None:
        kind = type(v)
        if kind is str:
            out.append(v)
        elif kind is dict:
            for x in v.values():
                walk(x)
        elif kind is list:
            for x in v:
                walk(x)

    walk(value)
    return out


def _aliased(value: list[dict[str, Any]], table: dict[str, str]) -> list[dict[str, Any]]:
    """The records with every string value that starts with a chosen prefix aliased."""
    rewrite = A.rewriter(table)

    def one(v: Any) -> Any:
        kind = type(v)
        if kind is str:
            return rewrite(v)
        if kind is list:
            return [one(x) for x in v]
        if kind is dict:
            return {k: one(x) for k, x in v.items()}
        return v

    return [{k: one(v) for k, v in row.items()} for row in value]


def _count_leaves(value: Any) -> int:
    """Scalars and empty containers under ``value`` (the knapsack's uniform value)."""
    kind = type(value)
    if kind is dict and value:
        return sum(map(_count_leaves, value.values()))
    if kind is list and value:
        return sum(map(_count_leaves, value))
    return 1


def _tables(records: Records, value: list[dict[str, Any]], prelude: list[str],
            ) -> list[tuple[str, str]]:  # fmt: skip
    """(option, text as sent) of each table that can carry the records, in the knapsack's
    order: the container's csv and Markdown blocks, or its path tables where the records
    hold objects, then the single csv format where they are scalars; ``prelude``: alias
    hint lines, after the format hint.

    Where the records hold objects the plain tables are not written: per row, their
    cell of an object (its JSON, quoted in csv) is longer than the path table's cells
    of its leaves, which name the keys once in the header; on 118 random arrays of
    records holding objects they cost 1.2 to 3.4 times as many tokens."""
    if records.nests:  # a cell per leaf (the plain tables' object cells cost more)
        header = [PT.path_text(p) for p in records.paths]
        rows = _cell_rows(map(_leaves, value))
        bodies = [("csv_paths", _csv_paths(header, rows))]
        formats = ("markdown_paths",)
    else:
        header = list(records.keys)
        rows = _cell_rows(row.values() for row in value)
        bodies = [("csv", _table(header, rows, "csv"))]
        formats = ("markdown_table",)
    try:  # a Markdown cell is one trimmed line
        bodies += [(fmt, _table(header, rows, fmt)) for fmt in formats]
    except ValueError:
        pass
    out = [(option, "\n".join([H.encoded("mckp", option), *prelude, body]))
           for option, body in bodies]  # fmt: skip
    single = _single_cells(value)
    if single is not None:
        body = _table(header, single, "csv")
        out.append(("single:csv", "\n".join([H.encoded("csv"), *prelude, body])))
    return out


def encode_records(value: list[dict[str, Any]], records: Records, *, tokenizer: str,
                   known: dict[str, int] | None = None) -> Any:  # fmt: skip
    """The lossless :class:`tersetalk.formats.solver.Encoding` of a long array of
    records (``records``: their shape, :func:`table_records`) as the cheapest table
    that reads back, or None where the knapsack should lay it out (see the module's
    docstring). ``known``: token counts made elsewhere, given the new ones."""
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

    strings = _strings(value)
    table = A.choose_among(strings, count) if any("/" in s for s in strings) else {}
    try:
        texts = _tables(records, value, [])
        plain = len(texts)
        if table:  # the knapsack's alias layer: the tables again with the prefixes named
            aliased = _tables(records, _aliased(value, table), A.hint_lines(table))
            texts += [(option, text) for option, text in aliased]
    except ValueError:  # an int past Python's int-to-str digit limit
        return None
    # every text counted elsewhere (the count helper, else threads) while the shortest
    # csv (most often the cheapest text: a Markdown table of the same cells is about as
    # long, and dearer by its pipes) is read back here: the same answer, only sooner
    pending = [(t, count_tokens_aside(t, tokenizer))
               for t in dict.fromkeys(t for _, t in texts if t not in known)]  # fmt: skip
    read: dict[str, bool] = {}
    want = exact_text(value)  # written once for every text read back

    def reads_back(text: str) -> bool:
        if text not in read:
            try:
                read[text] = same_value(decode(text), value, want)
            except ValueError:
                read[text] = False
        return read[text]

    reads_back(min((t for option, t in texts if not option.startswith("markdown")), key=len))
    for t, result in pending:
        known[t] = result()
    if asked is not None and asked() not in OPTIONS:
        return None
    # the cheapest first; among equals, the knapsack's order (without aliases first,
    # blocks before single formats)
    ranked = sorted(range(len(texts)), key=lambda i: (known[texts[i][1]], i))
    leaves = _count_leaves(value)
    for i in ranked:
        option, text = texts[i]
        if reads_back(text):
            return Encoding(text, "mckp", "exact", known[text], tokenizer, None, float(leaves),
                            float(leaves), True, (("$", option),),
                            aliases=len(table) if i >= plain else 0, read_back=True)  # fmt: skip
    return None
