"""Incremental boundary detection for MB-2: newline framing and sentence splitting.

Both take bytes as they arrive and return the units completed so far, and both
give the same units for any chunking of the same bytes (tests check this with
Hypothesis; MB-2 asserts it for every chunk size it times).

:class:`NewlineFramer` is the whole of TerseTalk-JSONL's framing: a line ends at
``\\n``, which can never occur inside a UTF-8 multibyte sequence or inside a JSON
string, so bytes need no decoding to be framed.

:class:`SentenceSplitter` is the best reasonable regex sentence splitter for
prose: a boundary is sentence-final punctuation (``. ! ? …``, optionally closed
by quotes or brackets), whitespace, then a capital, digit or opening quote --
except after a known abbreviation ("Dr.", "U.S.", "e.g.") or a single initial
("J. K. Rowling"). Decimals ("3.5") have no space after the period, so they
never split. Prose must be decoded first (incrementally: a character may be cut
across chunks), and a boundary at the end of the buffer is only known once the
next character arrives, so the tail is rescanned when it does.
"""

from __future__ import annotations

import codecs
import re

import orjson

from tersetalk.protocol.fast import assemble_trusted

_loads = orjson.loads

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof st mt ft jr sr rev gen col capt lt sgt gov sen rep pres vs etc
    e.g i.e cf al approx fig figs no nos vol vols ed eds p pp ch sec eq dept est inc ltd
    co corp bros jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat
    sun a.m p.m u.s u.k u.n d.c u.s.a ph.d b.a m.a b.sc m.sc""".split()
)
_CLOSERS = "\"')]”’»"
_OPENERS = "\"'([“‘«"
_CANDIDATE_RE = re.compile(
    rf"[.!?…]+[{re.escape(_CLOSERS)}]*(\s+)(?=[{re.escape(_OPENERS)}]?[A-Z0-9])"
)
#: What may end the buffer inside a boundary that is not yet confirmed: punctuation,
#: closers, and an opener that may precede the next sentence's capital (plus spaces).
_TRAIL = frozenset(".!?…" + _CLOSERS + _OPENERS)


def _is_abbreviation(text: str, lo: int, end: int) -> bool:
    """Is the word ending at ``end`` (just before the punctuation) an abbreviation?"""
    i = end
    while i > lo and not text[i - 1].isspace():
        i -= 1
    word = text[i:end].lstrip(_OPENERS)
    if len(word) == 1 and word.isupper():
        return True  # an initial: "J. K. Rowling"
    return word.lower() in ABBREVIATIONS


class SentenceSplitter:
    """Feed UTF-8 bytes of prose; get back the sentences completed so far."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._scan = 0  # no boundary left to confirm before this index of the buffer

    def feed(self, data: bytes) -> list[str]:
        text = self._decoder.decode(data)
        return self._push(text) if text else []

    def close(self) -> list[str]:
        """End of stream: the unfinished last sentence, if any."""
        out = self._push(self._decoder.decode(b"", final=True))
        rest = self._buf.strip()
        self._buf, self._scan = "", 0
        if rest:
            out.append(rest)
        return out

    def _push(self, text: str) -> list[str]:
        old_len = len(self._buf)
        buf = self._buf + text
        out: list[str] = []
        start = 0
        for m in _CANDIDATE_RE.finditer(buf, self._scan):
            if _is_abbreviation(buf, start, m.start()):
                continue
            out.append(buf[start : m.start(1)])
            start = m.end(1)
        # the trailing run of punctuation, quotes, brackets and spaces may still hold a
        # boundary that the next character confirms: rescan it on the next feed
        i = len(buf)
        while i > old_len and (buf[i - 1] in _TRAIL or buf[i - 1].isspace()):
            i -= 1
        scan = self._scan if i == old_len else i
        self._buf = buf[start:]
        self._scan = max(0, scan - start)
        return out


def split_sentences(text: str) -> list[str]:
    """Sentences of a whole text (the same as feeding it in one chunk)."""
    s = SentenceSplitter()
    return s.feed(text.encode("utf-8")) + s.close()


class NewlineFramer:
    """Feed bytes; get back the complete ``\\n``-terminated lines (without the newline).

    Only the new bytes are searched, only the unterminated tail is buffered, and a
    chunk that arrives with nothing buffered is split without being copied first.
    """

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        cut = data.rfind(b"\n")
        if cut < 0:
            self._buf += data
            return []
        if self._buf:
            self._buf += data[:cut]
            lines = bytes(self._buf).split(b"\n")
            self._buf.clear()
        else:
            lines = data[:cut].split(b"\n")
        self._buf += data[cut + 1 :]
        return lines

    def close(self) -> list[bytes]:
        """End of stream: an unterminated last line, if any."""
        rest = bytes(self._buf)
        self._buf.clear()
        return [rest] if rest else []


class NewlineJSONFramer(NewlineFramer):
    """Newline framing plus one ``orjson.loads`` per non-blank line, nothing checked.

    The limit for a stream parser of TerseTalk-JSONL on this machine: what any
    reader must at least do (find the lines, decode their JSON).
    """

    def feed(self, data: bytes) -> list:
        return list(map(_loads, filter(None, super().feed(data))))

    def close(self) -> list:
        return list(map(_loads, filter(None, super().close())))


class NewlineModelsFramer(NewlineFramer):
    """Newline framing, orjson per line, then line models assembled with no check.

    The floor of any stream reader that returns models: the limit plus assembly
    (:func:`~tersetalk.protocol.fast.assemble_trusted`), for canonical input only.
    """

    def feed(self, data: bytes) -> list:
        return assemble_trusted(map(_loads, filter(None, super().feed(data))))

    def close(self) -> list:
        return assemble_trusted(map(_loads, filter(None, super().close())))
