"""Building a record: one example's row, scored by its task's official scorer.

The layout, column names and frame of the records are :mod:`tersetalk.core.records`
(what the topologies, systems and metrics read); building a row takes the task's scorer
(:mod:`tersetalk.tasks`), so it stands on this floor, above the tasks.
"""

from __future__ import annotations

import json
from typing import Any

from tersetalk.core.io import MESSAGE_FIELDS
from tersetalk.core.records import (
    TOKENIZERS,
    RecordLayout,
    direction_column,
    edges,
    token_sum,
    usage_totals,
)
from tersetalk.tasks.registry import score_columns


def score(task: str, prediction: str, gold: str, options: dict | None = None) -> dict[str, float]:
    """Per-example scores with the task's official definitions (its ``score`` in
    :mod:`tersetalk.tasks`): ``em``, ``f1``, ``precision``, ``recall`` and ``correct``
    (the task's accuracy), plus any provenance columns its scorer adds (HumanEval's
    sandbox). ``options`` is the task's config section (HumanEval's sandbox settings).
    """
    return score_columns(task, prediction, gold, options)


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def build_record(
    example: dict,
    spec: dict,
    *,
    layout: RecordLayout,
    prediction: str,
    raw_answer: str,
    messages: list[dict],
    calls: list[dict],
    outcome: dict[str, Any] | None,
    counters: dict[str, Any],
    backend: str,
    model: str,
    spec_hash: str,
    error: str | None,
    elapsed_s: float,
    model_fingerprint: str | None = None,
    model_fingerprint_source: str | None = None,
    tokens_model_source: str | None = None,
    facts_checked: list[str] | None = None,
) -> dict[str, Any]:
    """One row; ``outcome`` None (an error row) takes each outcome field's ``on_error``.

    ``facts_checked``: the facts of the example's brief whose arrival at the Worker
    answer preservation checks (:meth:`~tersetalk.tasks.base.Brief.facts_checked`);
    None for an error row whose brief was never built.

    ``model_fingerprint`` and its source say what the model is (see
    :mod:`tersetalk.models.fingerprint`); None where nothing recorded it.
    ``tokens_model_source`` says where ``tokens_model`` comes from (``missing: <why>``
    where the model's tokens cannot be counted).
    """
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
        **score(task, prediction, example["gold"], spec.get("task_options")),
        "facts_checked": None if facts_checked is None else list(facts_checked),
    }
    for f in layout.outcome:
        rec[f.name] = f.on_error if outcome is None else outcome[f.name]
    for d in [*layout.directions, *(e for e in edges(messages) if e not in layout.directions)]:
        rec[direction_column(d)] = sum(
            m["tokens_cl100k"] for m in messages if f"{m['sender']}_{m['receiver']}" == d
        )
    for t in TOKENIZERS:
        rec[f"tokens_total_{t}"] = token_sum(messages, t)
    rec.update(
        bytes_on_wire=sum(m["bytes"] for m in messages),
        n_messages=len(messages),
        n_model_calls=len(calls),
        **usage_totals(calls),
        # the conversation as a list of structs (a nested Parquet column, MESSAGE_FIELDS)
        messages=[{k: m.get(k) for k, _ in MESSAGE_FIELDS} for m in messages],
        # a system's own timings (counters named t_*) are kept apart from its counters
        counters=json.dumps(
            {k: v for k, v in counters.items() if not k.startswith("t_")}, sort_keys=True
        ),
        counters_timing=json.dumps(
            {k: v for k, v in counters.items() if k.startswith("t_")}, sort_keys=True
        ),
        backend=backend,
        model=model,
        model_fingerprint=model_fingerprint,
        model_fingerprint_source=model_fingerprint_source,
        tokens_model_source=tokens_model_source,
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
