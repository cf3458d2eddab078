"""MB-4: the ``M#`` overflow memory -- insert, lookup and evict at 1k to 10k entries.

The design's Experiment 3 names "memory lookup" beside tag extraction (MB-1) and
boundary detection (MB-2). The store (:class:`tersetalk.protocol.Memory`) is a
bounded FIFO of texts behind ``M#n`` ids; it does more than a bare mapping (it
formats ids, keeps each entry's tag and source line, counts bytes, evictions and
puts, and tells an evicted id from an unknown one), and MB-4 measures what that
costs against the plain structures that do only the mapping, side by side:

* ``insert``: fill an empty store of capacity N with N texts; baseline: a ``dict``
  filled with the same ``M#n`` keys (formatted the same way).
* ``lookup``: fetch all N texts of a full store in a seeded shuffled order;
  baseline: ``dict.__getitem__`` on the same keys.
* ``evict``: put N more texts into a full store, each put evicting the oldest
  entry (steady state: the store stays at N); baseline: an ``OrderedDict`` with
  ``popitem(last=False)``, the standard library's FIFO (a bare ``dict`` evicting
  its first key by ``next(iter(d))`` degrades with the deleted slots in front).

Texts are seeded synthetic payloads (the design's "synthetic workloads"; a real
overflow payload is a sentence or a paragraph). Before timing, the store and the
baseline must hold the same ids with the same texts, after filling and after
evicting (:class:`EquivalenceError` otherwise). Each row reports nanoseconds per
operation, ``speedup_vs_baseline`` (baseline median over the store's: below 1
the store is slower, 0.5 half the baseline's speed) with its interquartile range,
and ``scaling_vs_smallest`` (ns per operation at N over that at the smallest N:
near 1 means the cost per operation does not grow with the store).
"""

from __future__ import annotations

import itertools
import logging
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

import pandas as pd

from tersetalk.protocol import Memory

from .defaults import DEFAULT_MEMORY_SIZES, DEFAULT_MIN_BATCH_NS, DEFAULT_WARMUP
from .results import EquivalenceError, finish, speedup_range
from .timing import measure

log = logging.getLogger(__name__)

OPERATIONS = ("insert", "lookup", "evict")
METHOD = "memory"
BASELINES = {
    "insert": ("dict", "dict[f'M#{i}'] = text"),
    "lookup": ("dict", "dict[ref]"),
    "evict": ("OrderedDict", "od[f'M#{i}'] = text; od.popitem(last=False)"),
}
_WORDS = (
    "the of river city born album film team season game member band station party county "
    "state league population north south company founded released played 1998 2004 42"
).split()


def synthetic_texts(n: int, seed: int = 0, words: tuple[int, int] = (8, 40)) -> list[str]:
    """``n`` distinct seeded payloads of ``words`` words (a sentence to a short paragraph)."""
    rng = random.Random(seed)
    return [f"{i}: " + " ".join(rng.choices(_WORDS, k=rng.randint(*words))) for i in range(n)]


def _fill_memory(texts: Sequence[str], capacity: int) -> Memory:
    mem = Memory(max_entries=capacity)
    for t in texts:
        mem.put(t)
    return mem


def _fill_dict(texts: Sequence[str]) -> dict[str, str]:
    d: dict[str, str] = {}
    for i, t in enumerate(texts, 1):
        d[f"M#{i}"] = t
    return d


class _FifoBaseline:
    """An ``OrderedDict`` evicting its oldest key, with ids numbered as the store's."""

    def __init__(self, texts: Sequence[str], capacity: int) -> None:
        self.od: OrderedDict[str, str] = OrderedDict()
        self.ids = itertools.count(1)
        self.capacity = capacity
        self.put_all(texts)

    def put_all(self, texts: Sequence[str]) -> None:
        od, ids, cap = self.od, self.ids, self.capacity
        for t in texts:
            od[f"M#{next(ids)}"] = t
            if len(od) > cap:
                od.popitem(last=False)


def _put_all(mem: Memory, texts: Sequence[str]) -> None:
    put = mem.put
    for t in texts:
        put(t)


def _consume(fn: Callable, items: Sequence) -> None:
    deque(map(fn, items), maxlen=0)


