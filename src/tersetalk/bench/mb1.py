"""MB-1: extracting every typed field from TerseTalk-JSONL vs from free-form text.

For each corpus group (the real messages, then each synthetic size) every
method extracts the fields of every message of the group; before anything is
timed, each method's result is checked against the group's known fields
(prose modulo the period its renderer adds) and a mismatch stops the run.
One timed call is one pass over the group; the ratio is the baseline's median
over the method's median, so a ratio above 1 means faster than the regex over
the free-form message the ``freeform`` system sends. Beside it every row has its
ratio to the limit (``ratio_vs_limit``: raw orjson over the whole message, which
checks nothing) and to the regex over prose (``speedup_vs_prose``); the
``jsonl_models_floor`` row is the limit plus line models assembled with no check, the
floor of any parser that returns models.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial

import pandas as pd

from .corpus import group_order
from .defaults import DEFAULT_MIN_BATCH_NS, DEFAULT_WARMUP
from .extract import BASELINE, LIMIT, METHODS, PROSE, VALIDATING, Extractor
from .fields import Fields, Key, prose_key
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
TARGET = SEED_TARGETS["mb1"]


def _consume(extract: Extractor, texts: Sequence[str]) -> None:
    deque(map(extract, texts), maxlen=0)


def check_extraction(name: str, texts: Sequence[str], truth: Sequence[Key]) -> int:
    """Raise :class:`EquivalenceError` unless ``name`` recovers every message's fields."""
    method = METHODS[name]
    compare: Callable[[Key], Key] = prose_key if method.representation == "prose" else (lambda k: k)
    for i, (text, want) in enumerate(zip(texts, truth, strict=True)):
        got = method.extract(text)
        if compare(got) != compare(want):
            raise EquivalenceError(
                f"MB-1: {name} did not recover the fields of message {i} from its "
                f"{method.representation} text: got {got!r}, want {want!r}"
            )
    return len(texts)


def run_mb1(
    corpus: pd.DataFrame,
    *,
    repeats: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    min_batch_ns: int = DEFAULT_MIN_BATCH_NS,
    seed: int = 0,
    methods: Sequence[str] | None = None,
) -> pd.DataFrame:
    names = list(methods or METHODS)
    for required in (LIMIT, BASELINE):
        if required not in names:
            names.insert(0, required)
    rows: list[dict] = []
    for group in group_order(corpus["group"]):
        sub = corpus[corpus["group"] == group]
        truth = [Fields.from_json(s).key() for s in sub["fields"]]
        n_items = int(sum(Fields.from_key(k).n_items for k in truth))
        texts = {rep: list(sub[rep]) for rep in ("jsonl", "freeform", "prose")}
        for name in names:
            check_extraction(name, texts[METHODS[name].representation], truth)
        funcs = {n: partial(_consume, METHODS[n].extract, texts[METHODS[n].representation])
                 for n in names}  # fmt: skip
        timings = measure(funcs, repeats=repeats, warmup=warmup, min_batch_ns=min_batch_ns,
                          seed=seed)  # fmt: skip
        base, limit = timings[BASELINE], timings[LIMIT]
        prose = timings.get(PROSE)
        for name in names:
            m, t = METHODS[name], timings[name]
            rep = m.representation
            n_bytes = int(sum(len(x.encode("utf-8")) for x in texts[rep]))
            speedup = base.median_ns / t.median_ns
            is_jsonl = m.family == "jsonl"
            rows.append({
                "group": group,
                "source": str(sub["source"].iloc[0]),
                "n_messages": len(sub),
                "n_items": n_items,
                "method": name,
                "family": m.family,
                "representation": rep,
                "description": m.describe,
                "baseline": BASELINE,
                "is_baseline": name == BASELINE,
                "bytes": n_bytes,
                **t.as_dict(),
                "ns_per_message": t.median_ns / len(sub),
                "ns_per_item": t.median_ns / max(n_items, 1),
                "mb_per_s": n_bytes / t.median_ns * 1e3,
                "speedup_vs_baseline": speedup,
                "speedup_vs_baseline_cpu": base.cpu_median_ns / t.cpu_median_ns,
                **speedup_range(base, t),
                **limit_columns(LIMIT, limit, t, name in VALIDATING),
                "speedup_vs_prose": prose.median_ns / t.median_ns if prose else float("nan"),
                "seed_target": TARGET if is_jsonl else float("nan"),
                "meets_seed_target": (speedup >= TARGET) if is_jsonl else None,
                "seed_target_verdict": target_verdict(speedup, TARGET) if is_jsonl else "",
                "fields_equal": True,
            })  # fmt: skip
        _log_group(group, len(sub), rows[-len(names) :])
    return finish(rows, "MB-1", {"warmup": warmup, "min_batch_ns": min_batch_ns, "seed": seed})


def _log_group(group: str, n: int, rows: list[dict]) -> None:
    base = next(r for r in rows if r["is_baseline"])
    parts = [
        f"{r['method']} {r['ns_per_message'] / 1e3:.2f} us/msg ({r['speedup_vs_baseline']:.2f}x, "
        f"{r['ratio_vs_limit']:.2f} of the limit)"
        for r in rows
    ]
    log.info("MB-1 %s (%d messages, all methods recover the same fields): %s",
             group, n, "; ".join(parts))  # fmt: skip
    best = max((r for r in rows if r["family"] == "jsonl"), key=lambda r: r["speedup_vs_baseline"])
    log.info("MB-1 %s: best JSONL extraction %s vs %s %s", group, best["method"],
             base["method"], best["seed_target_verdict"])  # fmt: skip
