"""Content-addressed on-disk cache of model calls.

Why: an interrupted run must resume without paying for the calls it already made,
and a rerun of the workflow with the same config must give identical answers.
The key is the sha256 of everything that determines the answer: what the model is
(its fingerprint, :mod:`.fingerprint`: the GGUF file's sha256, Ollama's digest, what
an OpenAI-compatible server reports about the weights; the model's name and address
only when nothing identifies it), the messages, the generation parameters, the
schema and the kind of call. So the same weights hit under another name or at another
address, and other weights under an old name miss. Each entry
is one JSON file ``cache_dir/ab/abcdef....json`` written atomically (temp file +
``os.replace``), so a crash never leaves a half-written entry; an unreadable entry
is a miss (with a warning) and is overwritten. So is an entry whose fields have the
wrong types (``text: null``, ``prompt_tokens: "abc"``): every field is type-checked
on read, so a hand-edited or foreign entry never reaches a record.

The answer of a call is never lost to the cache: a lone surrogate in a reply is
replaced by U+FFFD (counted in ``extra["surrogates_replaced"]``) before the answer is
both stored and returned, and any other failure to write an entry is a warning, with
the answer still returned.

A success entry is ``{"key", "request", "result"}``. A structured call whose answer
failed (:class:`StructuredOutputError`: schema-invalid after every retry, or cut off
at ``max_tokens``) is stored too, as ``{"key", "request", "error": {"type",
"message", "attempts"}}``: at temperature 0 with a seed it would fail the same way
again, and a forced rerun must make no model call. A lookup that finds one re-raises
the error with ``cache_hit=True``. Every other failure (transport, timeout, server,
anything unexpected) is never stored, so a rerun tries again. Adding failure entries
left the key and the success layout unchanged, so ``CACHE_FORMAT`` stayed 1 and old
entries still load.

Fingerprints changed the ``client`` part of the key and nothing else, so
``CACHE_FORMAT`` stays 1 again and old entries need no bump to be told apart: an entry
written before, of an in-process GGUF (keyed on the file's name and size), a scripted
double (its name) or a server that now reports a fingerprint (its URL), has another
key and is simply never found (it stays on disk, unused: delete the folder to reclaim
the space); its calls are made again once. An entry of a server that reports nothing
identifying the weights keeps its key (the weak fingerprint is the old identity) and
still hits. The fingerprint is worked out at the first lookup, not when the client is
built, so building one contacts no server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import pydantic

from tersetalk.core.io import write_atomic

from ._common import replace_lone_surrogates
from .base import (
    CallResult,
    GenerationConfig,
    ModelClient,
    ModelError,
    StructuredOutputError,
    check_messages,
)
from .fingerprint import (
    FINGERPRINT_DIR,
    Fingerprint,
    address_identity,
    model_fingerprint,
)

__all__ = ["CACHE_FORMAT", "CachedClient", "address_identity", "cache_identity"]

log = logging.getLogger(__name__)


#: Bumped when the key material or the entry layout changes, so old entries miss.
CACHE_FORMAT = 1


def canonical_json(obj: Any) -> str:
    """Stable JSON text: sorted keys, no whitespace, UTF-8 kept (used for hashing)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_identity(client: ModelClient) -> dict[str, Any]:
    """The ``client`` part of the cache key of ``client``'s calls: its model's
    fingerprint identity (:attr:`.fingerprint.Fingerprint.identity`), which is the
    model's name and address (:func:`.fingerprint.address_identity`) only when nothing
    identifies the model itself."""
    return model_fingerprint(client).identity


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


#: the type every stored CallResult field must have (None where the field may be unknown)
_RESULT_CHECKS: dict[str, tuple[str, Any]] = {
    "text": ("a string", lambda v: isinstance(v, str)),
    "parsed": ("an object or null", lambda v: v is None or isinstance(v, dict)),
    "prompt_tokens": ("an integer", _is_int),
    "completion_tokens": ("an integer", _is_int),
    "ttft_s": ("seconds or null", lambda v: v is None or _is_seconds(v)),
    "itl_s": ("seconds or null", lambda v: v is None or _is_seconds(v)),
    "total_s": ("seconds", _is_seconds),
    "attempts": ("an integer", _is_int),
    "cache_hit": ("true or false", lambda v: isinstance(v, bool)),
    "backend": ("a string", lambda v: isinstance(v, str)),
    "model": ("a string", lambda v: isinstance(v, str)),
    "extra": ("an object", lambda v: isinstance(v, dict)),
}


