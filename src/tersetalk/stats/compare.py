"""Paired comparisons of runs: non-inferiority of accuracy and token reduction, one row each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tersetalk.core.intervals import wilson
from tersetalk.stats._common import StatsError
from tersetalk.stats.bootstrap import bootstrap_ci, paired_bootstrap
from tersetalk.stats.noninferiority import (
    CONTINUITY,
    conservative_mean_interval,
    is_binary,
    noninferiority,
)
from tersetalk.stats.paired_proportions import paired_difference_interval
from tersetalk.stats.paired_tests import token_reduction_tests

_TOKEN_KEYS = (
    "n", "mean_treatment", "mean_control", "reduction_mean", "reduction_median",
    "relative_reduction", "relative_reduction_mean", "relative_reduction_median", "n_relative",
    "t_statistic", "p_ttest", "wilcoxon_statistic", "p_wilcoxon", "alternative",
    "wilcoxon_zero_method", "note",
)  # fmt: skip


def _run_frame(
    metrics_by_run: Mapping[str, pd.DataFrame], label: str, needed: Sequence[str], key: str
) -> pd.DataFrame:
    if label not in metrics_by_run:
        raise StatsError(f"run {label!r} is not among the runs given: {sorted(metrics_by_run)}")
    df = metrics_by_run[label]
    missing = [c for c in (key, *needed) if c not in df.columns]
    if missing:
        raise StatsError(f"run {label!r} lacks column(s) {missing}")
    dup = df[key][df[key].duplicated()]
    if len(dup):
        raise StatsError(
            f"run {label!r} has {dup.nunique()} duplicated {key!r} value(s), e.g. {dup.iloc[0]!r}"
        )
    return df


def _ids(values: pd.Series) -> str:
    return "; ".join(sorted(str(v) for v in values))


def _is_error(series: pd.Series) -> np.ndarray:
    s = series.astype(object)
    return (s.notna() & (s.astype(str) != "")).to_numpy()


def compare_runs(
    metrics_by_run: Mapping[str, pd.DataFrame],
    comparisons: Sequence[tuple[str, str]],
    *,
    margin: float = 0.02,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    key: str = "example_id",
    accuracy_col: str = "correct",
    tokens_col: str = "tokens_total_cl100k",
    error_col: str | None = "error",
) -> pd.DataFrame:
    """One row per (treatment, control): non-inferiority of accuracy and paired token tests.

    Each run is a per-example frame. The two runs are inner-joined on ``key`` and
    the pairs sorted by ``key``, so the result does not depend on row order;
    examples present on one side only are counted and listed (``only_treatment``,
    ``only_control``). Accuracy uses every paired example, and an example whose
    ``error_col`` is non-empty counts as a wrong answer (0) on that side, whatever
    score it was given (one policy for every comparison: an error is never dropped and
    never scores); ``n_errors_as_wrong_{treatment,control}`` count them. Token tests
    use the pairs where neither side has a non-empty ``error_col`` (when both frames
    have it), as the run summary's token means do; ``tokens_n_errors_excluded``
    counts the rest.
    Every comparison uses ``seed`` itself, so a row does not depend on the others.

    Columns: treatment, control, n_treatment, n_control, n_paired, n_only_treatment,
    n_only_control, only_treatment, only_control; the NIResult fields (mean_diff,
    lower_bound, lower_bound_t, p_bootstrap, p_t, margin, alpha, n, n_resamples,
    seed, non_inferior, method, mean_treatment, mean_control, note, and the verdict,
    floor and alternative bounds); diff_ci_low, diff_ci_high (two-sided interval of
    mean_diff at ``confidence``: Tango's score interval for binary accuracy, the paired
    bootstrap otherwise; ``diff_ci_method``); accuracy_{treatment,control}_ci_{low,high}
    (Wilson for binary accuracy, never [0, 0]; the bootstrap otherwise;
    ``accuracy_ci_method``); n_errors_as_wrong_{treatment,control}; the
    token_reduction_tests keys
    prefixed "tokens_", tokens_relative_reduction_ci_{low,high} (paired bootstrap
    of 1 - mean T / mean C), tokens_n_errors_excluded; confidence, key,
    accuracy_col, tokens_col.
    """
    if not comparisons:
        raise StatsError("no comparisons given")
    boot = {"n_resamples": n_resamples, "seed": seed}
    rows: list[dict[str, Any]] = []
    for pair in comparisons:
        if len(pair) != 2:
            raise StatsError(f"a comparison is a (treatment, control) pair, got {pair!r}")
        treat_label, ctrl_label = pair
        paired = _pair_runs(
            metrics_by_run,
            treat_label,
            ctrl_label,
            key=key,
            needed=[accuracy_col, tokens_col],
            error_col=error_col,
        )
        acc_t, err_t = _accuracy_scores(paired, "t", treat_label, accuracy_col, error_col)
        acc_c, err_c = _accuracy_scores(paired, "c", ctrl_label, accuracy_col, error_col)

        row = _join_columns(paired, treat_label, ctrl_label)
        row.update(noninferiority(acc_t, acc_c, margin=margin, alpha=alpha, **boot).as_dict())
        row.update(_accuracy_intervals(acc_t, acc_c, confidence, boot))
        row.update(n_errors_as_wrong_treatment=err_t, n_errors_as_wrong_control=err_c)
        row.update(_token_columns(paired, tokens_col, error_col, confidence, boot))
        row.update(
            confidence=float(confidence),
            key=key,
            accuracy_col=accuracy_col,
            tokens_col=tokens_col,
        )
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class _Paired:
    """Two runs inner-joined on the key (columns suffixed ``_t`` / ``_c``, sorted by the
    key), with what was left out of the join and which side carries an error column."""

    merged: pd.DataFrame
    only_t: pd.Series
    only_c: pd.Series
    n_treatment: int
    n_control: int
    has_err: dict[str, bool]


def _pair_runs(
    metrics_by_run: Mapping[str, pd.DataFrame],
    treat_label: str,
    ctrl_label: str,
    *,
    key: str,
    needed: Sequence[str],
    error_col: str | None,
) -> _Paired:
    """Join the two runs on ``key`` (one to one), sorted by ``key`` so the result does not
    depend on row order; an error column present on one side only keeps that side's
    suffix, so later steps find it by the same name either way."""
    treat = _run_frame(metrics_by_run, treat_label, needed, key)
    ctrl = _run_frame(metrics_by_run, ctrl_label, needed, key)
    has_err = {
        side: error_col is not None and error_col in frame
        for side, frame in (("t", treat), ("c", ctrl))
    }
    cols_t = [key, *needed, *([error_col] if has_err["t"] else [])]
    cols_c = [key, *needed, *([error_col] if has_err["c"] else [])]
    merged = treat[cols_t].merge(
        ctrl[cols_c], on=key, how="inner", suffixes=("_t", "_c"), validate="one_to_one"
    )
    if has_err["t"] != has_err["c"]:  # the one error column kept its plain name
        side = "t" if has_err["t"] else "c"
        merged = merged.rename(columns={error_col: f"{error_col}_{side}"})
    merged = merged.sort_values(key, kind="stable").reset_index(drop=True)
    only_t = treat[key][~treat[key].isin(ctrl[key])]
    only_c = ctrl[key][~ctrl[key].isin(treat[key])]
    if merged.empty:
        raise StatsError(
            f"{treat_label!r} and {ctrl_label!r} share no {key!r}: zero paired examples"
        )
    return _Paired(merged, only_t, only_c, len(treat), len(ctrl), has_err)


def _join_columns(paired: _Paired, treat_label: str, ctrl_label: str) -> dict[str, Any]:
    """The two runs' names and sizes, how many examples paired, and which were left out."""
    return {
        "treatment": treat_label,
        "control": ctrl_label,
        "n_treatment": paired.n_treatment,
        "n_control": paired.n_control,
        "n_paired": len(paired.merged),
        "n_only_treatment": len(paired.only_t),
        "n_only_control": len(paired.only_c),
        "only_treatment": _ids(paired.only_t),
        "only_control": _ids(paired.only_c),
    }


