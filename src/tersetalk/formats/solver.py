"""The multi-choice knapsack: one option per subtree, the most value within a token budget.

For every JSON subtree the solver picks exactly one option:

- a lossless format: ``inline`` (compact JSON, or the bare scalar where it reads back
  exactly), a block in ``csv`` / ``markdown_table`` / ``toon`` / ``text``, a path
  table (``csv_paths`` / ``markdown_paths``: records whose values nest or whose keys
  differ, a column per dotted key path, see :mod:`tersetalk.formats.pathtable`), or the
  container's composites ``kv`` (an object's keys one per line, each child with its
  own option) and ``list`` (an array's items one per line, each with its own option);
- ``truncated`` (a long string cut, with an overflow hint naming the rest);
- ``elided`` (the subtree left out; its key is named by an overflow hint, or an
  array keeps a prefix of its items and the hint gives the count and the call).

The root may also take a single-format encoder whole (``single:csv``, ...), so the
knapsack is never dearer than the best single format. A lossless result is decoded
before it is returned; if it does not read back (a body line that looks like a hint),
compact JSON is sent instead and ``Encoding.fallback`` says why.

Cost is the tokens of the lines the option emits (each line with its newline, under a
named tokenizer), hint lines included. Value is per scalar leaf (``ValueScheme``).
With no budget the solver returns the cheapest lossless encoding of the whole tree.
With a budget:

- ``exact``: dynamic programming over (cost, value) Pareto frontiers, bottom up, with
  the tree's constraints (a child's option exists only inside its parent's composite;
  an array keeps a prefix). Exact for the additive line-cost model; the emitted text
  is then measured and, in the rare case tokenisation across lines makes it longer
  than the budget, solved again with the budget lowered by the excess, so the result
  never exceeds the budget.
- ``greedy``: start from the cheapest lossless encoding and drop the unit (an object
  key or an array's last item) with the least value per token saved until it fits.
- ``binary``: the keep-or-drop knapsack of JSON only (every kept subtree as compact
  JSON, dropped ones named by hints): the single-format baseline of TrimTree.

Why Pareto frontiers and not an array over every token count: payloads have thousands
of tokens, and a frontier holds only the points that are not dominated (at most one
per distinct value), which keeps the exact solve fast enough to run over the corpus.
An object's frontier is extended key by key from (cost, value) pairs alone (numpy for
large products), partial plans that can only end over the budget are left out, and a
plan's children are read off a shared chain only when used: the frontiers, and the
plan kept among equal ones, are those of the plain cross product
(tests/test_formats_solver_exact.py checks it against that code).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any

from tersetalk.core import counter
from tersetalk.core.tokens import (
    ASIDE_MIN_CHARS,
    count_tokens,
    count_tokens_aside,
    lines_join_exactly,
)
from tersetalk.formats import aliases as A
from tersetalk.formats import hints as H
from tersetalk.formats import pathtable as PT
from tersetalk.formats.container import (
    _ITEM_HEADER,
    INDENT,
    PATH_TABLES,
    cell_rows,
    compact_json,
    indent_lines,
    inline,
    key_ok,
    parse_block,
    render_block,
)
from tersetalk.formats.tree import (
    MAX_DEPTH,
    Array,
    Node,
    Object,
    Scalar,
    TreeError,
    from_python,
    is_json,
    json_depth_exceeds,
    records_keys,
    same_value,
    to_python,
)

Path = tuple[str | int, ...]
METHODS = ("exact", "greedy", "binary")
BLOCKS = ("csv", "markdown_table", *PATH_TABLES, "toon", "text")
TRUNCATE_MIN_CHARS = 64
TRUNCATE_KEEP = (0.5, 0.25)
#: the fewest rows a table (csv, Markdown table, a TOON tabular array) may have; see
#: table_rows_ok()
MIN_TABLE_ROWS = 2
# a TOON tabular header, ``[N]{f1,f2}:`` after an optional key or list dash: TOON quotes
# any string holding brackets or braces, so an unquoted ``[N]{`` starts only a header
_TOON_TABLE = re.compile(r'^\s*(?:- )?(?:"(?:[^"\\]|\\.)*"|[^\s"\[]*)\[(\d+)[^\]]*\]\{', re.M)


class BudgetError(ValueError):
    """The budget is below what any encoding of the payload can reach (root kept)."""


# --- values -----------------------------------------------------------------------


@dataclass(frozen=True)
class ValueScheme:
    """Value of each scalar leaf: ``uniform`` (1), ``depth`` (``gamma ** depth``) or
    ``priority`` (leaves under a key in ``priority`` weigh ``priority_weight``)."""

    name: str = "uniform"
    gamma: float = 0.8
    priority: tuple[str, ...] = ()
    priority_weight: float = 10.0

    def __post_init__(self) -> None:
        if self.name not in ("uniform", "depth", "priority"):
            raise ValueError(f"value scheme {self.name!r}: use uniform, depth or priority")
        if not 0 < self.gamma <= 1:
            raise ValueError("value scheme gamma must be in (0, 1]")

    def leaf(self, path: Path) -> float:
        if self.name == "depth":
            return self.gamma ** len(path)
        if self.name == "priority":
            return self.priority_weight if any(p in self.priority for p in path) else 1.0
        return 1.0


def total_value(node: Node, scheme: ValueScheme, path: Path = ()) -> float:
    if scheme.name == "uniform":  # every leaf is worth 1, wherever it is: count them
        return float(_leaves(node))
    if isinstance(node, Object):
        return sum(total_value(v, scheme, (*path, k)) for k, v in node.items) or scheme.leaf(path)
    if isinstance(node, Array):
        return sum(
            total_value(v, scheme, (*path, i)) for i, v in enumerate(node.items)
        ) or scheme.leaf(path)
    return scheme.leaf(path)


def _leaves(node: Node) -> int:
    """Scalars and empty containers under ``node`` (a leaf each), without recursion."""
    n, stack = 0, [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, Object) and cur.items:
            stack.extend(v for _, v in cur.items)
        elif isinstance(cur, Array) and cur.items:
            stack.extend(cur.items)
        else:
            n += 1
    return n


def table_rows_ok(node: Node, fmt: str, text: str, min_rows: int = MIN_TABLE_ROWS) -> bool:
    """Whether a block of ``fmt`` holds no table with fewer than ``min_rows`` rows.

    Why: a table writes each key once in its header, which pays only when two or more
    rows would otherwise repeat it. A one-row table repeats nothing, yet puts every
    value a header's width away from its key, so a reader must count commas to pair
    them (and a small model answered the "[1]" of a TOON header ``[1]{id,...}`` when
    asked for the item's ``id``). ``key: value`` lines keep each key beside its value
    for about the same tokens. Checked on the rendered text for TOON, whose nested
    arrays may be tables too; csv and Markdown tables have one row per item.
    """
    if min_rows <= 1:
        return True
    if fmt in ("csv", "markdown_table", *PATH_TABLES):
        return not isinstance(node, Array) or len(node.items) >= min_rows
    if fmt == "toon":
        return all(int(n) >= min_rows for n in _TOON_TABLE.findall(text))
    return True


# --- plans ------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The option chosen for one subtree (and, for composites, for its children)."""

    option: str
    cost: float
    value: float
    children: tuple[tuple[str | int, Plan], ...] = ()
    dropped: tuple[str, ...] = ()  # kv / jsonobj: keys left out
    kept_chars: int = 0  # truncated
    missing: int = 0  # list / jsonarr: items left out at the end

    @property
    def lossless(self) -> bool:
        return (
            self.option != "truncated"
            and not self.dropped
            and not self.missing
            and all(p.lossless for _, p in self.children)
        )


Slot = tuple[str, Any]  # ("key", name) | ("item", None) | ("root", None) | ("json", None)


def _prefix(slot: Slot) -> str:
    return f"{slot[1]}: " if slot[0] == "key" else "- " if slot[0] == "item" else ""


def _header(slot: Slot, fmt: str) -> str:
    return f"{slot[1]} ({fmt}):" if slot[0] == "key" else f"- ({fmt}):"


def _inline_text(node: Node, slot: Slot) -> str:
    if slot[0] in ("root", "json"):  # a root without a format hint is JSON
        return compact_json(to_python(node))
    text = inline(node)
    if slot[0] == "item" and _ITEM_HEADER.match("- " + text):
        text = compact_json(to_python(node))
    return text


#: the sampled search renders whole only the blocks whose estimate from the sample is
#: at most this many times the cheapest block's (:meth:`_Solver._unlikely_blocks`)
SAMPLE_SLACK = 1.25

#: blocks of more lines than this are counted whole where that is exact (fewer lines
#: repeat across options often enough that counting each, cached, is cheaper)
_JOIN_MIN_LINES = 16


class _Costs:
    """What one :func:`solve` call computes once and reuses: token counts of lines (most
    lines repeat across options), each node's rendered blocks and root single formats
    (a TOON round trip is dear, and a node is offered in several solver instances: the
    lossless one of every array, each retry, the greedy's), and the lossless frontiers.

    Node-keyed entries use ``id(node)`` and keep the node itself, so an id is never
    reused while its entry lives. One instance per ``solve`` call, never shared across
    calls, so every solve's time stays its own (the knapsack experiment reports it).

    **Lazy read-back** (``lazy``): a block or a root single format is offered at the
    cost of its rendering, and its round trip (does it decode to the node?) is checked
    only when it is in the plan the solver picks (:meth:`verify`). A block that fails
    is then ruled out and the plan solved again. Why this gives the plan the eager
    check gives: every option's cost is only a lower bound of its cost with the failed
    blocks ruled out, so the plan picked with unchecked blocks, once each of its own
    blocks reads back, is also the least-cost (lossless) or most-value (budget) plan
    among the options that read back, and the solver's order among equal plans
    depends on the plans' own costs alone. Checking a block per candidate cost most of
    a large payload's time (a TOON decode per record, a Markdown parse per table).
    After :data:`LAZY_ROUNDS` failed plans the remaining blocks are checked eagerly.
    The greedy method starts from the lossless plan and drops units from it, so it
    depends on every subtree's cheapest option and always checks eagerly.
    """

    def __init__(self, tokenizer: str, lazy: bool = True,
                 known: dict[str, int] | None = None) -> None:  # fmt: skip
        self.tokenizer = tokenizer
        self.lazy = lazy
        #: counts of texts made elsewhere (``known``: the caller's, of this tokenizer; the
        #: MCP proxy has counted the result it was sent, often the root's compact JSON)
        #: and counted beside each other (:meth:`prefetch`)
        self.known: dict[str, int] = {} if known is None else known
        self.text = lru_cache(maxsize=200_000)(self._count)
        self._blocks: dict[tuple[int, str], tuple[Node, str | None]] = {}
        self._singles: dict[tuple[int, str], tuple[Node, str | None]] = {}
        #: (id(node), option) -> (node, whether its text reads back): checked ones only
        self._checked: dict[tuple[int, str], tuple[Node, bool]] = {}
        #: frontiers of lossless solvers (no budget: they depend on the node only)
        self.lossless: dict[tuple, tuple[Node, Frontier]] = {}
        #: round trips run (what the lazy read-back saves; tests count them)
        self.checks = 0
        #: id(node) -> (node, compact JSON, inline text): each rendered once per solve
        self._inline: dict[int, tuple[Node, str, str]] = {}
        #: (id(scheme), id(node), path or None) -> (node, total value)
        self._values: dict[tuple, tuple[Node, float]] = {}
        self._aliases: dict[int, tuple[Node, list[tuple[Node, list[str]]]]] = {}
        #: id(node) -> (node, its alias table) (:meth:`alias_table`)
        self._alias_tables: dict[int, tuple[Node, dict[str, str]]] = {}
        #: id(node) -> (node, its table rows of cells) (:meth:`_rows`)
        self._table_rows: dict[int, tuple[Node, list[list[str]]]] = {}
        #: id(node) -> (node, to_python(node)), for the nodes asked (:meth:`python`)
        self._python: dict[int, tuple[Node, Any]] = {}

    def compact(self, node: Node) -> str:
        """``compact_json(to_python(node))``, once per node."""
        return self._texts(node)[1]

    def inline(self, node: Node, slot: Slot) -> str:
        """``_inline_text(node, slot)``, its JSON and bare forms once per node."""
        if slot[0] in ("root", "json"):
            return self._texts(node)[1]
        text = self._texts(node)[2]
        if slot[0] == "item" and _ITEM_HEADER.match("- " + text):
            return self._texts(node)[1]
        return text

    def _cell(self, node: Node) -> str:
        """``inline(node)``, once per node: a table's cell."""
        return self._texts(node)[2]

    def _rows(self, node: Array) -> list[list[str]]:
        """A table's rows of cells (:func:`cell_rows`), once per node for every table format."""
        hit = self._table_rows.get(id(node))
        if hit is None:
            hit = self._table_rows[id(node)] = (node, cell_rows(node, self._cell))
        return hit[1]

    def _texts(self, node: Node) -> tuple[Node, str, str]:
        hit = self._inline.get(id(node))
        if hit is None:
            whole = compact_json(node.value if isinstance(node, Scalar) else self.python(node))
            # inline() is compact JSON but for a string that reads back bare
            text = isinstance(node, Scalar) and isinstance(node.value, str)
            bare = inline(node) if text else whole
            hit = self._inline[id(node)] = (node, whole, bare)
        return hit

    def value(self, node: Node, scheme: ValueScheme, path: Path) -> float:
        """``total_value(node, scheme, path)``, each subtree's summed once (the same
        sums in the same order; a uniform scheme's value does not depend on the path)."""
        key = (id(scheme), id(node), path if scheme.name != "uniform" else None)
        hit = self._values.get(key)
        if hit is None:
            if isinstance(node, Object):
                v = sum(self.value(c, scheme, (*path, k)) for k, c in node.items)
            elif isinstance(node, Array):
                v = sum(self.value(c, scheme, (*path, i)) for i, c in enumerate(node.items))
            else:
                v = 0
            hit = self._values[key] = (node, v or scheme.leaf(path))
        return hit[1]

    def aside(self, text: str) -> Callable[[], int]:
        """``self.text(text)``, a long text's counted now elsewhere (:func:`count_tokens_aside`)
        while the caller goes on; read by calling the result."""
        if text in self.known or len(text) < ASIDE_MIN_CHARS:
            return partial(self.text, text)
        result = count_tokens_aside(text, self.tokenizer)

        def counted() -> int:
            n = self.known[text] = result()
            return n

        return counted

    def python(self, node: Node) -> Any:
        """``to_python(node)``, once per node (:meth:`seed_python` gives one made
        elsewhere: the MCP proxy's parsed result)."""
        hit = self._python.get(id(node))
        if hit is None:
            hit = self._python[id(node)] = (node, to_python(node))
        return hit[1]

    def seed_python(self, node: Node, value: Any) -> None:
        """Take ``value`` as ``to_python(node)`` (the caller has it: no walk of the tree)."""
        self._python[id(node)] = (node, value)

    def _count(self, text: str) -> int:
        n = self.known.get(text)
        return count_tokens(text, self.tokenizer) if n is None else n

    def prefetch(self, texts: Sequence[Sequence[str]]) -> None:
        """Count the long texts that :meth:`lines` will count whole, for each of
        ``texts`` (line lists), beside each other (:func:`count_tokens_aside`: in the
        helper process where one runs, so a 100 KB CSV and Markdown table of the same
        records are counted on another core while this one goes on). The same counts,
        only sooner."""
        todo = []
        for lines in texts:
            whole = _joined(lines)
            if whole is not None and len(whole) >= ASIDE_MIN_CHARS and whole not in self.known:
                todo.append(whole)
        todo = list(dict.fromkeys(todo))
        if len(todo) < 2:
            return
        pending = [(t, count_tokens_aside(t, self.tokenizer)) for t in todo[1:]]
        self.known[todo[0]] = count_tokens(todo[0], self.tokenizer)
        for t, result in pending:
            self.known[t] = result()

    def alias_table(self, node: Node) -> dict[str, str]:
        """The string-prefix aliases worth naming in ``node`` (chosen once per node)."""
        hit = self._alias_tables.get(id(node))
        if hit is None:
            table = A.choose(node, self.text, self.compact(node))
            hit = self._alias_tables[id(node)] = (node, table)
        return hit[1]

    def aliased(self, node: Node) -> list[tuple[Node, list[str]]]:
        """``node`` with its string-prefix aliases applied and their hint lines, or
        nothing where no alias saves tokens (built once per node)."""
        hit = self._aliases.get(id(node))
        if hit is None:
            table = self.alias_table(node)
            out = [(A.apply(node, table), A.hint_lines(table))] if table else []
            hit = self._aliases[id(node)] = (node, out)
        return hit[1]

    def lines(self, lines: Sequence[str]) -> int:
        """Tokens of ``lines``, each with its newline, summed line by line; a block of
        many lines is counted whole where that gives the same sum (one tokenizer call
        instead of one per line: :func:`lines_join_exactly`)."""
        whole = _joined(lines)
        if whole is not None:
            return self.text(whole)
        return sum(self.text(x + "\n") for x in lines)

    def block(self, node: Node, fmt: str) -> str | None:
        """``render_block(node, fmt)`` where it may read back, else None: checked at
        once (eager) or, lazily, None only once its check has failed."""
        body = self._rendered(node, fmt)
        if body is None or not self._may_read_back(node, fmt):
            return None
        return body

    def _rendered(self, node: Node, fmt: str) -> str | None:
        """``render_block(node, fmt)``, once per node (None where it raises)."""
        key = (id(node), fmt)
        hit = self._blocks.get(key)
        if hit is None:
            try:
                body: str | None = render_block(node, fmt, self._cell, self._rows)
            except Exception:  # noqa: BLE001 - fail closed, as block_ok
                body = None
            hit = self._blocks[key] = (node, body)
        return hit[1]

    def single(self, node: Node, name: str) -> str | None:
        """The root in the single-format encoder ``name`` where it may be eligible (its
        shape fits; its round trip as for :meth:`block`), else None."""
        key = (id(node), "single:" + name)
        hit = self._singles.get(key)
        if hit is None:
            from tersetalk.formats.encoders import get_encoder

            enc = get_encoder(name)
            try:  # eligible()'s shape check and encoding, its round trip left to check()
                if not enc._shape_ok(node):
                    body = None
                elif name == "toon":  # the TOON encoder writes the TOON block's text
                    body = self._rendered(node, "toon")
                else:
                    body = enc._encode(node)
            except Exception:  # noqa: BLE001 - fail closed, as eligible()
                body = None
            text = None if body is None else H.encoded(name) + "\n" + body.rstrip("\n")
            hit = self._singles[key] = (node, text)
        if hit[1] is None or not self._may_read_back(node, "single:" + name):
            return None
        return hit[1]

    def _may_read_back(self, node: Node, option: str) -> bool:
        done = self._checked.get((id(node), option))
        if done is not None:
            return done[1]
        return True if self.lazy else self.check(node, option)

    def check(self, node: Node, option: str) -> bool:
        """Whether the block or single format ``option`` of ``node`` decodes to it (the
        round trip of ``block_ok`` / ``Encoder.eligible``; any exception fails closed)."""
        done = self._checked.get((id(node), option))
        if done is not None:
            return done[1]
        self.checks += 1
        try:
            if option.startswith("single:"):
                from tersetalk.formats.encoders import get_encoder

                enc = get_encoder(option[len("single:") :])
                ok = same_value(enc.decode(enc._encode(node)), to_python(node))
            else:
                body = self._blocks[(id(node), option)][1]
                ok = body is not None and same_value(parse_block(body, option),
                                                     to_python(node))  # fmt: skip
        except Exception:  # noqa: BLE001 - fail closed
            ok = False
        self._checked[(id(node), option)] = (node, ok)
        return ok

    def verify(self, node: Node, plan: Plan) -> bool:
        """Check every block and single format of ``plan`` not checked yet; True if
        they all read back. Each failure is remembered (the options then rule it out)
        and the lossless frontiers that may hold it are forgotten (:meth:`forget`)."""
        failed = [path for sub, option, path in _plan_blocks(node, plan)
                  if not self.check(sub, option)]  # fmt: skip
        self.forget(failed)
        return not failed

    def forget(self, paths: Sequence[Path]) -> None:
        """Drop the lossless frontiers of the nodes at ``paths`` and above them: only
        those can hold a block of a node there (a frontier is built from its own
        subtree's options). The rest stay as they are, and a new pick builds the same
        frontiers that a solve from scratch would (the checks known since change only
        the blocks that failed), in the time of the nodes above the failed blocks: a
        path table of a whole page that does not read back costs one root solve more,
        not the whole tree's again."""
        if not paths:
            return
        above = {path[:i] for path in paths for i in range(len(path) + 1)}
        # the key's path (see _Solver.frontier)
        self.lossless = {k: v for k, v in self.lossless.items() if k[6] not in above}

    def eager(self) -> None:
        """Check every block from now on, and forget frontiers built on unchecked ones."""
        self.lazy = False
        self.lossless.clear()


def _joined(lines: Sequence[str]) -> str | None:
    """The one text :meth:`_Costs.lines` counts for ``lines`` (many lines that join
    exactly: :func:`lines_join_exactly`), or None where it counts line by line."""
    if len(lines) > _JOIN_MIN_LINES and lines_join_exactly(lines):
        return "\n".join(lines) + "\n"
    return None


#: what :func:`solve` computes for a node, to share between solves of it (``cache=``)
SolveCache = _Costs

#: plans picked with unchecked blocks before the solver checks every block eagerly
LAZY_ROUNDS = 3


def _plan_blocks(node: Node, plan: Plan, path: Path = ()):
    """(node, option, path) of every block and root single format in ``plan``."""
    opt = plan.option
    if opt.startswith("single:") or opt in BLOCKS:
        yield node, opt, path
    elif opt in ("kv", "list", "jsonobj", "jsonarr") and plan.children:
        items = node.items if isinstance(node, Array) else dict(node.items)  # type: ignore[union-attr]
        for key, child in plan.children:
            yield from _plan_blocks(items[key], child, (*path, key))  # type: ignore[index]


def _checked_plan(tree: Node, costs: _Costs, pick) -> Plan | None:
    """``pick()``'s plan once each of its blocks reads back (see :class:`_Costs`): a
    plan with a failed block is picked again without it. None where ``pick`` finds none."""
    for _ in range(LAZY_ROUNDS):
        plan = pick()
        if plan is None or not costs.lazy or costs.verify(tree, plan):
            return plan
    costs.eager()
    return pick()


# --- rendering --------------------------------------------------------------------


def _render(
    node: Node,
    plan: Plan,
    slot: Slot,
    depth: int,
    path: Path,
    out: list[str],
    notes: list[str],
    costs: _Costs | None = None,
) -> None:
    pad = INDENT * depth
    opt = plan.option
    if opt.startswith("single:"):  # the root in one single-format encoder, hint included
        name = opt[len("single:") :]
        # the solver's own rendering (the same text; a root single is lossless, so the
        # whole text is read back after rendering, and a failed check rules it out)
        known = costs.single(node, name) if costs is not None else None
        out.extend((known if known is not None else _single_text(node, name)).split("\n"))
    elif opt == "inline":
        out.append(pad + _prefix(slot) + _inline_text(node, slot))
    elif opt == "truncated":
        assert isinstance(node, Scalar) and isinstance(node.value, str)
        out.append(pad + _prefix(slot) + compact_json(node.value[: plan.kept_chars]))
        notes.append(H.overflow_chars(path, plan.kept_chars, len(node.value)))
    elif opt in ("jsonobj", "jsonarr"):
        out.append(pad + _prefix(slot) + _json_inline(node, plan, path, notes))
    elif opt in ("kv", "list"):
        inner = depth if slot[0] == "root" else depth + 1
        if slot[0] != "root":
            out.append(pad + _header(slot, opt))
        for key, child in plan.children:
            sub = node.items[key] if isinstance(node, Array) else dict(node.items)[key]  # type: ignore[union-attr,index]
            cslot: Slot = ("item", None) if opt == "list" else ("key", key)
            _render(sub, child, cslot, inner, (*path, key), out, notes, costs)
        _overflow_note(node, plan, path, notes)
    else:  # a monolithic block
        text = costs.block(node, opt) if costs is not None else None
        if text is None:
            text = render_block(node, opt)
        if slot[0] == "root":
            out.extend(text.split("\n"))
        else:
            out.append(pad + _header(slot, opt))
            out.extend(indent_lines(text, depth + 1))


def _overflow_note(node: Node, plan: Plan, path: Path, notes: list[str]) -> None:
    if isinstance(node, Array) and len(plan.children) < len(node.items):
        notes.append(H.overflow_items(path, len(plan.children), len(node.items)))
    if plan.dropped:
        notes.append(H.overflow_keys(path, list(plan.dropped)))


def _json_inline(node: Node, plan: Plan, path: Path, notes: list[str]) -> str:
    if plan.option == "inline":
        return compact_json(to_python(node))
    if plan.option == "truncated":
        assert isinstance(node, Scalar) and isinstance(node.value, str)
        notes.append(H.overflow_chars(path, plan.kept_chars, len(node.value)))
        return compact_json(node.value[: plan.kept_chars])
    parts = []
    if isinstance(node, Array):
        for i, child in plan.children:
            parts.append(_json_inline(node.items[i], child, (*path, i), notes))  # type: ignore[index]
        _overflow_note(node, plan, path, notes)
        return "[" + ",".join(parts) + "]"
    assert isinstance(node, Object)
    d = dict(node.items)
    for k, child in plan.children:
        parts.append(compact_json(k) + ":" + _json_inline(d[k], child, (*path, k), notes))
    _overflow_note(node, plan, path, notes)
    return "{" + ",".join(parts) + "}"


def render(node: Node, plan: Plan, costs: _Costs | None = None) -> str:
    """The emitted text of ``plan``: the format hint, the body, then overflow hints
    (``costs``: the solve's renderings, reused)."""
    out: list[str] = []
    notes: list[str] = []
    _render(node, plan, ("root", None), 0, (), out, notes, costs)
    return "\n".join(_format_hint(plan) + out + notes)


#: single-format encoders the root may take whole (their own hint names them)
ROOT_SINGLES = ("csv", "markdown_table", "kv", "toon")


def _single_text(node: Node, name: str) -> str:
    from tersetalk.formats.encoders import get_encoder

    return H.encoded(name) + "\n" + get_encoder(name).encode(node).rstrip("\n")


def _format_hint(plan: Plan) -> list[str]:
    """The format hint: none for JSON, ``mckp`` for the container, ``mckp | <block>``
    when the root is one block (its cells follow the container's inline rules, which
    differ from the single ``csv`` encoder's, so the hint must say which)."""
    if plan.option in ("inline", "jsonobj", "jsonarr") or plan.option.startswith("single:"):
        return []
    if plan.option in ("kv", "list"):
        return [H.encoded("mckp")]
    return [H.encoded("mckp", plan.option)]


# --- the solver -------------------------------------------------------------------


Frontier = list[Plan]  # sorted by cost, strictly increasing value


def _pareto(points: list[Plan], budget: float) -> Frontier:
    points = sorted((p for p in points if p.cost <= budget), key=lambda p: (p.cost, -p.value))
    out: Frontier = []
    for p in points:
        if not out or p.value > out[-1].value + 1e-12:
            out.append(p)
    return out


def _block_formats(node: Node) -> tuple[str, ...]:
    """The blocks (of :data:`BLOCKS`, in its order) offered for ``node``: ``text`` for a
    string with a line break, tables for an array of records (path tables where the
    records nest or their keys differ: plain csv is the same table otherwise), TOON
    for any container."""
    if isinstance(node, Scalar):
        return ("text",) if isinstance(node.value, str) and "\n" in node.value else ()
    records = records_keys(node) is not None
    nests = PT.nests(node)
    return tuple(
        fmt
        for fmt in BLOCKS
        if fmt != "text"
        and (records or fmt not in ("csv", "markdown_table"))
        and (nests or fmt not in PATH_TABLES)
    )


@dataclass
class _Solver:
    scheme: ValueScheme
    costs: _Costs
    budget: float
    lossless_only: bool
    json_only: bool = False
    min_table_rows: int = MIN_TABLE_ROWS
    #: lossless: a composite of more than twice this many items is given up once its
    #: first ``sample`` items, extrapolated, cost more than an option found (None: the
    #: exact search, every item solved until the sum passes it); see :func:`solve`
    sample: int | None = None
    #: whether plans carry their value (False: every value is 0, for the plain lossless
    #: solve, which takes the cheapest plan and keeps everything: summing the values of
    #: a large payload's every subtree was a tenth of its time)
    values: bool = True
    _memo: dict[tuple, Frontier] = field(default_factory=dict)

    def value(self, node: Node, path: Path) -> float:
        return self.costs.value(node, self.scheme, path) if self.values else 0.0

    # the options of one node at one position ----------------------------------------

    def frontier(self, node: Node, slot: Slot, depth: int, path: Path) -> Frontier:
        if self.lossless_only and self.budget == float("inf"):
            # every lossless solver of this solve() agrees on a node's frontier: share it
            # (the path is the key's item 6: _Costs.forget reads it)
            key = (id(self.scheme), self.json_only, self.min_table_rows, self.sample,
                   self.values, id(node), path, slot, depth)  # fmt: skip
            hit = self.costs.lossless.get(key)
            if hit is None:
                hit = self.costs.lossless[key] = (node, self._frontier(node, slot, depth, path))
            return hit[1]
        memo = (path, slot, depth)
        if memo not in self._memo:
            self._memo[memo] = self._frontier(node, slot, depth, path)
        return self._memo[memo]

    def _frontier(self, node: Node, slot: Slot, depth: int, path: Path) -> Frontier:
        value = self.value(node, path)
        # inside a JSON composite only JSON options exist
        json_ctx = self.json_only or slot[0] == "json"
        pad = INDENT * depth
        points: list[Plan] = []
        # inline: compact JSON or the bare scalar (a JSON piece has no line of its own); a
        # long one (a whole payload's) counted on a thread while the blocks are rendered
        if slot[0] == "json":
            inline_cost = partial(self.costs.text, self.costs.compact(node))
        else:
            inline_cost = self.costs.aside(pad + _prefix(slot) + self.costs.inline(node, slot)
                                           + "\n")  # fmt: skip
        if isinstance(node, Scalar) and isinstance(node.value, str) and not self.lossless_only:
            n = len(node.value)
            if n >= TRUNCATE_MIN_CHARS:
                for frac in TRUNCATE_KEEP:
                    kept = int(n * frac)
                    piece = compact_json(node.value[:kept])
                    hint = self.costs.lines([H.overflow_chars(path, kept, n)])
                    cost = (
                        self.costs.text(piece)
                        if slot[0] == "json"
                        else self.costs.lines([pad + _prefix(slot) + piece])
                    )
                    points.append(Plan("truncated", cost + hint, value * kept / n, kept_chars=kept))
        unlikely = self._unlikely_blocks(node, slot, depth) if not json_ctx else ()
        blocks: list[tuple[str, list[str]]] = []  # (option, its lines)
        if not json_ctx:
            for fmt in _block_formats(node):
                if fmt in unlikely:
                    continue
                body = self.costs.block(node, fmt)
                if body is None:
                    continue
                if not table_rows_ok(node, fmt, body, self.min_table_rows):
                    continue
                lines = (
                    body.split("\n")
                    if slot[0] == "root"
                    else [pad + _header(slot, fmt), *indent_lines(body, depth + 1)]
                )
                blocks.append((fmt, lines))
        n_blocks = len(blocks)
        if slot[0] == "root" and not json_ctx:
            for name in ROOT_SINGLES:
                if name in unlikely:
                    continue
                text = self.costs.single(node, name)
                if text is not None and table_rows_ok(node, name, text, self.min_table_rows):
                    blocks.append((f"single:{name}", text.split("\n")))
        self.costs.prefetch([lines for _, lines in blocks])
        points.insert(0, Plan("inline", inline_cost(), value))
        points += [Plan(opt, self.costs.lines(lines), value) for opt, lines in blocks[:n_blocks]]
        # the singles are offered last, found before the composites (below)
        singles = [Plan(opt, self.costs.lines(lines), value) for opt, lines in blocks[n_blocks:]]

        # Lossless, the cheapest option is taken: a composite whose children so far
        # already cost more than an option found is left out before its last child (its
        # cost only grows), which spares the children's solves (the records of a table).
        # The cost compared is the one the root adds its format hint to (below).
        def extra(option: str) -> int:
            if slot[0] != "root":
                return 0
            return self.costs.lines(_format_hint(Plan(option, 0, 0.0))) - 1

        best = float("inf")
        if self.lossless_only:
            best = min((p.cost + extra(p.option) for p in (*points, *singles)), default=best)
        # The JSON composites ({...}, [...] with each child in JSON) matter under a
        # budget, which may drop keys or items inside them. Lossless they write the
        # inline option's very text (compact JSON), only costed as a sum of pieces
        # rather than counted whole, so they are not offered: on the 273 corpus payloads
        # the same texts, in about 70% of the time (half the frontiers built were
        # JSON pieces).
        composites: list[tuple[str, Any]] = []
        if isinstance(node, Object) and node.items:
            if not self.lossless_only:
                composites.append(("jsonobj", self._composite_object))
            if not json_ctx and all(key_ok(k) for k, _ in node.items):
                composites.append(("kv", self._composite_object))
        if isinstance(node, Array) and node.items:
            if not self.lossless_only:
                composites.append(("jsonarr", self._composite_array))
            if not json_ctx:
                composites.append(("list", self._composite_array))
        for option, build in composites:
            # under a budget the composite may cost what the root's hint leaves (its
            # format hint, less the last line's newline, can make it one token cheaper)
            found = build(node, slot, depth, path, option, best - extra(option),
                          room=self.budget - extra(option))  # fmt: skip
            points += found
            if self.lossless_only and found:
                best = min(best, min(p.cost for p in found) + extra(option))
        points += singles
        if slot[0] == "root":  # the format hint counts; the text's last line has no newline
            points = [
                replace(p, cost=p.cost + self.costs.lines(_format_hint(p)) - 1) for p in points
            ]
        if self.lossless_only:
            best = min(points, key=lambda p: p.cost)
            return [best]
        return _pareto(points, self.budget)

    def _unlikely_blocks(self, node: Node, slot: Slot, depth: int) -> tuple[str, ...]:
        """The sampled search's blocks not worth rendering whole. For a long array:
        those whose rendering of the first ``sample`` items, extrapolated to every
        item, costs more than :data:`SAMPLE_SLACK` times the cheapest block's
        (rendering, counting and reading back a 100 KB TOON block cost a fifth of the
        proxy's time on it, for a block a table beats by half). For an object below
        the root: TOON, which writes it as the ``kv`` composite does, with more quotes
        (each object's TOON also renders everything below it again: on the corpus
        payloads about a tenth of the proxy's time, for 11 tokens in 173,000). The
        exact search renders every block."""
        if not (self.lossless_only and self.sample):
            return ()
        if isinstance(node, Object):
            return ("toon",) if slot[0] != "root" else ()
        if not (isinstance(node, Array) and len(node.items) > 2 * self.sample):
            return ()
        fmts = _block_formats(node)
        if len(fmts) < 2:
            return ()
        head = Array(node.items[: self.sample])
        estimate = {}
        for fmt in fmts:
            body = self.costs.block(head, fmt)
            if body is None:
                continue
            lines = (
                body.split("\n")
                if slot[0] == "root"
                else [INDENT * depth + _header(slot, fmt), *indent_lines(body, depth + 1)]
            )
            estimate[fmt] = self.costs.lines(lines) * len(node.items) / self.sample
        if not estimate:
            return ()
        least = min(estimate.values())
        return tuple(f for f, cost in estimate.items() if cost > least * SAMPLE_SLACK)

    def _composite_object(
        self, node: Object, slot: Slot, depth: int, path: Path, opt: str,
        limit: float = float("inf"), room: float | None = None,
    ) -> list[Plan]:  # fmt: skip
        """The ``opt`` composite's plans (lossless: none once its cost passes ``limit``;
        under a budget: those costing at most ``room``, the budget by default)."""
        room = self.budget if room is None else room
        inner = depth if slot[0] == "root" else depth + 1
        if opt == "kv":
            base = (
                0 if slot[0] == "root" else self.costs.lines([INDENT * depth + _header(slot, "kv")])
            )
        else:  # {...}: braces and commas (keys carried by the children), on the slot's line
            base = 1 + self._line_head(slot, depth)
        if self.lossless_only:  # nothing is dropped: the cheapest point, every key kept
            # each key's cheapest option (the first of equal cost), summed in key order
            cost, value, kids = base, 0.0, []
            for k, child in node.items:
                cf = self._object_child(child, k, inner, (*path, k), opt)
                if not cf:
                    return []
                c = min(cf, key=_cost)
                cost, value = cost + c.cost, value + c.value
                if cost > limit:
                    return []
                kids.append((k, c))
            return [Plan(opt, cost, value, tuple(kids))] if kids else []
        # accumulator: frontiers for "no key dropped" and "some key dropped", as partial
        # plans (cost, value, link), link = (previous link, key, child plan or None when
        # the key is dropped); full plans are built once, for the survivors of the last key
        keys = [
            (k, self._object_child(child, k, inner, (*path, k), opt),
             max(self.costs.lines([compact_json(k) + ","]) - 1, 1))
            for k, child in node.items
        ]  # fmt: skip
        # rest[i]: the least the keys after the i-th add to any plan (each one dropped or
        # in its cheapest option). A partial plan dearer than room - rest[i] can only
        # end over the budget, and so can every plan it dominates: leaving such plans
        # out removes the top of each sorted candidate list and changes nothing below
        # it, so the frontier of the last key is the same (its rest is 0).
        rest = [0] * len(keys)
        for i in range(len(keys) - 1, 0, -1):
            _, cf, drop_cost = keys[i]
            rest[i - 1] = rest[i] + min(drop_cost, min((c.cost for c in cf), default=drop_cost))
        acc: dict[bool, list[_Partial]] = {False: [(base, 0.0, None)], True: []}
        for (k, cf, drop_cost), later in zip(keys, rest, strict=True):
            limit = room - later
            acc = {
                False: _extend(k, acc[False], cf, limit),
                True: _extend(k, acc[True], cf, limit, drop_from=acc[False], drop_cost=drop_cost),
            }
        out = [_plan(opt, part) for part in acc[False]]
        if acc[True]:
            hint_base = self.costs.lines([H.overflow_keys(path, [])])
            out += [_plan(opt, part, hint_base) for part in acc[True]]
        return [p for p in out if p.children or p.dropped]  # an object keeps or names every key

    def _object_child(self, child: Node, k: str, inner: int, cpath: Path, opt: str) -> Frontier:
        """The options of an object's value under key ``k``: on its own ``k:`` line in a
        ``kv`` composite, as ``"k":<JSON>`` inside a ``jsonobj``."""
        if opt == "kv":
            return self.frontier(child, ("key", k), inner, cpath)
        extra = self.costs.text(compact_json(k) + ":") + 1
        return [_recost(p, p.cost + extra) for p in self._json_child(child, cpath)]

    def _line_head(self, slot: Slot, depth: int) -> int:
        """Tokens of a JSON composite's line around it: the key or dash, and the newline."""
        if slot[0] in ("key", "item"):
            return self.costs.text(INDENT * depth + _prefix(slot)) + 1
        return 0

    def _json_child(self, node: Node, path: Path) -> Frontier:
        return self.frontier(node, ("json", None), 0, path)

    def _composite_array(
        self, node: Array, slot: Slot, depth: int, path: Path, opt: str,
        limit: float = float("inf"), room: float | None = None,
    ) -> list[Plan]:  # fmt: skip
        """A prefix of the items, each item whole in its cheapest lossless option
        (lossless: none once the cost passes ``limit``; under a budget: none past
        ``room``, the budget by default).

        Why whole items: an overflow hint can say "the items from k on" exactly, while
        holes inside items would each need a hint; it also keeps the frontier small.
        """
        room = self.budget if room is None else room
        inner = depth if slot[0] == "root" else depth + 1
        if opt == "list":
            base = (
                0
                if slot[0] == "root"
                else self.costs.lines([INDENT * depth + _header(slot, "list")])
            )
        else:
            base = 1 + self._line_head(slot, depth)
        n = len(node.items)
        whole = _Solver(
            self.scheme, self.costs, float("inf"), True, self.json_only, self.min_table_rows,
            self.sample, self.values,
        )  # fmt: skip
        # the sampled search's check, after the sample's last item (-1: none)
        check_at = self.sample - 1 if self.sample and n > 2 * self.sample else -1
        out: list[Plan] = []
        # the plan of the items so far, summed in item order
        cost, value, kids = base, 0.0, []
        for i, item in enumerate(node.items):
            if not self.lossless_only:
                # keep items 0..i-1; an overflow hint names the rest
                hint = self.costs.lines([H.overflow_items(path, i, n)])
                out.append(Plan(opt, cost + hint, value, tuple(kids), missing=n - i))
            if opt == "list":
                c = whole.frontier(item, ("item", None), inner, (*path, i))[0]
            else:
                c = whole._json_child(item, (*path, i))[0]
                c = _recost(c, c.cost + 1)
            cost, value = cost + c.cost, value + c.value
            if self.lossless_only and cost > limit:
                return []
            if i == check_at and self.lossless_only and base + (cost - base) * n / (i + 1) > limit:
                return []  # the sample, extrapolated to every item, passes the limit
            kids.append((i, c))
            if cost > room:
                break
        else:
            out.append(Plan(opt, cost, value, tuple(kids)))
        return out


#: below this many candidates a merge is filtered in plain Python (numpy's overhead
#: per call is larger than the work)
_VECTOR_MIN = 256


#: a plan being built: (cost, value, link), link = (previous link, key, child or None)
_Partial = tuple[Any, float, Any]


def _cost(p: Plan) -> float:
    return p.cost


def _recost(p: Plan, cost: float, value: float | None = None) -> Plan:
    """``replace(p, cost=cost)`` (and ``value``), without ``dataclasses.replace``'s
    overhead."""
    return Plan(p.option, cost, p.value if value is None else value, p.children, p.dropped,
                p.kept_chars, p.missing)  # fmt: skip


class _Chain(Sequence):
    """The kept children (``kept``) or the dropped keys of a composite plan, read off
    its chain of partial plans when first used.

    Why lazily: an object's frontier holds hundreds of plans and each would copy its
    keys into tuples, while only the plans on the chosen path are ever rendered. It
    reads, compares and hashes as the tuple it stands for.
    """

    __slots__ = ("_items", "_kept", "_link")

    def __init__(self, link: Any, kept: bool) -> None:
        self._link = link
        self._kept = kept
        self._items: tuple | None = None

    def _tuple(self) -> tuple:
        if self._items is None:
            out = []
            link = self._link
            while link is not None:
                link, key, child = link
                if (child is not None) == self._kept:
                    out.append((key, child) if self._kept else key)
            self._items, self._link = tuple(reversed(out)), None
        return self._items

    def __bool__(self) -> bool:
        if self._items is not None:
            return bool(self._items)
        link = self._link  # the first match decides: no tuple needed
        while link is not None:
            link, _, child = link
            if (child is not None) == self._kept:
                return True
        return False

    def __len__(self) -> int:
        return len(self._tuple())

    def __getitem__(self, index):
        return self._tuple()[index]

    def __iter__(self):
        return iter(self._tuple())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Chain):
            other = other._tuple()
        return self._tuple() == other

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return repr(self._tuple())


