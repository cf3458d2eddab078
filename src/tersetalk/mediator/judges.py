"""The optional judge: do the keys faithfully represent the original message?

A judge returns pass/fail, a confidence in [0, 1] and a list of issues (missing
critical information, hallucinated keys, contradictions).

* :class:`EmbeddingJudge` - MiniLM cosine similarity between the original and the
  keys rendered as text, plus deterministic checks any reader would make: each
  number of the original absent from the keys (``missing critical information:
  number X``), each number of the keys absent from the original (``hallucinated
  number: X``), keys whose content words mostly do not occur in the original
  (hallucinated keys), and contradictions between a key and the sentence of the
  original it restates (:func:`contradiction_issues`): a negation one has and the
  other lacks, or a number the key changed (``contradiction: ...``). Contradictions
  of other kinds (swapped names or roles, antonyms, numbers written as words) stay
  invisible to it; see :func:`number_issues` and :func:`contradiction_issues`.
* :class:`LLMJudge` - the model backend under a JSON schema; it may report any
  contradiction it notices, with the reliability of the model behind it.
"""

from __future__ import annotations

import dataclasses
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tersetalk.mediator.errors import JudgeError, MediatorConfigError
from tersetalk.mediator.keys import SemanticKey, render_keys
from tersetalk.models.embedding import LazyEmbedder

__all__ = [
    "EmbeddingJudge",
    "Judge",
    "JudgeResult",
    "LLMJudge",
    "contradiction_issues",
    "fidelity_issues",
    "make_judge",
    "number_issues",
]


@dataclass(frozen=True)
class JudgeResult:
    passed: bool
    confidence: float
    issues: list[str] = field(default_factory=list)
    judge: str = ""
    similarity: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.passed, bool):
            raise JudgeError(f"judge result 'passed' must be a bool, got {self.passed!r}")
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0.0 <= c <= 1.0:
            raise JudgeError(f"judge confidence must be a number in [0, 1], got {c!r}")
        if not isinstance(self.issues, list) or not all(isinstance(i, str) for i in self.issues):
            raise JudgeError(f"judge issues must be a list of strings, got {self.issues!r}")

    def as_dict(self) -> dict:
        return {"passed": self.passed, "confidence": round(float(self.confidence), 6),
                "issues": list(self.issues), "judge": self.judge,
                "similarity": self.similarity}  # fmt: skip


class Judge(ABC):
    name = "judge"

    @abstractmethod
    def evaluate(self, original: str, keys: list[SemanticKey]) -> JudgeResult:
        """Judge ``keys`` against ``original``."""


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[A-Za-z0-9]+")
_STOP = frozenset(
    "the a an and or of to in on at for with from by is are was were be been this that "
    "these those it its as into about than then there their what which who whom whose "
    "how when where why answer question facts fact goal give short span taken final "
    "number solve problem math word".split()
)


def _canonical_number(raw: str) -> str:
    """One spelling per value: thousands separators, leading zeros and trailing
    decimal zeros dropped ("4,310" -> "4310", "07" -> "7", "12.50" -> "12.5")."""
    n = raw.replace(",", "")
    whole, dot, frac = n.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return f"{whole}.{frac}" if dot and frac else whole


def _numbers(text: str) -> set[str]:
    return {_canonical_number(n) for n in _NUMBER.findall(text)}


def _number_order(s: str) -> tuple[int, str]:
    return (len(s), s)


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in _STOP}


def number_issues(original: str, rendered: str) -> list[str]:
    """The deterministic number check, one issue per number.

    A number of the original that the keys (rendered as text) lack is
    ``missing critical information: number X``; a number in the keys that the
    original never states is ``hallucinated number: X``. A changed value (the
    original's 12 became 21) therefore shows up as one missing and one hallucinated
    number; the check does not pair them into a "contradiction", because a lost
    number and an invented one are just as often unrelated.

    What it cannot detect: numbers written as words ("twelve" vs "12") or in another
    form ("1/2" vs "0.5", "5k" vs "5000"); a number kept but attached to the wrong
    thing (swapped values, changed units); a number the keys repeat in a different
    role; and contradictions that involve no number at all (negation, swapped
    names, reversed relations). Digits inside names or dates count as numbers, so
    "9:15" is the two numbers 9 and 15.
    """
    src, keys = _numbers(original), _numbers(rendered)
    missing = sorted(src - keys, key=_number_order)
    invented = sorted(keys - src, key=_number_order)
    issues = [f"missing critical information: number {n}" for n in missing]
    issues += [f"hallucinated number: {n} is in the keys but not in the original"
               for n in invented]  # fmt: skip
    return issues


_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_NEGATION = frozenset("not no never none nobody nothing neither nor cannot without".split())


def _negated(text: str) -> bool:
    words = [w.lower() for w in re.findall(r"[A-Za-z']+", text)]
    return any(w in _NEGATION or w.endswith("n't") for w in words)


