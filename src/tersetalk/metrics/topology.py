"""The topology study's metrics: pure functions over run frames (issue 16, the seed's §16).

A run frame holds one row per example of a routed system (``topology_freeform`` or
``topology_tersetalk``): the task, the route taken (``star`` or ``chain``), the policy,
whether the answer was correct, the tokens on the wire and the routing time. From them:

- **selection accuracy**: the share of examples routed to the topology their task's
  label asks for (:func:`tersetalk.tasks.registry.topology_labels`: direct -> ``star``,
  chain -> ``chain``). An error row counts as a wrong choice, as it counts 0 in accuracy;
- **token reduction** against the best fixed topology: ``(T_best - T) / T_best``, where
  the best fixed topology is the more accurate of the same system's fixed ``star`` and
  ``chain`` runs (the one with fewer tokens on a tie) and ``T`` is mean tokens per example;
- **quality preservation**: ``accuracy / accuracy of the best fixed topology``;
- **efficiency score**: ``token reduction x quality preservation``;
- **protocol advantage**: TerseTalk-adaptive's selection accuracy over free-form-adaptive's;
- **routing time**: mean and median ``t_route_s`` (signals, score and policy; the
  brief is written anyway);
- **latency**: mean and median ``t_example_s``, the runner's end-to-end time of one
  example (every model call, routing, scoring);
- **overflow rate**: the share of examples whose brief sent a line into memory
  (TerseTalk's ``c_overflow_total`` > 0); NaN for a protocol without that counter
  (free-form), never 0;
- intervals: a Wilson interval (:func:`tersetalk.stats.intervals.wilson`) on selection
  accuracy; against the best fixed topology, paired on the same examples, a percentile
  bootstrap interval on the token reduction and the non-inferiority test of accuracy
  (:func:`tersetalk.stats.noninferiority.noninferiority`) for the quality drop
  (:func:`paired_to_fixed`); the protocol advantage's bootstrap interval
  (:func:`advantage_interval`).

Undefined ratios (a zero denominator) are NaN, or infinity for a positive numerator over
zero, never a silent 0. The θ sweep and leave-one-task-out replay :func:`decide` on the
recorded signals, so they need no model call (:func:`theta_sweep`, :func:`leave_one_task_out`).
The ablations (a signal dropped from the score, scrambled tags) are rows of the policy
table set beside the full router (:func:`ablation_table`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from tersetalk.agents.router import TOPOLOGY_OF_LABEL, decide
from tersetalk.stats.bootstrap import bootstrap_distribution, paired_bootstrap
from tersetalk.stats.intervals import wilson
from tersetalk.stats.noninferiority import noninferiority
from tersetalk.tasks.registry import topology_labels

__all__ = [
    "FIXED",
    "SIX_POLICIES",
    "ablation_table",
    "advantage_interval",
    "best_fixed",
    "compare_to_fixed",
    "efficiency_score",
    "label_of",
    "leave_one_task_out",
    "loto_summary",
    "overflow_rate",
    "paired_to_fixed",
    "policy_table",
    "protocol_advantage",
    "quality_preservation",
    "ratio",
    "selection_accuracy",
    "six_policies",
    "theta_sweep",
    "token_reduction",
]

#: the fixed policies a routed policy is compared against
FIXED = ("star", "chain")
#: the study's six policies: (label, system, variant), as config.yaml's topology section names them
SIX_POLICIES = (
    ("Fixed-Star", "topology_tersetalk", "star"),
    ("Fixed-Chain", "topology_tersetalk", "chain"),
    ("Random", "topology_tersetalk", "random"),
    ("Oracle", "topology_tersetalk", "oracle"),
    ("FreeForm-Adaptive", "topology_freeform", "adaptive"),
    ("TerseTalk-Adaptive", "topology_tersetalk", "adaptive"),
)
TOKENS = "tokens_total_cl100k"
#: TerseTalk's counter of brief lines sent into memory (the codec's ``overflow_total``)
OVERFLOW = "c_overflow_total"


def ratio(num: float, den: float) -> float:
    """``num / den``; NaN for 0/0 (or a NaN input), ±inf for a non-zero over 0."""
    if math.isnan(num) or math.isnan(den):
        return math.nan
    if den == 0:
        return math.nan if num == 0 else math.copysign(math.inf, num)
    return num / den


def label_of(task: str) -> str:
    """The topology a task's label asks for; a clear error for a task without a label."""
    try:
        return TOPOLOGY_OF_LABEL[topology_labels()[task]]
    except KeyError:
        raise KeyError(
            f"task {task!r} has no topology label (the task's Task.topology); "
            "selection accuracy is defined on the topology study's tasks only"
        ) from None


