"""The benchmark corpus: real messages of the workflow's runs plus a synthetic size sweep.

Each real message is reduced to its typed fields (:class:`Fields`) and both
representations are rendered from those fields, so the two sides of every
comparison carry exactly the same content:

* a TerseTalk-JSONL message (``tersetalk`` runs) gives its ``r g f p q v`` lines;
  an overflow line ``["o", summary, "M#k", method]`` stands in for the capped
  line it replaced and counts as a fact with its summary text; ``x``, ``t``,
  ``d`` lines (answers, notes, references) are not typed fields here;
* a free-form message in the ``freeform`` system's layout (``render_brief``)
  gives its goal, facts and question;
* other free text (model replies) gives what it states explicitly: a Critic's
  verdict word, a Worker's numbered steps; a message with no typed field is
  left out (and counted).

Texts are made canonical (whitespace collapsed); duplicates (the brief is sent
to the Worker and to the Critic) are kept once. A message whose prose rendering
is ambiguous for any regex (a text holding ". Fact: " and the like) is left out
and counted, so the benchmark's equality assertions can hold; the count is
logged as a warning, since it biases the real group towards easy messages.

Every row says where it comes from in its ``source`` column: ``real`` (a message
the workflow's runs sent) or ``synthetic`` (the seeded size sweep); the
benchmark tables carry it on. A corpus without a single real message (no run
files yet, or none with a usable message) is logged as a warning: its timings
then describe the synthetic sweep only.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from tersetalk.core.io import message_list, read_parquet
from tersetalk.protocol import OverflowLine, ProtocolError, parse_strict

from .defaults import DEFAULT_MAX_REAL, DEFAULT_PER_SIZE, DEFAULT_SIZES
from .extract import METHODS, extract_regex_freeform
from .fields import (
    Fields,
    FieldsError,
    Key,
    canonical_text,
    key_from_lines,
    prose_key,
    to_freeform,
    to_jsonl,
    to_prose,
)
from .synth import synthetic_sweep

log = logging.getLogger(__name__)

REAL_GROUP = "real"
#: the ``source`` column: a message of the workflow's runs, or of the synthetic sweep
SOURCE_REAL = "real"
SOURCE_SYNTHETIC = "synthetic"
SOURCES = (SOURCE_REAL, SOURCE_SYNTHETIC)
REPRESENTATIONS = ("jsonl", "freeform", "prose")

_LAYOUT_HEADERS = {"Facts:", "Plan:"}
_LAYOUT_LINE_RE = re.compile(
    r"(?:- |\d+\. |Goal: |Question(?: for the (?:Manager|Worker|Critic))?: "
    r"|Role: (?:Manager|Worker|Critic)$|Verdict: (?:accept|revise|escalate)$)"
)
_NUMBERED_RE = re.compile(r"^\s*(?:step\s*)?\d{1,2}[.)]\s+(\S.*)$", re.M | re.I)
_VERDICT_WORD_RE = re.compile(r"^\W*(accept|revise|escalate)", re.I)


def synthetic_group(size: int) -> str:
    return f"synthetic-{size:03d}"


def _canonical_key(key: Key) -> Fields | None:
    """Canonical :class:`Fields` of an extracted key; empty texts dropped."""
    role, goal, facts, plan, questions, verdict = key

    def texts(items: Iterable[str]) -> tuple[str, ...]:
        return tuple(t for t in (canonical_text(x) for x in items) if t)

    goal = canonical_text(goal) if goal is not None else None
    try:
        fields = Fields(
            role=role,
            goal=goal or None,
            facts=texts(facts),
            plan=texts(plan),
            questions=tuple(
                (to, q) for to, q in ((to, canonical_text(q)) for to, q in questions) if q
            ),  # fmt: skip
            verdict=verdict,
        )
    except FieldsError:
        return None
    return None if fields.is_empty() else fields


def _is_freeform_layout(text: str) -> bool:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return bool(lines) and all(
        ln in _LAYOUT_HEADERS or _LAYOUT_LINE_RE.match(ln) is not None for ln in lines
    )


def fields_from_message(msg: dict) -> tuple[Fields | None, str]:
    """The typed fields of one recorded message and how they were read.

    ``msg`` is one entry of a run's ``messages`` column (``content``, ``kind``...).
    Returns ``(None, reason)`` when the message holds no typed field.
    """
    content = msg.get("content") or ""
    kind = msg.get("kind", "")
    try:
        lines = parse_strict(content)
    except ProtocolError:
        lines = None
    if lines:
        lines = [ln if not isinstance(ln, OverflowLine) else _as_fact(ln) for ln in lines]
        return _canonical_key(key_from_lines(lines)), "jsonl"
    if _is_freeform_layout(content):
        return _canonical_key(extract_regex_freeform(content)), "freeform_layout"
    verdict = None
    if kind == "verdict":
        m = _VERDICT_WORD_RE.match(content)
        verdict = {"a": "A", "r": "R", "e": "E"}[m.group(1)[0].lower()] if m else None
    plan = tuple(_NUMBERED_RE.findall(content)) if kind in ("draft", "final") else ()
    return _canonical_key((None, None, (), plan, (), verdict)), "free_text"


def _as_fact(line: OverflowLine):
    from tersetalk.protocol import FactLine

    return FactLine(text=line.summary)


def ambiguity(fields: Fields) -> str | None:
    """Why some extractor cannot recover ``fields`` from its rendering, or ``None``."""
    reps = {"jsonl": to_jsonl(fields), "freeform": to_freeform(fields), "prose": to_prose(fields)}
    want = fields.key()
    for method in METHODS.values():
        got = method.extract(reps[method.representation])
        same = (
            prose_key(got) == prose_key(want) if method.representation == "prose" else got == want
        )
        if not same:
            return f"{method.name} cannot recover the fields from its {method.representation}"
    return None


def _row(fields: Fields, group: str, source: str, size: int, meta: dict) -> dict:
    reps = {"jsonl": to_jsonl(fields), "freeform": to_freeform(fields), "prose": to_prose(fields)}
    return {
        "group": group,
        "source": source,
        "size_nominal": size,
        "n_items": fields.n_items,
        **meta,
        "fields": fields.to_json(),
        **reps,
        **{f"bytes_{k}": len(v.encode("utf-8")) for k, v in reps.items()},
    }


_META_KEYS = ("task", "system", "variant", "example_id", "kind", "sender", "receiver", "origin")


def real_messages(run_paths: Iterable[str | Path]) -> tuple[list[dict], Counter]:
    """Rows for the distinct typed messages of the given run files, with counts."""
    counts: Counter = Counter()
    seen: set[Fields] = set()
    rows: list[dict] = []
    for path in sorted(map(str, run_paths)):
        df = read_parquet(path, "run")
        for rec in df.itertuples(index=False):
            messages = message_list(getattr(rec, "messages", None))
            for msg in messages:
                counts["messages"] += 1
                fields, origin = fields_from_message(msg)
                if fields is None:
                    counts["untyped"] += 1
                    continue
                if fields in seen:
                    counts["duplicates"] += 1
                    continue
                why = ambiguity(fields)
                if why:
                    counts["ambiguous"] += 1
                    log.info("left out an ambiguous message (%s): %s", path, why)
                    continue
                seen.add(fields)
                counts[f"origin_{origin}"] += 1
                meta = {
                    "task": str(getattr(rec, "task", "")),
                    "system": str(getattr(rec, "system", "")),
                    "variant": str(getattr(rec, "variant", "")),
                    "example_id": str(getattr(rec, "example_id", "")),
                    "kind": str(msg.get("kind", "")),
                    "sender": str(msg.get("sender", "")),
                    "receiver": str(msg.get("receiver", "")),
                    "origin": origin,
                }
                rows.append(_row(fields, REAL_GROUP, SOURCE_REAL, fields.n_items, meta))
    counts["kept"] = len(rows)
    return rows, counts


def build_corpus(
    run_paths: Iterable[str | Path] = (),
    *,
    sizes: list[int] | None = None,
    per_size: int = DEFAULT_PER_SIZE,
    max_real: int = DEFAULT_MAX_REAL,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """The corpus table and a summary of how it was built (for logs and metadata)."""
    run_paths = [str(p) for p in run_paths]
    sizes = DEFAULT_SIZES if sizes is None else sizes
    rows, counts = real_messages(run_paths)
    if len(rows) > max_real:
        keep = sorted(random.Random(seed).sample(range(len(rows)), max_real))
        counts["sampled_out"] = len(rows) - max_real
        rows = [rows[i] for i in keep]
        counts["kept"] = len(rows)
    blank = {k: "" for k in _META_KEYS}
    n_synth_ambiguous = 0
    for size, fields in synthetic_sweep(sizes, per_size, seed):
        if ambiguity(fields):  # the templates avoid it; checked all the same
            n_synth_ambiguous += 1
            continue
        rows.append(_row(fields, synthetic_group(size), SOURCE_SYNTHETIC, size,
                         {**blank, "origin": "synthetic"}))  # fmt: skip
    df = pd.DataFrame(rows)
    n_real = int((df["source"] == SOURCE_REAL).sum()) if len(df) else 0
    _warn_about_real_messages(run_paths, counts, n_real, n_synth_ambiguous)
    summary = {
        "runs": run_paths,
        "real": dict(sorted(counts.items())),
        "sizes": sizes,
        "per_size": per_size,
        "max_real": max_real,
        "seed": seed,
        "synthetic_ambiguous": n_synth_ambiguous,
        "rows": len(df),
        "n_real": n_real,
        "synthetic_only": n_real == 0,
    }
    return df, summary


def _warn_about_real_messages(
    run_paths: list[str], counts: Counter, n_real: int, n_synth_ambiguous: int
) -> None:
    """Say loudly what the corpus lacks: real messages, or the ones left out."""
    if counts.get("ambiguous", 0):
        log.warning(
            "%d of %d real messages left out: some extractor cannot recover their fields "
            "(ambiguous as prose); the real group is biased towards unambiguous messages",
            counts["ambiguous"],
            counts.get("messages", 0),
        )
    if n_synth_ambiguous:
        log.warning("%d synthetic messages left out as ambiguous", n_synth_ambiguous)
    if n_real == 0:
        why = (
            "no run files were given"
            if not run_paths
            else f"none of the {counts.get('messages', 0)} messages in {len(run_paths)} run "
            "files could be used"
        )
        log.warning(
            "the corpus has NO real workflow messages (%s): every benchmark row comes from "
            "the synthetic sweep (source=synthetic). Run the workflow first for real messages",
            why,
        )


def read_corpus(path: str | Path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    missing = {"group", "fields", *REPRESENTATIONS} - set(df.columns)
    if missing:
        raise ValueError(
            f"{path} is not a bench corpus (missing columns {sorted(missing)}); "
            "write one with `tersetalk bench corpus`"
        )
    if "source" not in df.columns:  # older corpora: the group says it
        df["source"] = [SOURCE_REAL if g == REAL_GROUP else SOURCE_SYNTHETIC for g in df["group"]]
    else:  # older corpora called the real messages "runs"
        df["source"] = df["source"].replace({"runs": SOURCE_REAL})
    return df


def group_order(groups: Iterable[str]) -> list[str]:
    """Real messages first, then the synthetic sizes in increasing order."""
    return sorted(set(groups), key=lambda g: (g != REAL_GROUP, g))
