"""Records with nested or optional values as one table: a column per dotted key path.

Why: ``csv`` and ``markdown_table`` carry only arrays of objects with the same keys in
the same order, and write a nested object as inline JSON in a cell, so an array of
API records (a status with its ``account``, a notification whose ``status`` is
optional) falls back to JSON, which repeats every key in every row. Here each leaf
gets a column named by its path (``account.username``), written once in the header.

The table is an exact inverse of the rows, with three kinds of cell:

- **absent**: the empty cell. The key (or one of the objects on its path) is not in
  that row. The container never writes a value as an empty cell (``""`` is the
  JSON string ``""``), so absent, ``null``, ``""`` and ``{}`` are four different cells.
- **a value**: the value at that path, written by the container's inline rules.
- a path's **own column** (``account``) exists only when some row holds there a value
  that is not an object with keys (``null``, ``{}``, a scalar, an array); a row whose
  value there is an object with keys leaves that cell empty and fills the sub-columns.

Column order is a merge of the rows' key orders (a topological order of "key b comes
after key a in some row", ties broken by first appearance), and a decoded row takes
its keys in column order, so every row's key order is reproduced wherever the rows
agree on one order; where they do not (no such order exists), there is no path table
(:func:`flatten` gives None at once: a page of API objects whose fields come in
different orders is not rendered, counted and read back only to fail).

A path is its keys joined by ``.``, each key with ``\\``, ``.`` and ``=`` written
``\\\\``, ``\\.`` and ``\\=``: ``a.b`` is the key ``b`` inside ``a``; ``a\\.b`` the key
``a.b`` (``=`` is escaped for ``csv_paths`` headers, where it starts a constant).
"""

from __future__ import annotations

from typing import Any

from tersetalk.formats.tree import Array, Node, Object

KeyPath = tuple[str, ...]


class PathTableError(ValueError):
    """A header or row that is not a valid path table."""


class _Absent:
    """The cell of a key a row does not have (written as the empty cell)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


# --- headers -----------------------------------------------------------------------


def path_text(path: KeyPath) -> str:
    """A key path as a column name: keys joined by ``.``; ``\\``, ``.`` and ``=`` escaped."""
    return ".".join(k.replace("\\", "\\\\").replace(".", "\\.").replace("=", "\\=") for k in path)


def parse_path(text: str) -> KeyPath:
    """The key path a column name stands for (the inverse of :func:`path_text`)."""
    keys: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 == len(text) or text[i + 1] not in "\\.=":
                raise PathTableError(f"column {text!r}: '\\' escapes only '\\', '.' or '='")
            cur.append(text[i + 1])
            i += 2
            continue
        if ch == ".":
            keys.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    keys.append("".join(cur))
    return tuple(keys)


# --- rows to columns -----------------------------------------------------------------


class _Trie:
    """The key paths of the rows, in merged key order; ``own``: the path has a column.

    The order of the keys at one level is a topological order of "follows" in the
    rows (each row's keys in order), ties broken by first appearance, so rows that
    omit different keys of one common order all read back in it.
    """

    __slots__ = ("seen", "after", "children", "own")

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}  # key -> first appearance
        self.after: dict[str, set[str]] = {}  # key -> keys a row puts right after it
        self.children: dict[str, _Trie] = {}
        self.own = False

    def add(self, obj: Object) -> None:
        prev: str | None = None
        for k, v in obj.items:
            child = self.children.get(k)
            if child is None:
                child = self.children[k] = _Trie()
                self.seen[k] = len(self.seen)
                self.after[k] = set()
            if prev is not None:
                self.after[prev].add(k)
            if isinstance(v, Object) and v.items:
                child.add(v)
            else:
                child.own = True
            prev = k

    def keys(self) -> list[str] | None:
        """The keys in an order every row agrees with (first appearance where free);
        None where the rows disagree (no order keeps each row's)."""
        indegree = dict.fromkeys(self.seen, 0)
        for nxt in self.after.values():
            for k in nxt:
                indegree[k] += 1
        ready = [k for k in self.seen if indegree[k] == 0]
        out: list[str] = []
        while ready:
            k = min(ready, key=self.seen.__getitem__)
            ready.remove(k)
            out.append(k)
            for n in self.after[k]:
                indegree[n] -= 1
                if indegree[n] == 0:
                    ready.append(n)
        return out if len(out) == len(self.seen) else None

    def paths(self, prefix: KeyPath = ()) -> list[KeyPath] | None:
        """Every column's path in order; None where the rows' key orders disagree at
        some level."""
        keys = self.keys()
        if keys is None:
            return None
        out: list[KeyPath] = []
        for k in keys:
            child = self.children[k]
            if child.own:
                out.append((*prefix, k))
            below = child.paths((*prefix, k))
            if below is None:
                return None
            out += below
        return out


def _cell(row: Object, path: KeyPath, index: dict[int, dict[str, Node]]) -> Any:
    node: Node = row
    for k in path:
        if not isinstance(node, Object):
            return ABSENT
        keyed = index.get(id(node))
        if keyed is None:
            keyed = index[id(node)] = dict(node.items)
        found = keyed.get(k)
        if found is None:
            return ABSENT
        node = found
    if isinstance(node, Object) and node.items:
        return ABSENT  # carried by the sub-columns
    return node


def flatten(node: Node) -> tuple[list[KeyPath], list[list[Any]]] | None:
    """The columns and cells (a node or ABSENT) of an array of objects, else None.

    None also for an array whose rows have no key at all (nothing to head a column),
    and for rows whose keys come in orders no one column order keeps (see above).
    """
    if not isinstance(node, Array) or not node.items:
        return None
    if not all(isinstance(item, Object) for item in node.items):
        return None
    trie = _Trie()
    for item in node.items:
        trie.add(item)  # type: ignore[arg-type]
    paths = trie.paths()
    if not paths:  # None or empty
        return None
    index: dict[int, dict[str, Node]] = {}  # an object's children by key, by id()
    rows = [[_cell(item, p, index) for p in paths] for item in node.items]  # type: ignore[arg-type]
    return paths, rows


def nests(node: Node) -> bool:
    """Whether an array of objects needs a path table: some row holds an object with
    keys, or the rows' keys differ (plain ``csv`` carries the rest as well)."""
    if not isinstance(node, Array) or not node.items:
        return False
    if not all(isinstance(item, Object) for item in node.items):
        return False
    first = node.items[0].keys()  # type: ignore[union-attr]
    for item in node.items:
        if item.keys() != first:  # type: ignore[union-attr]
            return True
        if any(isinstance(v, Object) and v.items for _, v in item.items):  # type: ignore[union-attr]
            return True
    return False


# --- columns to rows -----------------------------------------------------------------


def unflatten(paths: list[KeyPath], rows: list[list[Any]]) -> list[dict[str, Any]]:
    """The rows back from columns and cells (ABSENT: the key is not in the row)."""
    if len(set(paths)) != len(paths):
        raise PathTableError("a column is repeated")
    out = []
    for n, cells in enumerate(rows, start=1):
        row: dict[str, Any] = {}
        for path, cell in zip(paths, cells, strict=True):
            if cell is ABSENT:
                continue
            cur = row
            for k in path[:-1]:
                if k not in cur:
                    cur[k] = {}
                elif not isinstance(cur[k], dict):
                    raise PathTableError(f"row {n}: {path_text(path)!r} is inside a non-object")
                cur = cur[k]
            if path[-1] in cur:
                raise PathTableError(f"row {n}: {path_text(path)!r} is given twice")
            cur[path[-1]] = cell
        out.append(row)
    return out