def check_equivalent(size: int, texts: Sequence[str], more: Sequence[str]) -> None:
    """The store and the baselines hold the same ids and texts, filled and after evicting."""
    mem, d = _fill_memory(texts, size), _fill_dict(texts)
    if mem.ids() != list(d) or any(mem.get(r) != d[r] for r in d):
        raise EquivalenceError(f"MB-4: Memory and dict disagree after inserting {size} texts")
    fifo = _FifoBaseline(texts, size)
    _put_all(mem, more)
    fifo.put_all(more)
    if mem.ids() != list(fifo.od) or any(mem.get(r) != fifo.od[r] for r in fifo.od):
        raise EquivalenceError(f"MB-4: Memory and OrderedDict disagree after evicting {size}")
    if len(mem) != size or mem.stats().evictions != len(more):
        raise EquivalenceError(
            f"MB-4: Memory holds {len(mem)} entries after {mem.stats().evictions} evictions; "
            f"want {size} and {len(more)}"
        )


def _functions(size: int, texts: list[str], more: list[str], seed: int) -> dict[str, Callable]:
    refs = [f"M#{i}" for i in range(1, size + 1)]
    random.Random(seed).shuffle(refs)
    full_mem, full_dict = _fill_memory(texts, size), _fill_dict(texts)
    steady_mem, steady_fifo = _fill_memory(texts, size), _FifoBaseline(texts, size)
    return {
        "memory/insert": lambda: _fill_memory(texts, size),
        "dict/insert": lambda: _fill_dict(texts),
        "memory/lookup": lambda: _consume(full_mem.get, refs),
        "dict/lookup": lambda: _consume(full_dict.__getitem__, refs),
        "memory/evict": lambda: _put_all(steady_mem, more),
        "OrderedDict/evict": lambda: steady_fifo.put_all(more),
    }


def run_mb4(
    *,
    sizes: Sequence[int] = DEFAULT_MEMORY_SIZES,
    repeats: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    min_batch_ns: int = DEFAULT_MIN_BATCH_NS,
    seed: int = 0,
) -> pd.DataFrame:
    if not sizes or min(sizes) < 1:
        raise ValueError(f"MB-4 sizes must be positive entry counts, got {list(sizes)}")
    rows: list[dict] = []
    for size in sorted(set(sizes)):
        texts = synthetic_texts(size, seed)
        more = synthetic_texts(size, seed + 1)
        check_equivalent(size, texts, more)
        timings = measure(_functions(size, texts, more, seed), repeats=repeats, warmup=warmup,
                          min_batch_ns=min_batch_ns, seed=seed)  # fmt: skip
        for op in OPERATIONS:
            base_name, base_desc = BASELINES[op]
            base = timings[f"{base_name}/{op}"]
            for method in (METHOD, base_name):
                t = timings[f"{method}/{op}"]
                rows.append({
                    "size": size,
                    "operation": op,
                    "method": method,
                    "baseline": base_name,
                    "baseline_description": base_desc,
                    "is_baseline": method == base_name,
                    "ops_per_call": size,
                    **t.as_dict(),
                    "ns_per_op": t.median_ns / size,
                    "cpu_ns_per_op": t.cpu_median_ns / size,
                    "speedup_vs_baseline": base.median_ns / t.median_ns,
                    "speedup_vs_baseline_cpu": base.cpu_median_ns / t.cpu_median_ns,
                    **speedup_range(base, t),
                    "equivalent": True,
                })  # fmt: skip
    df = pd.DataFrame(rows)
    smallest = df[df["size"] == df["size"].min()].set_index(["operation", "method"])["ns_per_op"]
    df["scaling_vs_smallest"] = [
        r.ns_per_op / smallest[(r.operation, r.method)] for r in df.itertuples()
    ]
    for r in df[~df["is_baseline"]].itertuples():
        log.info("MB-4 %s at %d entries: %.0f ns/op, %.2fx the %s baseline's speed, "
                 "%.2fx the ns/op at %d entries", r.operation, r.size, r.ns_per_op,
                 r.speedup_vs_baseline, r.baseline, r.scaling_vs_smallest,
                 int(df["size"].min()))  # fmt: skip
    return finish(df.to_dict("records"), "MB-4",
                  {"warmup": warmup, "min_batch_ns": min_batch_ns, "seed": seed,
                   "sizes": ",".join(map(str, sorted(set(sizes))))})  # fmt: skip
