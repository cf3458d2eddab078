"""The knapsack solver, the mckp container and the hints.

Properties run at least 200 examples each (the ``ci`` Hypothesis profile keeps that).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import toon as toon_lib
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tersetalk.formats import hints as H
from tersetalk.formats import pathtable as PT
from tersetalk.formats.container import INDENT
from tersetalk.formats.solver import (
    BudgetError,
    LossyEncodingError,
    Plan,
    ValueScheme,
    _Costs,
    _header,
    _Solver,
    decode,
    encode,
    solve,
    table_rows_ok,
    total_value,
)
from tersetalk.formats.tree import Array, Object, Scalar, from_python, same_value, to_python

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# awkward strings: ones that look like numbers, booleans, null, JSON, hints, headers
_tricky = st.sampled_from(
    [
        "",
        " ",
        "12",
        "1.0",
        "-0",
        "true",
        "null",
        "None",
        "{x}",
        "[1]",
        '"q"',
        "a: b",
        "- x",
        "- (csv):",
        "k (kv):",
        "> [ref: x]",
        "a\nb",
        "tab\tx",
        "é ü",
        "a,b",
        "a|b",
        "x\\|y",
        " pad ",
    ]
)
_text = st.one_of(_tricky, st.text(max_size=12))
_key = st.one_of(_tricky, st.text(min_size=0, max_size=8))
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    _text,
)
json_values = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(_key, inner, max_size=5),
        # arrays of records with the same keys: the shape tables carry
        st.lists(
            st.fixed_dictionaries({"id": st.integers(0, 99), "name": _text, "v": inner}),
            min_size=1,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


def _keys(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k)
            yield from _keys(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _keys(v, (*path, i))


@PROPS
@given(json_values)
@example({"": {"": "x", "k": None}, "z": None})  # an empty key cannot head a block
def test_lossless_mckp_round_trips(value):
    enc = encode(from_python(value))
    assert enc.lossless and enc.value_kept == enc.value_total
    assert same_value(decode(enc.text), value), enc.text


@PROPS
@given(json_values)
def test_lossless_mckp_is_never_dearer_than_compact_json(value):
    node = from_python(value)
    assert encode(node).tokens <= encode(node, "json_compact").tokens


def test_a_body_line_that_reads_as_a_hint_falls_back_to_json_and_says_so():
    value = [{"> [ref: x]": None}, {"> [ref: x]": None}]
    enc = encode(from_python(value))
    assert same_value(decode(enc.text), value)
    # the cheapest option, a CSV headed by that line, would decode as a reference hint
    assert enc.text.startswith("[") and "single:csv" in enc.fallback


@PROPS
@given(json_values, st.integers(1, 400), st.sampled_from(["exact", "greedy", "binary"]))
@example([{"> [ref: x]": None}, {"> [ref: x]": None}], 15, "exact")
@example(
    [{"v": None, "id": 0, "name": ""}, {"v": {"a\nb": None}, "id": 0, "name": ""}], 26, "exact"
)
@example([{"name": "", "id": 0, "v": None}, {"name": "", "id": 0, "v": {"\x1f\\0": None}}], 26,
         "exact")  # fmt: skip
def test_never_exceeds_budget_and_names_what_it_leaves_out(value, budget, method):
    node = from_python(value)
    try:
        enc = solve(node, budget=budget, method=method)
    except BudgetError:
        return
    assert enc.tokens <= budget
    hints = [h for h in enc.text.split("\n") if h.startswith("> [+")]
    # every key of the input is in the text, or an overflow hint names it / its array / its parent
    for path in _keys(value):
        key = path[-1]
        quoted = json.dumps(key, ensure_ascii=False)
        # as JSON writes it, as it is, escaped inside a quoted cell (a path table's
        # header writes a newline in a key as \n) or as a path table's column name
        # escapes it (a backslash doubled)
        if quoted in enc.text or (
            isinstance(key, str)
            and (key in enc.text or quoted[1:-1] in enc.text or PT.path_text((key,)) in enc.text)
        ):
            continue
        named = any(H.path_text(path[:i]) in h for i in range(len(path)) for h in hints)
        assert named, (path, enc.text)
    if enc.lossless:
        assert same_value(decode(enc.text), value)
    else:
        with pytest.raises(LossyEncodingError):
            decode(enc.text)


# --- exact vs brute force vs greedy ------------------------------------------------------


def _brute(solver: _Solver, node, slot, depth, path) -> list[tuple[float, float]]:
    """Every (cost, value) the option model allows, enumerated without pruning."""
    lossless = _Solver(solver.scheme, solver.costs, float("inf"), True)
    out = _non_composite(solver, node, slot, depth, path)
    inner = depth if slot[0] == "root" else depth + 1
    # a composite root carries the format hint; a nested one its header line
    hint_line = H.encoded("mckp") if slot[0] == "root" else None
    last = -1 if slot[0] == "root" else 0  # the text's last line has no newline
    if isinstance(node, Object) and node.items:
        base = solver.costs.lines([hint_line or INDENT * depth + _header(slot, "kv")]) + last
        per_key = []
        for k, child in node.items:
            opts = [(c, v, False) for c, v in _brute(solver, child, ("key", k), inner, (*path, k))]
            opts.append(
                (
                    max(solver.costs.lines([json.dumps(k, ensure_ascii=False) + ","]) - 1, 1),
                    0.0,
                    True,
                )
            )
            per_key.append(opts)
        hint = solver.costs.lines([H.overflow_keys(path, [])])
        for combo in itertools.product(*per_key):
            cost = base + sum(c for c, _, _ in combo) + (hint if any(d for *_, d in combo) else 0)
            out.append((cost, sum(v for _, v, _ in combo)))
    if isinstance(node, Array) and node.items:
        base = solver.costs.lines([hint_line or INDENT * depth + _header(slot, "list")]) + last
        n = len(node.items)
        items = [
            lossless.frontier(it, ("item", None), inner, (*path, i))[0]
            for i, it in enumerate(node.items)
        ]
        for k in range(n + 1):
            cost = base + sum(p.cost for p in items[:k])
            if k < n:
                cost += solver.costs.lines([H.overflow_items(path, k, n)])
            out.append((cost, sum(p.value for p in items[:k])))
    return out


def _non_composite(solver, node, slot, depth, path):
    """The leaf-level options (inline, blocks, truncations) of one node, unpruned."""
    from tersetalk.formats import solver as S

    return [
        (p.cost, p.value)
        for p in _all_points(S, solver, node, slot, depth, path)
        if p.option not in ("kv", "list")
    ]


def _all_points(S, solver, node, slot, depth, path):
    """frontier() without its Pareto step (monkeypatched for the call)."""
    original = S._pareto
    S._pareto = lambda pts, budget: sorted(pts, key=lambda p: p.cost)
    try:
        return _Solver(solver.scheme, solver.costs, float("inf"), False).frontier(
            node, slot, depth, path
        )
    finally:
        S._pareto = original


small_values = st.recursive(
    st.one_of(
        st.integers(0, 99), st.sampled_from(["x", "open", "a longer string value " * 4, None, True])
    ),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "name"]), inner, min_size=1, max_size=3),
    ),
    max_leaves=5,
)


@PROPS
@given(small_values, st.integers(1, 120), st.sampled_from(["uniform", "depth"]))
# a plan costing the budget exactly, as sent: the root's last line has no newline, so its
# composite may cost one token more than the budget before the format hint is counted
@example({"a": [0, 0, "a longer string value " * 4]}, 23, "uniform")
def test_exact_equals_brute_force_and_beats_greedy(value, budget, scheme_name):
    node = from_python(value)
    scheme = ValueScheme(scheme_name)
    costs = _Costs("o200k_base")
    solver = _Solver(scheme, costs, float(budget), False)
    front = solver.frontier(node, ("root", None), 0, ())
    feasible = [v for c, v in _brute(solver, node, ("root", None), 0, ()) if c <= budget]
    if not front:
        assert not feasible
        return
    assert front[-1].value == pytest.approx(max(feasible))
    try:
        greedy = solve(node, budget=budget, method="greedy", scheme=scheme)
        exact = solve(node, budget=budget, method="exact", scheme=scheme)
    except BudgetError:
        return
    assert exact.value_kept >= greedy.value_kept - 1e-9


# --- the postmortem cases (seed 002): a monolithic table encoder loses these ---------------

WRAPPED = {
    "company": "Acme",
    "year": 2026,
    "employees": [
        {"name": "Ann", "role": "dev", "manager": {"name": "Bo"}},
        {"name": "Cy", "role": "ops", "manager": {"name": "Di"}},
        {"name": "Ed", "role": "dev", "manager": None},
    ],
}
ORDERS = {
    "orders": [
        {"id": 1, "total": 9.5, "customer": {"email": "a@b.c"}, "items": [{"sku": "X1", "qty": 2}]},
        {"id": 2, "total": 3.0, "customer": {"email": "d@e.f"}, "items": []},
    ]
}


@pytest.mark.parametrize("value", [WRAPPED, ORDERS], ids=["wrapper-fields", "nested-in-items"])
def test_postmortem_payloads_keep_every_field(value):
    enc = encode(from_python(value))
    assert same_value(decode(enc.text), value)
    for needle in ("Acme", "2026", "Bo", "a@b.c", "X1"):
        if needle in json.dumps(value):
            assert needle in enc.text, (needle, enc.text)


def test_wrapper_fields_sit_beside_the_table():
    enc = encode(from_python(STAFF))
    lines = enc.text.split("\n")
    assert "company: Acme" in lines and "year: 2026" in lines
    assert any(re.fullmatch(r"employees \((csv|markdown_table|list|toon)\):", x) for x in lines), (
        enc.text
    )


def test_no_budget_cheapest_and_value_schemes():
    node = from_python(WRAPPED)
    assert total_value(node, ValueScheme()) == 11
    assert total_value(node, ValueScheme("priority", priority=("company",))) == 20
    with pytest.raises(ValueError, match="value scheme"):
        ValueScheme("random")


STAFF = {
    "company": "Acme",
    "year": 2026,
    "employees": [
        {"name": f"n{i}", "role": "dev", "grade": i % 4, "remote": i % 2 == 0} for i in range(20)
    ],
}


def test_budget_keeps_priority_fields():
    node = from_python(STAFF)
    full = encode(node).tokens
    enc = solve(
        node, budget=full // 2, scheme=ValueScheme("priority", priority=("company", "year"))
    )
    assert "Acme" in enc.text and "2026" in enc.text and not enc.lossless
    assert enc.tokens <= full // 2


def test_greedy_gap_is_reported_by_value():
    node = from_python({"a": "x" * 300, "b": list(range(40)), "c": {"d": 1, "e": "y" * 50}})
    exact = solve(node, budget=60)
    greedy = solve(node, budget=60, method="greedy")
    binary = solve(node, budget=60, method="binary")
    assert exact.value_kept >= greedy.value_kept and exact.value_kept >= binary.value_kept
    assert binary.text.split("\n")[0].startswith("{")  # JSON only
    json.loads(binary.text.split("\n")[0])


def test_budget_too_small_says_what_to_do():
    with pytest.raises(BudgetError, match="raise --budget"):
        solve(from_python({"k": list(range(50))}), budget=1)


def test_single_encoders_refuse_what_they_cannot_carry():
    with pytest.raises(ValueError, match="eligible: "):
        encode(from_python(WRAPPED), "csv")
    enc = encode(from_python([{"a": 1, "b": "x"}]), "csv")
    assert enc.text.startswith("> [encoded: csv]")
    assert decode(enc.text) == [{"a": 1, "b": "x"}]


def test_hints_have_the_seed_forms():
    assert re.fullmatch(r"> \[ref: [0-9a-f]{8}, byte-identical\]", H.reference("abc"))
    assert (
        H.overflow_items(("items",), 5, 23)
        == "> [+18 more items of $.items. call get($.items[5:])]"
    )
    assert H.encoded("csv", "rows=18") == "> [encoded: csv | rows=18]"
    assert (
        H.metadata("status=open", 247, 20) == '> [query: "status=open" | total=247 | returned=20]'
    )
    assert H.path_text(("a b", 0, "c")) == '$["a b"][0].c'
    assert H.parse_hint('> [+3 more keys of $: "a". call get($)]').family == "overflow"
    assert H.parse_hint("- x") is None


def test_decode_refuses_a_reference_and_bad_text():
    with pytest.raises(LossyEncodingError, match="reference"):
        decode(H.reference("x") + "\n")
    from tersetalk.formats.encoders import FormatDecodeError

    with pytest.raises(FormatDecodeError):
        decode("> [encoded: mckp]\nkey without separator")
    with pytest.raises(FormatDecodeError, match="not JSON"):
        decode("{oops")


def test_plan_lossless_flag():
    leaf = Plan("inline", 1, 1)
    assert Plan("kv", 2, 1, (("a", leaf),)).lossless
    assert not Plan("kv", 2, 1, (("a", leaf),), dropped=("b",)).lossless
    assert not Plan("list", 2, 0, (("a", Plan("truncated", 1, 0.5)),)).lossless


def test_scalar_root_and_empty_containers():
    for v in (None, 0, "", "x", [], {}, [[]], {"": {}}):
        enc = encode(from_python(v))
        assert same_value(decode(enc.text), v), (v, enc.text)
    assert isinstance(from_python([1]), Array) and isinstance(from_python(1), Scalar)


# --- Markdown payloads: tables re-encoded, the rest untouched --------------------------------

DOC = """# Tools