def _plan(opt: str, part: _Partial, extra: int = 0) -> Plan:
    """The composite plan of a partial one, ``extra`` added to its cost."""
    cost = part[0] + extra if extra else part[0]
    return Plan(opt, cost, part[1], _Chain(part[2], True), _Chain(part[2], False))  # type: ignore[arg-type]


def _extend(
    key: str,
    front: list[_Partial],
    child: Frontier,
    budget: float,
    *,
    drop_from: list[_Partial] | None = None,
    drop_cost: int = 0,
) -> list[_Partial]:
    """An object composite's frontier with one key more: ``_pareto`` of the candidates,
    exactly, without building a :class:`Plan` for each.

    Candidates, in this order: with ``drop_from`` (for the "some key dropped" frontier),
    ``key`` dropped from each plan of ``drop_from``; then for each plan of ``front``,
    that plan with each point of ``child`` and, with ``drop_from``, that plan with
    ``key`` dropped. This is the order in which the cross product used to be built,
    and it decides which of two candidates of equal cost and value survives, so the
    frontier is the same list of plans. Only (cost, value) pairs are formed and
    filtered; the survivors alone (at most one per distinct value) are kept, as
    partial plans that share their prefix (see :func:`_plan`).
    """
    first = drop_from or []
    with_drop = drop_from is not None
    width = len(child) + (1 if with_drop else 0)
    total = len(first) + len(front) * width
    if not total:
        return []
    chosen = None
    if total >= _VECTOR_MIN:
        chosen = _survivors_numpy(front, child, first, with_drop, drop_cost, budget)
    if chosen is None:
        chosen = _survivors_python(front, child, first, with_drop, drop_cost, budget)
    nfirst, nchild = len(first), len(child)
    out: list[_Partial] = []
    append = out.append
    for seq in chosen:
        if seq < nfirst:
            a = first[seq]
            append((a[0] + drop_cost, a[1], (a[2], key, None)))
            continue
        i, j = divmod(seq - nfirst, width)
        a = front[i]
        if j == nchild:
            append((a[0] + drop_cost, a[1], (a[2], key, None)))
        else:
            c = child[j]
            append((a[0] + c.cost, a[1] + c.value, (a[2], key, c)))
    return out


