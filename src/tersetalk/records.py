"""One record per (example, task, system, variant, seed): the row every file is made of.

Columns fall in two groups. Deterministic columns depend only on the config,
the seed and the model, so two runs with the same seed agree on them exactly.
Timing and cache columns (prefixed ``t_`` or listed in TIMING_COLUMNS) describe
one particular execution and are expected to differ.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from tersetalk.tasks.scoring import gsm8k_correct, hotpot_em, hotpot_f1

DIRECTIONS = ("M_W", "W_C", "M_C", "C_W", "W_M")
TOKENIZERS = ("cl100k", "o200k", "model")

DETERMINISTIC_COLUMNS = [
    "task", "system", "variant", "seed", "example_id", "position",
    "question", "gold", "prediction", "raw_answer",
    "em", "f1", "precision", "recall", "correct",
    "verdict", "verdict_explicit", "revisions",
    *[f"tokens_{d}" for d in DIRECTIONS],
    *[f"tokens_total_{t}" for t in TOKENIZERS],
    "bytes_on_wire", "n_messages", "n_model_calls",
    "usage_prompt_tokens", "usage_completion_tokens", "usage_unknown_calls", "usage_source",
    "messages", "counters", "backend", "model", "spec_hash", "error",
]  # fmt: skip

TIMING_COLUMNS = [
    "t_example_s", "t_model_s", "t_ttft_mean_s", "t_itl_mean_s",
    "cache_hits", "calls", "counters_timing",
]  # fmt: skip

ALL_COLUMNS = DETERMINISTIC_COLUMNS + TIMING_COLUMNS

_INT_COLUMNS = [
    "seed", "position", "revisions", "bytes_on_wire", "n_messages", "n_model_calls",
    "usage_unknown_calls", "cache_hits",
    *[f"tokens_{d}" for d in DIRECTIONS], *[f"tokens_total_{t}" for t in TOKENIZERS],
]  # fmt: skip
# usage totals are float so that "unknown" can be NaN (see usage_totals)
_FLOAT_COLUMNS = ["em", "f1", "precision", "recall", "correct", "t_example_s", "t_model_s",
                  "t_ttft_mean_s", "t_itl_mean_s",
                  "usage_prompt_tokens", "usage_completion_tokens"]  # fmt: skip
_BOOL_COLUMNS = ["verdict_explicit"]


def score(task: str, prediction: str, gold: str) -> dict[str, float]:
    """Per-example scores with the official definitions.

    ``correct`` is the task's accuracy: exact match for HotpotQA, numeric equality
    of the final answer for GSM8K.
    """
    if task == "hotpotqa":
        f1, p, r = hotpot_f1(prediction, gold)
        em = hotpot_em(prediction, gold)
        return {"em": em, "f1": f1, "precision": p, "recall": r, "correct": em}
    ok = float(gsm8k_correct(prediction, gold)) if prediction else 0.0
    return {"em": ok, "f1": ok, "precision": ok, "recall": ok, "correct": ok}


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


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


def build_record(
    example: dict,
    spec: dict,
    *,
    prediction: str,
    raw_answer: str,
    messages: list[dict],
    calls: list[dict],
    verdict: str,
    verdict_explicit: bool,
    revisions: int,
    counters: dict[str, Any],
    backend: str,
    model: str,
    spec_hash: str,
    error: str | None,
    elapsed_s: float,
) -> dict[str, Any]:
    task = spec["task"]
    rec: dict[str, Any] = {
        "task": task,
        "system": spec["system"],
        "variant": spec["variant"],
        "seed": spec["seed"],
        "example_id": example["example_id"],
        "position": example["position"],
        "question": example["question"],
        "gold": example["gold"],
        "prediction": prediction,
        "raw_answer": raw_answer,
        **score(task, prediction, example["gold"]),
        "verdict": verdict,
        "verdict_explicit": verdict_explicit,
        "revisions": revisions,
    }
    for d in DIRECTIONS:
        s, r = d.split("_")
        rec[f"tokens_{d}"] = sum(
            m["tokens_cl100k"] for m in messages if m["sender"] == s and m["receiver"] == r
        )
    for t in TOKENIZERS:
        rec[f"tokens_total_{t}"] = sum(m[f"tokens_{t}"] for m in messages)
    rec.update(
        bytes_on_wire=sum(m["bytes"] for m in messages),
        n_messages=len(messages),
        n_model_calls=len(calls),
        **usage_totals(calls),
        messages=json.dumps(messages, ensure_ascii=False),
        # a system's own timings (counters named t_*) are kept apart from its counters
        counters=json.dumps(
            {k: v for k, v in counters.items() if not k.startswith("t_")}, sort_keys=True
        ),
        counters_timing=json.dumps(
            {k: v for k, v in counters.items() if k.startswith("t_")}, sort_keys=True
        ),
        backend=backend,
        model=model,
        spec_hash=spec_hash,
        error=error,
        t_example_s=elapsed_s,
        t_model_s=sum(c["total_s"] for c in calls),
        t_ttft_mean_s=_mean([c["ttft_s"] for c in calls]),
        t_itl_mean_s=_mean([c["itl_s"] for c in calls]),
        cache_hits=sum(bool(c["cache_hit"]) for c in calls),
        calls=json.dumps(calls, default=str),  # extra provenance may hold odd types
    )
    # numeric protocol counters also get their own columns, c_<name>, for pandas
    for key, value in sorted(counters.items()):
        if isinstance(value, bool | int | float):
            rec[f"c_{key}"] = value
    return rec


def records_frame(records: list[dict]) -> pd.DataFrame:
    """A DataFrame with the stable column order and dtypes, whatever the rows hold."""
    df = pd.DataFrame(records)
    for col in ALL_COLUMNS:
        if col not in df.columns:
            df[col] = None
    extra = [c for c in df.columns if c not in ALL_COLUMNS]
    df = df[ALL_COLUMNS + sorted(extra)]
    for col in _INT_COLUMNS:
        df[col] = pd.to_numeric(df[col]).fillna(0).astype("int64")
    for col in _FLOAT_COLUMNS:
        df[col] = pd.to_numeric(df[col]).astype("float64")
    for col in _BOOL_COLUMNS:
        df[col] = df[col].fillna(False).astype(bool)
    for col in set(ALL_COLUMNS) - set(_INT_COLUMNS) - set(_FLOAT_COLUMNS) - set(_BOOL_COLUMNS):
        df[col] = df[col].astype("string")
    return df
