"""Per-run metrics computed from a run's records, and the summary across runs.

Quality is computed once, in the score step, from prediction and gold with the
official definitions (:func:`example_scores`), not copied from the record's columns:
the per-example metrics, the run's aggregate and the statistics all read that one
computation, so rerunning only the score step after a scorer changes leaves none of
them disagreeing. A task whose scorer runs the prediction (HumanEval's sandbox) has its
verdict recorded by the run and read here as data. HotpotQA EM/F1 are averaged over
every gold example of the sample: an error row (no prediction) counts 0, as in the
official evaluator.

Usage (the backend's own token counts) can be unknown for an example; see
:func:`usage_summary` for how the usage means and ``tokens_per_s`` treat it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from tersetalk.core.records import TOKENIZERS, direction_columns, directions_of
from tersetalk.tasks.base import SCORE_COLUMNS
from tersetalk.tasks.registry import get as get_task

#: per-record token columns averaged into ``<column>_mean``: per role, and per direction
#: (``tokens_M_W_o200k`` ...) under every tokenizer
MEAN_COLUMNS_PREFIXES = ("tokens_sent_", "tokens_received_")
_DIRECTION_TOKENS_RE = re.compile(r"^tokens_[A-Z][A-Z0-9]*_[A-Z][A-Z0-9]*_[a-z0-9]+$")


def _averaged(column: str) -> bool:
    return column.startswith(MEAN_COLUMNS_PREFIXES) or bool(_DIRECTION_TOKENS_RE.match(column))


MEAN_COLUMNS = (
    "token_reduction",
    "mw_token_reduction",
    "semantic_bertscore_f1",
    "semantic_jaccard",
    "gold_reaches_worker",
    "facts_reaching_worker",
    "t_ttft_max_s",
)


def example_scores(run: pd.DataFrame, options: Mapping | None = None) -> list[dict[str, float]]:
    """Each example's score columns (``em``, ``f1``, ``precision``, ``recall``,
    ``correct``), in the run's row order, computed once by the task's scorer from the
    prediction and the gold (an error row scores as an empty prediction: 0), or, for a
    task whose scorer runs the prediction, read from the verdict the run recorded
    (:meth:`tersetalk.tasks.base.Task.example_scores`). ``options``: the task's config
    section, as the run had it (its spec's ``task_options``)."""
    if run.empty:
        return []
    task = get_task(str(run["task"].iloc[0]))
    read = ["prediction", "gold", "error", *(SCORE_COLUMNS if task.executes else ())]
    return [
        task.example_scores(r["prediction"], r["gold"], options, error=not pd.isna(r["error"]),
                            recorded=r if task.executes else None)
        for r in run[read].to_dict("records")
    ]  # fmt: skip


def run_metrics(
    df: pd.DataFrame,
    per_record: pd.DataFrame | None = None,
    rates: Mapping[str, tuple[str, str]] | None = None,
    scores: list[dict[str, float]] | None = None,
) -> pd.DataFrame:
    """One row of metrics for one (task, system, variant) run.

    ``per_record`` (from :func:`per_record_metrics`) adds the paired and
    preservation metrics; answered examples only, like the token means.
    ``rates`` are the pooled rates the run's system declares (see
    :func:`protocol_rates`); the caller looks them up (``tersetalk score`` asks
    the system registry), so this module needs no system. ``scores``: the run's
    :func:`example_scores` when the caller has computed them (the score step, which
    also gives them to the per-example metrics); computed here otherwise.
    """
    if df.empty:
        raise ValueError("run file has no records")
    first = df.iloc[0]
    task = first["task"]
    row: dict = {
        "task": task,
        "system": first["system"],
        "variant": first["variant"],
        "seed": int(first["seed"]),
        "n": len(df),
        "n_errors": int(df["error"].notna().sum()),
    }
    # the task's official aggregate of the examples' scores: HotpotQA's EM/F1 over every
    # gold, GSM8K's numbers, HumanEval's pass@1 as the run's sandbox decided it
    row.update(get_task(task).run_metrics(example_scores(df) if scores is None else scores))
    ok = df[df["error"].isna()]
    for t in TOKENIZERS:
        # a missing count (the model's tokens of a hosted API, see tokens_model_source)
        # makes the mean missing: a mean over the rows that happen to have one would not
        # be the run's
        counts = pd.to_numeric(ok[f"tokens_total_{t}"]).astype("float64")
        row[f"tokens_total_{t}_mean"] = (
            float("nan") if counts.isna().any() else float(counts.mean()) if len(ok) else 0.0
        )
    if "tokens_model_source" in df:
        row["tokens_model_source"] = "; ".join(
            sorted({str(v) for v in df["tokens_model_source"].dropna()})
        )
    for col, d in zip(direction_columns(df.columns), directions_of(df.columns), strict=True):
        # named as the metrics' per-direction columns are (the per-record means below
        # give the same value for cl100k)
        row[f"tokens_{d}_cl100k_mean"] = float(ok[col].mean()) if len(ok) else 0.0
    row["bytes_on_wire_mean"] = float(ok["bytes_on_wire"].mean()) if len(ok) else 0.0
    usage = usage_summary(df)
    row.update({k: v for k, v in usage.items() if k != "tokens_per_s"})
    if "revisions" in ok:  # topologies with a Critic's verdict (the star)
        row["revision_rate"] = float((ok["revisions"] > 0).mean()) if len(ok) else 0.0
        row["verdict_explicit_rate"] = float(ok["verdict_explicit"].mean()) if len(ok) else 0.0
        for v in ("accept", "revise", "escalate"):
            row[f"verdict_{v}_share"] = float((ok["verdict"] == v).mean()) if len(ok) else 0.0
    row["n_model_calls"] = int(df["n_model_calls"].sum())
    row["cache_hits"] = int(df["cache_hits"].sum())
    row["t_example_mean_s"] = float(df["t_example_s"].mean())
    row["t_ttft_mean_s"] = float(df["t_ttft_mean_s"].mean())
    row["t_itl_mean_s"] = float(df["t_itl_mean_s"].mean())
    row["tokens_per_s"] = usage["tokens_per_s"]
    row.update(protocol_rates(ok, rates or {}))
    row.update(lingua_rate_distribution(ok))
    if per_record is not None:
        pr = per_record[per_record["error"].isna()]
        cols = [c for c in pr.columns if _averaged(c)] + list(MEAN_COLUMNS)
        for col in cols:
            vals = pd.to_numeric(pr[col], errors="coerce") if col in pr else pd.Series([])
            row[f"{col}_mean"] = float(vals.mean()) if len(vals) else float("nan")
        row["tokens_per_s_example_mean"] = float(pr["tokens_per_s"].mean()) if len(pr) else 0.0
        row["semantic_method"] = str(per_record["semantic_method"].iloc[0])
    row["backend"] = str(first["backend"])
    row["model"] = str(first["model"])
    return pd.DataFrame([row])


USAGE_COLUMNS = ("usage_prompt_tokens", "usage_completion_tokens")


def usage_summary(df: pd.DataFrame) -> dict[str, float | int | str]:
    """Usage means and throughput over the examples whose usage is known, and how many were not.

    A record's usage total is NaN when a backend could not report a call's usage
    (see ``records.usage_totals``). pandas would skip those NaNs silently, so this
    does it on purpose and says so. We keep the means over the known rows rather
    than NaN-ing the whole run (one unreported call would otherwise hide every other
    count), and report alongside them how many rows they leave out:

    - ``n_usage_unknown``: examples of the run (error rows included) whose usage is
      unknown; ``usage_unknown_calls``: model calls without usage, summed;
    - ``usage_mean_n``: answered examples with known usage, the rows that
      ``usage_prompt_tokens_mean`` / ``usage_completion_tokens_mean`` average over
      (NaN means when there is none, never a made-up 0);
    - ``tokens_per_s``: completion tokens over model time, both summed over the
      examples with known usage only (the unknown rows' model time would otherwise
      lower the rate); NaN when those rows spent no model time;
    - ``usage_source``: where the known counts came from (distinct sources, sorted).

    Compare usage across runs only together with ``n_usage_unknown``: a mean over
    the known rows is unbiased only if usage went missing independently of length.
    """
    usage = df[list(USAGE_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    known = usage.notna().all(axis=1)
    answered = known & df["error"].isna()
    nan = float("nan")
    out: dict[str, float | int | str] = {"n_usage_unknown": int((~known).sum())}
    calls = df["usage_unknown_calls"] if "usage_unknown_calls" in df else pd.Series([], dtype=float)
    out["usage_unknown_calls"] = int(pd.to_numeric(calls, errors="coerce").fillna(0).sum())
    out["usage_mean_n"] = int(answered.sum())
    for col in USAGE_COLUMNS:
        out[f"{col}_mean"] = float(usage.loc[answered, col].mean()) if answered.any() else nan
    model_s = float(pd.to_numeric(df.loc[known, "t_model_s"], errors="coerce").sum())
    completion = float(usage.loc[known, "usage_completion_tokens"].sum())
    out["tokens_per_s"] = completion / model_s if model_s > 0 else nan
    sources = df["usage_source"].dropna() if "usage_source" in df else pd.Series([], dtype=str)
    out["usage_source"] = "; ".join(sorted({s for v in sources for s in str(v).split("; ") if s}))
    return out


def protocol_rates(ok: pd.DataFrame, rates: Mapping[str, tuple[str, str]]) -> dict[str, float]:
    """Means of every numeric protocol counter (``c_*``) and the system's pooled rates.

    ``rates`` (``rate name: (numerator counter, denominator counter)``) are the ones
    the system declares (``systems.register(rates=...)``, read with
    ``systems.pooled_rates``), passed in as data. Systems without a counter simply
    lack its column; the summary then has NaN there rather than a made-up zero.
    """
    out: dict[str, float] = {}
    for col in sorted(c for c in ok.columns if c.startswith("c_")):
        out[f"{col}_mean"] = float(pd.to_numeric(ok[col]).mean())
    for name, (num, den) in rates.items():
        if f"c_{num}" in ok.columns and f"c_{den}" in ok.columns:
            total = float(ok[f"c_{den}"].sum())
            out[name] = float(ok[f"c_{num}"].sum()) / total if total else float("nan")
    return out


#: the calibration's acceptance: the achieved rate within 20% of the target rate
LINGUA_ACCEPTANCE_TOLERANCE = 0.2
_ACHIEVED, _TARGET, _UNREACHABLE = (
    "c_lingua_scope_rate",
    "c_lingua_target_rate",
    "c_lingua_target_unreachable",
)


def lingua_rate_distribution(ok: pd.DataFrame) -> dict[str, float | int]:
    """Distribution of LLMLingua's achieved compression rate over a run's messages.

    Only for records with the achieved-rate counters (the ``llmlingua`` system: one
    compressed message per example); otherwise ``{}``, so other runs get NaN in the
    summary rather than made-up numbers. The achieved rate is in the variant's
    scope (``lingua_scope_rate``: compressed / original tokens of the facts, or of
    the whole message), the same scope as the target. Columns:

    - ``lingua_n_messages``: messages with both an achieved and a target rate;
    - ``lingua_target_rate``: the target (the median when it varies per message,
      e.g. under ``target_tokens``);
    - ``lingua_achieved_rate_{p10,p50,p90,mean}``;
    - ``lingua_n_reachable``, ``lingua_within_20pct_share``: among messages whose
      target was reachable, the share with ``|achieved / target - 1| <= 0.2``
      (NaN when none was reachable);
    - ``lingua_unreachable_n`` / ``lingua_unreachable_share``: messages whose target
      LLMLingua could not reach (the kept parts or forced digits alone exceed it,
      typical of short messages), as the records flag them.
    """
    if _ACHIEVED not in ok.columns or _TARGET not in ok.columns:
        return {}
    achieved = pd.to_numeric(ok[_ACHIEVED], errors="coerce").to_numpy(dtype=float)
    target = pd.to_numeric(ok[_TARGET], errors="coerce").to_numpy(dtype=float)
    has = np.isfinite(achieved) & np.isfinite(target) & (target > 0)
    if _UNREACHABLE in ok.columns:
        flag = pd.to_numeric(ok[_UNREACHABLE], errors="coerce").fillna(0).to_numpy(dtype=float)
        unreachable = has & (flag > 0)
    else:
        unreachable = np.zeros(len(ok), dtype=bool)
    reachable = has & ~unreachable
    n = int(has.sum())
    nan = float("nan")
    out: dict[str, float | int] = {"lingua_n_messages": n}
    if n:
        a = achieved[has]
        p10, p50, p90 = (float(v) for v in np.percentile(a, [10, 50, 90]))
        out.update(
            lingua_target_rate=float(np.median(target[has])),
            lingua_achieved_rate_p10=p10,
            lingua_achieved_rate_p50=p50,
            lingua_achieved_rate_p90=p90,
            lingua_achieved_rate_mean=float(a.mean()),
        )
    else:
        out.update(
            dict.fromkeys(
                (
                    "lingua_target_rate",
                    "lingua_achieved_rate_p10",
                    "lingua_achieved_rate_p50",
                    "lingua_achieved_rate_p90",
                    "lingua_achieved_rate_mean",
                ),
                nan,
            )
        )
    n_reach = int(reachable.sum())
    within = (
        np.abs(achieved[reachable] / target[reachable] - 1.0) <= LINGUA_ACCEPTANCE_TOLERANCE + 1e-12
    )
    out["lingua_n_reachable"] = n_reach
    out["lingua_within_20pct_share"] = float(within.mean()) if n_reach else nan
    out["lingua_unreachable_n"] = int(unreachable.sum())
    out["lingua_unreachable_share"] = float(unreachable.sum() / n) if n else nan
    return out


def aggregate(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate per-run metric rows in a stable order."""
    if not paths:
        raise ValueError("no per-run score files to aggregate")
    df = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
    return df.sort_values(["task", "system", "variant"], kind="stable").reset_index(drop=True)
