"""The knapsack's faster frontier merge gives the very plans the plain cross product did.

The exact solver once built every candidate of an object composite as a ``Plan`` and
kept the Pareto frontier of them (``_ReferenceSolver`` below is that code). It now
filters (cost, value) pairs first, prunes partial plans that can only end over the
budget, and builds the survivors' children lazily. Which of two candidates of equal
cost and value survives decides the text that is sent, so these tests ask for equal
frontiers, plan by plan (children and dropped keys included), not only equal values;
and equal ``solve`` results, with the numpy and the plain-Python merge both.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tersetalk.formats import hints as H
from tersetalk.formats import solver as S
from tersetalk.formats.container import INDENT, block_ok, compact_json, render_block
from tersetalk.formats.encoders import get_encoder
from tersetalk.formats.solver import Plan, ValueScheme, _Chain, _Costs, _header, _Solver
from tersetalk.formats.tree import Object, from_python

# the ``merge`` fixture only sets a module threshold for the whole test: keeping it
# across generated inputs is what is wanted
PROPS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class _ReferenceSolver(_Solver):
    """The solver as it was: every candidate a Plan, one memo per solver instance."""

    def frontier(self, node, slot, depth, path):
        memo = (path, slot, depth)
        if memo not in self._memo:
            self._memo[memo] = self._frontier(node, slot, depth, path)
        return self._memo[memo]

    def _composite_array(self, node, slot, depth, path, opt, limit=float("inf"), room=None):
        # its lossless item solver must be a reference one too
        original = S._Solver
        S._Solver = _ReferenceSolver
        try:
            return super()._composite_array(node, slot, depth, path, opt, room=room)
        finally:
            S._Solver = original

    def _composite_object(self, node, slot, depth, path, opt, limit=float("inf"), room=None):
        room = self.budget if room is None else room
        inner = depth if slot[0] == "root" else depth + 1
        if opt == "kv":
            base = (
                0 if slot[0] == "root" else self.costs.lines([INDENT * depth + _header(slot, "kv")])
            )
        else:
            base = 1 + self._line_head(slot, depth)
        acc = {False: [Plan(opt, base, 0.0)], True: []}
        for k, child in node.items:
            cpath = (*path, k)
            if opt == "kv":
                cf = self.frontier(child, ("key", k), inner, cpath)
            else:
                cf = [
                    replace(p, cost=p.cost + self.costs.text(compact_json(k) + ":") + 1)
                    for p in self._json_child(child, cpath)
                ]
            new = {False: [], True: []}
            for flag, front in acc.items():
                for a in front:
                    for c in cf:
                        new[flag].append(
                            Plan(
                                opt,
                                a.cost + c.cost,
                                a.value + c.value,
                                (*a.children, (k, c)),
                                a.dropped,
                            )  # fmt: skip
                        )
                    if not self.lossless_only:
                        drop_cost = self.costs.lines([compact_json(k) + ","]) - 1
                        new[True].append(
                            Plan(
                                opt,
                                a.cost + max(drop_cost, 1),
                                a.value,
                                a.children,
                                (*a.dropped, k),
                            )  # fmt: skip
                        )
            acc = {
                f: S._pareto(v, room) if not self.lossless_only else S._cheapest(v)
                for f, v in new.items()
            }
        out = list(acc[False])
        if acc[True]:
            hint_base = self.costs.lines([H.overflow_keys(path, [])])
            out += [replace(p, cost=p.cost + hint_base) for p in acc[True]]
        return [p for p in out if p.children or p.dropped]


# many equal keys and values, so candidates tie on cost and value and the order decides
_leaf = st.one_of(
    st.sampled_from([0, 1, 7, True, None, "x", "open", "a longer string value " * 4]),
    st.integers(0, 10**4),
    st.text(max_size=6),
)
tie_values = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4),
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "id", "name", "x y"]), inner, min_size=1, max_size=5
        ),  # fmt: skip
        st.lists(
            st.fixed_dictionaries({"id": st.integers(0, 3), "name": _leaf, "v": inner}),
            min_size=1,
            max_size=3,
        ),
    ),
    max_leaves=16,
)
schemes = st.sampled_from(
    [ValueScheme(), ValueScheme("depth"), ValueScheme("priority", priority=("name",))]
)


def _solver(cls, scheme, budget, json_only=False):
    return cls(scheme, _Costs("o200k_base"), float(budget), False, json_only)


@pytest.fixture(params=["python", "numpy"])
def merge(request, monkeypatch):
    """Every merge in plain Python, or every one through numpy."""
    monkeypatch.setattr(S, "_VECTOR_MIN", 10**9 if request.param == "python" else 0)
    return request.param


@PROPS
@given(tie_values, st.floats(0.05, 1.5), schemes, st.booleans())
def test_frontiers_are_the_reference_plans(merge, value, fraction, scheme, json_only):
    node = from_python(value)
    # budgets around the payload's size, where the frontiers meet the budget
    budget = max(1, int(S.encode(node, "json_compact").tokens * fraction))
    got, want = (_solver(cls, scheme, budget, json_only) for cls in (_Solver, _ReferenceSolver))
    front = got.frontier(node, ("root", None), 0, ())
    assert front == want.frontier(node, ("root", None), 0, ())
    # every frontier below the root too (a tie there is often dominated at the root)
    assert got._memo == want._memo
    if isinstance(node, Object) and node.items and not json_only:
        for opt in ("kv", "jsonobj"):
            plans = got._composite_object(node, ("root", None), 0, (), opt)
            assert plans == want._composite_object(node, ("root", None), 0, (), opt)
            # the lazily built children read back as the tuples they stand for
            for p in plans:
                assert isinstance(p.children, _Chain) and p.children == tuple(p.children)


@pytest.mark.parametrize("budget", [20, 30])
def test_a_tie_keeps_the_candidate_built_first(merge, budget):
    """In ``{...}`` form, keeping "a" and dropping "b" costs what the reverse costs: the
    reference kept the one its cross product built first ("a" kept), so must the merge."""
    node = from_python({"a": 1, "b": 1})
    for opt in ("kv", "jsonobj"):
        got, want = (
            _solver(cls, ValueScheme(), budget)._composite_object(node, ("root", None), 0, (), opt)
            for cls in (_Solver, _ReferenceSolver)
        )
        assert got == want
    one = [(tuple(k for k, _ in p.children), p.dropped) for p in got if p.value == 1.0]
    assert one == [(("a",), ("b",))]


@PROPS
@given(tie_values, st.floats(0.05, 1.2), st.sampled_from(["exact", "greedy", "binary"]))
def test_solve_is_unchanged(merge, value, fraction, method):
    node = from_python(value)
    budget = max(1, int(S.encode(node, "json_compact").tokens * fraction))

    def run():
        try:
            return S.solve(node, budget=budget, method=method)
        except S.BudgetError as exc:
            return str(exc)

    got = run()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "_Solver", _ReferenceSolver)
        want = run()
    assert got == want


@PROPS
@given(tie_values)
def test_cached_blocks_and_singles_are_what_they_stand_for(value):
    node = from_python(value)
    eager, lazy = _Costs("o200k_base", lazy=False), _Costs("o200k_base")
    for fmt in S.BLOCKS:
        ok = block_ok(node, fmt)
        want = render_block(node, fmt) if ok else None
        assert eager.block(node, fmt) == want
        assert eager.block(node, fmt) == want  # the cached answer too
        # lazily, a rendering is offered before its round trip, which check() runs
        offered = lazy.block(node, fmt)
        if want is not None:  # a block that reads back is offered
            assert offered == want
        if offered is not None:
            assert offered == render_block(node, fmt)
            assert lazy.check(node, fmt) is ok
        assert lazy.block(node, fmt) == want  # once checked, as the eager answer
    for name in S.ROOT_SINGLES:
        ok = get_encoder(name).eligible(node)
        want = S._single_text(node, name) if ok else None
        assert eager.single(node, name) == want
        offered = lazy.single(node, name)
        if want is not None:
            assert offered == want
        if offered is not None:
            assert lazy.check(node, "single:" + name) is ok
        assert lazy.single(node, name) == want


def test_chain_reads_as_its_tuple():
    a, b = Plan("inline", 1, 1.0), Plan("inline", 2, 1.0)
    link = (((None, "k1", a), "k2", None), "k3", b)
    kept, dropped = _Chain(link, True), _Chain(link, False)
    assert bool(kept) and bool(dropped)
    assert kept == (("k1", a), ("k3", b)) and dropped == ("k2",)
    assert (("k1", a), ("k3", b)) == kept and len(kept) == 2 and kept[-1] == ("k3", b)
    assert hash(dropped) == hash(("k2",)) and list(dropped) == ["k2"]
    assert not _Chain((None, "k", None), True) and not _Chain(None, False)
    assert Plan("kv", 3, 2.0, kept, dropped) == Plan("kv", 3, 2.0, kept._tuple(), ("k2",))
