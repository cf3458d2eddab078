"""The semantic judge: semantic adequacy of the decoded text, as MSP's design defines it.

Adequate (``passed``) iff the MiniLM cosine similarity of original and decoded text
reaches the threshold (0.80 by default, configurable) **and**, when the signal is
given, the decoded text mentions the signal's intent and its target
(:func:`mentions`). Without a signal only the similarity decides (a caller that
judges two texts). Similarity is clamped to [0, 1] (a negative cosine means
"unrelated", i.e. 0).

Mentions are checked on words, case-insensitively, without a model, so a record
says exactly why a message failed: the intent counts when a word of the decoded
text starts with the intent's stem (``ANALYZE``: analyze, analysis, analysing ...;
synonyms such as "examine" do not count), the target when every one of its content
words occurs in the decoded text (a paraphrase of the target does not count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tersetalk.models.embedding import LazyEmbedder
from tersetalk.msp.errors import JudgeError, MSPConfigError
from tersetalk.msp.schema import INTENTS, MinimalSignal, MSPJudgeResult

__all__ = ["DEFAULT_THRESHOLD", "INTENT_STEMS", "Mentions", "SemanticJudge", "mentions"]

DEFAULT_THRESHOLD = 0.80

#: the word stem that names each intent in prose (every inflection starts with it)
INTENT_STEMS: dict[str, str] = {
    "ANALYZE": "analy",  # analyze, analyse, analysis, analytical
    "GENERATE": "generat",
    "EVALUATE": "evaluat",
    "TRANSFORM": "transform",
    "QUERY": "quer",  # query, queries, queried
    "RESPOND": "respon",  # respond, response
    "DELEGATE": "delegat",
    "REPORT": "report",
}
if set(INTENT_STEMS) != set(INTENTS):  # a new intent must say how prose names it
    raise RuntimeError(f"INTENT_STEMS must cover exactly the intents {INTENTS}")

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an the of to in on at for and or by with from as is are was were be this that "
    "these those it its".split()
)


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def target_words(target: str) -> set[str]:
    """The words of a target that must appear: its content words, or all its words when
    it has no content word ("the one"), or none when it has no word at all ("?")."""
    words = _words(target)
    content = {w for w in words if w not in _STOP}
    return content or set(words)


@dataclass(frozen=True)
class Mentions:
    """Whether decoded text mentions a signal's intent and target."""

    intent_present: bool
    target_present: bool
    target_coverage: float  # share of the target's words found (1.0 for a wordless target)
    missing_target_words: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.intent_present and self.target_present


def mentions(signal: MinimalSignal, decoded: str) -> Mentions:
    """MSP property 4, checked: does ``decoded`` mention the intent and the target?"""
    words = _words(decoded)
    stem = INTENT_STEMS[signal.intent]
    intent = any(w.startswith(stem) for w in words)
    wanted = target_words(signal.target)
    found = wanted & set(words)
    missing = tuple(sorted(wanted - found))
    coverage = len(found) / len(wanted) if wanted else 1.0
    return Mentions(intent, not missing, round(coverage, 6), missing)


class SemanticJudge:
    """``evaluate(original, decoded)`` -> :class:`MSPJudgeResult`."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, embedder=None,
                 model_path: str | None = None) -> None:  # fmt: skip
        if not 0.0 <= threshold <= 1.0:
            raise MSPConfigError(f"judge threshold must be in [0, 1], got {threshold}")
        self.threshold = threshold
        self._embedder = LazyEmbedder(model_path, embedder)

    @property
    def embedder(self):
        """MiniLM, loaded on first use; a load failure is the design's :class:`JudgeError`."""
        try:
            return self._embedder.get()
        except Exception as exc:  # noqa: BLE001 - the design's message, with the cause
            raise JudgeError(f"Sentence transformer model not available: {exc}") from exc

    def score(self, similarity: float, found: Mentions | None = None) -> MSPJudgeResult:
        """The verdict for a raw similarity (clamped into [0, 1]) and, when checked, the
        mentions of intent and target."""
        similarity = float(similarity)
        if similarity != similarity:  # NaN: the embedding was degenerate
            raise JudgeError("Failed to compute embeddings: similarity is NaN")
        sim = round(min(1.0, max(0.0, similarity)), 6)  # decide on the value we report
        similar = sim >= self.threshold
        issues = [] if similar else [
            f"Semantic drift detected: similarity {sim:.3f} < threshold {self.threshold:.2f}"
        ]  # fmt: skip
        if found is not None:
            if not found.intent_present:
                issues.append("Intent missing: the decoded text does not mention the intent")
            if not found.target_present:
                issues.append("Target missing: the decoded text lacks the target's words "
                              + ", ".join(repr(w) for w in found.missing_target_words))  # fmt: skip
        passed = similar and (found is None or found.ok)
        return MSPJudgeResult(
            passed=passed, confidence=sim, similarity_score=sim, threshold=self.threshold,
            similarity_passed=similar,
            intent_present=None if found is None else found.intent_present,
            target_present=None if found is None else found.target_present,
            target_coverage=None if found is None else found.target_coverage,
            issues=issues,
        )  # fmt: skip

    def evaluate(
        self, original: str, decoded: str, signal: MinimalSignal | None = None
    ) -> MSPJudgeResult:
        """Semantic adequacy of ``decoded`` against ``original`` (and ``signal``'s
        intent and target when given)."""
        embedder = self.embedder
        try:
            sim = embedder.similarity(original, decoded)
        except Exception as exc:  # noqa: BLE001
            raise JudgeError(f"Failed to compute embeddings: {type(exc).__name__}: {exc}") from exc
        return self.score(sim, None if signal is None else mentions(signal, decoded))
