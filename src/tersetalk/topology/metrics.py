"""The topology study's metrics: pure functions over run frames.

A run frame holds one row per example of a routed system (``topology_freeform`` or
``topology_tersetalk``): the task, the route taken (``star`` or ``chain``), the policy,
whether the answer was correct, the tokens on the wire and the routing time.

**Errors.** One rule everywhere: an error row is a wrong answer (``correct`` 0,
:func:`scored`) and a wrong routing choice, in every comparison, selection and target.
Error rows are never dropped from a pairing: a policy that fails on an example is paired
with the fixed run on that example and loses it. Their tokens are what the record holds
(what went on the wire before the failure).

**Ground truth from outcomes.** A task's topology label (direct -> star, chain -> chain)
is one constant per task, so agreeing with it restates how the brief is laid out per
task, not whether the route was right for the example. The reference is therefore the
**outcome oracle** (:func:`outcome_oracle`): per example, the cheapest topology among
those that answered it correctly, read from the same system's Fixed-Star and Fixed-Chain
runs (free-form's from free-form's, TerseTalk's from TerseTalk's):

- one of the two correct: that one;
- both correct: the one with fewer ``tokens_total_cl100k`` (equal tokens: a tie);
- both wrong: a tie ("all-wrong").

An example with an oracle pick is *decisive*; ties count in ``n_ties`` (all-wrong ones
also in ``n_all_wrong``) and are left out of the agreement. Per policy
(:func:`outcome_columns`): ``oracle_agreement`` (share of decisive examples routed to
the oracle's pick), ``accuracy_regret`` (mean over the examples of the oracle's
correctness, i.e. any-correct, minus the policy's) and ``token_regret`` (mean of the
policy's tokens minus the oracle's; on a tie the oracle spends the fewer of the two fixed
runs' tokens). Intervals take the task as the unit: a delete-one-task jackknife t
interval (:func:`tersetalk.stats.cluster.cluster_t_interval`, widened by its score form
for the agreement, a share) over all tasks, a continuity-corrected Wilson interval on
the agreement within one task. (A cluster bootstrap over a handful of tasks covers far
below its nominal level: 0.72 at 3 tasks in the simulation study, ``stats_sim``.)
Below :data:`MIN_DECISIVE` decisive examples or :data:`MIN_DECISIVE_TASKS` tasks with
one, the outcome columns are said to be inconclusive (``oracle_verdict``, ``oracle_note``
with the counts): a model at the floor answers too little for the outcomes to say which
route was right.

``label_agreement`` keeps the old measure (share routed to the task label's topology,
:func:`label_agreement`) as a secondary column, named for what it is.

**The best fixed topology** (:func:`fixed_comparison`): the fixed star and chain runs are
compared on the same examples by an exact McNemar test (a two-sided binomial test on the
discordant pairs, ``alpha`` 0.05). Only a significant difference names a best fixed
topology; otherwise ``best_fixed`` reads ``none (tie: p = ...)`` and the token reduction
and quality are reported against both fixed topologies (``*_vs_star``, ``*_vs_chain``).

Other measures: token reduction ``(T_best - T) / T_best``; quality preservation
``accuracy / best fixed accuracy``; efficiency score ``token reduction x quality
preservation``; routing time (``t_route_s``) and end-to-end latency (``t_example_s``);
overflow rate (TerseTalk's ``c_overflow_total`` > 0; NaN, never 0, for a protocol
without that counter). Paired against each fixed run (:func:`paired_to_fixed`): a
percentile bootstrap interval on the token reduction and the non-inferiority test of
accuracy (:func:`tersetalk.stats.noninferiority.noninferiority`).

**Protocol advantage** (:func:`protocol_advantage`): TerseTalk's fitted router against
free-form's fitted router, as the difference and ratio of their outcome-oracle agreement
(label agreement beside it, secondary), each with a jackknife t interval over tasks.

Undefined ratios (a zero denominator) are NaN, or infinity for a positive numerator over
zero, never a silent 0. The θ sweep and leave-one-task-out replay
:func:`tersetalk.topology.rule.decide` on the recorded signals, so they need no model
call (:func:`theta_sweep`, :func:`leave_one_task_out`). The ablations (a signal dropped
from the score, scrambled tags) are rows of the policy table set beside the full router
(:func:`ablation_table`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from tersetalk.core.intervals import wilson
from tersetalk.stats.bootstrap import paired_bootstrap
from tersetalk.stats.cluster import cluster_t_interval
from tersetalk.stats.noninferiority import noninferiority
from tersetalk.tasks.registry import topology_labels
from tersetalk.topology.rule import TOPOLOGY_OF_LABEL, decide

__all__ = [
    "FIXED",
    "MIN_DECISIVE",
    "MIN_DECISIVE_TASKS",
    "OUTCOME_COLUMNS",
    "SIX_POLICIES",
    "ablation_table",
    "best_fixed",
    "compare_to_fixed",
    "efficiency_score",
    "fixed_comparison",
    "fixed_variants",
    "floor_verdict",
    "label_agreement",
    "label_of",
    "leave_one_task_out",
    "loto_summary",
    "oracle_counts",
    "outcome_columns",
    "outcome_oracle",
    "outcome_oracles",
    "overflow_rate",
    "paired_to_fixed",
    "policy_table",
    "protocol_advantage",
    "quality_preservation",
    "ratio",
    "scored",
    "six_policies",
    "theta_sweep",
    "token_reduction",
]

#: the fixed policies a routed policy is compared against
FIXED = ("star", "chain")
#: the study's six policies: (label, system, variant), as config.yaml's topology section
#: names them. "Task-Label" routes by the task's label (config variant ``oracle``); the
#: outcome oracle is a virtual seventh row (:func:`six_policies`).
SIX_POLICIES = (
    ("Fixed-Star", "topology_tersetalk", "star"),
    ("Fixed-Chain", "topology_tersetalk", "chain"),
    ("Random", "topology_tersetalk", "random"),
    ("Task-Label", "topology_tersetalk", "oracle"),
    ("FreeForm-Adaptive", "topology_freeform", "adaptive"),
    ("TerseTalk-Adaptive", "topology_tersetalk", "adaptive"),
)
#: the virtual policy that takes the outcome oracle's pick (any-correct, the pick's tokens)
OUTCOME_ORACLE = "Outcome-Oracle"
TOKENS = "tokens_total_cl100k"
#: TerseTalk's counter of brief lines sent into memory (the codec's ``overflow_total``)
OVERFLOW = "c_overflow_total"
#: below these, the outcome columns are inconclusive (a model at the floor)
MIN_DECISIVE = 10
MIN_DECISIVE_TASKS = 2


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
            "label agreement is defined on the topology study's tasks only"
        ) from None


def _is_error(df: pd.DataFrame) -> pd.Series:
    """The error rows (an ``error`` that is set and not empty)."""
    if "error" not in df.columns:
        return pd.Series(False, index=df.index)
    err = df["error"].astype(object)
    return err.notna() & (err.astype(str) != "")


def scored(df: pd.DataFrame) -> pd.Series:
    """Each row's correctness as 0.0 / 1.0: an error row, or a row without a score, is 0
    (a wrong answer), the one rule of every comparison in this module."""
    ok = pd.to_numeric(df["correct"].astype(object), errors="coerce").astype(float).fillna(0.0)
    return ok.where(~_is_error(df), 0.0)


def _label_choice(df: pd.DataFrame, route: str = "route") -> pd.Series:
    labels = df["task"].map(label_of)
    return (df[route].astype("string") == labels).fillna(False).astype(bool)


def label_agreement(df: pd.DataFrame, route: str = "route") -> float:
    """Share of rows whose ``route`` is their task label's topology (NaN for no rows); an
    error row (route ``error``) counts as a wrong choice."""
    if df.empty:
        return math.nan
    return float(_label_choice(df, route).mean())


def token_reduction(tokens: float, best_tokens: float) -> float:
    """``(T_best - T) / T_best``: positive when fewer tokens than the best fixed topology."""
    return ratio(best_tokens - tokens, best_tokens)


def quality_preservation(accuracy: float, best_accuracy: float) -> float:
    """``accuracy / best fixed accuracy`` (1.0: nothing lost)."""
    return ratio(accuracy, best_accuracy)


def efficiency_score(reduction: float, preservation: float) -> float:
    """The TerseTalk design's ``token_reduction x quality_preservation``."""
    return reduction * preservation


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


