"""MB-3: encode and decode time and bytes on wire of every wire format, same messages.

For each corpus group every codec encodes every message's fields to bytes and
decodes them back. Round trips are checked before timing (each codec must give
back exactly the fields it was given). Encode and decode are timed separately,
interleaved with all other codecs; ratios are against ``freeform_text``, the
free-form message the ``freeform`` system sends: ``speedup_vs_baseline`` above
1 is faster, ``bytes_vs_baseline`` below 1 is smaller.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial

import pandas as pd

from .codecs import BASELINE, CODECS
from .corpus import group_order
from .defaults import DEFAULT_MIN_BATCH_NS, DEFAULT_WARMUP
from .fields import Fields, Key
from .results import EquivalenceError, finish, speedup_range
from .timing import measure

log = logging.getLogger(__name__)
OPERATIONS = ("encode", "decode")


def _consume(fn: Callable, items: Sequence) -> None:
    deque(map(fn, items), maxlen=0)


def check_round_trip(name: str, keys: Sequence[Key]) -> list[bytes]:
    """Encoded messages; :class:`EquivalenceError` unless each decodes to its own fields."""
    codec = CODECS[name]
    encoded = [codec.encode(k) for k in keys]
    for i, (key, data) in enumerate(zip(keys, encoded, strict=True)):
        if not isinstance(data, bytes):
            raise EquivalenceError(f"MB-3: {name} encoded message {i} to {type(data).__name__}")
        back = codec.decode(data)
        if back != key:
            raise EquivalenceError(
                f"MB-3: {name} did not round-trip message {i}: got {back!r}, want {key!r}"
            )
    return encoded


def run_mb3(
    corpus: pd.DataFrame,
    *,
    repeats: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    min_batch_ns: int = DEFAULT_MIN_BATCH_NS,
    seed: int = 0,
    codecs: Sequence[str] | None = None,
) -> pd.DataFrame:
    names = list(codecs or CODECS)
    if BASELINE not in names:
        names.insert(0, BASELINE)
    rows: list[dict] = []
    for group in group_order(corpus["group"]):
        sub = corpus[corpus["group"] == group]
        keys = [Fields.from_json(s).key() for s in sub["fields"]]
        encoded = {n: check_round_trip(n, keys) for n in names}
        funcs: dict[str, Callable[[], None]] = {}
        for n in names:
            funcs[f"{n}/encode"] = partial(_consume, CODECS[n].encode, keys)
            funcs[f"{n}/decode"] = partial(_consume, CODECS[n].decode, encoded[n])
        timings = measure(funcs, repeats=repeats, warmup=warmup, min_batch_ns=min_batch_ns,
                          seed=seed)  # fmt: skip
        base_bytes = sum(map(len, encoded[BASELINE]))
        for n in names:
            n_bytes = sum(map(len, encoded[n]))
            for op in OPERATIONS:
                base, t = timings[f"{BASELINE}/{op}"], timings[f"{n}/{op}"]
                rows.append({
                    "group": group,
                    "source": str(sub["source"].iloc[0]),
                    "n_messages": len(sub),
                    "codec": n,
                    "library": CODECS[n].library,
                    "description": CODECS[n].describe,
                    "operation": op,
                    "baseline": BASELINE,
                    "is_baseline": n == BASELINE,
                    "bytes": n_bytes,
                    "bytes_per_message": n_bytes / len(sub),
                    "bytes_vs_baseline": n_bytes / base_bytes,
                    **t.as_dict(),
                    "ns_per_message": t.median_ns / len(sub),
                    "mb_per_s": n_bytes / t.median_ns * 1e3,
                    "speedup_vs_baseline": base.median_ns / t.median_ns,
                    "speedup_vs_baseline_cpu": base.cpu_median_ns / t.cpu_median_ns,
                    **speedup_range(base, t),
                    "round_trip_equal": True,
                })  # fmt: skip
        _log_group(group, len(sub), rows[-2 * len(names) :])
    return finish(rows, "MB-3", {"warmup": warmup, "min_batch_ns": min_batch_ns, "seed": seed})


def _log_group(group: str, n: int, rows: list[dict]) -> None:
    by_codec: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_codec.setdefault(r["codec"], {})[r["operation"]] = r
    parts = []
    for codec, ops in by_codec.items():
        enc, dec = ops["encode"], ops["decode"]
        parts.append(
            f"{codec} {enc['bytes_per_message']:.0f} B/msg "
            f"({enc['bytes_vs_baseline']:.2f}x bytes), "
            f"encode {enc['ns_per_message'] / 1e3:.2f} us ({enc['speedup_vs_baseline']:.2f}x), "
            f"decode {dec['ns_per_message'] / 1e3:.2f} us ({dec['speedup_vs_baseline']:.2f}x)"
        )
    log.info("MB-3 %s (%d messages, every codec round-trips): %s", group, n, "; ".join(parts))
