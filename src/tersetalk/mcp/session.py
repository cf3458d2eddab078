"""One agent session's pipeline: what the proxy does to each tool result.

For every ``tools/call`` result text, in order:

0. **Size cap.** A text longer than ``max_result_chars`` passes through as it came,
   before anything reads it (no hash, no token count, no parse).
1. **L0 dedup.** A body at least ``dedup.min_body_chars`` long whose exact bytes were
   returned earlier in the session (and are still among the ``dedup.lru_size`` most
   recent) becomes ``> [ref: <ref>, byte-identical. call tersetalk_get {"ref":"<ref>"}]``.
   The earlier copy is in the agent's context; a reader that never saw it (another
   chat or a sub-agent sharing the proxy) makes the call the hint names, on its line,
   and gets the downstream's text whole. Before a write-class call runs, entries that
   share a resource with it are forgotten (:meth:`SessionPipeline.before_call`); a
   compaction boundary forgets all.
2. **Near-reference** (``hints.near_ref``): a body equal to a cached one of the same
   tool except a few scalar values becomes ``> [near-ref: <ref>, $.status: "a"→"b".
   call tersetalk_get {"ref":"<own>"}]``, which claims exactly that: the earlier value
   with those paths replaced is this one; the call returns this one whole.
3. **Encoding.** JSON, a Python literal (:mod:`tersetalk.mcp.literal`) or Markdown
   with tables is re-encoded by the knapsack (:func:`tersetalk.formats.solver.encode`)
   under the tool's budget: lossless by default; a budget elides whole subtrees, and
   each overflow hint names the ``tersetalk_get`` call that returns exactly what was
   left out, under the budget rule below. A page of a larger set (an object with a
   ``total_count``-like number above the length of its one array) gets a metadata
   hint. Text that is none of these, or whose encoding is not smaller, passes through
   byte-identical. A Markdown text is re-encoded only where it decodes back to the same bytes
   (:func:`tersetalk.formats.markdown.decode_markdown`); a table that would not (ragged
   rows, a ``|`` in a code span, a diff) is kept as it came, and ``fallback`` says so.
   A tool whose results a client may quote back (a file read, a diff:
   :mod:`tersetalk.mcp.editsafe`) is not re-encoded unless the config opts in; its
   results pass byte-exact (``verbatim``), dedup still applies.

**The budget rule: budget mode never costs a session more than lossless.** For each
result under a budget, the proxy counts what lossless mode would send for it (the
knapsack's lossless text where that is smaller than the downstream's, else the
downstream's text: ``L``). If ``L`` is within the budget, that is what goes. Otherwise
the result is encoded within the budget and the proxy counts, besides the text, every
``tersetalk_get`` answer a reader needs to get all that it leaves out (each overflow
hint's call, and the further pages of an answer over ``page_tokens``: what
:meth:`SessionPipeline.retrieve` returns for them); if the two add up to more than
``L``, what lossless sends goes instead, with a ``budget`` fallback giving both counts.
The budgeted solve is skipped where its outcome is plain beforehand: a text within
budget ``B`` carries at most about ``B / L`` of the result (at lossless's rate), so
fetching the rest costs about ``(1 - B / L)`` of the result's compact JSON (what the
calls return); where that alone is more than ``L``, lossless goes at once, and the
fallback says so. (On the tool-response corpora and two sqlite tables, 600 results
under budgets of 50 to 3,000 tokens, no budgeted text this skips would have gone.)
So per result, and over any session, the tokens sent plus the tokens a reader fetches
to get everything are at most those lossless mode sends. In practice a result that
leaves anything out rarely passes: its hint lines and the compact JSON the calls return
cost more than the knapsack's lossless encoding of the same parts, so a budget saves
tokens where the lossless text fits it or where its rest costs less to fetch than to
send. With ``budget_within_lossless: false`` the budget is a cap instead: every result
is encoded within it, and a reader that fetches all that was left out may pay more than
lossless would have sent.

A body's reference is the first 8 hex digits of its SHA-256, or all 64 when another
body of the session was already given those 8 (a server can make two texts share 8
digits): a reference names one body for the whole session (:meth:`SessionPipeline.ref_for`).

A hint is emitted only if its claim holds when it is sent: every re-encoded text is
decoded and compared with what the downstream sent before it goes out (JSON and Python
literals by value, Markdown byte for byte; a near-reference's delta applied to the
earlier value), and on a mismatch the downstream text goes instead, with a ``fallback``
whose fixed name (``readback``, ``markdown_readback``) the telemetry counts; a
reference points only at a body still cached, an overflow call's path is resolved
against the stored value.

``tersetalk_get {"ref": "<ref>"}`` returns the text the downstream sent for that body,
as it came, so a reader that never saw the earlier result gets it whole in one call.

4. **Pages.** A text to send over ``page_tokens`` tokens (default 25,000, about where
   clients cut a tool result) goes a page at a time, never cut: the pages are split at
   line ends (a longer line is cut between characters), each at most ``page_tokens``
   tokens with its last line, and concatenated (without those lines) they are the text
   exactly. Each page is followed by a line break and ``> [page k of n ... call
   tersetalk_get {"ref":"<ref>","page":k+1}]``; the last one says it is the last.
   ``page`` pages what the proxy sent for the result; a ``tersetalk_get`` answer over
   the bound (the original, a path) is paged the same way, its line naming the same
   arguments with the next page. A text over ``max_result_chars`` is not paged (step 0
   does not count its tokens).
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from tersetalk.core.tokens import count_tokens, count_tokens_aside
from tersetalk.formats import hints as H
from tersetalk.formats.container import compact_json
from tersetalk.formats.records import Records, encode_records, table_records
from tersetalk.formats.tree import (
    TreeError,
    from_python,
    load_json,
    same_value,
)
from tersetalk.mcp.config import ProxyConfig
from tersetalk.mcp.editsafe import Decision, decide, decide_tool
from tersetalk.mcp.literal import parse_literal

RETRIEVAL_TOOL = "tersetalk_get"
KINDS = ("passthrough", "encoded", "ref", "near-ref", "retrieval", "error")
#: the fallback of a text longer than ``max_result_chars`` (sent as it came, unread)
TOO_LONG = "longer than max_result_chars"
#: a fixed name for each fallback (its message may quote the payload): what logs keep
FALLBACK_KINDS = (
    (TOO_LONG, "too_long"),
    ("markdown re-encoding does not read back", "markdown_readback"),
    ("markdown kept as it came", "markdown_declined"),
    ("the encoding does not read back", "readback"),
    ("the encoding holds a lone surrogate", "surrogate"),
    ("budget ", "budget"),
)
#: the fallbacks of a re-encoding that did not decode to what the downstream sent
READBACK_KINDS = ("readback", "markdown_readback")
#: keys that give the size of the whole set a page of results was taken from
TOTAL_KEYS = ("total_count", "totalCount", "total", "count", "total_results", "totalResults")


class _Counts:
    """Token counts of the texts of one result, each counted once (a 100 KB text takes
    milliseconds); ``known`` may be given counts made elsewhere (the solver's).

    The downstream's text (``original``) is being counted elsewhere (``counting``, from
    :func:`count_tokens_aside`) and its count is read when first asked for: the table
    path asks only once its own work is done."""

    def __init__(self, tokenizer: str, original: str, counting: Callable[[], int]) -> None:
        self.tokenizer = tokenizer
        self.known: dict[str, int] = {}
        self.original = original
        self._counting: Callable[[], int] | None = counting

    def raw(self) -> int:
        """The downstream's text's count."""
        if self._counting is not None:
            self.known[self.original] = self._counting()
            self._counting = None
        return self.known[self.original]

    def __call__(self, text: str) -> int:
        if self._counting is not None and text == self.original:
            return self.raw()
        n = self.known.get(text)
        if n is None:
            n = self.known[text] = count_tokens(text, self.tokenizer)
        return n


class RetrievalError(ValueError):
    """A ``tersetalk_get`` call that cannot be answered; the message says why."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# --- L0 ---------------------------------------------------------------------------