def _result_from_entry(result: Any) -> CallResult:
    """The stored :class:`CallResult` of a success entry, its field types checked.

    Why check: ``CallResult.from_dict`` only checks that fields are present, and a
    wrong type (``text: null``, ``prompt_tokens: "abc"``) would otherwise fail later,
    in every rerun, as an error row or a traceback far from the cache. Raises
    ``TypeError`` naming the field, which the caller treats as corrupt (a miss).
    """
    if not isinstance(result, dict):
        raise TypeError(f"'result' must be an object, got {type(result).__name__}")
    for name, (want, ok) in _RESULT_CHECKS.items():
        if name in result and not ok(result[name]):
            raise TypeError(f"field {name!r} must be {want}, got {result[name]!r:.80}")
    return CallResult.from_dict(result)


def _error_from_entry(error: Any) -> StructuredOutputError:
    """The stored failure of a failure entry, replayed as a cache hit.

    Raises ``ValueError``/``TypeError``/``KeyError`` on a malformed entry, which the
    caller treats as corrupt (a miss).
    """
    if error.get("type") != StructuredOutputError.__name__:
        raise ValueError(f"unknown stored error type {error.get('type')!r}")
    message, attempts = error["message"], error["attempts"]
    if not isinstance(message, str) or not isinstance(attempts, int) or attempts < 0:
        raise TypeError("stored error needs a string message and an int attempts")
    return StructuredOutputError(message, attempts=attempts, cache_hit=True)


def _without_lone_surrogates(result: CallResult) -> CallResult:
    """``result`` with lone surrogates in ``text`` and ``parsed`` replaced by U+FFFD.

    The backends already do this for what they receive; doing it here too covers any
    other client, so whatever the cache returns is what it can store.
    """
    text, n_text = replace_lone_surrogates(result.text)
    parsed, n_parsed = replace_lone_surrogates(result.parsed)
    if not n_text + n_parsed:
        return result
    extra = dict(result.extra)
    extra["surrogates_replaced"] = int(extra.get("surrogates_replaced", 0)) + n_text + n_parsed
    log.warning(
        "%s/%s: %d lone surrogate(s) in the reply replaced by U+FFFD",
        result.backend,
        result.model,
        n_text + n_parsed,
    )
    return dataclasses.replace(result, text=text, parsed=parsed, extra=extra)