def _keep(ordered) -> list[int]:
    """``_pareto``'s scan over (value, seq) in (cost, -value, seq) order: the seqs kept."""
    chosen: list[int] = []
    last = 0.0
    for value, seq in ordered:
        if not chosen or value > last + 1e-12:
            chosen.append(seq)
            last = value
    return chosen


def _survivors_python(front, child, first, with_drop, drop_cost, budget) -> list[int]:
    pairs = [(c.cost, c.value) for c in child]
    cand = [(a[0] + drop_cost, -a[1], seq, a[1]) for seq, a in enumerate(first)]
    seq = len(first)
    for a_cost, a_value, _ in front:
        for c_cost, c_value in pairs:
            v = a_value + c_value
            cand.append((a_cost + c_cost, -v, seq, v))
            seq += 1
        if with_drop:
            cand.append((a_cost + drop_cost, -a_value, seq, a_value))
            seq += 1
    cand = [x for x in cand if x[0] <= budget]
    cand.sort()  # (cost, -value, seq): a stable sort by (cost, -value)
    return _keep([(x[3], x[2]) for x in cand])


def _survivors_numpy(front, child, first, with_drop, drop_cost, budget) -> list[int] | None:
    """As :func:`_survivors_python`, vectorised; None when a cost is not a plain number."""
    import numpy as np

    fc = np.array([a[0] for a in front])
    fv = np.array([a[1] for a in front], dtype=float)
    cc = np.array([c.cost for c in child])
    cv = np.array([c.value for c in child], dtype=float)
    first_c = np.array([a[0] for a in first]) + drop_cost
    first_v = np.array([a[1] for a in first], dtype=float)
    if with_drop:
        cc = np.append(cc, drop_cost)
        cv = np.append(cv, 0.0)  # a.value + 0.0 == a.value: values are never -0.0
    if any(x.size and x.dtype.kind not in "if" for x in (fc, cc, first_c)):
        return None
    costs = np.concatenate([first_c, (fc[:, None] + cc[None, :]).ravel()])
    values = np.concatenate([first_v, (fv[:, None] + cv[None, :]).ravel()])
    seqs = np.nonzero(costs <= budget)[0]
    if not seqs.size:
        return []
    costs, values = costs[seqs], values[seqs]
    order = np.lexsort((-values, costs))  # stable: ties stay in seq order
    values, seqs = values[order], seqs[order]
    # a candidate whose value does not beat every earlier one is never kept by the
    # scan (its value is at most the last kept + 1e-12): scan only the record-breakers
    best = np.maximum.accumulate(values)
    records = np.r_[0, np.nonzero(values[1:] > best[:-1])[0] + 1]
    return _keep(zip(values[records].tolist(), seqs[records].tolist(), strict=True))


