"""Summarizers that shrink a payload to a token target, and their registry.

A summarizer is ``fn(text, target_tokens, count_tokens) -> str``. ``extractive``
and ``truncation`` are built in and deterministic; ``llmlingua`` is a named slot
that the encoders package fills with :func:`register_summarizer` (so this package
never imports a model). :func:`summarize` guarantees the result fits the target,
falling back to truncation when a summarizer overshoots.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from .errors import SummarizerError
from .tokens import TokenCounter, approx_token_count

Summarizer = Callable[[str, int, TokenCounter], str]

_SENTENCE_END_RE = re.compile(r"(?<=[.!?;])\s+|\s*\n+\s*")
_WORD_RE = re.compile(r"\w+", re.UNICODE)
#: Cut points for truncation: the end of each word or punctuation mark.
_SPAN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_STOPWORDS = frozenset(
    """a an and are as at be but by for from has have he her his i in is it its of on or
    she that the their them they this to was were which who will with you your not no
    than then there these those what when where how also can could would should may""".split()
)


def truncate_to_tokens(
    text: str, target: int, count_tokens: TokenCounter = approx_token_count
) -> str:
    """Longest prefix of ``text`` (cut after a word or mark when possible) within ``target`` tokens.

    Binary search keeps the number of tokenizer calls logarithmic; only measured cuts
    are returned, so the result fits even for a counter that is not monotone in prefixes.
    """
    if target <= 0:
        return ""
    if count_tokens(text) <= target:
        return text
    ends = [m.end() for m in _SPAN_RE.finditer(text)]
    best = _longest_fitting(text, ends, target, count_tokens)
    if best == 0:
        # Even the first word is too long: cut inside it, character by character.
        first_end = ends[0] if ends else len(text)
        best = _longest_fitting(text, list(range(1, first_end + 1)), target, count_tokens)
    return text[:best].strip()


def _longest_fitting(text: str, cuts: list[int], target: int, count: TokenCounter) -> int:
    # lo only ever moves to a cut that was measured to fit, so the answer fits even
    # when the counter is not monotone (it may then be shorter than the best cut).
    lo, hi = 0, len(cuts)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[: cuts[mid - 1]].strip()) <= target:
            lo = mid
        else:
            hi = mid - 1
    return cuts[lo - 1] if lo else 0


def split_sentences(text: str) -> list[str]:
    """Sentences at ``. ! ? ;`` followed by space, and at line breaks."""
    return [s.strip() for s in _SENTENCE_END_RE.split(text) if s and s.strip()]


def _scores(sentences: list[str]) -> list[float]:
    """Content-word frequency (normalised) plus a small bonus for early position."""
    words = [
        [w for w in (x.lower() for x in _WORD_RE.findall(s)) if w not in _STOPWORDS]
        for s in sentences
    ]
    freq = Counter(w for ws in words for w in ws)
    top = max(freq.values(), default=1)
    scores = []
    for index, ws in enumerate(words):
        content = sum(freq[w] for w in ws) / top / (len(ws) ** 0.5) if ws else 0.0
        scores.append(content + 0.5 / (index + 1))
    return scores


def extractive_summary(
    text: str, target: int, count_tokens: TokenCounter = approx_token_count
) -> str:
    """Best-scoring sentences, kept in their original order, within ``target`` tokens.

    Greedy by score (ties: earlier first); if no sentence fits on its own, the best
    sentence is truncated. Deterministic: no randomness, no model.
    """
    if target <= 0:
        return ""
    if count_tokens(text) <= target:
        return text
    sentences = split_sentences(text)
    if not sentences:
        return ""
    scores = _scores(sentences)
    order = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
    chosen: list[int] = []
    for index in order:
        trial = sorted([*chosen, index])
        if count_tokens(" ".join(sentences[i] for i in trial)) <= target:
            chosen = trial
    if chosen:
        return " ".join(sentences[i] for i in chosen)
    return truncate_to_tokens(sentences[order[0]], target, count_tokens)


LLMLINGUA = "llmlingua"
_REGISTRY: dict[str, Summarizer] = {
    "extractive": extractive_summary,
    "truncation": truncate_to_tokens,
}
#: Names a config may use; ``llmlingua`` works once something registers it.
KNOWN_SUMMARIZERS: tuple[str, ...] = ("extractive", "truncation", LLMLINGUA)


def register_summarizer(name: str, fn: Summarizer, *, replace: bool = False) -> None:
    """Make ``fn`` available as ``name`` (e.g. the LLMLingua wrapper as ``"llmlingua"``)."""
    if not callable(fn):
        raise SummarizerError("a summarizer must be callable", snippet=repr(fn))
    if name in _REGISTRY and not replace and _REGISTRY[name] is not fn:
        raise SummarizerError(
            f"summarizer {name!r} is already registered", fix="pass replace=True to override"
        )
    _REGISTRY[name] = fn


def unregister_summarizer(name: str) -> None:
    """Remove a registered hook (built-ins stay); used by tests and teardown."""
    if name in ("extractive", "truncation"):
        raise SummarizerError(f"cannot unregister the built-in summarizer {name!r}")
    _REGISTRY.pop(name, None)


def available_summarizers() -> list[str]:
    return sorted(_REGISTRY)


def get_summarizer(name: str) -> Summarizer:
    """The summarizer registered as ``name``; a clear error for the empty llmlingua slot."""
    try:
        return _REGISTRY[name]
    except KeyError:
        if name == LLMLINGUA:
            raise SummarizerError(
                "the llmlingua summarizer has not been registered in this process",
                fix="call tersetalk.protocol.register_summarizer('llmlingua', fn) before use",
            ) from None
        raise SummarizerError(
            f"unknown summarizer {name!r}; available: {', '.join(available_summarizers())}",
            snippet=name,
        ) from None


def resolve_summarizer(summarizer: str | Summarizer) -> tuple[str, Summarizer]:
    """``(method name, function)`` from a registered name or a callable."""
    if isinstance(summarizer, str):
        return summarizer, get_summarizer(summarizer)
    if callable(summarizer):
        name = getattr(summarizer, "method_name", None) or getattr(summarizer, "__name__", "")
        return (name if name and not name.startswith("<") else "custom"), summarizer
    raise SummarizerError("summarizer must be a name or a callable", snippet=repr(summarizer))


def summarize(
    text: str,
    target: int,
    *,
    summarizer: str | Summarizer = "extractive",
    count_tokens: TokenCounter = approx_token_count,
) -> tuple[str, str]:
    """``(summary, method)`` with ``count_tokens(summary) <= target`` guaranteed.

    If the summarizer's output is too long it is truncated and the method is
    reported as ``"<name>+truncation"`` so the fallback shows up in the records.
    """
    name, fn = resolve_summarizer(summarizer)
    result = fn(text, target, count_tokens)
    if not isinstance(result, str):
        raise SummarizerError(
            f"summarizer {name!r} returned {type(result).__name__}, not str", snippet=repr(result)
        )
    if count_tokens(result) > target:
        result = truncate_to_tokens(result, target, count_tokens)
        if name != "truncation":
            name = f"{name}+truncation"
    return result, name