def _keys(*frames: pd.DataFrame) -> list[str]:
    """The columns that name one example in every frame: task, example id (and seed)."""
    return [c for c in ("task", "example_id", "seed") if all(c in f.columns for f in frames)]


def _policies(g: pd.DataFrame) -> list[str]:
    return sorted(set(g["route_policy"].dropna().astype(str)) - {"error"})


# -- the outcome oracle ----------------------------------------------------------------------
def fixed_variants(df: pd.DataFrame, system: str) -> dict[str, str]:
    """route -> the variant of ``system`` that ran that fixed policy (policy ``star`` or
    ``chain`` on every row but error rows). Several such variants: the one named like the
    policy, else the first in sorted order. Missing policies are missing keys."""
    rows = df[df["system"] == system]
    out: dict[str, str] = {}
    for arm in FIXED:
        found = [str(v) for v, g in rows.groupby("variant", sort=True) if _policies(g) == [arm]]
        if found:
            out[arm] = arm if arm in found else found[0]
    return out


def _examples(rows: pd.DataFrame, tokens: str = TOKENS, what: str = "") -> pd.DataFrame:
    """One run's rows as (keys, route, ok, tok): ``ok`` by :func:`scored` (errors 0)."""
    keys = _keys(rows)
    if "task" not in keys or "example_id" not in keys:
        raise ValueError(f"{what or 'a run frame'} has no task and example_id columns")
    dup = rows.duplicated(keys)
    if dup.any():
        raise ValueError(
            f"{what or 'a run'}: {int(dup.sum())} row(s) repeat an example ({', '.join(keys)}); "
            "one row per example is expected (concatenated the same run file twice?)"
        )
    out = rows[keys].copy()
    out["route"] = rows["route"].astype("string").fillna("error")
    out["ok"] = scored(rows)
    out["tok"] = _column(rows, tokens)
    return out