def _cheapest(points: list[Plan]) -> Frontier:
    return [min(points, key=lambda p: p.cost)] if points else []


# --- the public API ---------------------------------------------------------------


@dataclass(frozen=True)
class Encoding:
    """One encoding of a payload and what it cost and kept."""

    text: str
    encoder: str
    method: str
    tokens: int
    tokenizer: str
    budget: int | None
    value_kept: float
    value_total: float
    lossless: bool
    choices: tuple[tuple[str, str], ...]  # (JSON path, option), parents first
    #: why the chosen lossless text was replaced by compact JSON (None: it was not)
    fallback: str | None = None
    #: string prefixes named once by alias hints (``tersetalk.formats.aliases``)
    aliases: int = 0
    #: ``text`` was decoded and read back as the payload (a lossless plan's text; not
    #: the compact JSON sent after a failed read-back, nor a budgeted text)
    read_back: bool = False

    @property
    def value_share(self) -> float:
        return self.value_kept / self.value_total if self.value_total else 1.0


def _choices(node: Node, plan: Plan, path: Path = ()) -> list[tuple[str, str]]:
    out = [(H.path_text(path), plan.option)]
    for key, child in plan.children:
        sub = node.items[key] if isinstance(node, Array) else dict(node.items)[key]  # type: ignore[union-attr,index]
        out += _choices(sub, child, (*path, key))
    for k in plan.dropped:
        out.append((H.path_text((*path, k)), "elided"))
    if isinstance(node, Array) and plan.option in ("list", "jsonarr"):
        for i in range(len(plan.children), len(node.items)):
            out.append((H.path_text((*path, i)), "elided"))
    return out


