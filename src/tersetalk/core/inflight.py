"""Run a function over items on worker threads with at most ``limit`` calls in flight.

Why not ``ThreadPoolExecutor.map``: it submits every item at once (a run of 500
examples would queue 500 calls, and a stop could not keep the queue from starting),
and it yields in submission order, so one slow example would hold back the
checkpointing of the ones finished behind it. :class:`InFlight` submits the next
item only when one finishes, hands each outcome back on the caller's thread as soon
as it is ready (the caller checkpoints it and updates progress there, so those need
no lock), and :meth:`InFlight.stop` ends the submissions while the calls already
running still come back, to be kept.

Outcomes come back in completion order; the caller restores the item order (the
runner writes its run file in example order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

__all__ = ["InFlight"]

T = TypeVar("T")
R = TypeVar("R")


class InFlight(Generic[T, R]):
    """``for item, outcome in InFlight(fn, items, limit)``: outcome is fn's value or error.

    An exception raised by ``fn`` is the outcome (an ``Exception`` instance), never
    raised here: the caller decides what stops the run. Use as a context manager:
    leaving it early (an error or Ctrl-C on the caller's thread) submits nothing more
    and does not wait for the calls still running (their threads finish them and
    exit; their results are dropped).
    """

    def __init__(self, fn: Callable[[T], R], items: Iterable[T], limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, got {limit!r}")
        self.fn = fn
        self.limit = limit
        self._items = iter(items)
        self._stopped = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="tersetalk-example")
        self._running: dict[Future[R], T] = {}
        #: the most calls that were ever running at once (what a test can check)
        self.peak = 0

    def stop(self) -> None:
        """Submit nothing more; the calls already running still come back."""
        self._stopped.set()

    def _fill(self) -> None:
        while len(self._running) < self.limit and not self._stopped.is_set():
            item = next(self._items, _END)
            if item is _END:
                return
            self._running[self._pool.submit(self.fn, item)] = item  # type: ignore[arg-type]
            self.peak = max(self.peak, len(self._running))

    def __iter__(self) -> Iterator[tuple[T, R | Exception]]:
        self._fill()
        while self._running:
            done, _ = wait(list(self._running), return_when=FIRST_COMPLETED)
            # several may finish together: hand them back in submission order
            for fut in [f for f in self._running if f in done]:
                item = self._running.pop(fut)
                exc = fut.exception()
                if exc is not None and not isinstance(exc, Exception):
                    raise exc  # KeyboardInterrupt/SystemExit in a worker: not an outcome
                yield item, (exc if exc is not None else fut.result())
                self._fill()

    def close(self) -> None:
        self._stopped.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> InFlight[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_END = object()
