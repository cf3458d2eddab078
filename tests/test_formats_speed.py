"""The knapsack's lazy read-back: the same encodings as checking every block, fewer checks.

A block (csv, a Markdown table, TOON, ...) or a root single format is offered at the cost
of its rendering and its round trip is checked only when it is in the plan the solver
picks; one that fails is ruled out and the plan picked again (``solver._Costs``). These
tests hold it to the encodings of the eager check, on payloads whose blocks often fail
their round trip (strings that read back as numbers, booleans or hints), and count the
round trips a large table saves.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tersetalk.formats import container as C
from tersetalk.formats import solver as S
from tersetalk.formats.encoders import get_encoder
from tersetalk.formats.tree import from_python

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# strings a cell format or TOON may not read back as the same value
_tricky = st.sampled_from(
    ["12", "true", "", "null", "-", "> [ref: ab12cd34]", "a|b", "x, y", "- a", "[2]{a}:",
     " lead", "line\nbreak", "open", "closed", "a longer string value " * 4]
)  # fmt: skip
_leaf = st.one_of(_tricky, st.integers(0, 10**4), st.booleans(), st.none())
_records = st.lists(
    st.fixed_dictionaries({"id": st.integers(0, 50), "name": _leaf, "state": _leaf}),
    min_size=1,
    max_size=6,
)
values = st.one_of(
    _records,
    st.dictionaries(
        st.sampled_from(["items", "meta", "a b"]),
        st.one_of(_records, _leaf),
        min_size=1,
        max_size=3,
    ),  # fmt: skip
    st.lists(st.one_of(_records, _leaf), min_size=1, max_size=4),
)


class _Eager(S._Costs):
    """Costs that check every block's round trip before offering it (the old way)."""

    def __init__(self, tokenizer: str, lazy: bool = True) -> None:
        super().__init__(tokenizer, lazy=False)


def _solve(node, budget, method, eager):
    with pytest.MonkeyPatch.context() as mp:
        if eager:
            mp.setattr(S, "_Costs", _Eager)
        try:
            return S.solve(node, budget=budget, method=method)
        except S.BudgetError as exc:
            return str(exc)


@PROPS
@given(values, st.sampled_from([None, 0.1, 0.3, 0.6, 1.2]), st.sampled_from(["exact", "binary"]))
def test_lazy_read_back_gives_the_eager_encoding(value, fraction, method):
    node = from_python(value)
    budget = None
    if fraction is not None:
        budget = max(1, int(S.encode(node, "json_compact").tokens * fraction))
    assert _solve(node, budget, method, eager=False) == _solve(node, budget, method, eager=True)


def test_a_failed_block_in_the_picked_plan_is_ruled_out():
    # records whose csv cells would read back as numbers: csv renders, is the cheapest,
    # and fails its round trip; the plan picked again must be the eager one
    value = [{"id": str(i), "name": "12", "n": i} for i in range(12)]
    node = from_python(value)
    lazy, eager = _solve(node, None, "exact", False), _solve(node, None, "exact", True)
    assert lazy == eager
    assert "csv" not in dict(lazy.choices).values()


def _round_trips(monkeypatch) -> list[str]:
    """The formats decoded from here on: each block's and single format's round trip,
    and the final check of the whole text."""
    seen: list[str] = []
    real = S.parse_block

    def counted(body, fmt):
        seen.append(fmt)
        return real(body, fmt)

    monkeypatch.setattr(S, "parse_block", counted)
    for name in S.ROOT_SINGLES:
        cls = type(get_encoder(name))
        monkeypatch.setattr(cls, "decode", _counting(cls.decode, "single:" + name, seen))
    return seen


def _counting(fn, name, seen):
    def counted(self, text):
        seen.append(name)
        return fn(self, text)

    return counted


def test_a_large_table_checks_the_picked_blocks_only(monkeypatch):
    rows = [{"id": i, "question": f"Which county is station {i} in?", "answer": f"north {i}",
             "level": "hard" if i % 3 else "easy", "n": i % 7} for i in range(200)]  # fmt: skip
    node = from_python(rows)
    seen = _round_trips(monkeypatch)
    enc = S.encode(node, "mckp", tokenizer="o200k_base")
    assert S.decode(enc.text) == rows
    # the whole text of the picked single csv is read back once (its own check would
    # decode the same text again): every record's TOON block and every other root
    # format is rendered to be costed, never decoded (checking each candidate decoded
    # 200 TOON blocks and four root formats)
    assert dict(enc.choices)["$"] == "single:csv"
    assert seen == ["single:csv", "single:csv"]  # the whole text's read-back, the test's
    seen.clear()
    enc = S.encode(node, "mckp", tokenizer="o200k_base", budget=300)
    assert not enc.lossless
    assert len(seen) <= 2 and "toon" not in seen


_cell = st.sampled_from(
    ["a", "`x|y`", "a \\| b", "**b**", "[l](u)", "<b>", "`", "\\", "*", "12", " ", "é"]
)
_table = st.lists(st.lists(_cell, min_size=2, max_size=2), min_size=1, max_size=4).map(
    lambda rows: "\n".join(["| h | k |", "|---|:-:|", *(f"| {a} | {b} |" for a, b in rows)])
)
_doc = st.lists(
    st.one_of(_table, st.sampled_from(["Prose *with* `code`.", "", "> quote | pipe", "- item"])),
    min_size=1,
    max_size=5,
).map("\n".join)