def solve(
    node: Node,
    *,
    budget: int | None = None,
    method: str = "exact",
    tokenizer: str = "o200k_base",
    scheme: ValueScheme | None = None,
    aliases: bool = True,
    min_table_rows: int = MIN_TABLE_ROWS,
    cache: SolveCache | None = None,
    sample: int | None = None,
) -> Encoding:
    """The chosen encoding of a JSON tree: cheapest lossless without a budget, else the
    most value within ``budget`` tokens by ``method`` (exact | greedy | binary).

    With ``aliases`` (not for ``binary``, the JSON-only baseline) the payload is also
    solved with its repeated string prefixes named once (:mod:`tersetalk.formats.aliases`)
    and the better of the two is returned: more value kept, then fewer tokens.
    ``min_table_rows``: tables with fewer rows are not chosen (:func:`table_rows_ok`;
    1 allows every table).

    ``cache`` (a :class:`SolveCache` of the same tokenizer) carries what one solve
    computed into the next of the same node (renderings, token counts, round trips,
    lossless frontiers, the alias table): the proxy solves a result lossless and then
    under a budget. The encoding is the same with or without it. The greedy method
    keeps a cache of its own (it checks every block eagerly).

    ``sample`` (lossless only; None: the exact search): a list of more than twice this
    many items, laid out item by item, is given up once its first ``sample`` items,
    extrapolated to all of them, cost more than an option already found (a table of
    the same items, say). The exact search solves items until their sum passes that
    option, most of a long list. The whole formats of such a list (a table, TOON) are
    rendered only where their rendering of its first ``sample`` items, extrapolated,
    comes within :data:`SAMPLE_SLACK` of the cheapest one's, and an object below the
    root is offered no TOON block (its ``kv`` layout with more quotes). What is sent
    stays lossless either way; the sampled search may miss a cheaper layout where the
    first items are much dearer than the rest. The MCP proxy uses it to bound its
    latency on long results.
    """
    if not is_json(node):
        raise TreeError("the solver takes a JSON tree; Markdown goes through encode_markdown()")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: use one of {', '.join(METHODS)}")
    if budget is not None and budget <= 0:
        raise BudgetError(f"budget {budget}: give a positive number of tokens")
    if min_table_rows < 1:
        raise ValueError(f"min_table_rows {min_table_rows}: give 1 (every table) or more")
    if sample is not None and sample < 1:
        raise ValueError(f"sample {sample}: give a number of items (1 or more) or None")
    scheme = scheme or ValueScheme()
    if cache is not None and cache.tokenizer != tokenizer:
        raise ValueError(f"the solve cache counts {cache.tokenizer} tokens, not {tokenizer}")
    costs = cache if cache is not None and method != "greedy" else None
    if costs is None:
        costs = _Costs(tokenizer, lazy=method != "greedy")
    candidates: list[tuple[Node, list[str]]] = [(node, [])]
    aside = None
    if aliases and method != "binary":
        aside = _aliased_aside(node, costs, budget, method, scheme, min_table_rows, sample)
        if aside is None:
            candidates += costs.aliased(node)
    found: list[Encoding] = []
    error: BudgetError | None = None
    with counter.here() if aside is not None else nullcontext():
        for tree, prelude in candidates:
            try:
                enc = _solve(tree, node, prelude, budget, method, costs, scheme,
                             min_table_rows, sample)  # fmt: skip
            except BudgetError as exc:
                error = exc
                continue
            if not prelude or enc.fallback is None:  # an aliased text that fell back adds nothing
                found.append(enc)
    if aside is not None:
        enc = aside()
        if enc.fallback is None:
            found.append(enc)
    if not found:  # the plain tree is always a candidate: it failed for the budget
        assert error is not None
        raise error
    return max(found, key=lambda e: (e.value_kept, -e.tokens))