def outcome_oracle(df: pd.DataFrame, system: str, tokens: str = TOKENS) -> pd.DataFrame:
    """The outcome oracle of every example both fixed runs of ``system`` ran.

    Columns: the example keys (task, example_id, seed when present), ``system``,
    ``star_correct`` / ``chain_correct`` (errors 0), ``star_tokens`` / ``chain_tokens``,
    ``oracle`` (``star``, ``chain``, "" for a tie), ``oracle_kind`` (``only-star``,
    ``only-chain``, ``cheaper`` (both right, fewer tokens), ``equal-tokens``,
    ``tokens-unknown`` (both right, a token count missing) or ``all-wrong``; all but the
    first three are ties), ``oracle_correct`` (1 when either is right) and
    ``oracle_tokens`` (the pick's tokens; on a tie the fewer of the two). Sorted by the
    keys. A clear error when the system lacks a fixed star or chain run.
    """
    arms = fixed_variants(df, system)
    if set(arms) != set(FIXED):
        raise ValueError(
            f"no fixed star and chain runs of {system!r} (found: {arms or 'none'}): the outcome "
            "oracle needs both fixed topologies on the same examples"
        )
    sys_rows = df[df["system"] == system]
    star, chain = (
        _examples(sys_rows[sys_rows["variant"] == arms[a]], tokens, f"{system}/{arms[a]}")
        for a in FIXED
    )
    keys = _keys(star, chain)
    m = star.merge(chain, on=keys, suffixes=("_star", "_chain")).sort_values(keys, kind="stable")
    s_ok, c_ok = m["ok_star"].to_numpy() > 0, m["ok_chain"].to_numpy() > 0
    s_tok, c_tok = m["tok_star"].to_numpy(float), m["tok_chain"].to_numpy(float)
    both = s_ok & c_ok
    unknown = both & (np.isnan(s_tok) | np.isnan(c_tok))
    conds = [s_ok & ~c_ok, c_ok & ~s_ok, ~s_ok & ~c_ok, unknown, both & (s_tok < c_tok),
             both & (c_tok < s_tok)]  # fmt: skip
    kind = np.select(conds, ["only-star", "only-chain", "all-wrong", "tokens-unknown",
                             "cheaper", "cheaper"], "equal-tokens")  # fmt: skip
    pick = np.select(conds, ["star", "chain", "", "", "star", "chain"], "")
    with np.errstate(invalid="ignore"):
        tie_tokens = np.fmin(s_tok, c_tok)
    out = m[keys].reset_index(drop=True)
    out.insert(len(keys), "system", system)
    out["star_correct"] = m["ok_star"].to_numpy()
    out["chain_correct"] = m["ok_chain"].to_numpy()
    out["star_tokens"] = s_tok
    out["chain_tokens"] = c_tok
    out["oracle"] = pick
    out["oracle_kind"] = kind
    out["oracle_correct"] = np.maximum(out["star_correct"], out["chain_correct"])
    out["oracle_tokens"] = np.where(pick == "star", s_tok, np.where(pick == "chain", c_tok,
                                                                    tie_tokens))  # fmt: skip
    return out


def outcome_oracles(df: pd.DataFrame, tokens: str = TOKENS) -> dict[str, pd.DataFrame]:
    """system -> :func:`outcome_oracle`, for every system of ``df`` with both fixed runs
    (a system without them has no oracle, and NaN outcome columns)."""
    out = {}
    for sys_name in sorted(set(df["system"].astype(str))):
        if set(fixed_variants(df, sys_name)) == set(FIXED):
            out[sys_name] = outcome_oracle(df, sys_name, tokens)
    return out


def floor_verdict(
    n_decisive: int, n_examples: int, n_tasks: int, min_tasks: int = MIN_DECISIVE_TASKS
) -> tuple[str, str]:
    """(``oracle_verdict``, ``oracle_note``): ``measured``, or ``inconclusive`` below
    :data:`MIN_DECISIVE` decisive examples or ``min_tasks`` tasks with one (default
    :data:`MIN_DECISIVE_TASKS`; 1 for numbers of one task)."""
    if n_decisive < MIN_DECISIVE or n_tasks < min_tasks:
        return "inconclusive", (
            f"inconclusive: too few decisive examples ({n_decisive} of {n_examples}); "
            f"{n_tasks} task(s) with one, at least {MIN_DECISIVE} over {min_tasks} "
            "task(s) needed"
        )
    return "measured", f"{n_decisive} of {n_examples} examples decisive over {n_tasks} task(s)"


def oracle_counts(oracle: pd.DataFrame) -> dict:
    """An oracle frame summarised: examples, decisive ones, ties (all of them; all-wrong
    ones also apart), tasks, the oracle's picks, any-correct accuracy and tokens, and the
    floor verdict (:func:`floor_verdict`)."""
    decisive = oracle["oracle"] != ""
    n, k = len(oracle), int(decisive.sum())
    tasks = int(oracle.loc[decisive, "task"].nunique())
    verdict, note = floor_verdict(k, n, tasks)
    return {
        "n_oracle": n,
        "n_decisive": k,
        "n_ties": n - k,
        "n_all_wrong": int((oracle["oracle_kind"] == "all-wrong").sum()),
        "n_equal_tokens": int((oracle["oracle_kind"] == "equal-tokens").sum()),
        "n_tasks": int(oracle["task"].nunique()),
        "n_decisive_tasks": tasks,
        "star_picks": int((oracle["oracle"] == "star").sum()),
        "chain_picks": int((oracle["oracle"] == "chain").sum()),
        "accuracy": float(oracle["oracle_correct"].mean()) if n else math.nan,
        "tokens": float(oracle["oracle_tokens"].mean()) if n else math.nan,
        "oracle_verdict": verdict,
        "oracle_note": note,
    }


#: the outcome columns of a policy row (:func:`outcome_columns`)
OUTCOME_COLUMNS = (
    "oracle_agreement", "oracle_agreement_ci_low", "oracle_agreement_ci_high", "n_oracle",
    "n_decisive", "n_ties", "n_all_wrong", "n_decisive_tasks", "accuracy_regret",
    "accuracy_regret_ci_low", "accuracy_regret_ci_high", "token_regret", "token_regret_ci_low",
    "token_regret_ci_high", "oracle_interval", "oracle_verdict", "oracle_note",
)  # fmt: skip


def _empty_outcomes(note: str) -> dict:
    out: dict = dict.fromkeys(OUTCOME_COLUMNS, math.nan)
    out.update(n_oracle=0, n_decisive=0, n_ties=0, n_all_wrong=0, n_decisive_tasks=0,
               oracle_interval="", oracle_verdict="inconclusive", oracle_note=note)  # fmt: skip
    return out