def _accuracy_scores(
    paired: _Paired, side: str, label: str, accuracy_col: str, error_col: str | None
) -> tuple[np.ndarray, int]:
    """One side's accuracy over the pairs, an error row scoring 0 whatever it was given,
    and the number of such rows; a missing score that is no error stops the comparison."""
    merged = paired.merged
    arr = pd.to_numeric(merged[f"{accuracy_col}_{side}"], errors="coerce").to_numpy(dtype=float)
    err = (
        _is_error(merged[f"{error_col}_{side}"])
        if paired.has_err[side]
        else np.zeros(len(merged), dtype=bool)
    )
    arr = np.where(err, 0.0, arr)  # an error is a wrong answer
    if not np.all(np.isfinite(arr)):
        raise StatsError(f"run {label!r}: {accuracy_col!r} has missing values")
    return arr, int(err.sum())


def _accuracy_intervals(
    acc_t: np.ndarray, acc_c: np.ndarray, confidence: float, boot: dict[str, int]
) -> dict[str, Any]:
    """Two-sided intervals of the accuracy difference and of each side's accuracy:
    Tango's score interval and Wilson's for binary scores, the conservative t /
    studentized bootstrap interval otherwise (with the name of the method used)."""
    row: dict[str, Any] = {}
    if is_binary(acc_t, acc_c):
        low, high = paired_difference_interval(
            acc_t, acc_c, confidence, method="tango", continuity=CONTINUITY
        )
        row.update(diff_ci_low=low, diff_ci_high=high,
                   diff_ci_method=f"Tango score interval, continuity correction "
                   f"{CONTINUITY:g}")  # fmt: skip
        for side, arr in (("treatment", acc_t), ("control", acc_c)):
            ci_low, ci_high = wilson(float(arr.mean()), arr.size, confidence, continuity=True)
            row[f"accuracy_{side}_ci_low"], row[f"accuracy_{side}_ci_high"] = ci_low, ci_high
        row["accuracy_ci_method"] = "Wilson score interval, continuity-corrected"
    else:
        low, high = conservative_mean_interval(acc_t - acc_c, confidence, **boot)
        row.update(diff_ci_low=low, diff_ci_high=high,
                   diff_ci_method="the wider of the t and studentized bootstrap "
                   "intervals")  # fmt: skip
        for side, arr in (("treatment", acc_t), ("control", acc_c)):
            ci_low, ci_high = conservative_mean_interval(arr, confidence, **boot)
            row[f"accuracy_{side}_ci_low"], row[f"accuracy_{side}_ci_high"] = ci_low, ci_high
        row["accuracy_ci_method"] = "the wider of the t and studentized bootstrap intervals"
    return row