#: a payload whose compact JSON is at least this long has its aliased tree solved by the
#: count helper process, beside the plain one (:func:`_aliased_aside`)
ASIDE_SOLVE_MIN_CHARS = 8_192


def _aliased_aside(node: Node, costs: _Costs, budget: int | None, method: str,
                   scheme: ValueScheme, min_table_rows: int, sample: int | None,
                   ) -> Callable[[], Encoding] | None:  # fmt: skip
    """The lossless solve of ``node`` with its string prefixes aliased, asked of the
    count helper process (:mod:`tersetalk.core.counter`) to run beside the plain solve
    here, read by calling the result; None where it is solved here: no helper runs, a
    budget (its solve shares the lossless one's renderings), another method, no alias
    pays, or a payload under :data:`ASIDE_SOLVE_MIN_CHARS` (a solve of a few ms: little
    to gain over sending it). The two solves are independent and each is the same
    wherever it runs, so the encoding is the same; on a 12-23 KB API object with
    aliased URLs the knapsack takes about 60% of the time."""
    if budget is not None or method != "exact" or len(costs.compact(node)) < ASIDE_SOLVE_MIN_CHARS:
        return None
    table = costs.alias_table(node)
    if not table:
        return None
    return counter.call(_solve_aliased, costs.python(node), table, costs.tokenizer, scheme,
                        min_table_rows, sample)  # fmt: skip


