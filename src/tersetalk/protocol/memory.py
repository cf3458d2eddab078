"""The overflow memory: full texts behind ``M#`` ids, bounded, resettable.

Ids are monotone per store (``M#1``, ``M#2``, ...) so a reference is never reused
within an example; ``reset()`` between examples clears entries *and* restarts the
ids, so two runs with the same seed write identical messages. The store is bounded
and evicts the oldest entry first (insertion order), which keeps a long run's
memory flat; a reference to an evicted entry then fails loudly or counts as missing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ProtocolError, UnknownRefError
from .lines import (
    ContextLine,
    DeltaLine,
    FactLine,
    LineBase,
    OverflowLine,
    QuestionLine,
    TextLine,
    line_from_array,
)
from .tags import REF_MENTION_RE, REF_RE
from .tokens import TokenCounter, approx_token_count

DEFAULT_MAX_ENTRIES = 10_000
DerefPolicy = Literal["always", "conditional", "never"]
DEREF_POLICIES: tuple[str, ...] = ("always", "conditional", "never")


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class MemoryEntry:
    """One stored text; ``line`` is the canonical array of the line it came from."""

    ref: str
    text: str
    tag: str | None = None
    line: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class MemoryStats:
    """Size and churn of a store (``puts`` counts every store since the last reset)."""

    entries: int
    bytes: int
    evictions: int
    puts: int
    max_entries: int

    def as_dict(self, prefix: str = "memory_") -> dict[str, int]:
        return {
            f"{prefix}entries": self.entries,
            f"{prefix}bytes": self.bytes,
            f"{prefix}evictions": self.evictions,
            f"{prefix}puts": self.puts,
        }


class Memory:
    """A bounded FIFO store of texts addressed by ``M#n``."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ProtocolError(
                "memory max_entries must be a positive integer",
                snippet=repr(max_entries),
                fix="set e.g. max_entries: 10000",
            )
        self.max_entries = max_entries
        self._entries: OrderedDict[str, MemoryEntry] = OrderedDict()
        self._next = 1
        self._bytes = 0
        self._evictions = 0
        self._puts = 0

    def put(self, text: str, *, tag: str | None = None, line: LineBase | None = None) -> str:
        """Store ``text``; return its new id. Evicts the oldest entry when full."""
        if not isinstance(text, str):
            raise ProtocolError("memory stores text", snippet=repr(text))
        ref = f"M#{self._next}"
        self._next += 1
        self._puts += 1
        array = tuple(line.to_array()) if line is not None else None
        self._entries[ref] = MemoryEntry(ref=ref, text=text, tag=tag, line=array)
        self._bytes += _nbytes(text)
        while len(self._entries) > self.max_entries:
            _, old = self._entries.popitem(last=False)
            self._bytes -= _nbytes(old.text)
            self._evictions += 1
        return ref

    def entry(self, ref: str) -> MemoryEntry:
        """The stored entry, or :class:`UnknownRefError` (never stored, or evicted)."""
        try:
            return self._entries[ref]
        except (KeyError, TypeError):
            evicted = (
                isinstance(ref, str) and REF_RE.match(ref) is not None and int(ref[2:]) < self._next
            )
            raise UnknownRefError(
                "memory reference was evicted" if evicted else "no such memory reference",
                snippet=repr(ref),
                fix="raise memory.max_entries" if evicted else None,
            ) from None

    def get(self, ref: str) -> str:
        """The full text behind ``ref``."""
        return self.entry(ref).text

    def __contains__(self, ref: object) -> bool:
        return ref in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def ids(self) -> list[str]:
        """Ids currently held, oldest first."""
        return list(self._entries)

    def reset(self) -> None:
        """Forget everything and restart ids at ``M#1`` (call between examples)."""
        self._entries.clear()
        self._next = 1
        self._bytes = 0
        self._evictions = 0
        self._puts = 0

    def stats(self) -> MemoryStats:
        return MemoryStats(
            entries=len(self._entries),
            bytes=self._bytes,
            evictions=self._evictions,
            puts=self._puts,
            max_entries=self.max_entries,
        )