def _token_columns(
    paired: _Paired,
    tokens_col: str,
    error_col: str | None,
    confidence: float,
    boot: dict[str, int],
) -> dict[str, Any]:
    """The paired token tests (prefixed ``tokens_``) on the pairs where neither side has
    an error (when both runs have an error column), the bootstrap interval of the
    relative reduction, and how many pairs the errors left out."""
    merged = paired.merged
    ok = np.ones(len(merged), dtype=bool)
    if paired.has_err["t"] and paired.has_err["c"]:
        ok = ~(_is_error(merged[f"{error_col}_t"]) | _is_error(merged[f"{error_col}_c"]))
    tok_t = merged.loc[ok, f"{tokens_col}_t"].to_numpy(dtype=float)
    tok_c = merged.loc[ok, f"{tokens_col}_c"].to_numpy(dtype=float)
    if ok.any():
        tokens = token_reduction_tests(tok_t, tok_c)
    else:
        tokens = dict.fromkeys(_TOKEN_KEYS, float("nan"))
        tokens.update(
            n=0,
            n_relative=0,
            alternative="two-sided",
            wilcoxon_zero_method="wilcox",
            note="no paired example without an error",
        )
    row = {f"tokens_{k}": tokens[k] for k in _TOKEN_KEYS}
    low = high = float("nan")
    if ok.any() and tok_c.mean() > 0:
        rel = paired_bootstrap(
            tok_t, tok_c, statistic="relative_reduction", confidence=confidence, **boot
        )
        low, high = rel.ci_low, rel.ci_high
    row.update(
        tokens_relative_reduction_ci_low=low,
        tokens_relative_reduction_ci_high=high,
        tokens_n_errors_excluded=int((~ok).sum()),
    )
    return row


def run_intervals(
    metrics_by_run: Mapping[str, pd.DataFrame],
    columns: Sequence[str] = ("correct", "tokens_total_cl100k"),
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Mean and percentile bootstrap interval of each column of each run (for error bars).

    One row per (run, column): run, column, n, mean, ci_low, ci_high, n_resamples,
    seed, confidence, method. Missing values in a column are left out (n counts
    the rest); a column with no values gives NaN.
    """
    rows = []
    for label in sorted(metrics_by_run):
        df = metrics_by_run[label]
        for col in columns:
            if col not in df.columns:
                raise StatsError(f"run {label!r} lacks column {col!r}")
            values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
            values = values[np.isfinite(values)]
            if values.size == 0:
                nan = float("nan")
                rows.append(dict(run=label, column=col, n=0, mean=nan, ci_low=nan, ci_high=nan,
                                 n_resamples=n_resamples, seed=seed, confidence=confidence,
                                 method="no values"))  # fmt: skip
                continue
            ci = bootstrap_ci(values, n_resamples=n_resamples, seed=seed, confidence=confidence)
            rows.append(dict(run=label, column=col, n=ci.n, mean=ci.estimate, ci_low=ci.ci_low,
                             ci_high=ci.ci_high, n_resamples=ci.n_resamples, seed=ci.seed,
                             confidence=ci.confidence, method=ci.method))  # fmt: skip
    return pd.DataFrame(rows)
