"""One record per (example, task, system, variant, seed): the row every file is made of.

Columns fall in two groups. Deterministic columns depend only on the config,
the random seed and the model, so two runs with the same random seed agree on them exactly
(:func:`deterministic_columns`). Timing and cache columns (prefixed ``t_`` or listed
in TIMING_COLUMNS) describe one particular execution and are expected to differ.

The record follows the conversation that was held: a :class:`RecordLayout` (declared
by the topology) names the directions whose tokens get a ``tokens_<S>_<R>_cl100k``
column and the outcome fields of that topology (the star's Critic verdict, for one); an
edge that occurs in the messages without being declared gets its column too.

Token columns are named ``tokens_<what>_<tokenizer>`` in every file (``tokens_M_W_cl100k``,
``tokens_total_o200k``; the summary's means add ``_mean``). Run files written before
older run files named the per-direction columns ``tokens_<S>_<R>``: :func:`direction_columns`
reads both.

One row is built by :func:`tersetalk.pipeline.records.build_record`, which scores it
with the task's scorer; this module holds what the topologies, systems and metrics
read of a record (its layout and columns) and stands on nothing above the core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tersetalk.core.io import messages_column, strings_column

TOKENIZERS = ("cl100k", "o200k", "model")


@dataclass(frozen=True)
class OutcomeField:
    """A record column a topology adds: its name, pandas dtype and value on an error row."""

    name: str
    dtype: str  # "string" | "bool" | "int64" | "float64"
    on_error: Any


@dataclass(frozen=True)
class RecordLayout:
    """What a topology's records hold beyond the common columns.

    ``directions`` are the ``sender_receiver`` edges its conversations use, in column
    order; ``outcome`` its own result fields.
    """

    directions: tuple[str, ...]
    outcome: tuple[OutcomeField, ...] = ()

    def columns(self, extra_edges: tuple[str, ...] = ()) -> list[str]:
        """The deterministic columns, in order."""
        return [
            *_HEAD,
            *(f.name for f in self.outcome),
            *(direction_column(d) for d in (*self.directions, *extra_edges)),
            *_TAIL,
        ]


_HEAD = [
    "task", "system", "variant", "seed", "example_id", "position",
    "question", "gold", "prediction", "raw_answer",
    "em", "f1", "precision", "recall", "correct",
]  # fmt: skip
_TAIL = [
    *[f"tokens_total_{t}" for t in TOKENIZERS],
    "bytes_on_wire", "n_messages", "n_model_calls",
    "usage_prompt_tokens", "usage_completion_tokens", "usage_unknown_calls", "usage_source",
    "tokens_model_source", "messages", "facts_checked", "counters", "backend", "model",
    "model_fingerprint", "model_fingerprint_source",
    "spec_hash", "error",
]  # fmt: skip

TIMING_COLUMNS = [
    "t_example_s", "t_model_s", "t_ttft_mean_s", "t_itl_mean_s",
    "cache_hits", "calls", "counters_timing",
]  # fmt: skip

_INT_COLUMNS = [
    "seed", "position", "bytes_on_wire", "n_messages", "n_model_calls",
    "usage_unknown_calls", "cache_hits", "tokens_total_cl100k", "tokens_total_o200k",
]  # fmt: skip
# the model's tokens may be missing (see token_sum): a nullable integer, never 0 for "unknown"
_NULLABLE_INT_COLUMNS = ["tokens_total_model"]
# usage totals are float so that "unknown" can be NaN (see usage_totals)
_FLOAT_COLUMNS = ["em", "f1", "precision", "recall", "correct", "t_example_s", "t_model_s",
                  "t_ttft_mean_s", "t_itl_mean_s",
                  "usage_prompt_tokens", "usage_completion_tokens"]  # fmt: skip

#: the per-direction token column of a run file (cl100k); ``_cl100k`` absent in files
#: written by older versions
_DIRECTION_RE = re.compile(r"^tokens_([A-Z][A-Z0-9]*_[A-Z][A-Z0-9]*)(?:_cl100k)?$")


def direction_column(direction: str) -> str:
    """The run file's token column of ``S_R`` (cl100k): ``tokens_S_R_cl100k``."""
    return f"tokens_{direction}_cl100k"


def edges(messages: list[dict]) -> list[str]:
    """The ``sender_receiver`` pairs of the messages, in first-seen order."""
    return list(dict.fromkeys(f"{m['sender']}_{m['receiver']}" for m in messages))