def _correct_choice(df: pd.DataFrame, route: str = "route") -> pd.Series:
    labels = df["task"].map(label_of)
    return (df[route].astype("string") == labels).fillna(False).astype(bool)


def selection_accuracy(df: pd.DataFrame, route: str = "route") -> float:
    """Share of rows whose ``route`` column is their task's label (NaN for no rows)."""
    if df.empty:
        return math.nan
    return float(_correct_choice(df, route).mean())


def token_reduction(tokens: float, best_tokens: float) -> float:
    """``(T_best - T) / T_best``: positive when fewer tokens than the best fixed topology."""
    return ratio(best_tokens - tokens, best_tokens)


def quality_preservation(accuracy: float, best_accuracy: float) -> float:
    """``accuracy / best fixed accuracy`` (1.0: nothing lost)."""
    return ratio(accuracy, best_accuracy)


def efficiency_score(reduction: float, preservation: float) -> float:
    """The seed's ``token_reduction x quality_preservation``."""
    return reduction * preservation


def protocol_advantage(typed_selection: float, prose_selection: float) -> float:
    """TerseTalk-adaptive selection accuracy over free-form-adaptive's."""
    return ratio(typed_selection, prose_selection)


def _column(g: pd.DataFrame, col: str) -> pd.Series:
    """A numeric column of ``g`` (all NaN when the frame has no such column)."""
    if col not in g.columns:
        return pd.Series(math.nan, index=g.index, dtype="float64")
    return pd.to_numeric(g[col], errors="coerce").astype("float64")


def overflow_rate(df: pd.DataFrame, col: str = OVERFLOW) -> float:
    """Share of rows whose brief overflowed into memory (``col`` > 0), over the rows that
    record the counter; NaN when none does (a free-form run has no such counter)."""
    v = _column(df, col).dropna()
    return float((v > 0).mean()) if len(v) else math.nan


def _one(g: pd.DataFrame, col: str, default):
    """The single value of a per-variant setting column (``default`` when absent); joined
    with "," when a group mixes values."""
    if col not in g.columns:
        return default
    vals = sorted({str(v) for v in g[col].dropna()} - {"", "error"})
    return ",".join(vals) if vals else default


