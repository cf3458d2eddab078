"""A memo of a pure computation's values in one JSON file, read at the start of a job
and written back at its end.

Why: a rerun repeats computations whose inputs have not changed (a run's tiktoken
counts, its judge's sentence similarities); with their values read back it never loads
what computes them. The file records the identity of what computed its values (package
versions); a file made under another identity, a damaged file and a value that fails
the caller's check are ignored, so a memo can only save work, never change a number.
One file per run spec (the runner's choice): two jobs never write the same file.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT = 1


def memo_key(*parts: str) -> str:
    """A short stable key for ``parts`` (texts joined with a separator no text decides)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


class JsonMemo:
    """Values by key, from ``path`` when it was written under the same ``identity``."""

    def __init__(self, path: str | Path, identity: dict[str, Any],
                 valid: Callable[[Any], bool]) -> None:  # fmt: skip
        self.path = Path(path)
        self.identity = identity
        self.values: dict[str, Any] = {}
        self.added = 0
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") == FORMAT and data.get("identity") == identity:
                values = data.get("values")
                if isinstance(values, dict):
                    # anything else (a damaged entry) is computed again
                    self.values = {k: v for k, v in values.items() if valid(v)}
        except (OSError, ValueError, AttributeError):
            pass  # absent or damaged: computed afresh and rewritten

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def put(self, key: str, value: Any) -> None:
        self.values[key] = value
        self.added += 1

    def save(self) -> None:
        """Write the values back (atomically) if any was added; a failure only costs
        the next job the computations, so it is logged, not raised."""
        if not self.added:
            return
        from tersetalk.core.io import write_text_atomic

        body = {"format": FORMAT, "identity": self.identity, "values": self.values}
        try:
            write_text_atomic(json.dumps(body, sort_keys=True), self.path)
        except OSError as exc:
            log.warning("memo: could not write %s: %s", self.path, exc)


def versions(*packages: str) -> dict[str, str | None]:
    """The installed versions of ``packages``, read without importing them."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
