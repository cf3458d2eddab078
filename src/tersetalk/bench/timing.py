"""Timing with ``time.perf_counter_ns``: warmup, calibrated batches, interleaved repeats.

On two shared cores the machine's speed drifts while a benchmark runs (other
jobs, frequency scaling). Timing every method once per repeat, in a freshly
shuffled order, spreads that drift over all methods alike, so the ratio of two
medians measured in the same run is much steadier than either median. Each
timed batch calls the function often enough to last ``min_batch_ns``, so the
clock's resolution and call overhead do not dominate short functions. The
garbage collector is paused inside a batch (as :mod:`timeit` does).

Wall time (``perf_counter_ns``) is the measure; the thread's CPU time
(``thread_time_ns``) is recorded beside it, because on a shared machine a batch
can lose the CPU to another process, which wall time counts and CPU time does not.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .defaults import DEFAULT_MIN_BATCH_NS, DEFAULT_WARMUP, default_repeats


@dataclass
class Timing:
    """Per-call nanoseconds of one function over the repeats."""

    name: str
    inner: int
    samples_ns: list[float] = field(default_factory=list)
    cpu_samples_ns: list[float] = field(default_factory=list)

    @property
    def median_ns(self) -> float:
        return statistics.median(self.samples_ns)

    @property
    def q1_ns(self) -> float:
        return _quantile(self.samples_ns, 0.25)

    @property
    def q3_ns(self) -> float:
        return _quantile(self.samples_ns, 0.75)

    @property
    def min_ns(self) -> float:
        return min(self.samples_ns)

    @property
    def cpu_median_ns(self) -> float:
        return statistics.median(self.cpu_samples_ns)

    def as_dict(self, prefix: str = "") -> dict[str, float | int]:
        return {
            f"{prefix}median_ns": self.median_ns,
            f"{prefix}q1_ns": self.q1_ns,
            f"{prefix}q3_ns": self.q3_ns,
            f"{prefix}min_ns": self.min_ns,
            f"{prefix}cpu_median_ns": self.cpu_median_ns,
            f"{prefix}inner_loops": self.inner,
            f"{prefix}repeats": len(self.samples_ns),
        }


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _batch(fn: Callable[[], object], inner: int) -> tuple[int, int]:
    """Wall and thread-CPU nanoseconds of ``inner`` calls."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        t1 = time.perf_counter_ns()
        return t1 - t0, time.thread_time_ns() - c0
    finally:
        if enabled:
            gc.enable()


def calibrate(fn: Callable[[], object], min_batch_ns: int = DEFAULT_MIN_BATCH_NS) -> int:
    """How many calls make one batch last at least ``min_batch_ns`` (at least 1).

    Each trial size is timed three times and the fastest counts, so one
    preemption by another process does not shrink the batch for the whole run.
    """
    fn()  # first call: caches, lazy imports
    inner = 1
    while True:
        elapsed = min(_batch(fn, inner)[0] for _ in range(3))
        if elapsed >= min_batch_ns or inner >= 1 << 20:
            return inner
        # aim a little past the target, at most 10x more calls per step
        wanted = math.ceil(inner * 1.2 * min_batch_ns / max(elapsed, 1))
        inner = min(inner * 10, max(inner + 1, wanted))


def measure(
    funcs: Mapping[str, Callable[[], object]],
    *,
    repeats: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    min_batch_ns: int = DEFAULT_MIN_BATCH_NS,
    seed: int = 0,
) -> dict[str, Timing]:
    """Median per-call time of each function, all measured interleaved in this process
    (``repeats`` None: the config schema's ``bench.repeats`` default)."""
    if repeats is None:
        repeats = default_repeats()
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    timings = {name: Timing(name, calibrate(fn, min_batch_ns)) for name, fn in funcs.items()}
    names = list(funcs)
    for _ in range(max(0, warmup)):
        for name in names:
            _batch(funcs[name], timings[name].inner)
    rng = random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(names)
        for name in names:
            t = timings[name]
            wall, cpu = _batch(funcs[name], t.inner)
            t.samples_ns.append(wall / t.inner)
            t.cpu_samples_ns.append(cpu / t.inner)
    return timings