Some prose that stays as it is.

| name      | stars | archived |
|-----------|------:|----------|
| alpha     |    12 | false    |
| beta      |     7 | true     |
| gamma     |   140 | false    |
| delta     |     3 | false    |
| epsilon   |    99 | true     |

Closing words, with a | pipe.
"""


def test_markdown_tables_are_replaced_and_read_back():
    from tersetalk.formats.markdown import decode_tables, encode_markdown, table_spans

    spans = table_spans(DOC)
    assert [(s.start, s.end) for s in spans] == [(4, 11)]
    m = encode_markdown(DOC)
    assert m.tables == 1 and m.replaced == 1 and m.tokens < m.source_tokens
    assert m.text.startswith("# Tools\n\nSome prose that stays as it is.\n")
    assert m.text.endswith("\nClosing words, with a | pipe.\n")
    before, after = decode_tables(DOC), decode_tables(m.text)
    assert len(after) == 1 and same_value(after[0], before[0])
    assert before[0][0] == {"name": "alpha", "stars": "12", "archived": "false"}  # cells are text


def test_markdown_table_kept_when_its_encoding_is_not_cheaper():
    from tersetalk.formats.markdown import encode_markdown

    tiny = "|a|\n|-|\n|1|\n"
    m = encode_markdown(tiny)
    assert m.replaced == 0 and m.text == tiny


# --- readability: no one-row tables ---------------------------------------------------

DATA = Path(__file__).resolve().parents[1] / "data" / "toolresponses"
_TABLE_BLOCKS = ("csv", "markdown_table", "toon")


def _table_rows_respected(node, plan: Plan) -> bool:
    """Every table block of ``plan`` (nested or the root's single format) has >= 2 rows."""
    opt = plan.option.removeprefix("single:")
    if opt in ("csv", "markdown_table") and isinstance(node, Array) and len(node.items) < 2:
        return False
    if opt == "toon" and not table_rows_ok(node, "toon", toon_lib.encode(to_python(node))):
        return False
    for key, child in plan.children:
        sub = node.items[key] if isinstance(node, Array) else dict(node.items)[key]
        if not _table_rows_respected(sub, child):
            return False
    return True


def test_a_one_row_array_is_not_written_as_a_table():
    # a real API response: one collaborator, 20 fields. Written as a TOON table, the
    # header "[1]{login,id,node_id,...}" puts "id" beside the row count and its value
    # a dozen commas away (SmolLM2 answered "1" for the item's id); a table repeats no
    # key when there is one row, so it bought tokens with readability alone.
    rows = [json.loads(x) for x in (DATA / "json.jsonl").read_text().splitlines()]
    body = next(r for r in rows if r["id"] == "e4eeecd4b0ec")["body"]
    assert isinstance(body, list) and len(body) == 1
    node = from_python(body)
    old = encode(node, min_table_rows=1)
    assert "[1]{login,id," in old.text  # the output this test guards against
    enc = encode(node)
    assert not re.search(r"\[1\]\{", enc.text), enc.text
    assert re.search(r'"id":31898046\b|^ *id: 31898046$', enc.text, re.M), enc.text
    assert same_value(decode(enc.text), body)
    assert enc.tokens <= encode(node, "json_compact").tokens


def test_table_rows_ok_reads_csv_markdown_and_nested_toon_tables():
    one, two = [{"x": 1, "y": "a"}], [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]
    assert not table_rows_ok(from_python(one), "csv", "x,y\n1,a")
    assert table_rows_ok(from_python(two), "markdown_table", "")
    nested = {"a": {"b": one}, "c": two}
    text = toon_lib.encode(nested)
    assert "b[1]{x,y}:" in text and "c[2]{x,y}:" in text
    assert not table_rows_ok(from_python(nested), "toon", text)
    assert table_rows_ok(from_python({"c": two}), "toon", toon_lib.encode({"c": two}))
    # a quoted key or value that holds brackets is not a header
    quoted = {"k[1]{": "v[1]{x}", "c": two}
    assert table_rows_ok(from_python(quoted), "toon", toon_lib.encode(quoted))
    assert table_rows_ok(from_python(one), "csv", "x,y\n1,a", min_rows=1)
    with pytest.raises(ValueError, match="min_table_rows"):
        solve(from_python(one), min_table_rows=0)


@PROPS
@given(json_values)
@example([{"id": 0, "name": ":", "v": None}])  # a one-row table before min_table_rows
def test_lossless_mckp_writes_no_one_row_table(value):
    node = from_python(value)
    plan = _Solver(ValueScheme(), _Costs("o200k_base"), float("inf"), True).frontier(
        node, ("root", None), 0, ()
    )[0]
    assert _table_rows_respected(node, plan), plan


# --- the sampled search (what the MCP proxy uses on long results) --------------------


def _records(n: int, dear: int = 0) -> list[dict]:
    """``n`` records of the same keys; the first ``dear`` carry a long list each, which
    makes a table of them dear (a JSON cell per record) but not every other layout."""
    rows = []
    for i in range(n):
        row = {"id": i, "name": f"item {i}", "ok": i % 3 == 0}
        if i < dear:
            row["tags"] = [f"t{j}" for j in range(40)]
        rows.append(row)
    return rows


def _frontier_calls(monkeypatch, value, **kw) -> tuple[str, int]:
    from tersetalk.formats import solver as S

    calls = 0
    real = S._Solver._frontier

    def counted(self, *args):
        nonlocal calls
        calls += 1
        return real(self, *args)

    monkeypatch.setattr(S._Solver, "_frontier", counted)
    enc = encode(from_python(value), "mckp", **kw)
    assert same_value(decode(enc.text), value)
    return enc.text, calls


def test_the_sampled_search_gives_up_a_long_list_early_and_finds_the_same_table(monkeypatch):
    value = _records(300)
    exact, exact_calls = _frontier_calls(monkeypatch, value)
    sampled, sampled_calls = _frontier_calls(monkeypatch, value, sample=16)
    assert sampled == exact and "csv" in exact.splitlines()[0]
    # the exact search solves most records in each item-by-item layout before it passes
    # the table; the sampled one stops after 16 of them
    assert sampled_calls < exact_calls / 3


def test_the_sampled_search_leaves_short_lists_exact_and_refuses_a_bad_sample(monkeypatch):
    # up to twice the sample, every item is solved as in the exact search
    short = _records(32)
    assert _frontier_calls(monkeypatch, short, sample=16) == _frontier_calls(monkeypatch, short)
    with pytest.raises(ValueError, match="sample 0"):
        encode(from_python([1, 2]), "mckp", sample=0)


def _rendered(monkeypatch, value, **kw) -> tuple[str, list[tuple[str, int]]]:
    """The encoding of ``value`` and each whole-block rendering made for it: (format,
    items of the array rendered)."""
    from tersetalk.formats import solver as S

    made = []
    real = S.render_block

    def recorded(node, fmt, *args):
        made.append((fmt, len(getattr(node, "items", ()))))
        return real(node, fmt, *args)

    monkeypatch.setattr(S, "render_block", recorded)
    enc = encode(from_python(value), "mckp", **kw)
    assert same_value(decode(enc.text), value)
    return enc.text, made


def test_the_sampled_search_renders_whole_only_the_blocks_its_sample_finds_close(monkeypatch):
    value = _records(300)
    exact, exact_made = _rendered(monkeypatch, value)
    sampled, sampled_made = _rendered(monkeypatch, value, sample=16)
    assert sampled == exact
    # the exact search renders TOON (about twice a table's tokens here) for all 300 items;
    # the sampled one renders it for the first 16 only, and each table whole
    assert ("toon", 300) in exact_made and ("toon", 300) not in sampled_made
    assert ("toon", 16) in sampled_made and ("csv", 300) in sampled_made


def test_the_sampled_search_renders_no_toon_for_an_object_below_the_root(monkeypatch):
    from tersetalk.formats import solver as S

    value = {"repo": {"name": "x", "owner": {"login": "o", "id": 1}}, "items": _records(3)}
    made: list[tuple[str, str]] = []
    real = S.render_block

    def recorded(node, fmt, *args):
        made.append((fmt, type(node).__name__))
        return real(node, fmt, *args)

    monkeypatch.setattr(S, "render_block", recorded)
    runs = []
    for kw in ({}, {"sample": 16}):
        made.clear()
        assert same_value(decode(encode(from_python(value), "mckp", **kw).text), value)
        runs.append(list(made))
    exact, sampled = runs
    # exact: the root, repo, owner and records as TOON objects; sampled: the root only
    # (the list below the root keeps its TOON block in both)
    assert exact.count(("toon", "Object")) >= 4 and sampled.count(("toon", "Object")) == 1
    assert ("toon", "Array") in exact and ("toon", "Array") in sampled


def test_a_plan_that_reads_back_whole_is_not_read_back_block_by_block_again():
    from tersetalk.formats.solver import SolveCache

    cache = SolveCache("o200k_base")
    enc = encode(from_python(_records(60)), "mckp", cache=cache)
    assert enc.read_back and "csv" in enc.text.splitlines()[0]
    assert cache.checks == 0  # the table's own round trip was not run: the text's was


@given(json_values)
def test_the_uniform_total_value_counts_the_leaves_as_the_general_sum_does(value):
    from tersetalk.formats.solver import ValueScheme, total_value

    node = from_python(value)
    # depth with gamma 1 weighs every leaf 1 through the general, path-by-path sum
    assert total_value(node, ValueScheme()) == total_value(node, ValueScheme("depth", 1.0))


_numbers = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.text(alphabet="0123456789-+.eE", max_size=8),
)


