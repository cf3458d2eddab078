"""Per-example metrics of one run, paired with the free-form reference run.

One row per example: quality, tokens per role and direction under three
tokenizers, the reduction against the reference on the same example, semantic
and answer preservation, latency and protocol counters. The summary row of a run
and the statistics are computed from these rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tersetalk.core.io import InputFileError
from tersetalk.core.participants import participant
from tersetalk.core.records import TOKENIZERS, directions_of, token_sum
from tersetalk.metrics.preservation import (
    answer_preservation,
    as_prose,
    bertscore_f1_groups,
    jaccard,
    messages_of,
    worker_input,
)
from tersetalk.metrics.summary import example_scores


def _letters(directions: list[str]) -> list[str]:
    """The participants of a run's directions, in first-seen order."""
    return list(dict.fromkeys(letter for d in directions for letter in d.split("_")))


def _role_tokens(messages: list[dict], directions: list[str]) -> dict[str, int | None]:
    """Tokens sent and received per role, and per direction, under each tokenizer.

    Columns: ``tokens_sent_{role}_{tokenizer}``, ``tokens_received_{role}_{tokenizer}``
    and ``tokens_{sender}_{receiver}_{tokenizer}``, for the run's ``directions`` (the
    ``tokens_<S>_<R>`` columns of its records) and the participants they name.
    """
    out: dict[str, int | None] = {}
    for letter in _letters(directions):
        role = participant(letter).name
        for t in TOKENIZERS:
            out[f"tokens_sent_{role}_{t}"] = token_sum(
                [m for m in messages if m["sender"] == letter], t
            )
            out[f"tokens_received_{role}_{t}"] = token_sum(
                [m for m in messages if m["receiver"] == letter], t
            )
    # per direction under every tokenizer; the run file's own per-direction columns are
    # cl100k only (``tokens_{direction}_cl100k``, the same name), so they agree
    for d in directions:
        sender, receiver = d.split("_")
        for t in TOKENIZERS:
            out[f"tokens_{d}_{t}"] = token_sum(
                [m for m in messages if m["sender"] == sender and m["receiver"] == receiver], t
            )
    return out


def _latency(calls: list[dict], completion_tokens: int, model_s: float) -> dict[str, float]:
    ttfts = [c["ttft_s"] for c in calls if c.get("ttft_s") is not None]
    return {
        "t_ttft_max_s": max(ttfts) if ttfts else float("nan"),
        "tokens_per_s": completion_tokens / model_s if model_s > 0 else float("nan"),
    }


def per_record_metrics(
    run: pd.DataFrame,
    reference: pd.DataFrame | None,
    cache_dir: str | Path | None = None,
    scores: list[dict[str, float]] | None = None,
    name: str = "the run",
) -> pd.DataFrame:
    """Metrics for every example of ``run``; ``reference`` is the free-form run (or None).

    Answer preservation checks the facts each row recorded (``facts_checked``, from the
    brief the run built); a run file without them is refused (:class:`InputFileError`,
    naming the run by ``name``).

    ``cache_dir``: where BERTScore's results are kept between processes (see
    :func:`~tersetalk.metrics.preservation.bertscore_f1_groups`); None computes them
    afresh. ``scores``: the run's :func:`~tersetalk.metrics.summary.example_scores`
    (computed here when not given)."""
    return per_record_metrics_many([run], reference, cache_dir,
                                   None if scores is None else [scores], [name])[0]  # fmt: skip


def per_record_metrics_many(
    runs: list[pd.DataFrame],
    reference: pd.DataFrame | None,
    cache_dir: str | Path | None = None,
    scores: list[list[dict[str, float]]] | None = None,
    names: list[str] | None = None,
) -> list[pd.DataFrame]:
    """:func:`per_record_metrics` of several runs of a task, paired with the same
    ``reference``: their BERTScore in one call of the encoder, which embeds a text the
    runs share (the reference's messages, a Worker input several variants send) once.
    ``scores``: each run's :func:`~tersetalk.metrics.summary.example_scores`, the score
    step's one computation of correctness (computed here when not given). ``names``:
    how each run is named in an error (default: "the run")."""
    for run, name in zip(runs, names or ["the run"] * len(runs), strict=True):
        check_facts_recorded(run, name)
    if scores is None:
        scores = [example_scores(run) for run in runs]
    ref_by_id = {} if reference is None else {r.example_id: r for r in reference.itertuples()}
    collected = [
        _collect(run, ref_by_id, run_scores) for run, run_scores in zip(runs, scores, strict=True)
    ]
    groups = [([text for _, text in cands], refs) for _, cands, refs in collected]
    scores, method = bertscore_f1_groups(groups, cache_dir)
    if reference is None:
        method = "no free-form reference run"
    return [
        _frame(run, rows, cands, run_scores, method)
        for run, (rows, cands, _), run_scores in zip(runs, collected, scores, strict=True)
    ]