def outcome_columns(
    rows: pd.DataFrame,
    oracle: pd.DataFrame | None,
    tokens: str = TOKENS,
    *,
    interval: str = "cluster",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """One policy's rows against the outcome oracle (:data:`OUTCOME_COLUMNS`).

    Paired on the examples both hold (an error row stays: a wrong answer, a wrong
    choice). ``oracle_agreement``: share of the decisive examples routed to the oracle's
    pick; ``accuracy_regret``: mean of oracle correctness minus the policy's;
    ``token_regret``: mean of the policy's tokens minus the oracle's (over the examples
    with both counts). ``interval``: ``cluster`` (a jackknife t interval over tasks, for
    rows spanning tasks) or ``wilson`` (the agreement's Wilson interval, for one task;
    the regrets then have none). The floor verdict on the counts (:func:`floor_verdict`).
    """
    if oracle is None:
        return _empty_outcomes("no outcome oracle: the system lacks a fixed star or chain run")
    ex = _examples(rows, tokens)
    keys = _keys(ex, oracle)
    cols = [*keys, "oracle", "oracle_correct", "oracle_tokens"]
    m = ex.merge(oracle[cols], on=keys).sort_values(keys, kind="stable")
    if m.empty:
        return _empty_outcomes("no example in common with the fixed runs")
    decisive = (m["oracle"] != "").to_numpy()
    agree = (m["route"].astype(str) == m["oracle"]).to_numpy(float)
    acc_regret = (m["oracle_correct"] - m["ok"]).to_numpy(float)
    tok_regret = (m["tok"] - m["oracle_tokens"]).to_numpy(float)
    tasks = m["task"].astype(str).to_numpy()
    k, n = int(decisive.sum()), len(m)
    n_tasks = int(len(set(tasks[decisive])))
    verdict, note = floor_verdict(k, n, n_tasks, 1 if interval == "wilson" else MIN_DECISIVE_TASKS)
    out = _empty_outcomes(note)
    out.update(
        n_oracle=n, n_decisive=k, n_ties=n - k, n_decisive_tasks=n_tasks,
        n_all_wrong=int(((m["oracle"] == "") & (m["oracle_correct"] == 0)).sum()),
        oracle_verdict=verdict,
        oracle_agreement=float(agree[decisive].mean()) if k else math.nan,
        accuracy_regret=float(acc_regret.mean()),
        token_regret=float(np.nanmean(tok_regret)) if np.isfinite(tok_regret).any() else math.nan,
    )  # fmt: skip
    if interval == "wilson":
        if k:
            out["oracle_agreement_ci_low"], out["oracle_agreement_ci_high"] = wilson(
                out["oracle_agreement"], k, confidence, continuity=True
            )
        out["oracle_interval"] = f"Wilson (continuity-corrected) over {k} decisive example(s)"
        return out
    if interval != "cluster":
        raise ValueError(f"interval must be 'cluster' or 'wilson', got {interval!r}")
    parts = [("oracle_agreement", agree[decisive], tasks[decisive]),
             ("accuracy_regret", acc_regret, tasks)]  # fmt: skip
    finite = np.isfinite(tok_regret)
    parts.append(("token_regret", tok_regret[finite], tasks[finite]))
    clusters = 0
    for name, values, groups in parts:
        if len(values) == 0:
            continue
        res = cluster_t_interval(values, groups, confidence=confidence,
                                 share=name == "oracle_agreement")  # fmt: skip
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = res.low, res.high
        clusters = max(clusters, res.n_clusters)
    out["oracle_interval"] = (
        f"delete-one-task jackknife t interval over {clusters} task(s) ({clusters - 1} df)"
    )
    return out


def policy_table(
    df: pd.DataFrame,
    tokens: str = TOKENS,
    by: tuple[str, ...] = ("system", "variant"),
    *,
    oracles: Mapping[str, pd.DataFrame] | None = None,
    interval: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (system, variant) (or per ``by``): its policy and the study's numbers.

    Columns: the ``by`` columns, ``policy``, ``n``, ``errors``, ``label_agreement``,
    ``accuracy`` (mean of :func:`scored`: an error row counts 0), ``tokens`` (mean of
    ``tokens``), ``chain_share``, ``t_route_mean_s``, ``t_route_median_s``;
    ``label_agreement_ci_low`` / ``_high`` (95% Wilson interval over the ``n`` rows),
    ``t_example_mean_s`` / ``t_example_median_s`` (NaN without the column),
    ``overflow_rate`` (:func:`overflow_rate`), ``drop`` (the signal the variant's router
    leaves out, "" for none) and ``scrambled`` (tags scrambled); then, with ``oracles``
    (system -> :func:`outcome_oracle`), the :data:`OUTCOME_COLUMNS` against the system's
    oracle (``interval``: ``wilson`` when ``by`` holds ``task``, else ``cluster``; see
    :func:`outcome_columns`). Sorted by the ``by`` columns; every variant of the runs gets
    a row (the six policies, θ variants, ablations, fitted, planned, ...).
    """
    interval = interval or ("wilson" if "task" in by else "cluster")
    rows = []
    for key, g in df.groupby(list(by), sort=True):
        n = len(g)
        agree = label_agreement(g)
        low, high = wilson(agree, n, continuity=True) if n else (math.nan, math.nan)
        t_example = _column(g, "t_example_s").dropna()
        has_t = not t_example.empty
        scrambled = _one(g, "route_scrambled", "False")
        rec = {
            **dict(zip(by, key, strict=True)),
            "policy": ",".join(_policies(g)),
            "n": n,
            "errors": int(_is_error(g).sum()),
            "label_agreement": agree,
            "accuracy": float(scored(g).mean()),
            "tokens": float(_column(g, tokens).mean()),
            "chain_share": float((g["route"].astype("string") == "chain").fillna(False).mean()),
            "t_route_mean_s": float(_column(g, "t_route_s").mean()),
            "t_route_median_s": float(_column(g, "t_route_s").median()),
            "label_agreement_ci_low": low,
            "label_agreement_ci_high": high,
            "t_example_mean_s": float(t_example.mean()) if has_t else math.nan,
            "t_example_median_s": float(t_example.median()) if has_t else math.nan,
            "overflow_rate": overflow_rate(g),
            "drop": _one(g, "route_drop", ""),
            # error rows record False: one scrambled row marks the variant
            "scrambled": "True" in scrambled.split(","),
        }
        if oracles is not None:
            sys_name = str(g["system"].iloc[0])
            rec.update(outcome_columns(g, oracles.get(sys_name), tokens, interval=interval,
                                       n_resamples=n_resamples, seed=seed))  # fmt: skip
        rows.append(rec)
    return pd.DataFrame(rows)


# -- the best fixed topology -----------------------------------------------------------------
def fixed_comparison(
    df: pd.DataFrame, system: str, tokens: str = TOKENS, *, alpha: float = 0.05
) -> dict:
    """The fixed star and chain runs of ``system`` compared on the same examples.

    An exact McNemar test: of the discordant pairs (one right, the other wrong; an error
    row is wrong), ``star_only`` went the star's way; under no difference that count is
    Binomial(``star_only + chain_only``, 1/2), tested two-sided (scipy's ``binomtest``; p
    = 1 without a discordant pair). ``best``: the more accurate topology when ``p <
    alpha``, else "" (``best_label`` ``none (tie: p = ...)``). Returns ``star_variant``,
    ``chain_variant``, ``n_paired``, ``star_only``, ``chain_only``, ``p_value``,
    ``alpha``, ``best``, ``best_variant``, ``best_label``. A clear error without both runs.
    """
    arms = fixed_variants(df, system)
    if set(arms) != set(FIXED):
        raise ValueError(
            f"no fixed star and chain runs of {system!r} (found: {arms or 'none'}): the best "
            "fixed topology is chosen by comparing both on the same examples"
        )
    oracle = outcome_oracle(df, system, tokens)
    s, c = oracle["star_correct"] > 0, oracle["chain_correct"] > 0
    star_only, chain_only = int((s & ~c).sum()), int((c & ~s).sum())
    if star_only + chain_only:
        from scipy.stats import binomtest

        p = float(binomtest(star_only, star_only + chain_only, 0.5).pvalue)
    else:
        p = 1.0
    best = ("star" if star_only > chain_only else "chain") if p < alpha else ""
    return {
        "star_variant": arms["star"],
        "chain_variant": arms["chain"],
        "n_paired": len(oracle),
        "star_only": star_only,
        "chain_only": chain_only,
        "p_value": p,
        "alpha": alpha,
        "best": best,
        "best_variant": arms[best] if best else "",
        "best_label": best if best else f"none (tie: p = {p:.3g})",
    }


def best_fixed(df: pd.DataFrame, system: str, tokens: str = TOKENS, *, alpha: float = 0.05):
    """The best fixed topology of ``system`` (``star``, ``chain``, or "" when the McNemar
    test finds no significant difference): :func:`fixed_comparison`'s ``best``."""
    return fixed_comparison(df, system, tokens, alpha=alpha)["best"]


FIXED_TEST_COLUMNS = ("fixed_n_paired", "fixed_star_only", "fixed_chain_only", "fixed_p_value")


def compare_to_fixed(
    table: pd.DataFrame, df: pd.DataFrame, tokens: str = TOKENS, *, alpha: float = 0.05
) -> pd.DataFrame:
    """The policy table with each row compared to its system's fixed topologies.

    Adds ``best_fixed`` (``star``, ``chain``, ``none (tie: p = ...)`` or "" without both
    fixed runs), ``best_fixed_variant`` ("" unless a best one), the McNemar test's counts
    and p (:data:`FIXED_TEST_COLUMNS`, :func:`fixed_comparison`), ``token_reduction``,
    ``quality_preservation`` and ``efficiency_score`` against the best one (NaN on a tie),
    and ``token_reduction_vs_<arm>`` / ``quality_preservation_vs_<arm>`` against each
    fixed run (on the means of the table).
    """
    out = table.copy()
    out["best_fixed"] = ""
    out["best_fixed_variant"] = ""
    for col in ("token_reduction", "quality_preservation", "efficiency_score",
                *FIXED_TEST_COLUMNS):  # fmt: skip
        out[col] = math.nan
    for arm in FIXED:
        out[f"token_reduction_vs_{arm}"] = math.nan
        out[f"quality_preservation_vs_{arm}"] = math.nan
    for sys_name in out["system"].unique():
        idx = out["system"] == sys_name
        arms = fixed_variants(df, sys_name)
        for arm, variant in arms.items():
            hit = out[idx & (out["variant"] == variant)]
            if hit.empty:
                continue
            ref = hit.iloc[0]
            out.loc[idx, f"token_reduction_vs_{arm}"] = [
                token_reduction(t, ref["tokens"]) for t in out.loc[idx, "tokens"]
            ]
            out.loc[idx, f"quality_preservation_vs_{arm}"] = [
                quality_preservation(a, ref["accuracy"]) for a in out.loc[idx, "accuracy"]
            ]
        if set(arms) != set(FIXED):
            continue
        test = fixed_comparison(df, sys_name, tokens, alpha=alpha)
        out.loc[idx, "best_fixed"] = test["best_label"]
        out.loc[idx, "fixed_n_paired"] = test["n_paired"]
        out.loc[idx, "fixed_star_only"] = test["star_only"]
        out.loc[idx, "fixed_chain_only"] = test["chain_only"]
        out.loc[idx, "fixed_p_value"] = test["p_value"]
        if test["best"]:
            best = test["best"]
            out.loc[idx, "best_fixed_variant"] = test["best_variant"]
            red = out.loc[idx, f"token_reduction_vs_{best}"].to_numpy(float)
            pres = out.loc[idx, f"quality_preservation_vs_{best}"].to_numpy(float)
            out.loc[idx, "token_reduction"] = red
            out.loc[idx, "quality_preservation"] = pres
            out.loc[idx, "efficiency_score"] = [efficiency_score(r, p) for r, p in
                                                zip(red, pres, strict=True)]  # fmt: skip
    return out


def six_policies(table: pd.DataFrame, oracles: Mapping[str, pd.DataFrame] | None = None
                 ) -> pd.DataFrame:  # fmt: skip
    """The rows of :data:`SIX_POLICIES` in a :func:`compare_to_fixed` table, in that order,
    with their label first (``policy_label``); policies without a run are left out. With
    ``oracles``, the virtual ``Outcome-Oracle`` row of TerseTalk's oracle follows: its
    accuracy is any-correct, its tokens the oracle's picks, agreement 1 and no regret by
    definition (``policy`` ``outcome-oracle``, ``variant`` ``outcome_oracle``)."""
    rows = []
    for label, sys_name, variant in SIX_POLICIES:
        hit = table[(table["system"] == sys_name) & (table["variant"] == variant)]
        if not hit.empty:
            rows.append({"policy_label": label, **hit.iloc[0].to_dict()})
    typed = SIX_POLICIES[-1][1]
    if oracles is not None and typed in oracles and len(oracles[typed]):
        c = oracle_counts(oracles[typed])
        rows.append({
            "policy_label": OUTCOME_ORACLE, "system": typed, "variant": "outcome_oracle",
            "policy": "outcome-oracle", "n": c["n_oracle"], "errors": 0,
            "accuracy": c["accuracy"], "tokens": c["tokens"],
            "oracle_agreement": 1.0 if c["n_decisive"] else math.nan,
            "n_oracle": c["n_oracle"], "n_decisive": c["n_decisive"], "n_ties": c["n_ties"],
            "n_all_wrong": c["n_all_wrong"], "n_decisive_tasks": c["n_decisive_tasks"],
            "accuracy_regret": 0.0, "token_regret": 0.0,
            "chain_share": c["chain_picks"] / c["n_oracle"],
            "oracle_verdict": c["oracle_verdict"], "oracle_note": c["oracle_note"],
        })  # fmt: skip
    out = pd.DataFrame(rows)
    return out.reindex(columns=[*dict.fromkeys(["policy_label", *table.columns, *out.columns])])


# -- paired against the fixed runs -----------------------------------------------------------
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
_TEXT = ("quality_verdict", "quality_verdict_reason")


def _paired(treat: pd.DataFrame, ctrl: pd.DataFrame, tokens: str, margin: float, alpha: float,
            n_resamples: int, seed: int) -> dict:  # fmt: skip
    """:data:`PAIRED_COLUMNS` of one run against one fixed run, on the examples both ran;
    error rows kept and counted 0."""
    a, b = _examples(treat, tokens), _examples(ctrl, tokens)
    keys = _keys(a, b)
    pairs = a.merge(b, on=keys, suffixes=("_t", "_c")).sort_values(keys, kind="stable")
    out: dict = {c: ("" if c in _TEXT else math.nan) for c in PAIRED_COLUMNS}
    out["n_paired"] = len(pairs)
    if pairs.empty:
        out["quality_verdict"] = "inconclusive"
        out["quality_verdict_reason"] = "no example ran by both"
        return out
    t_tok, c_tok = pairs["tok_t"].to_numpy(float), pairs["tok_c"].to_numpy(float)
    fin = np.isfinite(t_tok) & np.isfinite(c_tok)
    if fin.any() and c_tok[fin].mean() > 0:
        res = paired_bootstrap(t_tok[fin], c_tok[fin], statistic="relative_reduction",
                               n_resamples=n_resamples, seed=seed)  # fmt: skip
        out["token_reduction_paired"] = res.estimate
        out["token_reduction_ci_low"] = res.ci_low
        out["token_reduction_ci_high"] = res.ci_high
    ni = noninferiority(pairs["ok_t"].to_numpy(float), pairs["ok_c"].to_numpy(float),
                        margin=margin, alpha=alpha, n_resamples=n_resamples, seed=seed)  # fmt: skip
    out.update(quality_diff=ni.mean_diff, quality_diff_lower=ni.lower_bound,
               quality_diff_upper=ni.upper_bound, quality_verdict=ni.verdict,
               quality_verdict_reason=ni.verdict_reason)  # fmt: skip
    return out


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
    """A :func:`compare_to_fixed` table with each row tested against each fixed run of its
    system on the same examples (task, example id; an error row on either side stays in
    the pair and counts 0, a wrong answer).

    Per fixed run ``<arm>`` (star, chain): :data:`PAIRED_COLUMNS` suffixed ``_vs_<arm>``:
    ``n_paired``; ``token_reduction_paired`` (1 - mean T / mean T_fixed on the pairs with
    both token counts) with its percentile bootstrap interval ``token_reduction_ci_low`` /
    ``_high`` (95%, :func:`tersetalk.stats.bootstrap.paired_bootstrap`); the quality drop
    as the paired non-inferiority test of correctness at ``margin``: ``quality_diff``
    (mean T - fixed), its one-sided bounds ``quality_diff_lower`` / ``_upper`` and
    ``quality_verdict`` (non-inferior / inferior / inconclusive, with
    ``quality_verdict_reason``). The unsuffixed columns repeat the best fixed run's; they
    are NaN and "" when no fixed topology is significantly better (``best_fixed`` a tie),
    and where there is no fixed run.
    """
    out = table.copy()
    for suffix in ("", *(f"_vs_{a}" for a in FIXED)):
        for col in PAIRED_COLUMNS:
            out[col + suffix] = "" if col in _TEXT else math.nan
        out["n_paired" + suffix] = 0
    for sys_name in out["system"].unique():
        arms = fixed_variants(df, sys_name)
        sys_rows = df[df["system"] == sys_name]
        for i in out.index[out["system"] == sys_name]:
            treat = sys_rows[sys_rows["variant"] == out.at[i, "variant"]]
            for arm, variant in arms.items():
                res = _paired(treat, sys_rows[sys_rows["variant"] == variant], tokens, margin,
                              alpha, n_resamples, seed)  # fmt: skip
                for col, v in res.items():
                    out.at[i, f"{col}_vs_{arm}"] = v
                if out.get("best_fixed_variant", pd.Series("", index=out.index))[i] == variant:
                    for col, v in res.items():
                        out.at[i, col] = v
    for suffix in ("", *(f"_vs_{a}" for a in FIXED)):
        out["n_paired" + suffix] = out["n_paired" + suffix].astype("int64")
    return out


# -- protocol advantage ----------------------------------------------------------------------
def _nanmean(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


def _diff(v: np.ndarray) -> float:
    return _nanmean(v[:, 0]) - _nanmean(v[:, 1])


def _ratio(v: np.ndarray) -> float:
    return ratio(_nanmean(v[:, 0]), _nanmean(v[:, 1]))


def _agreements(rows: pd.DataFrame, oracle: pd.DataFrame | None) -> pd.DataFrame:
    """Per example: ``oracle_ok`` (routed to the oracle's pick; NaN when not decisive or
    without an oracle) and ``label_ok`` (routed to the task label's topology)."""
    ex = _examples(rows)
    ex["label_ok"] = _label_choice(ex).astype(float).to_numpy()
    if oracle is None:
        ex["oracle_ok"] = math.nan
        return ex
    keys = _keys(ex, oracle)
    m = ex.merge(oracle[[*keys, "oracle"]], on=keys, how="left")
    hit = m["oracle"].fillna("").astype(str)
    m["oracle_ok"] = np.where(hit != "", (m["route"].astype(str) == hit).astype(float), math.nan)
    return m.drop(columns="oracle")


def protocol_advantage(
    typed: pd.DataFrame,
    prose: pd.DataFrame,
    typed_oracle: pd.DataFrame | None,
    prose_oracle: pd.DataFrame | None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """TerseTalk's router (``typed``, its rows) against free-form's (``prose``), each
    judged by its own system's outcome oracle, on the examples both ran.

    Returns ``n_paired``, ``n_tasks`` and two blocks, ``oracle`` (primary: agreement with
    the outcome oracle over each system's decisive examples) and ``label`` (secondary:
    agreement with the task labels, which the task mix sets). Each block: ``typed``,
    ``prose``, ``difference`` (typed - prose) and ``ratio`` (typed / prose), each with a
    jackknife t interval over tasks (``*_ci_low`` / ``_high``); the oracle block adds
    ``n_decisive_typed`` / ``_prose`` and the floor verdict of the weaker of the two
    (``verdict`` ``measured`` or ``inconclusive``, ``note``).
    """
    a, b = _agreements(typed, typed_oracle), _agreements(prose, prose_oracle)
    keys = _keys(a, b)
    pairs = a.merge(b, on=keys, suffixes=("_t", "_p")).sort_values(keys, kind="stable")
    tasks = pairs["task"].astype(str).to_numpy()
    out: dict = {"n_paired": len(pairs), "n_tasks": int(len(set(tasks))),
                 "interval": "delete-one-task jackknife t interval over tasks"}  # fmt: skip
    for block, col in (("oracle", "oracle_ok"), ("label", "label_ok")):
        v = pairs[[f"{col}_t", f"{col}_p"]].to_numpy(float)
        res = {"typed": _nanmean(v[:, 0]) if len(v) else math.nan,
               "prose": _nanmean(v[:, 1]) if len(v) else math.nan}  # fmt: skip
        # a difference of two shares lies in [-1, 1], a ratio of them in [0, inf)
        for name, stat, clip in (("difference", _diff, (-1.0, 1.0)),
                                 ("ratio", _ratio, (0.0, math.inf))):  # fmt: skip
            r = (cluster_t_interval(v, tasks, stat, confidence=confidence, clip=clip)
                 if len(v) else None)  # fmt: skip
            res[name] = r.estimate if r else math.nan
            res[f"{name}_ci_low"] = r.low if r else math.nan
            res[f"{name}_ci_high"] = r.high if r else math.nan
        if block == "oracle":
            verdicts = []
            for side, j in (("typed", 0), ("prose", 1)):
                dec = ~np.isnan(v[:, j]) if len(v) else np.zeros(0, bool)
                res[f"n_decisive_{side}"] = int(dec.sum())
                verdicts.append(floor_verdict(int(dec.sum()), len(v), len(set(tasks[dec]))))
            worst = next((vn for vn in verdicts if vn[0] == "inconclusive"), verdicts[0])
            res["verdict"] = worst[0]
            res["note"] = "; ".join(f"{s}: {vn[1]}" for s, vn in
                                    zip(("typed", "prose"), verdicts, strict=True))  # fmt: skip
        out[block] = res
    return out


# -- ablations, leave-one-task-out, θ sweep --------------------------------------------------
ABLATION_COLUMNS = (
    "system", "ablation", "signal", "variant", "n", "label_agreement", "label_agreement_ci_low",
    "label_agreement_ci_high", "full_label_agreement", "delta", "oracle_agreement",
    "oracle_agreement_ci_low", "oracle_agreement_ci_high", "full_oracle_agreement",
    "oracle_delta", "oracle_verdict",
)  # fmt: skip


def ablation_table(table: pd.DataFrame, full_variant: str = "adaptive") -> pd.DataFrame:
    """The router's ablations beside the full router, per system (protocol).

    ``table``: a :func:`policy_table`. Per system, the ``full_variant`` row (``ablation``
    "full"), every row whose router dropped a signal (``ablation`` "drop", ``signal``
    the dropped one) and every row with scrambled tags (``ablation`` "scrambled"). Each
    with its n, label agreement and Wilson interval, the full router's and ``delta``
    (ablated - full; NaN without a full row); the same for the outcome-oracle agreement
    (``oracle_*``, NaN when the table has no outcome columns).
    """
    rows = []

    def num(r, col):
        return float(r[col]) if col in r and pd.notna(r[col]) else math.nan

    for sys_name in sorted(table["system"].unique()):
        t = table[table["system"] == sys_name]
        full = t[t["variant"] == full_variant]
        full_label = num(full.iloc[0], "label_agreement") if len(full) else math.nan
        full_oracle = num(full.iloc[0], "oracle_agreement") if len(full) else math.nan
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
                    "label_agreement": num(r, "label_agreement"),
                    "label_agreement_ci_low": num(r, "label_agreement_ci_low"),
                    "label_agreement_ci_high": num(r, "label_agreement_ci_high"),
                    "full_label_agreement": full_label,
                    "delta": num(r, "label_agreement") - full_label,
                    "oracle_agreement": num(r, "oracle_agreement"),
                    "oracle_agreement_ci_low": num(r, "oracle_agreement_ci_low"),
                    "oracle_agreement_ci_high": num(r, "oracle_agreement_ci_high"),
                    "full_oracle_agreement": full_oracle,
                    "oracle_delta": num(r, "oracle_agreement") - full_oracle,
                    "oracle_verdict": str(r.get("oracle_verdict", "") or ""),
                }
            )
    return pd.DataFrame(rows, columns=list(ABLATION_COLUMNS))


def loto_summary(loto: pd.DataFrame) -> dict:
    """A leave-one-task-out frame (this module's or the fitted router's, precomputed)
    summarised per system: mean held-out label agreement over held-out tasks, the pooled
    one (weighted by n) and each task's. ``loto`` has ``held_out``, ``n``, the agreement
    as ``label_agreement`` (this module) or ``selection_accuracy`` (the fitted router's
    frame) and, when it covers several routers, ``system``."""
    frame = loto if "system" in loto.columns else loto.assign(system="")
    col = "label_agreement" if "label_agreement" in frame.columns else "selection_accuracy"
    if col not in frame.columns:
        raise ValueError("a leave-one-task-out frame needs label_agreement or selection_accuracy")
    out = {}
    for sys_name, g in frame.groupby("system", sort=True):
        n = pd.to_numeric(g["n"], errors="coerce")
        sel = pd.to_numeric(g[col], errors="coerce")
        total = float(n.sum())
        out[str(sys_name)] = {
            "mean_label_agreement": float(sel.mean()),
            "pooled_label_agreement": float((sel * n).sum() / total) if total else math.nan,
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


def _oracle_agreement(g: pd.DataFrame, oracle: pd.DataFrame | None, route: str) -> tuple:
    """(agreement over decisive examples, n decisive) of ``g[route]`` against ``oracle``."""
    if oracle is None or g.empty:
        return math.nan, 0
    keys = _keys(g, oracle)
    m = g[[*keys, route]].merge(oracle[[*keys, "oracle"]], on=keys)
    m = m[m["oracle"] != ""]
    if m.empty:
        return math.nan, 0
    return float((m[route].astype(str) == m["oracle"]).mean()), len(m)


def theta_sweep(
    df: pd.DataFrame,
    thetas: Iterable[float],
    weights: Mapping[str, float] | None = None,
    oracle: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Label agreement, outcome-oracle agreement and chain share of the rule at each θ,
    replayed on the signals.

    ``df``: rows of one routed system (any policy: every row records its signals; error
    rows, which have none, are left out and counted in ``errors``). ``weights`` None:
    each row's recorded weights. ``oracle``: the system's :func:`outcome_oracle`
    (``oracle_agreement`` and ``n_decisive``; NaN and 0 without). One row per θ, per
    task and overall (``task`` "all").
    """
    ok = df[~_is_error(df)]
    rows = []
    for theta in thetas:
        frame = ok.assign(replayed=_replayed(ok, theta, weights))
        groups = [(True, "all", frame)]
        groups += [(False, t, g) for t, g in sorted(frame.groupby("task"), key=lambda kv: kv[0])]
        for overall, task, g in groups:
            agree, k = _oracle_agreement(g, oracle, "replayed")
            rows.append(
                {
                    "theta": float(theta),
                    "task": task,
                    "n": len(g),
                    "errors": int(len(df) - len(ok)) if overall else 0,
                    "label_agreement": label_agreement(g, "replayed"),
                    "chain_share": float((g["replayed"] == "chain").mean()) if len(g) else math.nan,
                    "oracle_agreement": agree,
                    "n_decisive": k,
                }
            )
    return pd.DataFrame(rows)


def leave_one_task_out(
    df: pd.DataFrame, thetas: Iterable[float], weights: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """θ chosen on the other tasks, label agreement on the held-out one.

    For each task: the θ of ``thetas`` with the best label agreement on the other tasks'
    rows (the smallest such θ on a tie), then the label agreement that θ gets on the
    held-out task. Replayed on recorded signals like :func:`theta_sweep`.
    """
    thetas = sorted(float(t) for t in thetas)
    ok = df[~_is_error(df)]
    rows = []
    for task in sorted(ok["task"].unique()):
        train, test = ok[ok["task"] != task], ok[ok["task"] == task]
        scores = [(label_agreement(train.assign(r=_replayed(train, t, weights)), "r"), t)
                  for t in thetas]  # fmt: skip
        finite = [(s, t) for s, t in scores if not math.isnan(s)]
        best_score = max((s for s, _ in finite), default=math.nan)
        theta = min((t for s, t in finite if s == best_score), default=thetas[0])
        rows.append(
            {
                "held_out": task,
                "theta": theta,
                "train_label_agreement": best_score,
                "label_agreement": label_agreement(
                    test.assign(r=_replayed(test, theta, weights)), "r"
                ),
                "n": len(test),
            }
        )
    return pd.DataFrame(rows)
