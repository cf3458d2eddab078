"""L0 dedup: hits, LRU eviction, invalidation, the hint's form."""

from __future__ import annotations

import re

import pytest

from tersetalk.formats.dedup import DedupCache
from tersetalk.formats.hints import content_hash


def test_hit_miss_and_hint():
    c = DedupCache(2)
    assert c.check("a") is None and c.check("b") is None
    hint = c.check("a")
    assert hint == f"> [ref: {content_hash('a')}, byte-identical]"
    assert re.fullmatch(r"> \[ref: [0-9a-f]{8}, byte-identical\]", hint)
    assert (c.hits, c.misses) == (1, 2)
    assert c.check("a ") is None  # not byte-identical


def test_lru_eviction_never_dangles():
    c = DedupCache(2)
    c.check("a"), c.check("b"), c.check("a")  # a is now the most recent
    c.check("c")  # evicts b
    assert c.check("b") is None  # b was evicted: no reference to it
    assert c.check("a") is None  # and inserting b evicted a (capacity 2: c, b)
    assert len(c) == 2


def test_invalidate_and_bad_capacity():
    c = DedupCache()
    c.check("x")
    c.invalidate()
    assert c.check("x") is None
    with pytest.raises(ValueError, match="capacity"):
        DedupCache(0)
