"""Soft caps: keep each payload within a per-tag token budget without losing text.

A payload over its cap is first offered to an optional ``compress`` hook (the
LLMLingua wrapper, later); its output is used only if it fits. Otherwise the
payload is summarised to fit, the full text goes into :class:`Memory`, and the
line is replaced by ``["o", summary, "M#k", method]``. Dereferencing ``M#k``
restores the exact original text, so overflow saves tokens on the wire without
dropping information.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .errors import CapConfigError
from .lines import LineBase, OverflowLine
from .memory import Memory
from .summarize import Summarizer, resolve_summarizer, summarize
from .tags import CAPPABLE_TAGS, TAGS
from .tokens import TokenCounter, approx_token_count

CompressHook = Callable[[str, int], str]

#: The default caps (tokens) of the TerseTalk issue; tags not listed are uncapped.
DEFAULT_CAPS: dict[str, int] = {"f": 30, "p": 20, "q": 30}


def validate_caps(caps: Mapping[str, int] | None) -> dict[str, int]:
    """Check a cap mapping from config; a wrong key or value names itself and the fix."""
    if caps is None:
        return {}
    if not isinstance(caps, Mapping):
        raise CapConfigError("caps must be a mapping tag -> tokens", snippet=repr(caps))
    out: dict[str, int] = {}
    for tag, cap in caps.items():
        if tag not in CAPPABLE_TAGS:
            raise CapConfigError(
                f"cannot cap tag {tag!r}",
                snippet=repr(tag),
                fix=f"use one of {', '.join(CAPPABLE_TAGS)}",
            )
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise CapConfigError(
                f"cap for tag {tag!r} must be a non-negative integer number of tokens",
                snippet=repr(cap),
            )
        out[tag] = cap
    return out


@dataclass
class CapCounters:
    """What capping did to one message.

    ``lines_by_tag`` counts output lines per tag (``o`` lines under ``"o"``);
    ``overflow_by_tag`` and ``compressed_by_tag`` are keyed by the *original* tag;
    ``density = 1 - overflow_lines / total_lines`` (1.0 for an empty message).
    """

    lines_by_tag: dict[str, int] = field(default_factory=dict)
    overflow_by_tag: dict[str, int] = field(default_factory=dict)
    compressed_by_tag: dict[str, int] = field(default_factory=dict)
    summary_methods: dict[str, int] = field(default_factory=dict)

    @property
    def total_lines(self) -> int:
        return sum(self.lines_by_tag.values())

    @property
    def overflow_lines(self) -> int:
        return sum(self.overflow_by_tag.values())

    @property
    def compressed_lines(self) -> int:
        return sum(self.compressed_by_tag.values())

    @property
    def density(self) -> float:
        total = self.total_lines
        return 1.0 - self.overflow_lines / total if total else 1.0

    def as_dict(self) -> dict[str, float | int]:
        """Flat counters with stable keys (every tag present), for record columns."""
        out: dict[str, float | int] = {
            "lines_total": self.total_lines,
            "overflow_total": self.overflow_lines,
            "compressed_total": self.compressed_lines,
            "density": self.density,
        }
        for tag in TAGS:
            out[f"lines_{tag}"] = self.lines_by_tag.get(tag, 0)
        for tag in CAPPABLE_TAGS:
            out[f"overflow_{tag}"] = self.overflow_by_tag.get(tag, 0)
            out[f"compressed_{tag}"] = self.compressed_by_tag.get(tag, 0)
        return out


@dataclass
class CapResult:
    lines: list[LineBase]
    counters: CapCounters


def cap_line(
    line: LineBase,
    cap: int,
    *,
    memory: Memory,
    summarizer: str | Summarizer = "extractive",
    compress: CompressHook | None = None,
    count_tokens: TokenCounter = approx_token_count,
) -> tuple[LineBase, str]:
    """One line within ``cap``: ``(line, outcome)`` with outcome ``kept|compressed|overflow``."""
    text = line.capped_text
    if text is None or count_tokens(text) <= cap:
        return line, "kept"
    if compress is not None:
        shorter = compress(text, cap)
        if isinstance(shorter, str) and count_tokens(shorter) <= cap:
            return type(line).model_validate({**line.model_dump(), line.capped_field: shorter}), (
                "compressed"
            )
    summary, method = summarize(text, cap, summarizer=summarizer, count_tokens=count_tokens)
    ref = memory.put(text, tag=line.tag, line=line)
    return OverflowLine(summary=summary, ref=ref, method=method), "overflow"


def apply_caps(
    lines: Iterable[LineBase],
    caps: Mapping[str, int] | None = None,
    *,
    memory: Memory,
    summarizer: str | Summarizer = "extractive",
    compress: CompressHook | None = None,
    count_tokens: TokenCounter = approx_token_count,
    verbatim: Callable[[LineBase], bool] | None = None,
) -> CapResult:
    """Cap every line whose tag has a cap; ``caps=None`` means :data:`DEFAULT_CAPS`.

    Pass ``caps={}`` for no caps at all; a line for which ``verbatim(line)`` is true is
    never capped (program text, which a summary would cut mid-statement). The compress
    hook's output is not stored in memory (it is accepted as a lossy rewrite that fits);
    a summarised payload always is.
    Exceptions from hooks propagate: a broken compressor must show up as an error row.
    """
    caps = validate_caps(DEFAULT_CAPS if caps is None else caps)
    resolve_summarizer(summarizer)  # fail before touching memory if the name is wrong
    out: list[LineBase] = []
    counters = CapCounters()
    by_tag: Counter[str] = Counter()
    overflow: Counter[str] = Counter()
    compressed: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    for line in lines:
        if line.tag in caps and not (verbatim is not None and verbatim(line)):
            new, outcome = cap_line(
                line,
                caps[line.tag],
                memory=memory,
                summarizer=summarizer,
                compress=compress,
                count_tokens=count_tokens,
            )
            if outcome == "overflow":
                overflow[line.tag] += 1
                methods[new.method] += 1  # type: ignore[attr-defined]
            elif outcome == "compressed":
                compressed[line.tag] += 1
            line = new
        by_tag[line.tag] += 1
        out.append(line)
    counters.lines_by_tag = dict(by_tag)
    counters.overflow_by_tag = dict(overflow)
    counters.compressed_by_tag = dict(compressed)
    counters.summary_methods = dict(methods)
    return CapResult(lines=out, counters=counters)
