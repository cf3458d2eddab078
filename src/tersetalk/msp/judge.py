"""The semantic judge: cosine similarity of original and decoded text (MiniLM).

Passed iff the similarity reaches the threshold (0.80 by default, configurable).
Similarity is clamped to [0, 1] (a negative cosine means "unrelated", i.e. 0).
"""

from __future__ import annotations

from tersetalk.msp.errors import JudgeError, MSPConfigError
from tersetalk.msp.schema import MSPJudgeResult

__all__ = ["DEFAULT_THRESHOLD", "SemanticJudge"]

DEFAULT_THRESHOLD = 0.80


class SemanticJudge:
    """``evaluate(original, decoded)`` -> :class:`MSPJudgeResult`."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, embedder=None,
                 model_path: str | None = None) -> None:  # fmt: skip
        if not 0.0 <= threshold <= 1.0:
            raise MSPConfigError(f"judge threshold must be in [0, 1], got {threshold}")
        self.threshold = threshold
        self._embedder = embedder
        self._model_path = model_path

    @property
    def embedder(self):
        if self._embedder is None:
            from tersetalk.metrics.embedding import Embedder

            try:
                self._embedder = Embedder(self._model_path)
            except Exception as exc:  # noqa: BLE001 - the design's message, with the cause
                raise JudgeError(f"Sentence transformer model not available: {exc}") from exc
        return self._embedder

    def score(self, similarity: float) -> MSPJudgeResult:
        """The verdict for a raw similarity (clamped into [0, 1])."""
        similarity = float(similarity)
        if similarity != similarity:  # NaN: the embedding was degenerate
            raise JudgeError("Failed to compute embeddings: similarity is NaN")
        sim = round(min(1.0, max(0.0, similarity)), 6)  # decide on the value we report
        passed = sim >= self.threshold
        issues = [] if passed else [
            f"Semantic drift detected: similarity {sim:.3f} < threshold {self.threshold:.2f}"
        ]  # fmt: skip
        return MSPJudgeResult(passed=passed, confidence=sim, similarity_score=sim,
                              threshold=self.threshold,
                              issues=issues)  # fmt: skip

    def evaluate(self, original: str, decoded: str) -> MSPJudgeResult:
        embedder = self.embedder
        try:
            sim = embedder.similarity(original, decoded)
        except Exception as exc:  # noqa: BLE001
            raise JudgeError(f"Failed to compute embeddings: {type(exc).__name__}: {exc}") from exc
        return self.score(sim)