def contradiction_issues(original: str, keys: list[SemanticKey]) -> list[str]:
    """Keys that contradict the sentence of the original they restate.

    A key restates the sentence of the original that shares the most of its content
    words, if it shares at least two and at least half of them (otherwise it restates
    nothing in particular and is not compared). Against that sentence the key
    contradicts the original when:

    * negation: exactly one of the two carries a negation (not, no, never, none,
      nothing, nobody, neither, nor, cannot, without, or a word ending in n't), as in
      "the bridge was not finished" kept as "the bridge was finished";
    * number: the key states a number the original states nowhere while the sentence
      states a number the key lacks ("costs 12 dollars" kept as "costs 21 dollars").

    What it cannot see: a negation in another clause of the same sentence (it then
    reports a contradiction that is not one), antonyms ("rose" vs "fell"), swapped
    names or roles, and numbers written as words.
    """
    sentences = [s for s in _SENTENCE.split(original) if s.strip()]
    everywhere = _numbers(original)
    issues: list[str] = []
    for k in keys:
        words = _content_words(k.value)
        if len(words) < 2 or not sentences:
            continue
        shared, sent = max(((len(words & _content_words(s)), s) for s in sentences),
                           key=lambda p: p[0])  # fmt: skip
        if shared < 2 or shared / len(words) < 0.5:
            continue
        quote = f"{k.type.value}: {k.value[:80]!r} against {sent.strip()[:80]!r}"
        if _negated(k.value) != _negated(sent):
            issues.append(f"contradiction: negation differs: {quote}")
        invented = sorted(_numbers(k.value) - everywhere, key=_number_order)
        replaced = sorted(_numbers(sent) - _numbers(k.value), key=_number_order)
        if invented and replaced:
            issues.append(f"contradiction: number {', '.join(invented)} where the original "
                          f"says {', '.join(replaced)}: {quote}")  # fmt: skip
    return issues


def fidelity_issues(original: str, keys: list[SemanticKey]) -> tuple[list[str], bool]:
    """(issues, any critical) from the checks a reader makes without a model.

    Critical (the judge fails): no keys, a number of the original missing from the
    keys, a number in the keys the original does not state, or a key contradicting
    the sentence it restates (:func:`contradiction_issues`). Not critical: a key
    whose content words are mostly absent from the original (paraphrase is allowed,
    so it is reported as a possibly hallucinated key). See :func:`number_issues` and
    :func:`contradiction_issues` for what these checks cannot see.
    """
    if not keys:
        return ["missing critical information: no keys were extracted"], True
    issues = contradiction_issues(original, keys)
    issues += number_issues(original, render_keys(keys))
    critical = bool(issues)
    source = _content_words(original)
    for k in keys:
        words = _content_words(k.value)
        if len(words) >= 2 and len(words & source) / len(words) < 0.5:
            issues.append(f"hallucinated key: {k.type.value}: {k.value[:80]!r} is mostly "
                          "not in the original")  # fmt: skip
    return issues, critical


class EmbeddingJudge(Judge):
    """Pass when cosine(original, keys as text) >= threshold and nothing critical is missing."""

    name = "embedding"

    def __init__(self, threshold: float = 0.5, embedder=None, model_path: str | None = None):
        if not 0.0 <= threshold <= 1.0:
            raise MediatorConfigError(f"judge.threshold must be in [0, 1], got {threshold}")
        self.threshold = threshold
        self._embedder = LazyEmbedder(model_path, embedder)

    @property
    def embedder(self):
        """MiniLM, loaded on first use (a load failure surfaces in :meth:`evaluate`)."""
        return self._embedder.get()

    def evaluate(self, original: str, keys: list[SemanticKey]) -> JudgeResult:
        issues, critical = fidelity_issues(original, keys)
        if not keys:
            return JudgeResult(False, 0.0, issues, self.name, 0.0)
        try:
            sim = float(self.embedder.similarity(original, render_keys(keys)))
        except Exception as exc:  # noqa: BLE001 - typed for the pipeline
            raise JudgeError(f"embedding judge failed to compute embeddings: {exc}") from exc
        conf = round(min(1.0, max(0.0, sim)), 6)  # decide on the value we report
        if conf < self.threshold:
            issues.insert(0, f"low similarity: {conf:.3f} < threshold {self.threshold:.2f}")
        return JudgeResult(conf >= self.threshold and not critical, conf, issues, self.name,
                           round(sim, 6))  # fmt: skip


JUDGE_SYSTEM = (
    "You check whether semantic keys faithfully represent an original message. Report "
    "issues: missing critical information, hallucinated keys (not supported by the "
    "original), contradictions. passed is true only if there is no serious issue. "
    "confidence is a number from 0 to 1."
)

_Issue = Annotated[str, StringConstraints(max_length=200)]


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    passed: bool
    confidence: float = Field(ge=0.0, le=1.0)
    issues: list[_Issue] = Field(default_factory=list, max_length=5)


class LLMJudge(Judge):
    """The model backend judges, under a JSON schema (passed, confidence, issues)."""

    name = "llm"

    def __init__(self, client, gen=None, max_tokens: int = 128) -> None:
        from tersetalk.models import GenerationConfig

        self.client = client
        self.gen = dataclasses.replace(gen or GenerationConfig(), max_tokens=max_tokens)

    def evaluate(self, original: str, keys: list[SemanticKey]) -> JudgeResult:
        from tersetalk.models import ModelError

        messages = [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"Original message:\n{original}\n\nSemantic keys:\n"
                                        f"{render_keys(keys) or '(none)'}"},
        ]  # fmt: skip
        try:
            res = self.client.structured(messages, _Verdict, self.gen)
        except ModelError as exc:
            raise JudgeError(f"LLM judge failed: {exc}") from exc
        v = res.parsed or {}
        conf = min(1.0, max(0.0, float(v.get("confidence", 0.0))))
        return JudgeResult(bool(v.get("passed", False)), conf,
                           [str(i) for i in v.get("issues", [])], self.name)  # fmt: skip


def make_judge(cfg, client=None, gen=None) -> Judge:
    """Build the judge ``judge.kind`` names."""
    if cfg.kind == "embedding":
        return EmbeddingJudge(cfg.threshold, model_path=cfg.embedding_model)
    if cfg.kind == "llm":
        if client is None:
            raise MediatorConfigError("judge.kind=llm needs a model client; use kind: embedding")
        return LLMJudge(client, gen, max_tokens=cfg.max_tokens)
    raise MediatorConfigError(f"judge.kind: unknown judge {cfg.kind!r}")