class CachedClient(ModelClient):
    """Wraps any :class:`ModelClient` with the on-disk call cache.

    ``hits`` and ``misses`` count lookups since construction. A hit returns the stored
    :class:`CallResult` (original tokens and timings) with ``cache_hit=True``, or
    re-raises a stored :class:`StructuredOutputError` with ``cache_hit=True``.

    Safe to share between threads (a run with ``models.max_concurrency`` > 1) and
    between processes on one folder: an entry is only ever replaced whole, by one
    ``os.replace``; two callers that miss the same key both ask the model and both
    write, and whichever rename lands last leaves one complete entry (at temperature 0
    with a seed, the same answer). The counters are guarded by a lock.
    """

    def __init__(self, inner: ModelClient, cache_dir: Path | str) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.model = inner.model
        self.cache_dir = Path(cache_dir)
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelError(
                f"cannot create the model-call cache folder {self.cache_dir}: {exc}; "
                "point models.cache_dir at a writable folder"
            ) from exc
        self._fingerprint: Fingerprint | None = None
        self._fingerprint_lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._count_lock = threading.Lock()

    def fingerprint(self) -> Fingerprint:
        """The fingerprint of the model behind this cache, worked out at first use (a
        server is asked then, a GGUF hashed or its digest read from
        ``cache_dir/fingerprints/``) and kept: every key and row of this client's life
        uses the same one."""
        with self._fingerprint_lock:
            if self._fingerprint is None:
                self._fingerprint = model_fingerprint(
                    self.inner, memo_dir=self.cache_dir / FINGERPRINT_DIR
                )
            return self._fingerprint

    @property
    def _identity(self) -> dict[str, Any]:
        return self.fingerprint().identity

    def _count(self, hit: bool) -> None:
        with self._count_lock:  # += is not atomic across threads
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    # -- keys and files -------------------------------------------------------------

    def key_material(
        self,
        kind: str,
        messages: list[dict[str, Any]],
        gen: GenerationConfig,
        schema: type[pydantic.BaseModel] | None,
    ) -> dict[str, Any]:
        return {
            "format": CACHE_FORMAT,
            "kind": kind,
            "client": self._identity,
            "messages": messages,
            "gen": gen.as_dict(),
            "schema": None if schema is None else schema.model_json_schema(),
        }

    def key(self, material: dict[str, Any]) -> str:
        # surrogatepass: a prompt holding a lone surrogate still gets a key (text without
        # one encodes exactly as before, so existing keys are unchanged)
        return hashlib.sha256(canonical_json(material).encode("utf-8", "surrogatepass")).hexdigest()

    def path_for(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _load(self, key: str) -> CallResult | StructuredOutputError | None:
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            warnings.warn(
                f"model-call cache: cannot read {path} ({exc}); treating as a miss", stacklevel=3
            )
            return None
        try:
            entry = json.loads(raw.decode("utf-8"))  # not UTF-8: corrupt, like bad JSON
            if entry.get("key") != key:
                raise ValueError("entry belongs to another key")
            if "result" in entry:
                return _result_from_entry(entry["result"])
            return _error_from_entry(entry["error"])
        except (ValueError, KeyError, TypeError, AttributeError, ModelError) as exc:
            warnings.warn(
                f"model-call cache: corrupt entry {path} ({exc}); treating as a miss "
                "and overwriting it",
                stacklevel=3,
            )
            return None

    def _store(
        self, key: str, material: dict[str, Any], outcome: CallResult | StructuredOutputError
    ) -> None:
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {"key": key, "request": material}
        if isinstance(outcome, StructuredOutputError):
            entry["error"] = {
                "type": type(outcome).__name__,
                "message": str(outcome),
                "attempts": outcome.attempts,
            }
        else:
            entry["result"] = outcome.to_dict()
        data = json.dumps(entry, ensure_ascii=False, indent=1)

        def write(tmp: Path) -> None:  # flushed to disk before the rename: a crash
            with open(tmp, "w", encoding="utf-8") as fh:  # keeps a whole entry or none
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())

        write_atomic(path, write)

    def _cached(
        self,
        kind: str,
        messages: list[dict[str, Any]],
        gen: GenerationConfig,
        schema: type[pydantic.BaseModel] | None,
    ) -> CallResult:
        messages = check_messages(messages)
        material = self.key_material(kind, messages, gen, schema)
        key = self.key(material)
        hit = self._load(key)
        if hit is not None:
            self._count(True)
            if isinstance(hit, StructuredOutputError):
                raise hit
            hit.cache_hit = True
            return hit
        self._count(False)
        try:
            if kind == "chat":
                result = self.inner.chat(messages, gen)
            else:
                assert schema is not None
                result = self.inner.structured(messages, schema, gen)
        except StructuredOutputError as exc:
            # The answer itself failed: deterministic, so stored like an answer. Other
            # errors (transport, timeout, server) propagate unstored, to be retried.
            self._try_store(key, material, StructuredOutputError(str(exc), exc.attempts))
            raise
        result = _without_lone_surrogates(result)
        # Store a copy marked as a miss: cache_hit is a property of a lookup, not of the answer.
        self._try_store(
            key, material, CallResult.from_dict({**result.to_dict(), "cache_hit": False})
        )
        return result

    def _try_store(
        self, key: str, material: dict[str, Any], outcome: CallResult | StructuredOutputError
    ) -> None:
        """Store ``outcome``; a failure is a warning, never the loss of the answer.

        Any error counts, not only ``OSError``: the answer was paid for and received,
        and a cache that cannot keep it (a full disk, text it cannot encode) must not
        turn it into an error row. The call is then simply asked again on a rerun.
        """
        try:
            self._store(key, material, outcome)
        except Exception as exc:  # noqa: BLE001 - the answer matters more than the entry
            log.warning("model-call cache: could not write %s: %s", self.path_for(key), exc)
            warnings.warn(
                f"model-call cache: could not write {self.path_for(key)} "
                f"({type(exc).__name__}: {exc}); the answer is used but not cached",
                stacklevel=4,
            )

    # -- ModelClient ----------------------------------------------------------------

    def chat(self, messages: list[dict[str, Any]], gen: GenerationConfig) -> CallResult:
        return self._cached("chat", messages, gen, None)

    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: type[pydantic.BaseModel],
        gen: GenerationConfig,
    ) -> CallResult:
        return self._cached("structured", messages, gen, schema)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def describe(self) -> dict[str, Any]:
        d = {
            **self.inner.describe(),
            "cache_dir": str(self.cache_dir),
            "cache_hits": self.hits,
            "cache_misses": self.misses,
        }
        fp = self._fingerprint  # once worked out: describing contacts no server
        if fp is not None:
            d.update(model_fingerprint=fp.value, model_fingerprint_source=fp.source)
        return d

    def close(self) -> None:
        self.inner.close()