def direction_columns(columns) -> list[str]:
    """The per-direction token columns of a run frame (``tokens_<S>_<R>_cl100k``, or the
    older ``tokens_<S>_<R>``), in their order."""
    return [c for c in columns if _DIRECTION_RE.match(c)]


def directions_of(columns) -> list[str]:
    """The ``S_R`` directions a run frame's per-direction token columns name, in order."""
    return [_DIRECTION_RE.match(c).group(1) for c in direction_columns(columns)]


def deterministic_columns(df: pd.DataFrame) -> list[str]:
    """Every column of a run frame that two runs with the same seed reproduce exactly.

    Also right for the score and metrics frames: ``tokens_per_s*`` (completion tokens
    over model time) is a timing column there.
    """
    return [
        c
        for c in df.columns
        if c not in TIMING_COLUMNS and not c.startswith(("t_", "c_t_", "tokens_per_s"))
    ]


def token_sum(messages: list[dict], tokenizer: str) -> int | None:
    """The messages' tokens under ``tokenizer`` (``cl100k``, ``o200k``, ``model``), or
    None when any message's count is missing: the model's tokens cannot be counted for a
    hosted API with no tokenize endpoint and no ``models.tokenizer`` (the run file's
    ``tokens_model_source`` says so), and a part left out would lower the total unseen."""
    counts = [m.get(f"tokens_{tokenizer}") for m in messages]
    return None if any(n is None for n in counts) else sum(counts)


def usage_totals(calls: list[dict]) -> dict[str, Any]:
    """Usage summed over the calls, or unknown as a whole when any call's is unknown.

    Backends report ``-1`` for a count they could not get (never a guess). Adding
    ``-1`` into a sum would quietly lower it, and skipping the call would quietly
    undercount, so a total with any unknown part is itself unknown: ``None`` in the
    record (JSON ``null``), NaN in the frame. ``usage_unknown_calls`` says how many
    calls lacked usage and ``usage_source`` where the known counts came from (the
    distinct ``usage_source`` values of the calls, sorted, joined by ``"; "``).
    """
    unknown = sum(
        1
        for c in calls
        if c.get("prompt_tokens") is None
        or c.get("completion_tokens") is None
        or c["prompt_tokens"] < 0
        or c["completion_tokens"] < 0
    )
    sources = sorted({str(c.get("usage_source") or "not stated") for c in calls})
    return {
        "usage_prompt_tokens": None if unknown else sum(c["prompt_tokens"] for c in calls),
        "usage_completion_tokens": None if unknown else sum(c["completion_tokens"] for c in calls),
        "usage_unknown_calls": unknown,
        "usage_source": "; ".join(sources),
    }


def records_frame(records: list[dict], layout: RecordLayout) -> pd.DataFrame:
    """A DataFrame with the stable column order and dtypes, whatever the rows hold.

    Columns: the layout's, then the token columns of edges the layout does not
    declare (first seen first), the timing columns, and the rest (``c_*``) sorted.
    """
    df = pd.DataFrame(records)
    declared = set(layout.columns())
    extra_edges = tuple(
        d
        for c, d in zip(direction_columns(df.columns), directions_of(df.columns), strict=True)
        if c not in declared
    )
    main = layout.columns(extra_edges) + TIMING_COLUMNS
    for col in main:
        if col not in df.columns:
            df[col] = None
    extra = [c for c in df.columns if c not in main]
    df = df[main + sorted(extra)]
    ints = _INT_COLUMNS + direction_columns(main)
    for col in ints:
        df[col] = pd.to_numeric(df[col]).fillna(0).astype("int64")
    for col in _NULLABLE_INT_COLUMNS:
        df[col] = pd.to_numeric(df[col]).astype("Int64")
    for col in _FLOAT_COLUMNS:
        df[col] = pd.to_numeric(df[col]).astype("float64")
    for f in layout.outcome:
        if f.dtype == "bool":
            df[f.name] = df[f.name].fillna(f.on_error).astype(bool)
        elif f.dtype in ("int64", "float64"):
            df[f.name] = pd.to_numeric(df[f.name]).fillna(f.on_error).astype(f.dtype)
        else:
            df[f.name] = df[f.name].astype(f.dtype)
    # a checkpoint written before messages were nested holds them as a JSON string
    df["messages"] = messages_column(df["messages"])
    df["facts_checked"] = strings_column(df["facts_checked"])
    typed = {*ints, *_NULLABLE_INT_COLUMNS, *_FLOAT_COLUMNS, "messages", "facts_checked"}
    typed |= {f.name for f in layout.outcome}
    for col in main:
        if col not in typed:
            df[col] = df[col].astype("string")
    return df
