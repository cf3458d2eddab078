"""The training telemetry replayed: what a cache size, a minimum body or a tool's
re-encoding would have saved or cost on the sessions the tuner learns from.

Why a replay and not thresholds alone: a knob whose only purpose is to save tokens
should change only when the training sessions show that the new value saves tokens.
The local telemetry (:mod:`tersetalk.mcp.telemetry`) writes, per tool result, the
endpoint, the size, a digest of the body, the compaction partition, what the proxy
did with it (``kind``: passthrough, encoded, ref, ...; ``fallback``) and its tokens
before and after. With every event of a session written (sample rate 1), the L0
cache can be run again over the same sequence of bodies with other settings:

- the **repeat distance** of a result is the number of distinct cacheable bodies
  (long enough, from a tool with dedup on) used since the earlier copy of the same
  body: an LRU of ``distance + 1`` entries or more catches it. The LRU size the tuner
  proposes (:func:`saving_size`) is the smallest one whose replay saves
  :data:`COVERAGE` of the tokens the largest, :data:`LRU_MAX` (the proxy's default
  ``retrieval.keep``: a reference is only given while the store still holds the body),
  saves; :func:`covering_size` gives the size by the repeats' count, for comparison;
- the **tokens** of a replay: a hit costs the reference hint's tokens (as the proxy
  sent them), a miss what the proxy sent for that body when it was not a reference.

What the telemetry does not say: which calls were writes (before a write runs, the
proxy forgets the cached bodies it may change; all of them when the write names no
resource). The replay infers them (:func:`writes`): a repeat the proxy did not catch
although a hit of the same session at a larger distance proves its cache held that
many bodies was forgotten by a write, so one of the tools called since its earlier
copy is a write; a tool called between a body and a later hit on it forgot nothing.
The tools found in the first kind of interval and never in the second are taken as
writes that forget every cached body, and each of their calls empties the replayed
cache. A repeat the proxy missed that no inferred write explains stays a miss in every
replay (:func:`blocked`). A repeat beyond every distance the session proves, with no
inferred write before it, is assumed catchable, so a replay's saving of a larger cache
is an upper bound; the held-out sessions of the tuned experiment
(:mod:`tersetalk.mcp.tuned`) measure the real one.

Sessions written at a sample rate below 1 have gaps and are not replayed (counted).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tersetalk.mcp.config import Retrieval

#: the share of repeats the proposed LRU size must catch
COVERAGE = 0.95
#: the largest LRU size proposed: the proxy keeps this many bodies for tersetalk_get
#: by default, and a reference is only given to a body it still keeps
LRU_MAX = Retrieval().keep
#: the fallbacks that mean a re-encoding did not decode to what the server sent
READBACK_FALLBACKS = ("readback", "markdown_readback")
#: passthrough from decode failures: at least this many, and this share of the tool's
#: re-encoding attempts
MIN_FAILURES, FAILURE_SHARE = 3, 0.5
#: passthrough from edit patterns: an edit-tool call within this many results after a
#: re-encoded result of the tool, at least this many times
EDIT_WINDOW, MIN_EDITS = 3, 2
#: name words of a tool that edits text it was shown (an agent quotes the text back)
EDIT_WORDS = frozenset({"edit", "edits", "replace", "patch", "apply", "str"})


@dataclass(frozen=True)
class Event:
    """One tool result as the replay reads it."""

    endpoint: str
    digest: str
    chars: int
    partition: int
    original: int  # the body's tokens
    sent: int  # what the proxy sent for this body when it was not a reference
    was_ref: bool  # the proxy sent a reference for it in training
    kind: str
    fallback: str | None


@dataclass(frozen=True)
class Trace:
    """The replayable sessions of a telemetry folder."""

    sessions: tuple[tuple[Event, ...], ...]
    skipped_sessions: int  # written at a sample rate below 1 (gaps): not replayed
    tokenizer: str
    hint_tokens: int  # the tokens of one reference hint, as the proxy sent them


def _tokenizer(events: Sequence[Mapping]) -> str:
    """The tokenizer every event counted in (o200k_base when it is one of them)."""
    common: set[str] | None = None
    for e in events:
        keys = set((e.get("tokens") or {}).keys())
        common = keys if common is None else common & keys
    if not common:
        return "o200k_base"
    return "o200k_base" if "o200k_base" in common else sorted(common)[0]


def trace(events: Iterable[Mapping]) -> Trace:
    """The events grouped into sessions in call order, with their token counts."""
    from tersetalk.core.tokens import count_tokens
    from tersetalk.formats.hints import reference_call

    rows = [e for e in events if isinstance(e.get("content_sha_prefix"), str)]
    tok = _tokenizer(rows)
    by: dict[str, list[Mapping]] = {}
    for e in rows:
        by.setdefault(e["session_hash"], []).append(e)
    sessions, skipped, ref_tokens = [], 0, []
    for name in sorted(by):
        evs = sorted(by[name], key=lambda e: (e.get("seq", 0), e.get("part", 0)))
        if any(float(e.get("sample_rate", 1.0)) < 1.0 for e in evs):
            skipped += 1
            continue
        nonref: dict[str, int] = {}
        out = []
        for e in evs:
            pair = (e.get("tokens") or {}).get(tok)
            if not pair or len(pair) != 2:
                continue
            original, sent = int(pair[0]), int(pair[1])
            was_ref = e.get("kind") == "ref"
            if was_ref:
                ref_tokens.append(sent)
            else:
                nonref.setdefault(e["content_sha_prefix"], sent)
            out.append((e, original, sent, was_ref))
        session = tuple(
            Event(e["endpoint_class"], e["content_sha_prefix"], int(e["response_chars"]),
                  int(e.get("context_partition", 0)), original,
                  nonref.get(e["content_sha_prefix"], original) if was_ref else sent,
                  was_ref, str(e.get("kind", "")), e.get("fallback"))
            for e, original, sent, was_ref in out
        )  # fmt: skip
        sessions.append(session)
    if ref_tokens:
        hint = sorted(ref_tokens)[len(ref_tokens) // 2]
    else:
        hint = count_tokens(reference_call("0" * 8, "tersetalk_get"), tok)
    return Trace(tuple(sessions), skipped, tok, hint)


Eligible = Callable[[Event], bool]


def eligibility(min_body_chars: int, enabled: Mapping[str, bool],
                default: bool = True) -> Eligible:  # fmt: skip
    """Whether the L0 cache takes a body: long enough, from a tool with dedup on."""
    return lambda e: e.chars >= min_body_chars and enabled.get(e.endpoint, default)


def _distances(session: Sequence[Event], eligible: Eligible,
               forget: frozenset[str] = frozenset()) -> list[int | None]:  # fmt: skip
    """Per event, its repeat distance among the eligible bodies (None: not eligible or
    the first of its body in the partition, or since a call of a tool in ``forget``)."""
    stack: OrderedDict[str, None] = OrderedDict()
    partition, out = None, []
    for e in session:
        if e.partition != partition or e.endpoint in forget:
            partition = e.partition
            stack.clear()
        if not eligible(e):
            out.append(None)
            continue
        d = None
        if e.digest in stack:
            d = 0
            for key in reversed(stack):
                if key == e.digest:
                    break
                d += 1
            stack.move_to_end(e.digest)
        else:
            stack[e.digest] = None
        out.append(d)
    return out


def _missed(session: Sequence[Event], dist: Sequence[int | None]) -> list[int]:
    """The repeats the proxy did not catch although a hit of the session at a distance
    as large or larger proves its cache held that many bodies."""
    hits = [d for d, e in zip(dist, session, strict=True) if d is not None and e.was_ref]
    proven = max(hits, default=-1)  # the cache held at least proven + 1 bodies
    return [i for i, (d, e) in enumerate(zip(dist, session, strict=True))
            if d is not None and not e.was_ref and d <= proven]  # fmt: skip


def writes(tr: Trace, eligible: Eligible) -> frozenset[str]:
    """The tools taken as writes: called between a body and a repeat of it the proxy
    missed (:func:`_missed`), never between a body and a hit on it."""
    suspects: set[str] = set()
    cleared: set[str] = set()
    for session in tr.sessions:
        dist = _distances(session, eligible)
        missed = set(_missed(session, dist))
        last: dict[tuple[int, str], int] = {}
        for j, (d, e) in enumerate(zip(dist, session, strict=True)):
            key = (e.partition, e.digest)
            if d is not None and key in last:
                between = {x.endpoint for x in session[last[key] + 1 : j]}
                if e.was_ref:
                    cleared |= between
                elif j in missed:
                    suspects |= between
            if eligible(e):
                last[key] = j
    return frozenset(suspects - cleared)


def blocked(tr: Trace, eligible: Eligible,
            forget: frozenset[str] = frozenset()) -> frozenset[tuple[int, int]]:  # fmt: skip
    """(session, event) of repeats the proxy did not catch although its cache held more
    bodies than their distance (a hit of the same session at that distance or beyond
    proves it), and that no call of a tool in ``forget`` explains. Misses in every
    replay."""
    out = set()
    for s, session in enumerate(tr.sessions):
        out |= {(s, i) for i in _missed(session, _distances(session, eligible, forget))}
    return frozenset(out)


@dataclass(frozen=True)
class Replay:
    tokens: int  # what the sessions' results would have cost, in tr.tokenizer's tokens
    hits: int
    distances: tuple[int, ...]  # the repeats' distances (blocked ones left out)


def replay(tr: Trace, lru_size: int, eligible: Eligible,
           block: frozenset[tuple[int, int]] = frozenset(),
           forget: frozenset[str] = frozenset()) -> Replay:  # fmt: skip
    """The L0 cache of ``lru_size`` entries over the training sessions, emptied at each
    call of a tool in ``forget`` (the inferred writes)."""
    tokens = hits = 0
    distances = []
    for s, session in enumerate(tr.sessions):
        dist = _distances(session, eligible, forget)
        for i, (d, e) in enumerate(zip(dist, session, strict=True)):
            if d is not None and (s, i) not in block:
                distances.append(d)
                if d + 1 <= lru_size:
                    hits += 1
                    tokens += tr.hint_tokens
                    continue
            tokens += e.sent
    return Replay(tokens, hits, tuple(distances))


def covering_size(distances: Sequence[int], coverage: float = COVERAGE,
                  bound: int = LRU_MAX) -> int | None:  # fmt: skip
    """The smallest LRU size that catches ``coverage`` of the repeats (a repeat at
    distance d needs d + 1 entries), at most ``bound``; None without repeats."""
    if not distances:
        return None
    need = sorted(d + 1 for d in distances)
    k = max(1, math.ceil(coverage * len(need) - 1e-9))
    return min(bound, need[k - 1])


def saving_size(
    tokens_now: int, tokens_at: Mapping[int, int], coverage: float = COVERAGE
) -> tuple[int | None, int]:
    """The smallest LRU size (a key of ``tokens_at``: size -> the replay's tokens) that
    saves ``coverage`` of what the best size saves against ``tokens_now``, and what it
    saves; ``(None, 0)`` when no size saves anything."""
    if not tokens_at:
        return None, 0
    best = tokens_now - min(tokens_at.values())
    if best <= 0:
        return None, 0
    size = min(s for s, t in tokens_at.items() if tokens_now - t >= coverage * best - 1e-9)
    return size, tokens_now - tokens_at[size]


def is_edit_tool(name: str) -> bool:
    """A tool that edits text an agent was shown: ``edit_file``, ``str_replace``,
    ``apply_patch``, ``write_file`` (write with a text noun)."""
    from tersetalk.mcp.editsafe import TEXT_NOUNS, words

    w = set(words(name))
    return bool(w & EDIT_WORDS) or ("write" in w and bool(w & TEXT_NOUNS))


@dataclass(frozen=True)
class ToolEvidence:
    """One tool's re-encoding record over the training sessions."""

    endpoint: str
    encoded: int  # results sent re-encoded
    failures: int  # re-encodings that did not read back (the original went instead)
    edits_after: int  # re-encoded results followed by an edit-tool call (EDIT_WINDOW)
    tokens_saved: int  # what its re-encoded results saved (original - sent)

    @property
    def failure_share(self) -> float:
        tried = self.encoded + self.failures
        return self.failures / tried if tried else 0.0


def tool_evidence(tr: Trace) -> list[ToolEvidence]:
    """Per endpoint, sorted: re-encodings, decode failures, edits that followed."""
    enc: dict[str, int] = {}
    fail: dict[str, int] = {}
    edits: dict[str, int] = {}
    saved: dict[str, int] = {}
    for session in tr.sessions:
        for i, e in enumerate(session):
            if e.kind == "encoded":
                enc[e.endpoint] = enc.get(e.endpoint, 0) + 1
                saved[e.endpoint] = saved.get(e.endpoint, 0) + e.original - e.sent
                after = session[i + 1 : i + 1 + EDIT_WINDOW]
                if any(is_edit_tool(x.endpoint) for x in after):
                    edits[e.endpoint] = edits.get(e.endpoint, 0) + 1
            if e.fallback in READBACK_FALLBACKS:
                fail[e.endpoint] = fail.get(e.endpoint, 0) + 1
    names = sorted(set(enc) | set(fail))
    return [ToolEvidence(n, enc.get(n, 0), fail.get(n, 0), edits.get(n, 0), saved.get(n, 0))
            for n in names]  # fmt: skip
