"""MB-2: message boundaries in a chunked byte stream, newline framing vs sentence detection.

One stream is built from the corpus (a seeded shuffle of its messages, up to
``stream_bytes`` of JSONL): the JSONL stream is every message's lines, each
ending in ``\\n``; the prose stream is the same messages as ``jsonl_to_prose``
paragraphs. Each stream is cut into chunks of each size and fed to:

* ``newline_framer`` -- a plain ``\\n`` splitter over bytes (framing only);
* ``newline_framer_orjson`` -- the same plus ``orjson.loads`` per line, nothing
  checked: the limit (``ratio_vs_limit``) a stream parser is measured against;
* ``newline_framer_models`` -- the limit plus line models assembled with no
  check: the floor of any reader that returns models (``floor`` in the log);
* ``stream_reader_strict`` / ``stream_reader_lenient`` -- the protocol's
  :class:`~tersetalk.protocol.StreamReader`, which frames and also parses each
  line into a validated model (strict), or repairs it (lenient);
* ``stream_reader_strict_arrays`` -- ``StreamReader(strict=True, arrays=True)``:
  the same checks and the same lines, as canonical arrays instead of models;
* ``sentence_regex`` (baseline) -- incremental UTF-8 decoding and the regex
  sentence splitter of :mod:`.framing` over the prose stream.

Before timing, every method's units for every chunk size are checked against the
same stream fed in one piece (and the framers against the known line count).
The stream mixes the corpus's groups, so each row says what it holds: ``source``
is ``real``, ``synthetic`` or ``real+synthetic``, with ``n_real_messages``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import pandas as pd

from tersetalk.protocol import StreamReader, parse_strict
from tersetalk.protocol.codec import parse_strict_reference

from .corpus import REAL_GROUP, SOURCE_REAL, SOURCE_SYNTHETIC
from .defaults import (
    DEFAULT_CHUNK_SIZES,
    DEFAULT_MIN_BATCH_NS,
    DEFAULT_STREAM_BYTES,
    DEFAULT_WARMUP,
)
from .framing import NewlineFramer, NewlineJSONFramer, NewlineModelsFramer, SentenceSplitter
from .results import (
    SEED_TARGETS,
    EquivalenceError,
    finish,
    limit_columns,
    speedup_range,
    target_verdict,
)
from .timing import measure

log = logging.getLogger(__name__)
TARGET = SEED_TARGETS["mb2"]


@dataclass(frozen=True)
class Framer:
    name: str
    stream: str  # jsonl | prose
    factory: Callable[[], object]
    family: str  # newline | sentence
    describe: str


FRAMERS: dict[str, Framer] = {
    f.name: f
    for f in (
        Framer("sentence_regex", "prose", SentenceSplitter, "sentence",
               "incremental UTF-8 decode + regex sentence boundaries (abbreviation-aware)"),
        Framer("newline_framer", "jsonl", NewlineFramer, "newline",
               "plain newline splitter over bytes"),
        Framer("newline_framer_orjson", "jsonl", NewlineJSONFramer, "newline",
               "newline splitter + orjson.loads per line (nothing checked): the limit"),
        Framer("newline_framer_models", "jsonl", NewlineModelsFramer, "newline",
               "newline splitter + orjson.loads per line + models assembled unchecked: "
               "the floor of a reader that returns models"),
        Framer("stream_reader_strict", "jsonl", partial(StreamReader, strict=True), "newline",
               "tersetalk.protocol.StreamReader(strict=True): frames and parses lines"),
        Framer("stream_reader_strict_arrays", "jsonl",
               partial(StreamReader, strict=True, arrays=True), "newline",
               "tersetalk.protocol.StreamReader(strict=True, arrays=True): frames and checks "
               "lines, returns their arrays"),
        Framer("stream_reader_lenient", "jsonl", StreamReader, "newline",
               "tersetalk.protocol.StreamReader(): frames, parses and repairs lines"),
    )
}  # fmt: skip
BASELINE = "sentence_regex"
LIMIT = "newline_framer_orjson"
#: The floor of a reader that returns line models (the limit plus unchecked assembly).
FLOOR = "newline_framer_models"
#: The protocol's stream readers held to a share of the limit.
VALIDATING = ("stream_reader_strict", "stream_reader_strict_arrays")


@dataclass(frozen=True)
class Streams:
    jsonl: bytes
    prose: bytes
    n_messages: int
    n_lines: int
    #: messages of the stream that are real workflow messages (the rest are synthetic)
    n_real: int = 0

    @property
    def source(self) -> str:
        if self.n_real == 0:
            return SOURCE_SYNTHETIC
        if self.n_real == self.n_messages:
            return SOURCE_REAL
        return f"{SOURCE_REAL}+{SOURCE_SYNTHETIC}"


def _is_real(row) -> bool:
    source = getattr(row, "source", None)
    return source == SOURCE_REAL if source is not None else row.group == REAL_GROUP


def build_streams(
    corpus: pd.DataFrame, stream_bytes: int = DEFAULT_STREAM_BYTES, seed: int = 0
) -> Streams:
    """Whole messages in a seeded order until the JSONL stream reaches ``stream_bytes``.

    Messages over an eighth of the budget are skipped, so a few huge synthetic
    messages cannot make up the whole stream; a small corpus is cycled through
    again (in a new order) until the stream is long enough.
    """
    rows = [r for r in corpus.itertuples(index=False) if r.bytes_jsonl <= stream_bytes // 8]
    if not rows:
        raise ValueError("MB-2: the corpus has no message small enough for the stream")
    rng = random.Random(seed)
    jsonl: list[bytes] = []
    prose: list[bytes] = []
    size = n_lines = n_real = 0
    while size < stream_bytes:
        rng.shuffle(rows)
        for r in rows:
            if size >= stream_bytes:
                break
            data = r.jsonl.encode("utf-8") + b"\n"
            jsonl.append(data)
            prose.append(r.prose.encode("utf-8") + b"\n")
            size += len(data)
            n_lines += r.jsonl.count("\n") + 1
            n_real += _is_real(r)
    return Streams(b"".join(jsonl), b"".join(prose), len(jsonl), n_lines, n_real)


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def feed_all(factory: Callable[[], object], chunks: Sequence[bytes]) -> list:
    """Every unit the framer yields for these chunks, in order."""
    framer = factory()
    out: list = []
    for chunk in chunks:
        out += framer.feed(chunk)  # type: ignore[attr-defined]
    out += framer.close()  # type: ignore[attr-defined]
    return out


def _count_all(factory: Callable[[], object], chunks: Sequence[bytes]) -> int:
    framer = factory()
    feed = framer.feed  # type: ignore[attr-defined]
    n = 0
    for chunk in chunks:
        n += len(feed(chunk))
    return n + len(framer.close())  # type: ignore[attr-defined]


def check_framing(name: str, data: bytes, chunks: Sequence[bytes], whole: list) -> int:
    got = feed_all(FRAMERS[name].factory, chunks)
    if got != whole:
        raise EquivalenceError(
            f"MB-2: {name} gave {len(got)} units for chunks of {len(chunks[0])} bytes but "
            f"{len(whole)} for the stream in one piece"
        )
    return len(got)


def run_mb2(
    corpus: pd.DataFrame,
    *,
    chunk_sizes: Sequence[int] = DEFAULT_CHUNK_SIZES,
    stream_bytes: int = DEFAULT_STREAM_BYTES,
    repeats: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    min_batch_ns: int = DEFAULT_MIN_BATCH_NS,
    seed: int = 0,
    methods: Sequence[str] | None = None,
) -> pd.DataFrame:
    names = list(methods or FRAMERS)
    for required in (LIMIT, BASELINE):
        if required not in names:
            names.insert(0, required)
    streams = build_streams(corpus, stream_bytes, seed)
    data = {"jsonl": streams.jsonl, "prose": streams.prose}
    whole = {n: feed_all(FRAMERS[n].factory, [data[FRAMERS[n].stream]]) for n in names}
    if "newline_framer" in whole and len(whole["newline_framer"]) != streams.n_lines:
        raise EquivalenceError("MB-2: the newline framer did not find every JSONL line")
    # the Pydantic path (no fast path) defines the lines every reader must give
    reference = parse_strict_reference(streams.jsonl)
    if parse_strict(streams.jsonl) != reference:
        raise EquivalenceError("MB-2: parse_strict disagrees with its Pydantic path")
    for n in (FLOOR, "stream_reader_strict", "stream_reader_lenient"):
        if n in whole and whole[n] != reference:
            raise EquivalenceError(f"MB-2: {n} disagrees with parse_strict on the JSONL stream")
    arrays = [line.to_array() for line in reference]
    for n in (LIMIT, "stream_reader_strict_arrays"):
        if n in whole and whole[n] != arrays:
            raise EquivalenceError(f"MB-2: {n} did not give every line of the JSONL stream")
    log.info("MB-2 stream: %d messages (%d real), %d JSONL bytes in %d lines, %d prose bytes "
             "in %d sentences", streams.n_messages, streams.n_real, len(streams.jsonl),
             streams.n_lines, len(streams.prose), len(whole[BASELINE]))  # fmt: skip
    rows: list[dict] = []
    for size in sorted(chunk_sizes):
        chunks = {s: chunked(d, size) for s, d in data.items()}
        for n in names:
            check_framing(n, data[FRAMERS[n].stream], chunks[FRAMERS[n].stream], whole[n])
        funcs = {n: partial(_count_all, FRAMERS[n].factory, chunks[FRAMERS[n].stream])
                 for n in names}  # fmt: skip
        timings = measure(funcs, repeats=repeats, warmup=warmup, min_batch_ns=min_batch_ns,
                          seed=seed)  # fmt: skip
        base, limit = timings[BASELINE], timings[LIMIT]
        for n in names:
            f, t = FRAMERS[n], timings[n]
            n_bytes = len(data[f.stream])
            speedup = base.median_ns / t.median_ns
            is_newline = f.family == "newline"
            rows.append({
                "chunk_size": size,
                "n_chunks": len(chunks[f.stream]),
                "n_messages": streams.n_messages,
                "source": streams.source,
                "n_real_messages": streams.n_real,
                "method": n,
                "family": f.family,
                "stream": f.stream,
                "description": f.describe,
                "baseline": BASELINE,
                "is_baseline": n == BASELINE,
                "bytes": n_bytes,
                "units": len(whole[n]),
                **t.as_dict(),
                "ns_per_byte": t.median_ns / n_bytes,
                "mb_per_s": n_bytes / t.median_ns * 1e3,
                "speedup_vs_baseline": speedup,
                "speedup_vs_baseline_cpu": base.cpu_median_ns / t.cpu_median_ns,
                **speedup_range(base, t),
                **limit_columns(LIMIT, limit, t, n in VALIDATING),
                "seed_target": TARGET if is_newline else float("nan"),
                "meets_seed_target": (speedup >= TARGET) if is_newline else None,
                "seed_target_verdict": target_verdict(speedup, TARGET) if is_newline else "",
                "same_units_any_chunking": True,
            })  # fmt: skip
        _log_size(size, rows[-len(names) :])
    settings = {"warmup": warmup, "min_batch_ns": min_batch_ns, "seed": seed,
                "stream_bytes_target": stream_bytes}  # fmt: skip
    return finish(rows, "MB-2", settings)


def _log_size(size: int, rows: list[dict]) -> None:
    parts = [f"{r['method']} {r['mb_per_s']:.1f} MB/s ({r['speedup_vs_baseline']:.2f}x, "
             f"{r['ratio_vs_limit']:.2f} of the limit)" for r in rows]  # fmt: skip
    log.info("MB-2 chunks of %d bytes (same units for any chunking): %s", size, "; ".join(parts))
    for r in rows:
        if r["family"] == "newline":
            log.info("MB-2 chunks of %d bytes: %s vs %s %s", size, r["method"], r["baseline"],
                     r["seed_target_verdict"])  # fmt: skip