def _solve_aliased(value: Any, table: dict[str, str], tokenizer: str, scheme: ValueScheme,
                   min_table_rows: int, sample: int | None) -> Encoding:  # fmt: skip
    """:func:`_solve` of the tree of ``value`` with the aliases ``table`` applied,
    lossless (what :func:`solve` does for its aliased candidate; run by the count
    helper process)."""
    original = from_python(value)
    return _solve(A.apply(original, table), original, A.hint_lines(table), None, "exact",
                  _Costs(tokenizer), scheme, min_table_rows, sample)  # fmt: skip


def _solve(
    tree: Node,
    original: Node,
    prelude: list[str],
    budget: int | None,
    method: str,
    costs: _Costs,
    scheme: ValueScheme,
    min_table_rows: int = MIN_TABLE_ROWS,
    sample: int | None = None,
) -> Encoding:
    """``solve`` on ``tree`` (``original`` with its aliases applied, or itself), the
    ``prelude`` hint lines before the body and counted against the budget."""
    vtotal = total_value(original, scheme)
    json_only = method == "binary"
    encoder = "mckp" if not json_only else "json_compact"
    if budget is None:

        def cheapest() -> Plan:
            return _Solver(scheme, costs, float("inf"), True, json_only, min_table_rows, sample,
                           values=False).frontier(tree, ("root", None), 0, ())[0]  # fmt: skip

        if costs.lazy:
            # the picked plan's whole text reads back: then so does each of its blocks,
            # and it is the plan _checked_plan would pick (its blocks' own round trips,
            # a second parse of the same text, are spared); else the blocks are checked
            plan = cheapest()
            try:  # (a root single format that does not fit refuses to render)
                enc = _encoding(tree, original, prelude, _recost(plan, plan.cost, vtotal),
                                costs, encoder, method, None, vtotal)  # fmt: skip
            except ValueError:
                pass
            else:
                if enc.read_back:
                    return enc
        plan = _checked_plan(tree, costs, cheapest)
        assert plan is not None  # inline compact JSON is always an option
        plan = _recost(plan, plan.cost, vtotal)  # lossless keeps every leaf's value
        return _encoding(tree, original, prelude, plan, costs, encoder, method, None, vtotal)
    target = budget - costs.lines(prelude)
    for _ in range(8):
        if target <= 0:
            break
        if method == "greedy":
            plan = _greedy(tree, scheme, costs, target, min_table_rows)
        else:
            found = _checked_plan(tree, costs, lambda t=target: (_Solver(
                scheme, costs, float(t), False, json_only, min_table_rows
            ).frontier(tree, ("root", None), 0, ()) or [None])[-1])  # fmt: skip
            if found is None:
                raise BudgetError(_too_small(budget, costs.tokenizer))
            plan = found
        encoder = "mckp" if not json_only else "binary"
        enc = _encoding(tree, original, prelude, plan, costs, encoder, method, budget, vtotal)
        if enc.tokens <= budget:
            return enc
        target -= enc.tokens - budget  # tokenisation across lines: lower and solve again
    raise BudgetError(_too_small(budget, costs.tokenizer))


def _with_prelude(text: str, prelude: list[str]) -> str:
    """``prelude`` hint lines after the format hint (which stays first, where readers of
    a fenced Markdown block look for it), else before the body."""
    if not prelude:
        return text
    first, sep, rest = text.partition("\n")
    if H.parse_hint(first) is not None and H.parse_hint(first).family == "encoded":
        return "\n".join([first, *prelude, rest]) if sep else "\n".join([first, *prelude])
    return "\n".join([*prelude, text])


def _too_small(budget: int, tokenizer: str) -> str:
    return (
        f"budget {budget} tokens ({tokenizer}) is below the smallest encoding that keeps the"
        " payload's root and its overflow hints; raise --budget"
    )


def _encoding(
    tree: Node,
    original: Node,
    prelude: list[str],
    plan: Plan,
    costs: _Costs,
    encoder: str,
    method: str,
    budget: int | None,
    vtotal: float,
) -> Encoding:
    text = _with_prelude(render(tree, plan, costs), prelude)
    fallback = None
    read_back = False
    counted = costs.aside(text)  # beside the read-back
    if plan.lossless:
        # fail closed on the whole text too: a body line that reads as a hint (a CSV
        # header "> [ref: x]") would make the text decode to something else
        try:
            ok = same_value(decode(text), costs.python(original))
        except ValueError as exc:
            ok, why = False, str(exc)
        else:
            why = "decoded to a different value"
        read_back = ok
        if not ok:
            fallback = f"the {plan.option} encoding does not read back ({why[:120]})"
            tree, plan = original, Plan("inline", 0, plan.value)
            counted()  # (its thread ends here)
            text = render(tree, plan)
            counted = partial(costs.text, text)
            if budget is not None and costs.text(text) > budget:
                raise BudgetError(_too_small(budget, costs.tokenizer))
    return Encoding(
        fallback=fallback,
        text=text,
        encoder=encoder,
        method=method,
        tokens=counted(),
        tokenizer=costs.tokenizer,
        budget=budget,
        value_kept=plan.value,
        value_total=vtotal,
        lossless=plan.lossless,
        choices=tuple(_choices(tree, plan)),
        aliases=0 if fallback else len(prelude),
        read_back=read_back,
    )


