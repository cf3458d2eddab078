"""Three places where LLMLingua can help TerseTalk, each a toggle that is off by default.

1. ``payloads``: a ``f``/``p``/``q`` payload over its cap is first offered to
   LLMLingua (the protocol's ``compress`` hook); its output replaces the payload
   only if it fits the cap, otherwise the payload overflows as usual.
2. ``summaries``: the ``o`` line's summary of an overflowed payload is written by
   LLMLingua (the protocol's ``llmlingua`` summarizer slot) instead of the
   extractive summarizer.
3. ``deref``: text fetched from memory for an ``M#`` reference is compressed at
   the variant's rate before it is re-injected.

Each has its own counters (``tp_*``), present in every record whether the toggle
is on or off, so toggling one changes its own counters and no other touchpoint's.
The compressor is built only when a toggle actually needs it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from tersetalk.core.tokens import count_tokens
from tersetalk.encoders.lingua import Compressor, LinguaSettings, get_compressor
from tersetalk.protocol import ContextLine, DerefResult
from tersetalk.protocol.summarize import LLMLINGUA

COUNTER_KEYS = (
    "tp_payload_calls",  # over-cap payloads offered to LLMLingua
    "tp_payload_fit",  # ... whose compression fitted the cap (used instead of overflow)
    "tp_summary_calls",  # overflow summaries written by LLMLingua
    "tp_deref_compressed",  # dereferenced texts compressed before re-injection
    "tp_deref_tokens_saved",  # tokens those compressions removed
)


class Touchpoints:
    """The toggled touchpoints of one example, with their counters."""

    def __init__(
        self,
        *,
        payloads: bool = False,
        summaries: bool = False,
        deref: bool = False,
        compressor: Callable[[], Compressor] | None = None,
        options: LinguaSettings | None = None,
        question: str = "",
        force: bool = False,
    ) -> None:
        self.payloads, self.summaries, self.deref = payloads, summaries, deref
        self._get = compressor
        self.options = options or LinguaSettings()
        self.question = question
        self.force = force
        self.counts: dict[str, int] = dict.fromkeys(COUNTER_KEYS, 0)
        self.seconds = 0.0
        # the same payload may be offered more than once (the hybrid gate re-encodes a
        # brief with tighter caps); compress each (text, target) once per example
        self._cache: dict[tuple[str, int, str], str] = {}

    @classmethod
    def from_settings(cls, settings: Any, ctx: Any, *, question: str, task: str) -> Touchpoints:
        """From a TerseTalk variant's ``lingua_*`` toggles and its ``lingua`` settings."""
        opts = settings.lingua or LinguaSettings()
        return cls(
            payloads=settings.lingua_payloads,
            summaries=settings.lingua_summaries,
            deref=settings.lingua_deref,
            compressor=lambda: get_compressor(ctx, opts),
            options=opts,
            question=question,
            force=opts.forces(task),
        )

    @property
    def any_on(self) -> bool:
        return self.payloads or self.summaries or self.deref

    def _compress(self, text: str, target: int, question: str) -> str:
        if self._get is None:
            raise RuntimeError("a touchpoint is on but no compressor was given")
        key = (text, max(1, target), question)
        if key not in self._cache:
            comp = self._get().compress(
                [text],
                target_tokens=key[1],
                question=question,
                force=self.force,
                options=self.options,
            )
            self.seconds += comp.seconds
            self._cache[key] = " ".join(comp.pieces)  # a payload is one line of text
        return self._cache[key]

    def _aim(self, cap: int) -> int:
        """Aim below a hard cap by the compressor's own slack, so the result tends to fit."""
        return max(1, math.floor(cap * (1.0 - self.options.tolerance / 2)))

    # -- 1. the protocol's compress hook ----------------------------------------------
    @property
    def compress_hook(self) -> Callable[[str, int], str] | None:
        if not self.payloads:
            return None

        def hook(text: str, cap: int) -> str:
            self.counts["tp_payload_calls"] += 1
            question = "" if text.strip() == self.question.strip() else self.question
            out = self._compress(text, self._aim(cap), question)
            if count_tokens(out) <= cap:
                self.counts["tp_payload_fit"] += 1
            return out

        return hook

    # -- 2. the llmlingua summarizer slot ----------------------------------------------
    def summarizer(self, base: str) -> str | Callable[..., str]:
        """The summarizer to use: ``base`` (a name), or, when toggled on, this example's
        LLMLingua summarizer (a callable whose ``method_name`` is ``llmlingua``, so ``o``
        lines name the method). Nothing is registered process-wide."""
        if not self.summaries:
            return base

        def llmlingua_summary(text: str, target: int, count=count_tokens) -> str:
            self.counts["tp_summary_calls"] += 1
            return self._compress(text, self._aim(target), self.question)

        llmlingua_summary.method_name = LLMLINGUA  # type: ignore[attr-defined]
        return llmlingua_summary

    # -- 3. dereferenced text before re-injection ---------------------------------------
    def compress_deref(self, result: DerefResult) -> DerefResult:
        if not self.deref or not result.lines:
            return result
        lines = []
        for line in result.lines:
            before = count_tokens(line.value)
            target = round(self.options.rate * before)
            out = (
                self._compress(line.value, target, self.question)
                if target < before
                else (line.value)
            )
            after = count_tokens(out)
            if after < before:
                self.counts["tp_deref_compressed"] += 1
                self.counts["tp_deref_tokens_saved"] += before - after
                lines.append(ContextLine(key=line.key, value=out))
            else:
                lines.append(line)
        return dataclasses.replace(result, lines=lines)

    def counters(self) -> dict[str, Any]:
        return {**self.counts, "t_touchpoints_s": self.seconds}
