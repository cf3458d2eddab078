"""Typed errors of the TerseTalk-JSONL protocol.

Every error says what was wrong, where (the 1-based physical line number when the
error concerns a message line) and, where it helps, how to fix it. Callers catch
:class:`ProtocolError` to turn a bad message into an error row instead of a crash.
"""

from __future__ import annotations

_SNIPPET_CHARS = 80


def _snippet(text: str | None) -> str | None:
    if text is None:
        return None
    text = text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 1] + "…"
    return text


class ProtocolError(Exception):
    """Base class: something about a TerseTalk message or protocol object is wrong.

    ``line_no`` is the 1-based physical line (split on ``\\n``) or ``None`` when the
    problem is not tied to a line; ``problem`` is the human-readable cause; ``snippet``
    is a shortened copy of the offending text; ``fix`` is an optional hint.
    """

    def __init__(
        self,
        problem: str,
        *,
        line_no: int | None = None,
        snippet: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.line_no = line_no
        self.snippet = _snippet(snippet)
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"line {self.line_no}: " if self.line_no is not None else ""
        what = f" (got {self.snippet!r})" if self.snippet is not None else ""
        fix = f". Fix: {self.fix}" if self.fix else ""
        return f"{where}{self.problem}{what}{fix}"

    def __reduce__(self):  # keyword-only init: keep the errors picklable across processes
        return (
            _rebuild,
            (type(self), self.problem, self.line_no, self.snippet, self.fix),
        )


def _rebuild(cls, problem, line_no, snippet, fix):
    return cls(problem, line_no=line_no, snippet=snippet, fix=fix)


class EncodingError(ProtocolError):
    """The bytes of a line are not valid UTF-8."""


class InvalidJSONError(ProtocolError):
    """A non-blank line is not one JSON value."""


class LineShapeError(ProtocolError):
    """The line is JSON but not an array whose first item is a tag string."""


class UnknownTagError(ProtocolError):
    """The tag is not one of r g f u p q d v o t x."""


class PayloadError(ProtocolError):
    """Wrong number of payload items, or an item of the wrong type or value."""


class NormalizationError(ProtocolError):
    """Lenient normalisation found no line shape that fits the object."""


class UnknownRefError(ProtocolError):
    """A memory reference is not (or no longer) in the store."""


class CapConfigError(ProtocolError, ValueError):
    """A soft-cap configuration is invalid (unknown tag or negative cap)."""


class SummarizerError(ProtocolError):
    """A summarizer is unknown, unregistered, or returned something unusable."""


class StreamClosedError(ProtocolError):
    """Bytes were fed to a stream reader after ``close()``."""


class InputTypeError(ProtocolError, TypeError):
    """A function got an input of a type it cannot read."""
