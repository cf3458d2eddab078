"""L0 dedup: a byte-identical repeat of an earlier payload becomes a reference hint.

A per-session LRU of content hashes (SHA-256 of the exact bytes). A hit refreshes the
entry and returns ``> [ref: <hash8>, byte-identical]``; a miss records the payload.
An evicted or invalidated entry is never referenced again, so a hint never points at
a payload that is no longer in the session (the design's "dangling reference" anti-pattern).
"""

from __future__ import annotations

from collections import OrderedDict

from tersetalk.formats.hints import reference_to


class DedupCache:
    """The session's cache of payload hashes, least recently used evicted first."""

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError("dedup capacity must be at least 1 entry")
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def check(self, text: str) -> str | None:
        """The reference hint if ``text`` repeats a payload still cached, else None (recorded)."""
        import hashlib

        key = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if key in self._seen:
            self._seen.move_to_end(key)
            self.hits += 1
            return reference_to(key[:8])  # content_hash(text): the same prefix, hashed once
        self.misses += 1
        self._seen[key] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return None

    def invalidate(self) -> None:
        """A compaction boundary: the earlier payloads may be gone from the context."""
        self._seen.clear()

    def __len__(self) -> int:
        return len(self._seen)