@dataclass
class DerefResult:
    """What dereferencing re-injected.

    ``texts`` maps each dereferenced id to its full text (first-mention order);
    ``lines`` are the same as ``["x", "M#k", text]`` context lines ready to send;
    ``derefs`` counts distinct ids resolved, ``reinjected_tokens`` their tokens;
    ``missing`` lists requested ids the store does not hold (never stored or evicted).
    """

    policy: str
    texts: dict[str, str]
    lines: list[ContextLine]
    derefs: int
    reinjected_tokens: int
    missing: list[str]

    def counters(self, prefix: str = "deref_") -> dict[str, int]:
        return {
            f"{prefix}count": self.derefs,
            f"{prefix}tokens": self.reinjected_tokens,
            f"{prefix}missing": len(self.missing),
        }


def structural_refs(lines: Iterable[LineBase]) -> list[str]:
    """Ids a message points at: ``o`` and ``d`` lines and facts' sources."""
    out: list[str] = []
    for line in lines:
        if isinstance(line, OverflowLine | DeltaLine) or (isinstance(line, FactLine) and line.ref):
            out.append(line.ref)  # type: ignore[union-attr]
    return out


def requested_refs(lines: Iterable[LineBase]) -> list[str]:
    """Ids a receiver asks for: ``M#k`` mentioned in a ``q`` line, or a ``d`` line."""
    out: list[str] = []
    for line in lines:
        if isinstance(line, QuestionLine):
            out += [f"M#{m.group(1)}" for m in REF_MENTION_RE.finditer(line.text)]
        elif isinstance(line, DeltaLine):
            out.append(line.ref)
    return out


def dereference(
    lines: Iterable[LineBase],
    memory: Memory,
    policy: DerefPolicy = "conditional",
    *,
    requests: Iterable[LineBase] = (),
    count_tokens: TokenCounter = approx_token_count,
) -> DerefResult:
    """Resolve ``M#`` references of a message according to ``policy``.

    ``always``: every id the message points at (``o``/``d`` lines, fact sources)
    plus any requested. ``conditional``: only ids the receiver asked about in
    ``requests`` (a ``q`` line mentioning ``M#k``, or a ``d`` line); ``lines`` only
    matter to ``always``. ``never``: nothing. Missing ids are reported, not raised,
    because eviction is a legitimate outcome the records should count.
    """
    if policy not in DEREF_POLICIES:
        raise ProtocolError(
            f"unknown dereference policy; choose one of {', '.join(DEREF_POLICIES)}",
            snippet=repr(policy),
        )
    lines = list(lines)
    wanted: list[str] = []
    if policy == "always":
        wanted = structural_refs(lines) + requested_refs(lines) + requested_refs(requests)
    elif policy == "conditional":
        wanted = requested_refs(requests)
    texts: dict[str, str] = {}
    missing: list[str] = []
    for ref in dict.fromkeys(wanted):
        if ref in memory:
            texts[ref] = memory.get(ref)
        else:
            missing.append(ref)
    return DerefResult(
        policy=policy,
        texts=texts,
        lines=[ContextLine(key=ref, value=text) for ref, text in texts.items()],
        derefs=len(texts),
        reinjected_tokens=sum(count_tokens(t) for t in texts.values()),
        missing=missing,
    )


def expand_overflow(lines: Iterable[LineBase], memory: Memory) -> list[LineBase]:
    """Replace each ``o`` line by the line it stands for, as stored in ``memory``.

    The inverse of capping when nothing was evicted; raises :class:`UnknownRefError`
    for an id the store no longer holds.
    """
    out: list[LineBase] = []
    for line in lines:
        if isinstance(line, OverflowLine):
            entry = memory.entry(line.ref)
            if entry.line is not None:
                out.append(line_from_array(list(entry.line)))
            else:
                out.append(TextLine(text=entry.text))
        else:
            out.append(line)
    return out