def _collect(run: pd.DataFrame, ref_by_id: dict, scores: list[dict[str, float]]):
    """A run's metric rows without BERTScore, and the pairs it is computed on:
    (row index, the Worker's input as prose) and the reference's Worker input."""
    directions = directions_of(run.columns)
    brief_edge = f"tokens_{directions[0]}_cl100k"  # the Manager's brief (M_W in the star)
    rows, cands, refs = [], [], []
    for r, score in zip(run.itertuples(), scores, strict=True):
        msgs = messages_of(r.messages)
        received = worker_input(msgs)
        prose, was_jsonl = as_prose(received)
        row = {
            "task": r.task,
            "system": r.system,
            "variant": r.variant,
            "seed": r.seed,
            "example_id": r.example_id,
            "position": r.position,
            "error": r.error,
            # the score step's one computation of correctness (not the run's columns)
            "correct": score["correct"],
            "em": score["em"],
            "f1": score["f1"],
            **{f"tokens_total_{t}": getattr(r, f"tokens_total_{t}") for t in TOKENIZERS},
            **_role_tokens(msgs, directions),
            "bytes_on_wire": r.bytes_on_wire,
            "worker_input_is_jsonl": was_jsonl,
            "t_example_s": r.t_example_s,
            "t_ttft_mean_s": r.t_ttft_mean_s,
            "t_itl_mean_s": r.t_itl_mean_s,
            **_latency(json.loads(r.calls or "[]"), r.usage_completion_tokens, r.t_model_s),
        }
        facts = [] if r.facts_checked is None else list(r.facts_checked)
        row.update(answer_preservation(r.task, facts, r.gold, received + "\n" + prose))
        ref = ref_by_id.get(r.example_id)
        if ref is not None and pd.isna(r.error) and pd.isna(ref.error):
            ref_text = worker_input(messages_of(ref.messages))
            row["reference_tokens_total_cl100k"] = ref.tokens_total_cl100k
            row["token_reduction"] = 1 - r.tokens_total_cl100k / max(ref.tokens_total_cl100k, 1)
            ref_mw = _role_tokens(messages_of(ref.messages), directions)[brief_edge]
            row["mw_token_reduction"] = 1 - row[brief_edge] / max(ref_mw, 1)
            row["semantic_jaccard"] = jaccard(prose, ref_text)
            cands.append((len(rows), prose))
            refs.append(ref_text)
        else:
            row.update(
                reference_tokens_total_cl100k=np.nan,
                token_reduction=np.nan,
                mw_token_reduction=np.nan,
                semantic_jaccard=np.nan,
            )
        rows.append(row)
    return rows, cands, refs


def _facts_or_none(value) -> bool:
    """A recorded ``facts_checked`` cell: missing, or a list of texts."""
    if value is None:
        return True
    return isinstance(value, list | tuple | np.ndarray) and all(isinstance(v, str) for v in value)


def check_facts_recorded(run: pd.DataFrame, name: str = "the run") -> None:
    """Refuse a run whose rows do not say which facts their brief held (a run file
    written before runs recorded them): preservation would check nothing and report no
    facts instead of the ones that did not arrive. ``name`` says which run, for the
    message."""
    if "facts_checked" not in run.columns:
        missing = "has no facts_checked column"
    else:
        facts = run["facts_checked"]
        if not facts.map(_facts_or_none).all():
            raise InputFileError(
                f"{name}: its facts_checked column holds something else where each row has a "
                "list of facts as text (a run file written otherwise than by tersetalk run); "
                "rerun it"
            )
        unrecorded = facts.isna() & run["error"].isna()
        if not unrecorded.any():
            return
        missing = f"has {int(unrecorded.sum())} answered example(s) without facts_checked"
    raise InputFileError(
        f"{name} {missing}: answer preservation reads the facts each example's brief held, "
        "which runs record since this version; rerun it (delete the run file, or snakemake "
        "--forcerun the rule that wrote it) and score it again"
    )


def _frame(run: pd.DataFrame, rows: list[dict], cands: list, scores: list[float],
           method: str) -> pd.DataFrame:  # fmt: skip
    """The per-example frame: ``rows`` with their BERTScore, the method, the run's c_."""
    for (i, _), s in zip(cands, scores, strict=True):
        rows[i]["semantic_bertscore_f1"] = s
    for row in rows:
        row.setdefault("semantic_bertscore_f1", float("nan"))
        row["semantic_method"] = method
    df = pd.DataFrame(rows)
    # the run's own c_ columns (no metric above starts with c_), added at once: one
    # insert per column made pandas log a PerformanceWarning per column into score logs
    extra = {c: run[c].to_numpy() for c in run.columns if c.startswith("c_")}
    if extra:
        df = pd.concat([df, pd.DataFrame(extra, index=df.index)], axis=1)
    return df