@dataclass
class Entry:
    ref: str  # the reference the hints name (SessionPipeline.ref_for)
    tool: str
    resources: frozenset[str] | None  # None: unknown, any write invalidates it
    value: Any = None  # the structured value, kept for near-ref (None: not structured)
    structured: bool = False
    raw_tokens: int = 0  # the body's tokens, so a hit need not count them again
    hint_tokens: int = 0  # the reference hint's tokens


class DedupCache:
    """The L0 cache: SHA-256 of each body, least recently used evicted first.

    ``check`` is the whole hot path (hash, look up, record): the reference hint on a
    hit, None on a miss (the body is then recorded).
    """

    def __init__(self, lru_size: int = 5, min_body_chars: int = 200) -> None:
        if lru_size < 1:
            raise ValueError("dedup lru_size must be at least 1 entry")
        self.lru_size = lru_size
        self.min_body_chars = min_body_chars
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.invalidated = 0

    def check(
        self, body: str, tool: str = "", resources: frozenset[str] | None = None
    ) -> str | None:
        if len(body) < self.min_body_chars:
            return None
        key = digest(body)
        entry = self.hit(key)
        if entry is not None:
            return H.reference_call(entry.ref, RETRIEVAL_TOOL)
        self.record(key, Entry(key[:8], tool, resources))
        return None

    def hit(self, key: str) -> Entry | None:
        """The entry of ``key`` made most recent (a hit), or None (counted as a miss)."""
        entry = self.entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.entries.move_to_end(key)
        self.hits += 1
        return entry

    def record(self, key: str, entry: Entry) -> None:
        self.entries[key] = entry
        self.entries.move_to_end(key)
        while len(self.entries) > self.lru_size:
            self.entries.popitem(last=False)

    def invalidate(self, resources: frozenset[str] | None) -> int:
        """Forget entries that share a resource with a write (None: every entry)."""
        gone = [
            k
            for k, e in self.entries.items()
            if resources is None or e.resources is None or e.resources & resources
        ]
        for k in gone:
            del self.entries[k]
        self.invalidated += len(gone)
        return len(gone)

    def __len__(self) -> int:
        return len(self.entries)