@PROPS
@given(_numbers)
@example("-0")
@example("1e999")
def test_json_number_reads_what_json_loads_reads_and_nothing_else(text):
    """A table cell is read with Python's int/float where it is a JSON number: the same
    value and type as json.loads gives, and None where json.loads reads no number."""
    from tersetalk.formats.tree import json_number

    try:
        expected = json.loads(text)
    except ValueError:
        expected = None
    if not isinstance(expected, int | float) or isinstance(expected, bool):
        expected = None
    got = json_number(text)
    assert type(got) is type(expected) and (got == expected or repr(got) == repr(expected))


def test_the_depth_is_checked_as_the_tree_is_built():
    """100 levels of arrays are a tree; 101 are refused, as JSON text and as a value,
    and text deeper than Python's recursion limit is refused the same way."""
    from tersetalk.formats.tree import MAX_DEPTH, TreeDepthError, parse_json

    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert to_python(parse_json(ok)) == json.loads(ok)
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
                 '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1),
                 "[" * 100_000 + "]" * 100_000):  # fmt: skip
        with pytest.raises(TreeDepthError, match="nests deeper than"):
            parse_json(text)
    with pytest.raises(TreeDepthError):
        from_python(json.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)))


def test_long_texts_are_counted_beside_each_other_with_the_same_counts(monkeypatch):
    """prefetch counts the long line lists that lines() counts whole, on threads, and
    lines() then reads those counts: the same numbers as counting each alone."""
    from tersetalk.core.tokens import count_tokens

    rows = [f"{i},name {i},{i * 7}" for i in range(3000)]
    tables = [["id,name,n", *rows], ["|id|name|n|", "|-|-|-|", *(f"|{r}|" for r in rows)]]
    costs = _Costs("o200k_base")
    costs.prefetch(tables)
    assert len(costs.known) == 2
    counted = []
    monkeypatch.setattr("tersetalk.formats.solver.count_tokens",
                        lambda t, n: counted.append(t) or count_tokens(t, n))  # fmt: skip
    got = [costs.lines(t) for t in tables]
    assert counted == []  # read from the prefetched counts
    assert got == [sum(count_tokens(x + "\n", "o200k_base") for x in t) for t in tables]


def test_the_final_text_is_counted_beside_its_read_back():
    """The encoding's token count of a long text, counted on a thread while it is
    decoded, is the count of its text."""
    from tersetalk.core.tokens import count_tokens

    rows = [{"id": i, "name": f"user {i}", "ok": i % 2 == 0} for i in range(2000)]
    enc = encode(from_python(rows), "mckp", tokenizer="o200k_base")
    assert len(enc.text) > 16_384 and enc.read_back
    assert enc.tokens == count_tokens(enc.text, "o200k_base")