def policy_table(
    df: pd.DataFrame, tokens: str = TOKENS, by: tuple[str, ...] = ("system", "variant")
) -> pd.DataFrame:
    """One row per (system, variant) (or per ``by``): its policy and the study's numbers.

    Columns: the ``by`` columns, ``policy``, ``n``, ``errors``, ``selection_accuracy``,
    ``accuracy`` (mean ``correct``), ``tokens`` (mean of ``tokens``), ``chain_share``,
    ``t_route_mean_s``, ``t_route_median_s``; then ``selection_ci_low`` /
    ``selection_ci_high`` (95% Wilson interval of selection accuracy over the ``n`` rows),
    ``t_example_mean_s`` / ``t_example_median_s`` (end-to-end seconds per example; NaN
    without the column), ``overflow_rate`` (:func:`overflow_rate`), ``drop`` (the signal
    the variant's router leaves out, "" for none) and ``scrambled`` (tags scrambled);
    sorted by the ``by`` columns. Every variant of the runs gets a row (the six policies,
    θ variants, ablations, fitted, planned, ...).
    """
    rows = []
    for key, g in df.groupby(list(by), sort=True):
        policies = sorted(set(g["route_policy"].dropna().astype(str)) - {"error"})
        n = len(g)
        sel = selection_accuracy(g)
        low, high = wilson(sel, n) if n else (math.nan, math.nan)
        t_example = _column(g, "t_example_s").dropna()
        has_t = not t_example.empty
        scrambled = _one(g, "route_scrambled", "False")
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "policy": ",".join(policies),
                "n": n,
                "errors": int(g["error"].notna().sum()),
                "selection_accuracy": sel,
                "accuracy": float(g["correct"].mean()),
                "tokens": float(g[tokens].mean()),
                "chain_share": float((g["route"].astype("string") == "chain").fillna(False).mean()),
                "t_route_mean_s": float(g["t_route_s"].mean()),
                "t_route_median_s": float(g["t_route_s"].median()),
                "selection_ci_low": low,
                "selection_ci_high": high,
                "t_example_mean_s": float(t_example.mean()) if has_t else math.nan,
                "t_example_median_s": float(t_example.median()) if has_t else math.nan,
                "overflow_rate": overflow_rate(g),
                "drop": _one(g, "route_drop", ""),
                # error rows record False: one scrambled row marks the variant
                "scrambled": "True" in scrambled.split(","),
            }
        )
    return pd.DataFrame(rows)


def best_fixed(table: pd.DataFrame, system: str) -> pd.Series:
    """The best fixed-topology row of ``system`` in a :func:`policy_table`.

    The most accurate of its ``star`` and ``chain`` runs; fewer tokens on a tie.
    """
    fixed = table[(table["system"] == system) & table["policy"].isin(FIXED)]
    if fixed.empty:
        raise ValueError(
            f"no fixed star or chain run of {system!r} in the table: the best fixed topology "
            "needs variants with policy star and chain"
        )
    return fixed.sort_values(["accuracy", "tokens"], ascending=[False, True]).iloc[0]


def compare_to_fixed(table: pd.DataFrame) -> pd.DataFrame:
    """The policy table with each row compared to its system's best fixed topology.

    Adds ``best_fixed`` (its policy), ``token_reduction``, ``quality_preservation`` and
    ``efficiency_score``, then ``best_fixed_variant`` (the run compared with). A system
    without a fixed run gets NaN and ``best_fixed`` "".
    """
    out = table.copy()
    out["best_fixed"] = ""
    for col in ("token_reduction", "quality_preservation", "efficiency_score"):
        out[col] = math.nan
    for sys_name in out["system"].unique():
        try:
            best = best_fixed(out, sys_name)
        except ValueError:
            continue
        idx = out["system"] == sys_name
        red = [token_reduction(t, best["tokens"]) for t in out.loc[idx, "tokens"]]
        pres = [quality_preservation(a, best["accuracy"]) for a in out.loc[idx, "accuracy"]]
        out.loc[idx, "best_fixed"] = best["policy"]
        out.loc[idx, "token_reduction"] = red
        out.loc[idx, "quality_preservation"] = pres
        eff = [efficiency_score(r, p) for r, p in zip(red, pres, strict=True)]
        out.loc[idx, "efficiency_score"] = eff
        out.loc[idx, "best_fixed_variant"] = best["variant"]
    out["best_fixed_variant"] = out.get("best_fixed_variant", pd.Series("", index=out.index))
    out["best_fixed_variant"] = out["best_fixed_variant"].fillna("").astype(str)
    return out