# --- results ----------------------------------------------------------------------


@dataclass(frozen=True)
class Processed:
    """What the proxy sends for one tool result, and what it cost."""

    text: str
    kind: str  # passthrough | encoded | ref | near-ref
    source: str  # json | literal | markdown | text
    raw_chars: int
    raw_tokens: int | None  # None: not counted (a text longer than max_result_chars)
    sent_tokens: int | None
    hints: tuple[str, ...]
    ref: str | None  # this body's reference (what a later hint names); None: not kept
    lossless: bool
    fallback: str | None
    pipeline_s: float
    #: the tool's results pass as they came: a client may quote them back (editsafe)
    verbatim: bool = False
    #: the pages the text was sent in (1: whole); the first is sent, the rest fetched
    pages: int = 1


@dataclass
class _Stored:
    sent: str
    original: str  # what the downstream sent (what tersetalk_get returns without a path)
    value: Any  # the structured value (None for text)
    structured: bool
    resources: frozenset[str] | None = None  # what the call read (None: unknown)
    changed_by: str | None = None  # a write-class tool that ran after it on its resources


@dataclass
class SessionPipeline:
    """The per-session state of the proxy: the L0 cache and the retrieval store."""

    config: ProxyConfig = field(default_factory=ProxyConfig)
    #: tools the downstream's annotations mark as not read-only
    annotated_writes: set[str] = field(default_factory=set)
    #: each tool's re-encode decision (editsafe), as the downstream listed it
    decisions: dict[str, Decision] = field(default_factory=dict)
    calls: int = 0

    def __post_init__(self) -> None:
        d = self.config.dedup
        self.cache = DedupCache(d.lru_size, d.min_body_chars)
        self.store: OrderedDict[str, _Stored] = OrderedDict()
        #: every reference given in this session -> the digest of the body it names
        self.issued: dict[str, str] = {}
        self.compactions = 0

    # --- writes and compaction ------------------------------------------------------

    def is_write(self, tool: str) -> bool:
        own = self.config.tool(tool).write
        if own is not None:
            return own
        return tool in self.config.dedup.write_tools or tool in self.annotated_writes

    def resources(self, tool: str, arguments: dict[str, Any] | None) -> frozenset[str] | None:
        """The resources a call touches: the values of its resource arguments (None: unknown)."""
        names = self.config.resource_args_for(tool)
        found = {
            str(v)
            for k, v in (arguments or {}).items()
            if k in names and isinstance(v, str | int) and not isinstance(v, bool)
        }
        return frozenset(found) or None

    def before_call(self, tool: str, arguments: dict[str, Any] | None) -> int:
        """Run before a call is sent downstream: a write forgets what it may change.

        Returns the number of cache entries forgotten (by the write or by a periodic
        compaction boundary, ``dedup.compact_every``).
        """
        self.calls += 1
        gone = 0
        every = self.config.dedup.compact_every
        if every and self.calls > 1 and (self.calls - 1) % every == 0:
            gone += self.compaction_boundary()
        if self.is_write(tool):
            touched = self.resources(tool, arguments)
            gone += self.cache.invalidate(touched)
            for stored in self.store.values():
                if touched is None or stored.resources is None or stored.resources & touched:
                    stored.changed_by = tool
        return gone

    def note_tool(self, tool: Any) -> Decision:
        """Decide a listed MCP tool's re-encoding from its name, annotations and
        description (:mod:`tersetalk.mcp.editsafe`), and remember it for its calls."""
        d = decide_tool(self.config, tool)
        self.decisions[tool.name] = d
        return d

    def decision(self, tool: str) -> Decision:
        """The tool's decision; a tool never listed is decided from its name alone."""
        d = self.decisions.get(tool)
        if d is None:
            d = self.decisions[tool] = decide(self.config, tool)
        return d

    def compaction_boundary(self) -> int:
        """The agent's context was compacted: earlier results may be gone from it."""
        self.compactions += 1
        return self.cache.invalidate(None)

    # --- one result ---------------------------------------------------------------

    def process(self, tool: str, arguments: dict[str, Any] | None, text: str) -> Processed:
        with _gc_paused():
            p = self._process(tool, arguments, text)
        limit = self.config.page_tokens
        if (limit is None or p.sent_tokens is None or p.sent_tokens <= limit
                or p.ref is None or self.store.get(p.ref) is None
                or self.store[p.ref].sent != p.text):  # fmt: skip
            return p
        pages = split_pages(p.text, limit, self.config.tokenizer)
        first = _with_page_line(pages, 1, {"ref": p.ref}, limit)
        return replace(p, text=first, sent_tokens=count_tokens(first, self.config.tokenizer),
                       hints=(*p.hints, "page"), pages=len(pages))  # fmt: skip

    def _process(self, tool: str, arguments: dict[str, Any] | None, text: str) -> Processed:
        t0 = time.perf_counter()
        cfg = self.config
        tok = cfg.tokenizer
        if len(text) > cfg.max_result_chars:  # before any work: not hashed, counted, parsed
            return Processed(text, "passthrough", "text", len(text), None, None, (), None, True,
                             TOO_LONG, time.perf_counter() - t0)  # fmt: skip
        key = digest(text)
        ref = self.ref_for(key)
        dedup = cfg.dedup_for(tool) and cfg.dedup.min_body_chars <= len(text)
        entry = self.cache.entries.get(key) if dedup else None
        if entry is not None and entry.ref in self.store:  # the hot path: no tokenizer
            # (a body whose sent text the store no longer holds is not referenced: the
            # hint promises that tersetalk_get returns it)
            self.cache.hit(key)
            self.store.move_to_end(entry.ref)
            return Processed(H.reference_call(entry.ref, RETRIEVAL_TOOL), "ref", "unparsed",
                             len(text), entry.raw_tokens, entry.hint_tokens, ("ref",), ref,
                             True, None, time.perf_counter() - t0)  # fmt: skip
        if dedup:
            self.cache.misses += 1
        counting = count_tokens_aside(text, tok)  # beside the parse (in the count helper)
        rows = 2 * cfg.search_sample + 1 if cfg.search_sample else None
        source, value, parsed = _structured(text, cfg.max_result_chars, rows)
        tokens = _Counts(tok, text, counting)  # a large text is counted once
        if not isinstance(parsed, Records):  # (the table path reads it after its own work)
            tokens.raw()

        def done(sent: str, kind: str, source: str, hints: tuple[str, ...] = (),
                 ref: str | None = None, lossless: bool = True,
                 fallback: str | None = None) -> Processed:  # fmt: skip
            return Processed(sent, kind, source, len(text), tokens.raw(), tokens(sent), hints,
                             ref, lossless, fallback, time.perf_counter() - t0)  # fmt: skip

        resources = self.resources(tool, arguments)

        def remember(sent: str, value: Any, structured: bool) -> None:
            self._remember(key, ref, tool, resources, tokens.raw(), dedup, text, sent, value,
                           structured)  # fmt: skip

        if dedup and cfg.hints.near_ref and source in ("json", "literal"):
            near = self._near_ref(tool, value, text, ref)
            if near is not None:
                remember(near, value, True)
                return done(near, "near-ref", source, ("near-ref",), ref)
        if source == "text":
            remember(text, value, False)
            return done(text, "passthrough", source, ref=ref)
        if not self.decision(tool).encode:  # a client may quote it back: as it came
            remember(text, value, True)
            return replace(done(text, "passthrough", source, ref=ref), verbatim=True)
        if source == "markdown":
            sent, hints, lossless, fallback = self._markdown(text, tokens, parsed)
        else:
            sent, hints, lossless, fallback = self._encode(tool, arguments, value, ref, parsed,
                                                           tokens)  # fmt: skip
        if sent is not None and not _utf8(sent):  # a lone surrogate the JSON escaped
            sent, fallback = None, "the encoding holds a lone surrogate; sent as it came"
        if sent is None or (lossless and tokens(sent) >= tokens.raw()):
            remember(text, value, True)
            return done(text, "passthrough", source, ref=ref, fallback=fallback)
        remember(sent, value, True)
        return done(sent, "encoded", source, hints, ref, lossless, fallback)

    def ref_for(self, key: str) -> str:
        """The reference of the body whose SHA-256 is ``key``: its first 8 hex digits, or
        the whole digest if another body of this session was given those 8 already.

        A reference, once given, names one body for the rest of the session, so a hint
        in the agent's context never comes to name another result."""
        short = key[:8]
        if self.issued.setdefault(short, key) == key:
            return short
        return key

    def _remember(self, key: str, ref: str, tool: str, resources: frozenset[str] | None,
                  raw_tokens: int, dedup: bool, original: str, sent: str, value: Any,
                  structured: bool) -> None:  # fmt: skip
        if dedup:
            hint = count_tokens(H.reference_call(ref, RETRIEVAL_TOOL), self.config.tokenizer)
            self.cache.record(key, Entry(ref, tool, resources, value, structured, raw_tokens,
                                         hint))  # fmt: skip
        self.store[ref] = _Stored(sent, original, value, structured, resources)
        self.store.move_to_end(ref)
        while len(self.store) > self.config.retrieval.keep:
            self.store.popitem(last=False)

    # --- encoders -----------------------------------------------------------------

    @staticmethod
    def _markdown(text: str, tokens: _Counts, spans: Any) -> tuple[str | None, tuple[str, ...],
                                                                   bool, str | None]:  # fmt: skip
        from tersetalk.formats.markdown import decode_markdown, encode_markdown

        m = encode_markdown(text, "mckp", tokenizer=tokens.tokenizer, spans=spans,
                            source_tokens=tokens(text))  # fmt: skip
        tokens.known[m.text] = m.tokens
        if not m.replaced:
            if m.declined_why or m.declined:
                why = m.declined_why or f"{m.declined} table(s) would not decode to the same text"
                return None, (), True, f"markdown kept as it came: {why}"
            return None, (), True, None
        try:  # the proof, independent of the encoder's own check: the same bytes back
            same, why = decode_markdown(m.text) == text, "it decodes to other text"
        except (ValueError, TreeError) as exc:
            same, why = False, str(exc)
        if not same:
            return None, (), True, f"markdown re-encoding does not read back ({why[:120]})"
        return m.text, ("encoded",), True, None

    def _encode(self, tool: str, arguments: dict[str, Any] | None, value: Any, ref: str,
                node: Any, tokens: _Counts) -> tuple[str | None, tuple[str, ...], bool,
                                                     str | None]:  # fmt: skip
        """The text to send for a structured result (None: the downstream's text), its
        hint families, whether it is lossless, and the fallback.

        Under a budget, what lossless would send goes instead when it fits the budget, or
        when the budgeted text and fetching everything it leaves out would cost more
        tokens than it (the budget rule of the module docstring)."""
        from tersetalk.formats.solver import SolveCache

        cfg = self.config
        budget = cfg.budget_for(tool)
        meta = self._metadata(tool, arguments, value) if cfg.hints.metadata else None
        # the lossless and the budgeted solve share it; it starts with the result's count
        # (its compact JSON is often the text as sent) and the value the tree was read from
        cache = SolveCache(cfg.tokenizer, known=tokens.known)
        tabled = None
        if isinstance(node, Records):  # a long array of records of this shape: no tree
            tabled = encode_records(value, node, tokenizer=cfg.tokenizer, known=tokens.known)
            node = None
        if tabled is None:
            tokens.raw()  # the knapsack may weigh the text as sent: counted once, here
            node = self._tree(node, value, cache)
        whole = self._encode_within(node, value, ref, meta, None, cache, tokens, tabled)
        if budget is None:
            return whole
        # what lossless sends: its text where that is smaller, else the downstream's
        raw = tokens.raw()
        lossless_cost = raw if whole[0] is None else min(tokens(whole[0]), raw)
        if lossless_cost <= budget:
            return whole
        if cfg.budget_within_lossless:
            # what the budget leaves out costs about its share of the result's compact
            # JSON to fetch (what the calls return): where that share alone passes
            # lossless, the budgeted text is taken to lose and is not solved (an
            # estimate; the module docstring says how it was checked)
            rest = tokens(compact_json(value)) * (1 - budget / lossless_cost)
            if rest > lossless_cost:
                return (*whole[:3], f"budget {budget}: fetching what it would leave out "
                                    f"costs about {rest:.0f} tokens, more than lossless "
                                    f"({lossless_cost}); sent lossless")  # fmt: skip
        node = self._tree(node, value, cache)
        part = self._encode_within(node, value, ref, meta, budget, cache, tokens)
        text, _hints, lossless, fallback = part
        if text is None:  # it did not read back: as lossless sends it
            return whole
        if fallback is not None and fallback.startswith("budget "):
            return (*whole[:3], fallback)
        if not cfg.budget_within_lossless:  # a cap, whatever fetching the rest costs
            return part
        cost = tokens(text) + (0 if lossless else self._rest_tokens(text, value, tokens))
        if cost > lossless_cost:
            what = "it" if lossless else "it and fetching what it leaves out"
            return (*whole[:3], f"budget {budget}: sending {what} costs {cost} tokens, more "
                                f"than lossless ({lossless_cost}); sent lossless")  # fmt: skip
        return part

    @staticmethod
    def _tree(node: Any, value: Any, cache: Any) -> Any:
        """``node``, or the tree of ``value`` built where the table path left none;
        ``cache`` takes ``value`` as the tree's (idempotent)."""
        node = from_python(value) if node is None else node
        cache.seed_python(node, value)
        return node

    def _encode_within(self, node: Any, value: Any, ref: str, meta: str | None,
                       budget: int | None, cache: Any, tokens: _Counts, solved: Any = None,
                       ) -> tuple[str | None, tuple[str, ...], bool, str | None]:  # fmt: skip
        """The knapsack's text for ``node`` within ``budget`` (None: lossless), its
        overflow hints naming ``tersetalk_get``, read back where it is lossless.
        ``solved``: the lossless encoding, already found (the table path of
        :mod:`tersetalk.formats.records`)."""
        from tersetalk.formats.solver import BudgetError, decode, encode

        cfg = self.config
        extra = tokens(meta + "\n") if meta else 0
        fallback = None
        enc, text = None, ""
        target = None if budget is None else budget - extra
        for _ in range(6):  # the retrieval calls are longer than the solver's get(): refit
            if target is not None and target <= 0:
                break
            try:
                enc = solved if target is None and solved is not None else encode(
                    node, "mckp", budget=target, tokenizer=cfg.tokenizer, cache=cache,
                    sample=cfg.search_sample if target is None else None)  # fmt: skip
            except BudgetError:
                enc = None
                break
            text = _retrieval_hints(enc.text, ref, value)
            if text == enc.text:
                tokens.known[text] = enc.tokens  # the solver counted it
            if target is None:
                break
            over = tokens(text) + extra - budget
            if over <= 0:
                break
            target -= over
            enc = None
        if enc is None:  # nothing within the budget keeps the root: send it all
            fallback = f"budget {budget}: no encoding with its hints fits; sent lossless"
            enc = encode(node, "mckp", tokenizer=cfg.tokenizer, cache=cache,
                         sample=cfg.search_sample)  # fmt: skip
            text = enc.text
        if enc.fallback:
            fallback = enc.fallback
        hints = [h.family for h in H.split_hints(text)[0]]
        if meta:
            text = meta + "\n" + text
            hints.insert(0, "query")
        if enc.lossless and not (enc.read_back and text == enc.text):
            # (a text the solver has read back as this value is not decoded again)
            try:
                ok = same_value(decode(text), value)
            except ValueError as exc:
                ok, why = False, str(exc)
            else:
                why = "decoded to a different value"
            if not ok:  # fail closed: never send a lossless text that reads back otherwise
                return None, (), True, f"the encoding does not read back ({why[:120]})"
        return text, tuple(hints), enc.lossless, fallback

    def _rest_tokens(self, text: str, value: Any, tokens: _Counts) -> int:
        """The tokens of every ``tersetalk_get`` answer a reader of ``text`` needs to get
        all it leaves out: each overflow hint's call, and the further pages of an answer
        over ``page_tokens`` (what :meth:`retrieve` would return for them)."""
        limit = self.config.page_tokens
        total = 0
        for line in text.split("\n"):
            m = _RETRIEVAL_CALL.match(line)
            if not m:
                continue
            args = json.loads(m.group(1))
            answer = self._part(args["ref"], _Stored("", "", value, True), args["path"],
                                args.get("keys"))  # fmt: skip
            n = tokens(answer)
            if limit is not None and n > limit:
                pages = split_pages(answer, limit, tokens.tokenizer)
                n = sum(tokens(_with_page_line(pages, k, args, limit))
                        for k in range(1, len(pages) + 1))  # fmt: skip
            total += n
        return total

    def _metadata(self, tool: str, arguments: dict[str, Any] | None, value: Any) -> str | None:
        """The metadata hint of a page of a larger set, or None if ``value`` is not one."""
        if not isinstance(value, dict):
            return None
        arrays = [v for v in value.values() if isinstance(v, list)]
        totals = [
            value[k]
            for k in TOTAL_KEYS
            if isinstance(value.get(k), int) and not isinstance(value.get(k), bool)
        ]
        if len(arrays) != 1 or not totals or totals[0] <= len(arrays[0]):
            return None
        query = tool + (" " + compact_json(arguments) if arguments else "")
        if len(query) > 120:
            query = tool
        return H.metadata(query, totals[0], len(arrays[0]))

    def _near_ref(self, tool: str, value: Any, text: str, own: str) -> str | None:
        hints = self.config.hints
        if len(text) < hints.near_ref_min_body_chars:
            return None
        for entry in reversed(self.cache.entries.values()):
            if entry.tool != tool or not entry.structured:
                continue
            delta = scalar_delta(entry.value, value)
            if not delta or not same_value(apply_delta(entry.value, delta), value):
                continue  # equal (a reference's case), another shape, or no exact delta
            # the delta payload: the old and new values (what the design bounds at 50 bytes)
            size = sum(len(compact_json(a).encode()) + len(compact_json(b).encode())
                       for _, a, b in delta)  # fmt: skip
            if size > hints.near_ref_max_delta_chars:
                continue
            body = ", ".join(f"{H.path_text(p)}: {compact_json(a)}→{compact_json(b)}"
                             for p, a, b in delta)  # fmt: skip
            return H.near_reference_call(entry.ref, body, own, RETRIEVAL_TOOL)
        return None

    # --- the retrieval tool ------------------------------------------------------

    def changed_note(self, ref: str) -> str | None:
        """A line saying that a write ran after the result ``ref`` names (so what
        ``tersetalk_get`` returns may be out of date), or None if none did."""
        stored = self.store.get(ref)
        if stored is None or stored.changed_by is None:
            return None
        return (f"[note: {stored.changed_by} ran after this result and may have changed what "
                "it shows; this is the result as it was sent then, call the tool again for "
                "the current content]")  # fmt: skip

    def retrieve(self, ref: str, path: str | None = None, keys: list[str] | None = None,
                 page: int | None = None, original: bool = False) -> str:  # fmt: skip
        """What ``tersetalk_get`` returns: the text the downstream sent for ``ref`` (no
        path), as it came, or the part of its value at ``path`` (``$.rows[5:]``,
        ``$.a["b c"][2]``) as compact JSON, restricted to ``keys`` of an object if given.

        ``page`` k (from 1) without path or keys is page k of the text the proxy sent
        for ``ref`` (``original``: of the downstream's text); with them, of that part.
        An answer over ``page_tokens`` is paged even when no page was asked for: page 1,
        its last line naming the call for page 2."""
        stored = self.store.get(ref)
        if stored is None:
            raise RetrievalError(
                f"ref {ref!r} is not held (the proxy keeps the last "
                f"{self.config.retrieval.keep} results); call the tool again"
            )
        if isinstance(page, bool) or (page is not None and (not isinstance(page, int) or page < 1)):
            raise RetrievalError("page is a whole number from 1")
        args: dict[str, Any] = {"ref": ref}
        if (path is None or path == "") and not keys:
            if page is not None and not original:
                whole = stored.sent
            else:
                whole = stored.original
                args["original"] = True
        else:
            whole = self._part(ref, stored, path or "$", keys)
            args.update({"path": path or "$", **({"keys": keys} if keys else {})})
        return self._page(whole, args, page or 1)

    def _part(self, ref: str, stored: _Stored, path: str, keys: list[str] | None) -> str:
        if not stored.structured:
            raise RetrievalError(f"ref {ref} is text, not structured data; omit path")
        part = resolve(stored.value, path)
        if keys:
            if not isinstance(part, dict):
                raise RetrievalError(f"{path} is not an object; keys apply to objects")
            missing = [k for k in keys if k not in part]
            if missing:
                raise RetrievalError(f"{path} has no key(s) {', '.join(map(repr, missing))}")
            part = {k: v for k, v in part.items() if k in keys}
        return compact_json(part)

    def _page(self, whole: str, args: dict[str, Any], page: int) -> str:
        """Page ``page`` of ``whole`` with its line, or ``whole`` if it fits one page."""
        limit = self.config.page_tokens
        if limit is None or count_tokens(whole, self.config.tokenizer) <= limit:
            if page != 1:
                raise RetrievalError("this answer is one page; omit page")
            return whole
        pages = split_pages(whole, limit, self.config.tokenizer)
        if page > len(pages):
            raise RetrievalError(f"there are {len(pages)} pages; page is 1 to {len(pages)}")
        return _with_page_line(pages, page, args, limit)


