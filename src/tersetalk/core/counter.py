"""Token counts of long texts in a helper process, beside the caller's Python work.

tiktoken holds the interpreter's lock for nearly all of its work: measured here, two
threads counting two 100 KB texts take about as long as one thread counting both,
and a count on a thread beside Python work adds its whole time to that work. The MCP
proxy counts every long result (the text it was sent, each table it weighs), about a
fifth of its time per result, while a second core sits idle: a helper process counts
there instead. It is a plain loop over a pipe: the caller sends a function and its
arguments (a count: ``count_tokens`` and ``(text, encoding)``), the helper answers, in
the order asked. Besides counts it runs the table path's question about the first rows
of a long array (:mod:`tersetalk.formats.records`), which needs no answer until the
tables are written and read back, and the knapsack's solve of a payload with its string
prefixes aliased, beside the caller's solve of it without (:func:`tersetalk.formats.
solver.solve`); while the caller waits on such a long job it asks the helper nothing
more (:func:`here`): its counts would queue behind the job.

:func:`tersetalk.core.tokens.start_count_helper` starts the helper (the proxy does, once
its session is set up, and the MB-5 benchmark does for the proxy's pipeline);
:func:`tersetalk.core.tokens.count_tokens_aside` then sends it every text of
:data:`tersetalk.core.tokens.ASIDE_MIN_CHARS` or more. The counts are tiktoken's either
way. If the helper cannot start or dies, each count it owed is made in the caller's
process and the helper is not used again (a warning says so once); nothing is lost or
counted twice.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

#: a counting function: (text, encoding name) -> tokens
Count = Callable[[str, str], int]
_LOCK = threading.Lock()
_HELPER: _Helper | None = None
#: ``on``: this thread's work asks the helper nothing (:func:`here`)
_HERE = threading.local()


@contextmanager
def here() -> Iterator[None]:
    """Within it, this thread's :func:`submit` and :func:`call` answer None (the caller
    counts or runs it itself): for work beside a long job the helper is doing."""
    outer = getattr(_HERE, "on", False)
    _HERE.on = True
    try:
        yield
    finally:
        _HERE.on = outer


def _serve(conn: Any, names: Sequence[str], count_tokens: Count,
           preload: Sequence[str]) -> None:  # fmt: skip
    """The helper's loop: build the encodings and import ``preload``, then answer each
    ``(function, args)`` with ``(True, function(*args))``, or ``(False, None)`` where it
    raised (the caller runs it again and gets the error). Its standard output is its
    standard error: the MCP proxy's standard output is the client's channel."""
    import importlib
    import os
    import sys

    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for name in names:
        count_tokens("", name)
    for module in preload:
        importlib.import_module(module)
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):  # the caller is gone
            return
        try:
            answer: tuple[bool, Any] = (True, fn(*args))
        except Exception:  # noqa: BLE001 - the caller's own run raises it
            answer = (False, None)
        try:
            conn.send(answer)
        except OSError:
            return


class _Helper:
    def __init__(self, names: Sequence[str], count: Count, preload: Sequence[str]) -> None:
        ctx = multiprocessing.get_context("spawn")  # no copy of the caller's threads
        self.count = count
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, tuple(names), count, tuple(preload)),
                                name="tersetalk-count", daemon=True)  # fmt: skip
        self.proc.start()
        child.close()
        self.lock = threading.Lock()
        self.sent = 0  # tickets given
        self.got = 0  # answers read
        self.answers: dict[int, tuple[bool, Any]] = {}
        self.broken = False

    def _break(self, why: str) -> None:
        if not self.broken:
            self.broken = True
            log.warning("the token-count helper process stopped (%s); counting in this "
                        "process from now on", why)  # fmt: skip

    def call(self, fn: Callable[..., Any], args: tuple) -> Callable[[], Any] | None:
        """``fn(*args)`` in the helper, asked now and read by calling the result; None
        where the helper is no longer there."""
        with self.lock:
            if self.broken:
                return None
            try:
                data = pickle.dumps((fn, args))
            except (pickle.PicklingError, AttributeError, TypeError):
                return None  # (a local function, say): the caller runs it
            try:
                self.conn.send_bytes(data)
            except (OSError, ValueError) as exc:  # a closed pipe
                self._break(str(exc) or type(exc).__name__)
                return None
            ticket = self.sent
            self.sent += 1

        def result() -> Any:
            with self.lock:
                while ticket not in self.answers and not self.broken:
                    try:
                        self.answers[self.got] = self.conn.recv()
                    except (EOFError, OSError) as exc:
                        self._break(f"exit status {self.proc.exitcode}"
                                    if isinstance(exc, EOFError) else str(exc))  # fmt: skip
                        break
                    self.got += 1
                ok, answer = self.answers.pop(ticket, (False, None))
            return answer if ok else fn(*args)

        return result

    def close(self) -> None:
        self.broken = True
        try:
            self.conn.close()
        finally:
            self.proc.join(timeout=1.0)
            if self.proc.is_alive():
                self.proc.terminate()
                self.proc.join(timeout=1.0)


def start(names: Sequence[str], count: Count, preload: Sequence[str] = ()) -> bool:
    """Start the helper process (once per process), its encodings ``names`` built and
    the modules ``preload`` imported before its first answer; whether one is running.
    ``count``: the counting function (a module-level one, which the helper imports by
    name). A helper that cannot start is logged and the counts stay in this process."""
    global _HELPER
    with _LOCK:
        if _HELPER is not None and not _HELPER.broken:
            return True
        try:
            _HELPER = _Helper(names, count, preload)
        except Exception as exc:  # noqa: BLE001 - counting goes on here, as it did
            log.warning("cannot start the token-count helper process (%s); counting in "
                        "this process", exc)  # fmt: skip
            _HELPER = None
            return False
        return True


def stop() -> None:
    """Stop the helper process, if one runs (its counts owed are made here)."""
    global _HELPER
    with _LOCK:
        helper, _HELPER = _HELPER, None
    if helper is not None:
        helper.close()


def submit(text: str, name: str) -> Callable[[], int] | None:
    """``text``'s count from the helper, read by calling the result; None when no helper
    runs or inside :func:`here` (the caller counts it itself)."""
    helper = _HELPER
    if helper is None or helper.broken or getattr(_HERE, "on", False):
        return None
    return helper.call(helper.count, (text, name))


def call(fn: Callable[..., Any], *args: Any) -> Callable[[], Any] | None:
    """``fn(*args)`` run by the helper (``fn`` a module-level function, ``args`` small),
    read by calling the result; None when no helper runs or inside :func:`here`. Where
    the helper cannot answer (``fn`` raised there, or it died), the result runs ``fn``
    here."""
    helper = _HELPER
    if helper is None or helper.broken or getattr(_HERE, "on", False):
        return None
    return helper.call(fn, args)