@PROPS
@given(_doc)
def test_table_spans_read_by_blocks_alone_are_the_full_parse(doc):
    # the inline pass the block parser leaves out fills tokens table_spans never reads
    import tersetalk.formats.markdown as M
    from tersetalk.formats.tree import markdown_parser

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(M, "_block_parser", markdown_parser)
        want = M.table_spans(doc)
    assert M.table_spans(doc) == want
    assert M._block_parser() is M._block_parser()  # built once


_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
)


@PROPS
@given(st.one_of(_json_scalars, st.lists(_json_scalars, max_size=3)))
def test_compact_json_writes_a_scalar_as_json_dumps_does_without_the_encoder(value):
    import json

    from tersetalk.formats import container as C

    class _Only:  # the encoder is for containers (and NaN, infinity) alone
        def encode(self, v):
            assert isinstance(v, list) or (isinstance(v, float) and v != v or v in (
                float("inf"), float("-inf")))  # fmt: skip
            return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "_COMPACT", _Only())
        got = C.compact_json(value)
    assert got == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _no_early_exit(mp) -> list[float]:
    """Every composite solved to its last child (the limit ignored); the limits given."""
    limits: list[float] = []
    for name in ("_composite_object", "_composite_array"):
        real = getattr(S._Solver, name)

        def whole(self, node, slot, depth, path, opt, limit=float("inf"), room=None, _real=real):
            limits.append(limit)
            return _real(self, node, slot, depth, path, opt, room=room)

        mp.setattr(S._Solver, name, whole)
    return limits


@PROPS
@given(values, st.sampled_from([None, 0.3, 0.8]))
def test_leaving_out_a_dearer_composite_early_gives_the_same_encoding(value, fraction):
    node = from_python(value)
    budget = None
    if fraction is not None:
        budget = max(1, int(S.encode(node, "json_compact").tokens * fraction))
    got = _solve(node, budget, "exact", eager=False)
    with pytest.MonkeyPatch.context() as mp:
        limits = _no_early_exit(mp)
        want = _solve(node, budget, "exact", eager=False)
    assert got == want
    if budget is None and limits:  # lossless: a composite is bounded by an option found
        assert max(limits) < float("inf")


def test_a_table_solves_only_the_records_its_composites_need(monkeypatch):
    rows = [{"id": i, "question": f"Which county is station {i} in?", "answer": f"north {i}",
             "level": "hard" if i % 3 else "easy", "n": i % 7} for i in range(200)]  # fmt: skip
    node = from_python(rows)
    solved: list[int] = []
    real = S._Solver._composite_object

    def counted(self, node, slot, depth, path, opt, limit=float("inf"), room=None):
        solved.append(path[0])
        return real(self, node, slot, depth, path, opt, limit, room)

    monkeypatch.setattr(S._Solver, "_composite_object", counted)
    enc = S.encode(node, "mckp_plain", tokenizer="o200k_base")
    assert dict(enc.choices)["$"] == "single:csv"
    # a record written as its own lines costs more than its csv row: the list of records
    # passes the csv's cost before the last record, and the rest are not solved
    assert len(set(solved)) < len(rows) * 3 // 4


def test_a_failed_block_is_solved_again_only_above_it(monkeypatch):
    # the csv of "bad" is made to fail its round trip; picking again solves the nodes
    # above it, not the records beside it, and gives the eager check's encoding
    value = {
        "bad": [{"k": i, "v": f"x{i}", "w": i % 3 == 0} for i in range(12)],
        "good": [{"k": i, "v": f"y{i}", "w": i % 3 == 0} for i in range(12)],
    }
    real_parse = S.parse_block

    def parse(body, fmt):
        got = real_parse(body, fmt)
        return got[1:] if fmt == "csv" and "x0" in body else got

    monkeypatch.setattr(S, "parse_block", parse)  # the block's own round trip
    monkeypatch.setattr(C, "parse_block", parse)  # and the whole text's
    solved: list[tuple] = []
    real = S._Solver._frontier

    def counted(self, node, slot, depth, path):
        solved.append((path, slot, depth))
        return real(self, node, slot, depth, path)

    monkeypatch.setattr(S._Solver, "_frontier", counted)
    node = from_python(value)
    lazy = _solve(node, None, "exact", False)
    twice = {k for k in solved if solved.count(k) > 1}
    assert {k[0] for k in twice} == {(), ("bad",)}, sorted(twice)
    monkeypatch.setattr(S._Solver, "_frontier", real)
    assert lazy == _solve(node, None, "exact", True)
    assert dict(lazy.choices)["$.bad"] != "csv" and dict(lazy.choices)["$.good"] == "csv"


def test_a_lossless_solve_builds_no_json_piece_frontiers(monkeypatch):
    # lossless, {...} and [...] composites would write the inline option's own text
    # (compact JSON): none is offered, so no frontier of a value inside JSON is built;
    # under a budget they are (keys and items may be dropped inside them)
    value = {"user": {"id": 1, "tags": ["a", "b"]}, "items": [{"k": 1}, {"k": 2, "v": None}]}
    slots: list[str] = []
    real = S._Solver._frontier

    def counted(self, node, slot, depth, path):
        slots.append(slot[0])
        return real(self, node, slot, depth, path)

    monkeypatch.setattr(S._Solver, "_frontier", counted)
    S.solve(from_python(value))
    assert slots and "json" not in slots
    S.solve(from_python(value), budget=20)
    assert "json" in slots
