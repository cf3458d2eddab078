"""A compressor double for unit tests of control flow ONLY.

It keeps a prefix of each piece's words in proportion to the target (and every
forced number or operator when asked), so routing and counters can be tested in
milliseconds without a model. Nothing it returns may ever become a reported number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tersetalk.core.tokens import count_tokens
from tersetalk.encoders.lingua import Compressed, LinguaSettings, force_pattern


class ScriptedCompressor:
    """Deterministic word-prefix "compression"; records every call in ``calls``."""

    def __init__(self, *, ratio: float = 1.0, mismatch: bool = False) -> None:
        #: multiplies the target: <1 overshoots the compression, >1 falls short of it
        self.ratio = ratio
        #: pretend the prepared folder does not match the embedded model
        self.mismatch = mismatch
        self.calls: list[dict[str, Any]] = []

    def describe(self) -> dict[str, Any]:
        return {
            "compressor": "scripted",
            "note": "test double",
            "compressor_mismatch": self.mismatch,
        }

    def compress(
        self,
        context: Sequence[str],
        *,
        target_tokens: int,
        question: str = "",
        force: bool = False,
        options: LinguaSettings | None = None,
    ) -> Compressed:
        opts = options or LinguaSettings()
        pieces = [" ".join(c.split()) for c in context if c and c.strip()]
        self.calls.append(
            {"pieces": pieces, "target_tokens": target_tokens, "question": question, "force": force}
        )
        origin = count_tokens("\n".join(pieces))
        if not pieces or target_tokens >= origin:
            return Compressed(pieces, origin, origin, target_tokens, skipped=True)
        keep = min(1.0, max(0.0, self.ratio * target_tokens / origin))
        pattern = force_pattern(opts.force_tokens, opts.force_number_words) if force else None
        out = []
        for piece in pieces:
            words = piece.split()
            n = max(1, round(len(words) * keep))
            kept = words[:n] + ([w for w in words[n:] if pattern.search(w)] if pattern else [])
            out.append(" ".join(kept))
        got = count_tokens("\n".join(out))
        return Compressed(out, origin, got, target_tokens, attempts=1)