# --- helpers ------------------------------------------------------------------------


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for one result's work, then as it was.

    Why: encoding a large result allocates many short-lived plans and strings, and each
    collection that runs meanwhile walks every live object, the result's tree and the
    solver's caches included (up to a third of a 100 KB result's time). Reference
    counting frees what it did as before; reference cycles wait for the next collection.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def fallback_kind(fallback: str | None) -> str | None:
    """A fixed name for why the pipeline fell back (its message may quote the payload)."""
    if not fallback:
        return None
    for prefix, name in FALLBACK_KINDS:
        if fallback.startswith(prefix):
            return name
    return "other"


def _utf8(text: str) -> bool:
    """Whether ``text`` can go over the wire (stdio is UTF-8: no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _structured(text: str, max_chars: int, rows: int | None = None) -> tuple[str, Any, Any]:
    """(source, value, parsed): JSON, a Python literal, Markdown with tables, or plain
    text; ``parsed`` is what was read on the way and need not be read again (JSON's
    tree, Markdown's table spans; None otherwise). For a list of at least ``rows``
    records of one shape (:func:`tersetalk.formats.records.table_records`) it is that:
    such a list is JSON data as it is, and its tree is built only if it is needed."""

    stripped = text.lstrip(" \t\r\n")[:1]
    if stripped in ("{", "["):
        try:
            value = load_json(text)
        except TreeError:
            value, source = parse_literal(text, max_chars=max_chars), "literal"
        else:
            source = "json"
        if value is None and source == "literal":
            return "text", None, None
        records = None if rows is None else table_records(value, rows)
        if records is not None:
            return source, value, records
        try:
            node = from_python(value)
        except TreeError:  # nested deeper than the encoders follow, or no JSON data
            return "text", None, None
        return source, value, node
    if "|" in text:
        from tersetalk.formats.markdown import table_spans

        spans = table_spans(text)
        if spans:
            return "markdown", None, spans
    return "text", None, None


#: the modules the count helper process imports before its first answer: what the
#: pipeline asks of it (the table path's first rows, the knapsack's aliased solve)
HELPER_PRELOAD = ("tersetalk.formats.records", "tersetalk.formats.solver")


_PATH_TOKEN = re.compile(
    r'\.([A-Za-z_][A-Za-z0-9_]*)|\[("(?:[^"\\]|\\.)*")\]|\[(-?\d+)\]|\[(\d*):(\d*)\]'
)


def resolve(value: Any, path: str) -> Any:
    """The part of ``value`` at a path as the hints write them (``$``, ``.k``, ``["k"]``,
    ``[i]``, and a final slice ``[i:]`` / ``[i:j]`` of an array or a string)."""
    if not path.startswith("$"):
        raise RetrievalError(f"path {path!r} must start with $ (e.g. $.rows[5:])")
    pos, cur = 1, value
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if not m:
            raise RetrievalError(f"path {path!r}: cannot read {path[pos : pos + 20]!r}")
        name, quoted, index, lo, hi = m.groups()
        if name is not None or quoted is not None:
            key = name if name is not None else json.loads(quoted)
            if not isinstance(cur, dict) or key not in cur:
                raise RetrievalError(f"path {path!r}: no key {key!r} at {path[:pos]}")
            cur = cur[key]
        elif index is not None:
            i = int(index)
            if not isinstance(cur, list) or not -len(cur) <= i < len(cur):
                raise RetrievalError(f"path {path!r}: no item {i} at {path[:pos]}")
            cur = cur[i]
        else:
            if m.end() != len(path):
                raise RetrievalError(f"path {path!r}: a slice must come last")
            if not isinstance(cur, list | str):
                raise RetrievalError(f"path {path!r}: {path[:pos]} is not an array or a string")
            cur = cur[int(lo) if lo else None : int(hi) if hi else None]
        pos = m.end()
    return cur


def scalar_delta(old: Any, new: Any, path: tuple = ()) -> list[tuple[tuple, Any, Any]] | None:
    """The (path, old, new) scalar changes that turn ``old`` into ``new``, or None if the
    two differ in shape (keys, key order, array lengths, a container for a scalar).
    An empty list means equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        if list(old) != list(new):
            return None
        out: list = []
        for k in old:
            sub = scalar_delta(old[k], new[k], (*path, k))
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return None
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            sub = scalar_delta(a, b, (*path, i))
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(old, dict | list) or isinstance(new, dict | list):
        return None
    return [] if same_value(old, new) else [(path, old, new)]


def apply_delta(value: Any, delta: list[tuple[tuple, Any, Any]]) -> Any:
    """``value`` with each (path, old, new) of a near-ref delta applied (a copy)."""
    out = json.loads(json.dumps(value))
    for path, _old, new in delta:
        if not path:
            return new
        cur = out
        for p in path[:-1]:
            cur = cur[p]
        cur[path[-1]] = new
    return out


_OVERFLOW = re.compile(
    r"^> \[\+(\d+) more (items|keys|chars) of (.*?)(?:: (.*))?\. call get\((.*)\)\]$"
)


def _retrieval_hints(text: str, ref: str, value: Any) -> str:
    """Overflow hints rewritten to name the proxy's retrieval call, each resolved now."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _OVERFLOW.match(line)
        if not m:
            continue
        n, what, path, names, call = m.groups()
        args: dict[str, Any] = {"ref": ref}
        if what == "items":
            args["path"] = call
        elif what == "keys":
            keys = json.loads("[" + names + "]")
            args["path"] = path
            args["keys"] = keys
        else:  # chars: the rest of the string after what was kept
            whole = resolve(value, path)
            args["path"] = f"{path}[{len(whole) - int(n)}:]"
        resolve(value, args["path"])  # the claim holds now: the path exists
        head = line[: line.index(". call get(")]
        lines[i] = f"{head}. call {RETRIEVAL_TOOL} {compact_json(args)}]"
    return "\n".join(lines)


#: an overflow hint as the proxy writes it: its ``tersetalk_get`` arguments
_RETRIEVAL_CALL = re.compile(r"^> \[\+\d+ more (?:items|keys|chars) of .*\. call "
                             + RETRIEVAL_TOOL + r" (\{.*\})\]$")  # fmt: skip

#: tokens kept free on every page for its page line
PAGE_LINE_TOKENS = 80


def page_line(page: int, pages: int, args: dict[str, Any], limit: int) -> str:
    """The line that ends page ``page`` of ``pages``: it names the call for the next."""
    if page == pages:
        return f"> [page {page} of {pages}, the last (pages of at most {limit} tokens)]"
    nxt = json.dumps({**args, "page": page + 1}, ensure_ascii=False, separators=(",", ":"))
    return (f"> [page {page} of {pages}: the result goes on (pages of at most {limit} "
            f"tokens). call {RETRIEVAL_TOOL} {nxt}]")  # fmt: skip


def _with_page_line(pages: list[str], page: int, args: dict[str, Any], limit: int) -> str:
    # always one line break of its own before the page line, so the page is exactly
    # what precedes that break
    return f"{pages[page - 1]}\n{page_line(page, len(pages), args, limit)}"


def split_pages(text: str, limit: int, tokenizer: str) -> list[str]:
    """``text`` cut into pages of at most ``limit - PAGE_LINE_TOKENS`` tokens each, at
    line ends where a line fits (a longer line is cut between characters); the pages
    concatenated are ``text`` exactly. Deterministic: the same text, limit and tokenizer
    give the same pages."""
    room = max(limit - PAGE_LINE_TOKENS, 1)
    pieces: list[str] = []
    for line in text.splitlines(keepends=True):
        if count_tokens(line, tokenizer) <= room:
            pieces.append(line)
            continue
        step = max(room // 4, 1)  # a character is at most 4 bytes, a byte at most a token
        pieces.extend(line[i : i + step] for i in range(0, len(line), step))
    pages: list[str] = []
    current: list[str] = []
    used = 0
    for piece in pieces:
        n = count_tokens(piece, tokenizer)
        if current and used + n > room:
            pages.append("".join(current))
            current, used = [], 0
        current.append(piece)
        used += n
    if current:
        pages.append("".join(current))
    # pieces joined may tokenize a little differently from their sum: recheck, and move
    # a page's last piece on until each page is within the room
    out: list[str] = []
    for page in pages:
        out.extend(_fit(page, room, tokenizer))
    return out


def _fit(page: str, room: int, tokenizer: str) -> list[str]:
    if count_tokens(page, tokenizer) <= room or len(page) <= 1:
        return [page]
    cut = len(page) // 2
    newline = page.rfind("\n", 0, cut)
    if newline > 0:
        cut = newline + 1
    return _fit(page[:cut], room, tokenizer) + _fit(page[cut:], room, tokenizer)
