"""Content-addressed on-disk cache of LLMLingua compressions.

Why: LLMLingua is not a model behind the call cache, so a rerun of the workflow (a
forced one, or a calibration grid that compresses the same briefs again) used to
recompute every compression, and load torch and the compressor to do it. A
compression is deterministic given what goes in, so it is kept like a model call
(:mod:`tersetalk.models.cache`): the key is the sha256 of everything that decides the
output, and each entry is one JSON file ``<cache_dir>/lingua/ab/abcdef....json``
written atomically (a temporary file renamed into place). An unreadable entry, or
one whose fields have the wrong types, is a warning and a miss, and is overwritten.

What the key holds (:func:`key_material`):

* the compressor model's fingerprint: the sha256 of every file of its folder (a hub
  id is resolved to its snapshot in the local Hugging Face cache), each memoised per
  (path, size, mtime_ns, inode) like the call cache's GGUF digests, so weights
  replaced in place miss; with whether it runs as LLMLingua-2, its device and torch
  threads;
* the code: the sha256 of the wrapper's source (``encoders/lingua.py``, which holds
  the target correction, the forcing and the short-prompt fix) and the versions of
  llmlingua, transformers, torch and tiktoken;
* the call: the context pieces as given, the target, the question, whether spans are
  forced, and every field of the variant's :class:`~tersetalk.encoders.lingua.LinguaSettings`.

A hit returns the stored :class:`~tersetalk.encoders.lingua.Compressed` as it was
computed (its ``seconds`` too, as the call cache keeps a call's timings), marked
``extra["cache_hit"] = True``; the counters carry that as ``t_lingua_cache_hit``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

from tersetalk.core.io import file_sha256 as plain_sha256
from tersetalk.core.io import write_text_atomic

log = logging.getLogger(__name__)

#: bumped when the key material or the entry layout changes, so old entries miss
LINGUA_CACHE_FORMAT = 1
#: the folder under the workflow's ``cache_dir`` (beside the call cache's ``calls``)
LINGUA_CACHE_DIR = "lingua"
#: where file digests of compressor folders are memoised, inside the lingua cache
FINGERPRINTS = "fingerprints"
_LIBRARIES = ("llmlingua", "transformers", "torch", "tiktoken")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def code_identity() -> dict[str, Any]:
    """The wrapper's source digest and the versions of the libraries it runs on."""
    wrapper = Path(__file__).with_name("lingua.py")
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"wrapper_sha256": plain_sha256(wrapper), **versions}


def _hub_snapshot(model: str) -> Path | None:
    """The local snapshot folder of a hub id, or None when it is not cached."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, no hub library: no fingerprint
        return None


def model_fingerprint(model: str, memo_dir: Path | None = None) -> str | None:
    """``sha256:<hex>`` of every file of the compressor's folder (relative name and
    content digest), or None when the folder cannot be found or read (no caching then).

    Each file's digest is memoised per (path, size, mtime_ns, inode), in this process
    and under ``memo_dir``: a file replaced or changed in place is hashed again.
    """
    from tersetalk.models.fingerprint import file_sha256

    folder = Path(model) if Path(model).is_dir() else _hub_snapshot(model)
    if folder is None:
        return None
    try:
        files = sorted(
            p
            for p in folder.rglob("*")
            if p.is_file() and not any(s.startswith(".") for s in p.relative_to(folder).parts)
        )
        listing = [[p.relative_to(folder).as_posix(), file_sha256(p, memo_dir)] for p in files]
    except OSError as exc:
        log.warning("LLMLingua cache: cannot fingerprint %s (%s); not caching", folder, exc)
        return None
    return "sha256:" + _sha256(canonical_json(listing)) if listing else None


def key_material(
    compressor: dict[str, Any],
    context: list[str],
    *,
    target_tokens: int,
    question: str,
    force: bool,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Everything that decides a compression's output (see the module docstring)."""
    return {
        "format": LINGUA_CACHE_FORMAT,
        "compressor": compressor,
        "context": list(context),
        "target_tokens": int(target_tokens),
        "question": question,
        "force": bool(force),
        "options": options,
    }


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_seconds(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v >= 0


#: the type every stored field of a compression must have
_CHECKS: dict[str, tuple[str, Any]] = {
    "pieces": ("a list of strings", _is_strings),
    "origin_tokens": ("an integer", _is_int),
    "compressed_tokens": ("an integer", _is_int),
    "target_tokens": ("an integer", _is_int),
    "seconds": ("seconds", _is_seconds),
    "attempts": ("an integer", _is_int),
    "forced_tokens": ("an integer", _is_int),
    "reachable": ("true or false", lambda v: isinstance(v, bool)),
    "skipped": ("true or false", lambda v: isinstance(v, bool)),
    "fallbacks": ("an integer", _is_int),
    "extra": ("an object", lambda v: isinstance(v, dict)),
}


class CompressionCache:
    """One folder of entries; ``hits`` and ``misses`` count lookups since construction.

    Safe between threads and processes on one folder: an entry is only ever replaced
    whole, by one rename, and two writers of one key write the same compression.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def key(self, material: dict[str, Any]) -> str:
        return _sha256(canonical_json(material))

    def path_for(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored fields of a compression, or None (absent, or corrupt: warned)."""
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return self._count(None)
        except OSError as exc:
            warnings.warn(f"LLMLingua cache: cannot read {path} ({exc}); a miss", stacklevel=2)
            return self._count(None)
        try:
            entry = json.loads(raw.decode("utf-8"))
            if entry.get("key") != key:
                raise ValueError("entry belongs to another key")
            result = entry["result"]
            if not isinstance(result, dict) or set(result) != set(_CHECKS):
                raise ValueError(f"fields {sorted(result) if isinstance(result, dict) else result}")
            for name, (want, ok) in _CHECKS.items():
                if not ok(result[name]):
                    raise TypeError(f"field {name!r} must be {want}, got {result[name]!r:.80}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(
                f"LLMLingua cache: corrupt entry {path} ({exc}); a miss, and overwritten",
                stacklevel=2,
            )
            return self._count(None)
        return self._count(result)

    def _count(self, result: dict[str, Any] | None) -> dict[str, Any] | None:
        with self._lock:
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
        return result

    def put(self, key: str, material: dict[str, Any], result: dict[str, Any]) -> None:
        """Store a compression; a failure is a warning (the result is still used)."""
        path = self.path_for(key)
        entry = {"key": key, "request": material, "result": result}
        try:
            write_text_atomic(json.dumps(entry, ensure_ascii=False, indent=1), path)
        except Exception as exc:  # noqa: BLE001 - the compression matters more than the entry
            warnings.warn(
                f"LLMLingua cache: could not write {path} ({type(exc).__name__}: {exc}); "
                "the compression is used but not cached",
                stacklevel=2,
            )
