"""Incremental reading: act on the first line before the message has ended.

Bytes are buffered until a ``\\n`` arrives and only complete lines are decoded,
so a UTF-8 character split across chunks is never seen half-way (``\\n`` can never
occur inside a multibyte sequence). Complete lines go through the same code as the
whole-message parsers, which is why the reader yields the same lines for any
chunking of the same bytes.

The work per byte is the same at every chunk size: each chunk is searched for its
last newline once (bytes already buffered are never scanned again), only the
unterminated tail is kept, and the complete lines of a chunk are parsed once, as one
block -- in a single orjson call when they are all canonical (:mod:`.fast`), else
line by line. A chunk that ends no line costs one search and one append; a chunk
that arrives with nothing buffered is parsed without being copied first.

Building a Pydantic model costs more per line than orjson's decoding of it (MB-2's
``newline_framer_models`` floor), so ``StreamReader(strict=True, arrays=True)``
returns the checked arrays instead and runs at about the speed of a bare newline
splitter with ``orjson.loads`` per line.
"""

from __future__ import annotations

import tersetalk.protocol.fast as _fast  # not "from . import": that names the package

from .codec import decode_strict, parse_line_strict
from .errors import InputTypeError, StreamClosedError
from .lines import LineBase, line_from_array
from .repair import LenientMachine, ParseResult


class StreamReader:
    """Feed bytes as they arrive; get back the lines completed so far.

    ``strict=False`` (default) applies the lenient repairs of :func:`parse_lenient`;
    ``strict=True`` behaves like :func:`parse_strict` and raises the same error for
    the first bad line as soon as that line is complete.

    ``arrays=True`` returns each line as its canonical array (``line.to_array()``)
    instead of a model, as :func:`validate_strict` does for a whole message: the same
    lines, accepted and refused alike, for consumers that only read payloads. Strict
    canonical blocks are then checked without building any model, which is what makes
    it several times faster (MB-2).
    """

    def __init__(
        self, *, strict: bool = False, arrays: bool = False, default_addressee: str | None = None
    ) -> None:
        self.strict = strict
        self.arrays = arrays
        self._machine = None if strict else LenientMachine(default_addressee=default_addressee)
        #: the fast path for a strict block of complete lines (None: not decided there)
        self._fast_block = (_fast.check_block if arrays else _fast.parse_block) if strict else None
        self._buffer = bytearray()
        self._line_no = 0
        self._closed = False
        self._lines: list = []

    def feed(self, data: bytes | bytearray | memoryview | str) -> list:
        """Add bytes (``str`` is encoded as UTF-8); return newly completed lines."""
        if self._closed:
            raise StreamClosedError("feed() after close()", fix="start a new StreamReader")
        if data.__class__ is not bytes:
            data = self._as_bytes(data)
        cut = data.rfind(b"\n")  # only the new bytes are searched
        buffer = self._buffer
        if cut < 0:
            buffer += data
            return []
        if buffer:
            buffer += data[:cut]
            block = bytes(buffer)
            buffer.clear()
        else:
            block = data[:cut]
        if cut + 1 < len(data):
            buffer += data[cut + 1 :]
        if self._fast_block is not None:
            lines = self._fast_block(block)
            if lines is not None:
                self._line_no += len(lines)
                self._lines += lines
                return lines
        return self._block(block)

    @staticmethod
    def _as_bytes(data: object) -> bytes:
        if isinstance(data, str):
            return data.encode("utf-8", "surrogatepass")
        if isinstance(data, bytes | bytearray | memoryview):
            return bytes(data)
        raise InputTypeError("feed() takes bytes", snippet=type(data).__name__)

    def close(self) -> list:
        """End of message: the unterminated last line and anything held back."""
        if self._closed:
            return []
        self._closed = True
        out: list = []
        if self._buffer:
            raw = bytes(self._buffer)
            self._buffer.clear()
            out += self._line(raw)
        if self._machine is not None:
            out += self._emit(self._machine.finish())
        return out

    def _emit(self, lines: list[LineBase]) -> list:
        """Models from the slower paths as this reader returns them, kept as they come (so
        the lines before a bad one are kept when it raises)."""
        if self.arrays:
            lines = [line.to_array() for line in lines]
        self._lines += lines
        return lines

    def _block(self, block: bytes) -> list:
        """Complete lines (joined by ``\\n``, without the last one's newline).

        Strict blocks that are all canonical never get here (:meth:`feed` parses them).
        """
        if self._machine is not None:
            return self._emit(self._machine.push_block(block))
        out: list = []
        for raw in block.split(b"\n"):
            out += self._line(raw)
        return out

    def _line(self, raw: bytes) -> list:
        self._line_no += 1
        if self._machine is not None:
            return self._emit(self._machine.push_bytes(raw))
        line = parse_line_strict(decode_strict(raw, self._line_no), self._line_no)
        return [] if line is None else self._emit([line])

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending_bytes(self) -> int:
        """Bytes received but not yet part of a complete line."""
        return len(self._buffer)

    def result(self) -> ParseResult:
        """Lines so far with the lenient repair counts (strict mode: no repairs)."""
        if self._machine is not None:
            return self._machine.result()
        lines = [line_from_array(a) for a in self._lines] if self.arrays else list(self._lines)
        return ParseResult(lines=lines, canonical_lines=len(lines))