def six_policies(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of :data:`SIX_POLICIES` in a :func:`compare_to_fixed` table, in that order,
    with their label first (``policy_label``); policies without a run are left out."""
    rows = []
    for label, sys_name, variant in SIX_POLICIES:
        hit = table[(table["system"] == sys_name) & (table["variant"] == variant)]
        if not hit.empty:
            rows.append({"policy_label": label, **hit.iloc[0].to_dict()})
    return pd.DataFrame(rows)


def _answered(df: pd.DataFrame) -> pd.Series:
    err = df["error"].astype(object)
    return ~(err.notna() & (err.astype(str) != ""))


def _keys(*frames: pd.DataFrame) -> list[str]:
    """The columns that name one example in every frame: task, example id (and seed)."""
    return [c for c in ("task", "example_id", "seed") if all(c in f.columns for f in frames)]


PAIRED_COLUMNS = (
    "n_paired",
    "token_reduction_paired",
    "token_reduction_ci_low",
    "token_reduction_ci_high",
    "quality_diff",
    "quality_diff_lower",
    "quality_diff_upper",
    "quality_verdict",
    "quality_verdict_reason",
)


def paired_to_fixed(
    df: pd.DataFrame,
    table: pd.DataFrame,
    tokens: str = TOKENS,
    *,
    margin: float = 0.02,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """A :func:`compare_to_fixed` table with each row tested against its best fixed run
    on the same examples (task, example id; rows with an error on either side left out).

    Adds ``n_paired``; ``token_reduction_paired`` (1 - mean T / mean T_best on the pairs)
    with its percentile bootstrap interval ``token_reduction_ci_low`` / ``_high`` (95%,
    :func:`tersetalk.stats.bootstrap.paired_bootstrap`); the quality drop as the paired
    non-inferiority test of ``correct`` at ``margin``: ``quality_diff`` (mean T - best),
    its one-sided bounds ``quality_diff_lower`` / ``_upper`` and ``quality_verdict``
    (non-inferior / inferior / inconclusive, with ``quality_verdict_reason``). NaN and ""
    where there is no best fixed run or no pair.
    """
    out = table.copy()
    for col in PAIRED_COLUMNS:
        out[col] = "" if col in ("quality_verdict", "quality_verdict_reason") else math.nan
    out["n_paired"] = 0
    for i, r in out.iterrows():
        best = r.get("best_fixed_variant", "")
        if not isinstance(best, str) or not best:
            continue
        sys_rows = df[df["system"] == r["system"]]
        treat = sys_rows[sys_rows["variant"] == r["variant"]]
        ctrl = sys_rows[sys_rows["variant"] == best]
        keys = _keys(treat, ctrl)
        cols = [*keys, tokens, "correct"]
        pairs = (
            treat[_answered(treat)][cols]
            .merge(ctrl[_answered(ctrl)][cols], on=keys, suffixes=("_t", "_c"))
            .sort_values(keys, kind="stable")
        )
        out.at[i, "n_paired"] = len(pairs)
        if pairs.empty:
            out.at[i, "quality_verdict"] = "inconclusive"
            out.at[i, "quality_verdict_reason"] = "no example answered by both runs"
            continue
        t_tok = pairs[f"{tokens}_t"].to_numpy(float)
        c_tok = pairs[f"{tokens}_c"].to_numpy(float)
        if c_tok.mean() > 0:
            res = paired_bootstrap(t_tok, c_tok, statistic="relative_reduction",
                                   n_resamples=n_resamples, seed=seed)  # fmt: skip
            out.at[i, "token_reduction_paired"] = res.estimate
            out.at[i, "token_reduction_ci_low"] = res.ci_low
            out.at[i, "token_reduction_ci_high"] = res.ci_high
        ni = noninferiority(
            pairs["correct_t"].to_numpy(float), pairs["correct_c"].to_numpy(float),
            margin=margin, alpha=alpha, n_resamples=n_resamples, seed=seed,
        )  # fmt: skip
        out.at[i, "quality_diff"] = ni.mean_diff
        out.at[i, "quality_diff_lower"] = ni.lower_bound
        out.at[i, "quality_diff_upper"] = ni.upper_bound
        out.at[i, "quality_verdict"] = ni.verdict
        out.at[i, "quality_verdict_reason"] = ni.verdict_reason
    out["n_paired"] = out["n_paired"].astype("int64")
    return out


def _ratio_of_means(t: np.ndarray, c: np.ndarray) -> np.ndarray:
    mt, mc = t.mean(axis=-1), c.mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mc > 0, mt / np.where(mc > 0, mc, 1.0), np.where(mt > 0, np.inf, np.nan))


def advantage_interval(
    typed: pd.DataFrame,
    prose: pd.DataFrame,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """The protocol advantage with a paired percentile bootstrap interval.

    ``typed`` and ``prose``: the two adaptive routers' rows; paired on the examples both
    ran (task, example id), a correct choice being 1 (an error row counts 0, as in
    selection accuracy). The statistic is the ratio of the two selection accuracies; a
    resample where free-form picks nothing right and TerseTalk something is +inf (kept in
    the percentiles, so the interval is not biased low), one where both pick nothing is
    left out. Returns ``estimate``, ``ci_low``, ``ci_high``, ``n``.
    """
    keys = _keys(typed, prose)
    a = typed.assign(_ok=_correct_choice(typed).astype(float))[[*keys, "_ok"]]
    b = prose.assign(_ok=_correct_choice(prose).astype(float))[[*keys, "_ok"]]
    pairs = a.merge(b, on=keys, suffixes=("_t", "_c")).sort_values(keys, kind="stable")
    if pairs.empty:
        return {"estimate": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0}
    t, c = pairs["_ok_t"].to_numpy(float), pairs["_ok_c"].to_numpy(float)
    estimate = float(_ratio_of_means(t[np.newaxis, :], c[np.newaxis, :])[0])
    dist = bootstrap_distribution([t, c], _ratio_of_means, n_resamples=n_resamples, seed=seed)
    dist = dist[~np.isnan(dist)]
    if dist.size == 0:
        low = high = math.nan
    else:
        tail = (1.0 - confidence) / 2.0
        # inverted_cdf picks resampled values, so +inf resamples stay +inf (no inf - inf)
        low, high = (float(q) for q in np.quantile(dist, [tail, 1 - tail], method="inverted_cdf"))
    return {"estimate": estimate, "ci_low": low, "ci_high": high, "n": len(pairs)}


#: how a variant's router differs from the full one, from its recorded settings
ABLATION_COLUMNS = (
    "system", "ablation", "signal", "variant", "n", "selection_accuracy", "selection_ci_low",
    "selection_ci_high", "full_selection_accuracy", "delta",
)  # fmt: skip


def ablation_table(table: pd.DataFrame, full_variant: str = "adaptive") -> pd.DataFrame:
    """The router's ablations beside the full router, per system (protocol).

    ``table``: a :func:`policy_table`. Per system, the ``full_variant`` row (``ablation``
    "full"), every row whose router dropped a signal (``ablation`` "drop", ``signal``
    the dropped one) and every row with scrambled tags (``ablation`` "scrambled"). Each
    with its n, selection accuracy and Wilson interval, the full router's selection
    accuracy and ``delta`` (ablated - full; NaN without a full row).
    """
    rows = []
    for sys_name in sorted(table["system"].unique()):
        t = table[table["system"] == sys_name]
        full = t[t["variant"] == full_variant]
        full_sel = float(full.iloc[0]["selection_accuracy"]) if len(full) else math.nan
        parts = [("full", "", r) for _, r in full.iterrows()]
        drops = t[t["drop"].astype(str) != ""].sort_values(["drop", "variant"])
        parts += [("drop", str(r["drop"]), r) for _, r in drops.iterrows()]
        scr = t[t["scrambled"].astype(bool) & (t["drop"].astype(str) == "")]
        parts += [("scrambled", "", r) for _, r in scr.sort_values("variant").iterrows()]
        for kind, signal, r in parts:
            rows.append(
                {
                    "system": sys_name,
                    "ablation": kind,
                    "signal": signal,
                    "variant": r["variant"],
                    "n": int(r["n"]),
                    "selection_accuracy": float(r["selection_accuracy"]),
                    "selection_ci_low": float(r["selection_ci_low"]),
                    "selection_ci_high": float(r["selection_ci_high"]),
                    "full_selection_accuracy": full_sel,
                    "delta": float(r["selection_accuracy"]) - full_sel,
                }
            )
    return pd.DataFrame(rows, columns=list(ABLATION_COLUMNS))


def loto_summary(loto: pd.DataFrame) -> dict:
    """A leave-one-task-out frame (this module's or the fitted router's, precomputed)
    summarised per system: mean held-out selection accuracy over held-out tasks, the
    pooled one (weighted by n) and each task's. ``loto`` has ``held_out``,
    ``selection_accuracy``, ``n`` and, when it covers several routers, ``system``."""
    frame = loto if "system" in loto.columns else loto.assign(system="")
    out = {}
    for sys_name, g in frame.groupby("system", sort=True):
        n = pd.to_numeric(g["n"], errors="coerce")
        sel = pd.to_numeric(g["selection_accuracy"], errors="coerce")
        total = float(n.sum())
        out[str(sys_name)] = {
            "mean_selection_accuracy": float(sel.mean()),
            "pooled_selection_accuracy": float((sel * n).sum() / total) if total else math.nan,
            "n": int(total),
            "held_out": {str(t): float(v) for t, v in zip(g["held_out"], sel, strict=True)},
        }
    return out


def _replayed(df: pd.DataFrame, theta: float, weights: Mapping[str, float] | None) -> pd.Series:
    """The rule's decision for every row at ``theta``, from its recorded signals alone."""
    out = []
    for sig, w in zip(df["route_signals"], df["route_weights"], strict=True):
        signals = json.loads(sig)
        out.append(decide(signals, weights if weights is not None else json.loads(w), theta)[0])
    return pd.Series(out, index=df.index, dtype="string")


def theta_sweep(
    df: pd.DataFrame, thetas: Iterable[float], weights: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """Selection accuracy and chain share of the rule at each θ, replayed on the signals.

    ``df``: rows of one routed system (any policy: every row records its signals; error
    rows, which have none, are left out and counted in ``errors``). ``weights`` None:
    each row's recorded weights. One row per θ, per task and overall (``task`` "all").
    """
    ok = df[df["error"].isna()]
    rows = []
    for theta in thetas:
        frame = ok.assign(replayed=_replayed(ok, theta, weights))
        groups = [(True, "all", frame)]
        groups += [(False, t, g) for t, g in sorted(frame.groupby("task"), key=lambda kv: kv[0])]
        for overall, task, g in groups:
            rows.append(
                {
                    "theta": float(theta),
                    "task": task,
                    "n": len(g),
                    "errors": int(len(df) - len(ok)) if overall else 0,
                    "selection_accuracy": selection_accuracy(g, "replayed"),
                    "chain_share": float((g["replayed"] == "chain").mean()) if len(g) else math.nan,
                }
            )
    return pd.DataFrame(rows)


def leave_one_task_out(
    df: pd.DataFrame, thetas: Iterable[float], weights: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """θ chosen on the other tasks, selection accuracy on the held-out one.

    For each task: the θ of ``thetas`` with the best selection accuracy on the other
    tasks' rows (the smallest such θ on a tie), then the selection accuracy that θ gets
    on the held-out task. Replayed on recorded signals like :func:`theta_sweep`.
    """
    thetas = sorted(float(t) for t in thetas)
    ok = df[df["error"].isna()]
    rows = []
    for task in sorted(ok["task"].unique()):
        train, test = ok[ok["task"] != task], ok[ok["task"] == task]
        scores = [(selection_accuracy(train.assign(r=_replayed(train, t, weights)), "r"), t)
                  for t in thetas]  # fmt: skip
        finite = [(s, t) for s, t in scores if not math.isnan(s)]
        best_score = max((s for s, _ in finite), default=math.nan)
        theta = min((t for s, t in finite if s == best_score), default=thetas[0])
        rows.append(
            {
                "held_out": task,
                "theta": theta,
                "train_selection_accuracy": best_score,
                "selection_accuracy": selection_accuracy(
                    test.assign(r=_replayed(test, theta, weights)), "r"
                ),
                "n": len(test),
            }
        )
    return pd.DataFrame(rows)
