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
  brief is written anyway).

Undefined ratios (a zero denominator) are NaN, or infinity for a positive numerator over
zero, never a silent 0. The θ sweep and leave-one-task-out replay :func:`decide` on the
recorded signals, so they need no model call (:func:`theta_sweep`, :func:`leave_one_task_out`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

import pandas as pd

from tersetalk.agents.router import TOPOLOGY_OF_LABEL, decide
from tersetalk.tasks.registry import topology_labels

__all__ = [
    "FIXED",
    "SIX_POLICIES",
    "best_fixed",
    "compare_to_fixed",
    "efficiency_score",
    "label_of",
    "leave_one_task_out",
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


def policy_table(
    df: pd.DataFrame, tokens: str = TOKENS, by: tuple[str, ...] = ("system", "variant")
) -> pd.DataFrame:
    """One row per (system, variant) (or per ``by``): its policy and the study's numbers.

    Columns: the ``by`` columns, ``policy``, ``n``, ``errors``, ``selection_accuracy``,
    ``accuracy`` (mean ``correct``), ``tokens`` (mean of ``tokens``), ``chain_share``,
    ``t_route_mean_s``, ``t_route_median_s``; sorted by the ``by`` columns.
    """
    rows = []
    for key, g in df.groupby(list(by), sort=True):
        policies = sorted(set(g["route_policy"].dropna().astype(str)) - {"error"})
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "policy": ",".join(policies),
                "n": len(g),
                "errors": int(g["error"].notna().sum()),
                "selection_accuracy": selection_accuracy(g),
                "accuracy": float(g["correct"].mean()),
                "tokens": float(g[tokens].mean()),
                "chain_share": float((g["route"].astype("string") == "chain").fillna(False).mean()),
                "t_route_mean_s": float(g["t_route_s"].mean()),
                "t_route_median_s": float(g["t_route_s"].median()),
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
    ``efficiency_score``. A system without both fixed runs gets NaN and ``best_fixed`` "".
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