def _greedy(
    node: Node,
    scheme: ValueScheme,
    costs: _Costs,
    budget: float,
    min_table_rows: int = MIN_TABLE_ROWS,
) -> Plan:
    """Drop the unit with the least value per token saved until the plan fits."""
    whole = _Solver(scheme, costs, float("inf"), True, min_table_rows=min_table_rows)
    plan = whole.frontier(node, ("root", None), 0, ())[0]
    if plan.cost > budget:
        # units to drop exist inside a composite root: start from the cheapest one
        root = [
            replace(p, cost=p.cost + costs.lines(_format_hint(p)) - 1)
            for p in (
                whole._composite_object(node, ("root", None), 0, (), "kv")
                if isinstance(node, Object) and node.items and all(key_ok(k) for k, _ in node.items)
                else whole._composite_array(node, ("root", None), 0, (), "list")
                if isinstance(node, Array) and node.items
                else []
            )
        ]
        if root:
            plan = min(root, key=lambda p: p.cost)
    while plan.cost > budget:
        best: tuple[float, Path] | None = None
        for path, saved, value in _units(node, plan, ()):
            if saved <= 0:
                continue
            ratio = value / saved
            if best is None or ratio < best[0]:
                best = (ratio, path)
        if best is None:
            break
        plan = _drop(node, plan, best[1], costs, ())
    return plan


def _units(node: Node, plan: Plan, path: Path):
    """(path, tokens saved, value lost) of every droppable unit of ``plan``."""
    if plan.option == "kv" and isinstance(node, Object):
        d = dict(node.items)
        for k, child in plan.children:
            yield (*path, k), child.cost, child.value
            yield from _units(d[k], child, (*path, k))
    elif plan.option == "list" and isinstance(node, Array) and plan.children:
        i, last = plan.children[-1]
        yield (*path, i), last.cost, last.value  # items are kept whole (see _composite_array)


def _drop(node: Node, plan: Plan, target: Path, costs: _Costs, path: Path) -> Plan:
    key = target[len(path)]
    kids = list(plan.children)
    idx = next(i for i, (k, _) in enumerate(kids) if k == key)
    if len(target) == len(path) + 1:
        lost = kids.pop(idx)[1]
        dropped = plan.dropped
        missing = plan.missing
        extra = 0
        if isinstance(node, Object):
            extra = costs.lines([H.overflow_keys(path, [*dropped, key])]) - (
                costs.lines([H.overflow_keys(path, list(dropped))]) if dropped else 0
            )
            dropped = (*dropped, key)  # type: ignore[assignment]
        else:
            n = len(node.items)  # type: ignore[union-attr]
            had = len(plan.children) < n
            missing += 1
            extra = costs.lines([H.overflow_items(path, len(kids), n)]) - (
                costs.lines([H.overflow_items(path, len(kids) + 1, n)]) if had else 0
            )
        return replace(plan, cost=plan.cost - lost.cost + extra, value=plan.value - lost.value,
                       children=tuple(kids), dropped=dropped, missing=missing)  # fmt: skip
    sub = node.items[key] if isinstance(node, Array) else dict(node.items)[key]  # type: ignore[union-attr,index]
    old = kids[idx][1]
    new = _drop(sub, old, target, costs, (*path, key))
    kids[idx] = (key, new)
    cost = plan.cost - old.cost + new.cost
    return replace(plan, cost=cost, value=plan.value - old.value + new.value, children=tuple(kids))


# --- single formats and decoding -----------------------------------------------------

SINGLE = ("json_pretty", "json_compact", "toon", "csv", "markdown_table", "kv")
#: the knapsack with and without the alias layer (the difference is what aliases save)
MCKP = ("mckp", "mckp_plain")


def encode(
    node: Node,
    encoder: str = "mckp",
    *,
    budget: int | None = None,
    tokenizer: str = "o200k_base",
    method: str = "exact",
    scheme: ValueScheme | None = None,
    min_table_rows: int = MIN_TABLE_ROWS,
    cache: SolveCache | None = None,
    sample: int | None = None,
) -> Encoding:
    """A payload in one encoder: ``mckp`` (the knapsack, with string-prefix aliases
    where they save tokens), ``mckp_plain`` (the knapsack's per-subtree formats alone)
    or one of the single formats (``sample``: the knapsack's sampled search, see
    :func:`solve`).

    Single formats are all-or-nothing: a format that cannot carry the payload
    losslessly raises ValueError naming the ones that can (no silent fallback).
    """
    from tersetalk.formats.encoders import eligible_encoders

    if encoder in MCKP:
        enc = solve(node, budget=budget, method=method, tokenizer=tokenizer, scheme=scheme,
                    aliases=encoder == "mckp", min_table_rows=min_table_rows,
                    cache=cache, sample=sample)  # fmt: skip
        return replace(enc, encoder=encoder) if enc.encoder == "mckp" else enc
    if budget is not None:
        raise ValueError(f"--budget applies to the mckp encoder only, not {encoder!r}")
    text = single_text(node, encoder)
    if text is None:
        raise ValueError(
            f"{encoder} cannot carry this payload losslessly;"
            f" eligible: {', '.join(eligible_encoders(node))}"
        )
    vtotal = total_value(node, scheme or ValueScheme())
    return Encoding(text, encoder, "single", count_tokens(text, tokenizer), tokenizer, None,
                    vtotal, vtotal, True, (("$", encoder),))  # fmt: skip


def single_text(node: Node, encoder: str) -> str | None:
    """The text :func:`encode` gives for the single format ``encoder`` (its hint line,
    then the body; compact JSON without a hint), or None where the format cannot carry
    ``node`` losslessly. It does not depend on the tokenizer, so a caller counting it
    under several encodes once (the eligibility check is a full round trip)."""
    from tersetalk.formats.encoders import get_encoder

    enc = get_encoder(encoder)
    if not enc.eligible(node):
        return None
    body = enc._encode(node)  # eligible() has just checked its round trip
    return body if encoder == "json_compact" else H.encoded(encoder) + "\n" + body


class LossyEncodingError(ValueError):
    """The text leaves something out (overflow hints); it cannot give back the payload."""


def decode(text: str) -> Any:
    """The exact JSON value of a lossless encoding (any encoder, mckp included).

    Raises FormatDecodeError for text that is no valid encoding, including a format
    hint no decoder knows and nesting beyond ``tree.MAX_DEPTH`` (a crafted
    document must get a clear refusal, not a KeyError or RecursionError).
    """
    from tersetalk.formats.encoders import FormatDecodeError

    found, _ = H.split_hints(text)
    table = dict(filter(None, (A.parse(h.body) for h in found if h.family == "alias")))
    try:
        value = _decode_body(text)
        return A.expand(value, table) if table else value
    except RecursionError:
        # A backstop: the depth checks below refuse deep JSON and deep containers
        # before they are read, but a library decoder (toon) may still recurse.
        raise FormatDecodeError(
            f"the encoding nests too deep to decode (the limit is {MAX_DEPTH} levels); "
            "it was not written by `tersetalk formats encode`"
        ) from None


def _decode_body(text: str) -> Any:
    """The JSON value of the body, aliases (if any) still in its strings."""
    from tersetalk.formats.container import parse_container
    from tersetalk.formats.encoders import ENCODERS, FormatDecodeError, get_encoder

    found, body = H.split_hints(text)
    lost = [h for h in found if h.family == "overflow"]
    if lost:
        raise LossyEncodingError(
            f"the encoding leaves out {len(lost)} part(s)"
            f" ({'; '.join(h.body for h in lost[:3])});"
            " only a lossless encoding decodes to the payload"
        )
    refs = [h for h in found if h.family == "ref"]
    if refs:
        raise LossyEncodingError(
            f"the payload is a reference ({refs[0].body}); decode the earlier copy"
        )
    named = [h.body.split(" | ") for h in found if h.family == "encoded"]
    fmt = named[0][0] if named else "json_compact"
    if fmt != "mckp" and fmt not in ENCODERS:
        raise FormatDecodeError(
            f"the format hint '> [encoded: {named[0][0]}]' names no known encoding; "
            f"known: mckp, {', '.join(ENCODERS)} (the hint must be the one the encoder wrote)"
        )
    joined = "\n".join(body)
    if fmt in ("json_compact", "json_pretty") and json_depth_exceeds(joined):
        raise FormatDecodeError(
            f"{fmt}: the body nests deeper than {MAX_DEPTH} levels of arrays/objects, the "
            "most an encoding of a payload can (`tersetalk formats encode` refuses deeper)"
        )
    if fmt == "mckp":
        if len(named[0]) > 1:
            return parse_container(body, named[0][1])
        if not body:
            raise FormatDecodeError("mckp: empty body")
        return parse_container(body, "list" if body[0].startswith("- ") else "kv")
    if fmt in ("json_compact", "json_pretty"):
        try:
            return json.loads(joined)
        except json.JSONDecodeError as exc:
            raise FormatDecodeError(
                f"not JSON and no format hint names another format: {exc}"
            ) from exc
    if fmt in ("csv", "markdown_table", "kv"):
        return get_encoder(fmt).decode(joined + ("\n" if fmt != "kv" else ""))
    return get_encoder(fmt).decode(joined)
