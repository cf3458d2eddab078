"""Token counts of long texts in a helper process, beside the caller's Python work.

tiktoken holds the interpreter's lock for nearly all of its work: measured here, two
threads counting two 100 KB texts take about as long as one thread counting both,
and a count on a thread beside Python work adds its whole time to that work. The MCP
proxy counts every long result (the text it was sent, each table it weighs), about a
fifth of its time per result, while a second core sits idle: a helper process counts
there instead. It is a plain loop over a pipe: the caller sends ``(encoding, text)``,
the helper answers the count, in the order asked.

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
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

#: a counting function: (text, encoding name) -> tokens
Count = Callable[[str, str], int]
_LOCK = threading.Lock()
_HELPER: _Helper | None = None


def _serve(conn: Any, names: Sequence[str], count_tokens: Count) -> None:
    """The helper's loop: build the encodings, then answer each ``(name, text)`` with its
    count (None where counting raised: the caller counts again and gets the error)."""
    for name in names:
        count_tokens("", name)
    while True:
        try:
            name, text = conn.recv()
        except (EOFError, OSError):  # the caller is gone
            return
        try:
            n: int | None = count_tokens(text, name)
        except Exception:  # noqa: BLE001 - the caller's own count raises it
            n = None
        try:
            conn.send(n)
        except OSError:
            return


class _Helper:
    def __init__(self, names: Sequence[str], count: Count) -> None:
        ctx = multiprocessing.get_context("spawn")  # no copy of the caller's threads
        self.count = count
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, tuple(names), count),
                                name="tersetalk-count", daemon=True)  # fmt: skip
        self.proc.start()
        child.close()
        self.lock = threading.Lock()
        self.sent = 0  # tickets given
        self.got = 0  # answers read
        self.answers: dict[int, int | None] = {}
        self.broken = False

    def _break(self, why: str) -> None:
        if not self.broken:
            self.broken = True
            log.warning("the token-count helper process stopped (%s); counting in this "
                        "process from now on", why)  # fmt: skip

    def submit(self, text: str, name: str) -> Callable[[], int] | None:
        """The count of ``text``, asked now and read by calling the result; None where
        the helper is no longer there."""
        with self.lock:
            if self.broken:
                return None
            try:
                self.conn.send((name, text))
            except (OSError, ValueError) as exc:
                self._break(str(exc) or type(exc).__name__)
                return None
            ticket = self.sent
            self.sent += 1

        def result() -> int:
            with self.lock:
                while ticket not in self.answers and not self.broken:
                    try:
                        self.answers[self.got] = self.conn.recv()
                    except (EOFError, OSError) as exc:
                        self._break(f"exit status {self.proc.exitcode}"
                                    if isinstance(exc, EOFError) else str(exc))  # fmt: skip
                        break
                    self.got += 1
                answer = self.answers.pop(ticket, None)
            return self.count(text, name) if answer is None else answer

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


def start(names: Sequence[str], count: Count) -> bool:
    """Start the helper process (once per process), its encodings ``names`` built before
    its first answer; whether one is running. ``count``: the counting function (a
    module-level one, which the helper imports by name), also used here for what the
    helper cannot answer. A helper that cannot start is logged and the counts stay in
    this process."""
    global _HELPER
    with _LOCK:
        if _HELPER is not None and not _HELPER.broken:
            return True
        try:
            _HELPER = _Helper(names, count)
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
    runs (the caller counts it itself)."""
    helper = _HELPER
    if helper is None or helper.broken:
        return None
    return helper.submit(text, name)
