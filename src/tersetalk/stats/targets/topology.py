"""The topology study's targets (TerseTalk design, section 16), from ``results/topology/``.

What ``tersetalk topology`` writes (:mod:`tersetalk.topology.cli`) is read here,
with the table's rules (:mod:`tersetalk.stats.targets`). Every met / not met is decided
on an interval, which the row carries (``ci_low`` / ``ci_high``):

- ``topology_agreement`` (selection >= 0.85, TerseTalk-Adaptive with the design's
  weights): agreement with the **outcome oracle** (per example, the cheapest fixed
  topology that answered it correctly), its jackknife t interval over tasks
  (``six_policies.csv``'s ``oracle_agreement_ci_low`` / ``_high``) against 0.85;
  inconclusive when the outcomes are at the floor (``oracle_verdict``, too few decisive
  examples). The label agreement (which restates the task mix) and the fitted router's
  numbers are given beside it in the reason, never decide;
- ``topology_tokens`` (20-30% fewer tokens than the best fixed topology at <= 2% quality
  drop): on the examples paired with the fixed runs, the token reduction's bootstrap
  interval against 20% and the accuracy's non-inferiority verdict at the 0.02 margin;
  met when both are met, not met when either is not, inconclusive otherwise. The best
  fixed topology is the one an exact McNemar test finds more accurate; when none is
  (``best_fixed`` ``none (tie: p = ...)``), which one a user would have picked is
  unknown, so the row is decided against **both**: met only when met against both,
  not met when not met against both, inconclusive otherwise. The reason names the
  quality verdict the token number stands beside;
- ``topology_protocol_advantage`` (~2x TerseTalk vs free-form): the ratio of the fitted
  routers' outcome-oracle agreements (``summary.json``'s ``protocol_advantage``) with its
  jackknife t interval over tasks against 2; inconclusive when either system's
  outcomes are at the floor or the interval straddles 2 (too wide to decide). The
  label-agreement ratio is only reported: it is set by the task mix.

A file written before these columns existed gives an inconclusive row saying to rerun
the report, never a point-estimate verdict.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ._base import NAN, NI_STATUS, TT, Provider, interval_reason, interval_status, row

__all__ = ["PROVIDERS", "topology_rows"]

RERUN = "rerun the report (snakemake --cores all topology)"
TARGETS = (
    ("topology_agreement", "topology selection >= 85% agreement with the outcome oracle "
     "(cheapest topology that answered correctly)", 0.85),
    ("topology_tokens", "20-30% fewer tokens than the best fixed topology, <= 2% "
     "quality drop", 0.20),
    ("topology_protocol_advantage", "~2x outcome-oracle agreement of TerseTalk vs free-form "
     "(fitted routers)", 2.0),
)  # fmt: skip
FIXED = ("star", "chain")


def _num(r: pd.Series | dict, key: str) -> float:
    """A number of a row (NaN when absent, empty or null)."""
    try:
        v = r.get(key, NAN)
        return NAN if v is None else float(v)
    except (TypeError, ValueError):
        return NAN


def _int(r: pd.Series | dict, key: str) -> int:
    """A count of a row (0 when absent or not a number)."""
    v = _num(r, key)
    return int(v) if np.isfinite(v) else 0


def _text(r: pd.Series | dict, key: str) -> str:
    v = r.get(key, "")
    return v if isinstance(v, str) else ""


def _bounded(x: float) -> float:
    """+inf as the largest float: an interval open to the right still decides."""
    return min(x, sys.float_info.max) if not math.isnan(x) else x


def _agreement(adaptive: pd.Series, fitted: pd.Series | None, run: str, src: str) -> dict:
    tid, text, thr = TARGETS[0]
    base = dict(id=tid, seed=TT, target=text, run=run, threshold=thr, source=src)
    if "oracle_agreement_ci_low" not in adaptive.index:
        return row(**base, status="inconclusive",
                   reason="six_policies.csv has no agreement with the outcome oracle (written "
                   f"before it; the label agreement restates the task mix): {RERUN}")  # fmt: skip
    k, n = _int(adaptive, "n_decisive"), _int(adaptive, "n_oracle")
    acc = _num(adaptive, "oracle_agreement")
    low = _num(adaptive, "oracle_agreement_ci_low")
    high = _num(adaptive, "oracle_agreement_ci_high")
    ties, wrong = _int(adaptive, "n_ties"), _int(adaptive, "n_all_wrong")
    measured = (f"{acc:.3f} of {k} decisive examples agree with the outcome oracle "
                f"({n} examples, {ties} ties of which {wrong} all-wrong)")  # fmt: skip
    label = (f"label agreement (secondary, set by the task mix): "
             f"{_num(adaptive, 'label_agreement'):.3f}")  # fmt: skip
    if fitted is not None:
        label += (f"; fitted weights ({fitted['variant']}): outcome-oracle agreement "
                  f"{_num(fitted, 'oracle_agreement'):.3f} "
                  f"[{_num(fitted, 'oracle_agreement_ci_low'):.3g}, "
                  f"{_num(fitted, 'oracle_agreement_ci_high'):.3g}], label agreement "
                  f"{_num(fitted, 'label_agreement'):.3f}")  # fmt: skip
    if _text(adaptive, "oracle_verdict") != "measured":
        note = _text(adaptive, "oracle_note") or "no outcome oracle"
        return row(**base, measured=measured, value=acc, ci_low=low, ci_high=high,
                   status="inconclusive", reason=f"{note}; {label}")  # fmt: skip
    status = interval_status(low, high, thr)
    how = _text(adaptive, "oracle_interval") or "jackknife t interval over tasks"
    reason = interval_reason(status, low, high, f"{thr:g}") + f" ({how}); {label}"
    return row(**base, measured=measured, value=acc, ci_low=low, ci_high=high, status=status,
               reason=reason)  # fmt: skip


def _one_arm(adaptive: pd.Series, suffix: str, thr: float) -> dict:
    """The token and quality halves against one fixed run (``suffix`` "" for the best)."""
    low = _num(adaptive, f"token_reduction_ci_low{suffix}")
    high = _num(adaptive, f"token_reduction_ci_high{suffix}")
    verdict = _text(adaptive, f"quality_verdict{suffix}")
    verdict = verdict if verdict in NI_STATUS else "inconclusive"
    why_q = _text(adaptive, f"quality_verdict_reason{suffix}") or "no paired example"
    tok_status = interval_status(low, high, thr)
    statuses = {tok_status, NI_STATUS[verdict]}
    status = ("not met" if "not met" in statuses
              else "met" if statuses == {"met"} else "inconclusive")  # fmt: skip
    return {
        "status": status,
        "red": _num(adaptive, f"token_reduction_paired{suffix}"),
        "low": low,
        "high": high,
        "diff": _num(adaptive, f"quality_diff{suffix}"),
        "n": _int(adaptive, f"n_paired{suffix}"),
        "verdict": verdict,
        "tokens": f"{interval_reason(tok_status, low, high, f'{thr:.0%}')} (paired bootstrap)",
        "quality": f"quality verdict beside it: {verdict} at margin 0.02 ({why_q})",
    }


def _tokens(adaptive: pd.Series, run: str, src: str) -> dict:
    tid, text, thr = TARGETS[1]
    base = dict(id=tid, seed=TT, target=text, run=run, threshold=thr, source=src)
    needed = [f"token_reduction_ci_low_vs_{a}" for a in FIXED] + ["fixed_p_value"]
    if any(c not in adaptive.index for c in needed):
        return row(**base, status="inconclusive",
                   reason="six_policies.csv has no paired comparison with both fixed "
                   f"topologies (written before it): {RERUN}")  # fmt: skip
    best = _text(adaptive, "best_fixed")
    if not best:
        return row(**base, status="inconclusive",
                   reason="no fixed star and chain runs to compare with")  # fmt: skip
    p = _num(adaptive, "fixed_p_value")
    if best in FIXED:
        a = _one_arm(adaptive, "", thr)
        measured = (f"{a['red']:.1%} fewer tokens than {best} [{a['low']:.1%}, {a['high']:.1%}], "
                    f"accuracy {a['diff']:+.3f} vs {best} (n={a['n']} pairs)")  # fmt: skip
        reason = (f"best fixed topology: {best} (exact McNemar p = {p:.3g}); tokens: "
                  f"{a['tokens']}; {a['quality']}")  # fmt: skip
        return row(**base, measured=measured, value=a["red"], ci_low=a["low"],
                   ci_high=a["high"], status=a["status"], reason=reason)  # fmt: skip
    arms = {arm: _one_arm(adaptive, f"_vs_{arm}", thr) for arm in FIXED}
    statuses = [arms[a]["status"] for a in FIXED]
    status = ("met" if statuses == ["met", "met"]
              else "not met" if statuses == ["not met", "not met"] else "inconclusive")  # fmt: skip
    # the binding arm: the one whose interval reaches lower (it decides "met against both")
    bind = min(FIXED, key=lambda a: (np.nan_to_num(arms[a]["low"], nan=-np.inf), a))
    measured = "; ".join(
        f"vs {a}: {arms[a]['red']:.1%} fewer tokens [{arms[a]['low']:.1%}, "
        f"{arms[a]['high']:.1%}], accuracy {arms[a]['diff']:+.3f} (n={arms[a]['n']} pairs)"
        for a in FIXED
    )
    reason = (f"best fixed topology: {best} (no significant accuracy difference between "
              "star and chain), so decided against both: met only when met against both, "
              "not met when not met against both; "
              + "; ".join(f"vs {a}: {arms[a]['status']}: tokens: {arms[a]['tokens']}; "
                          f"{arms[a]['quality']}" for a in FIXED)
              + f"; value and interval: vs {bind}")  # fmt: skip
    return row(**base, measured=measured, value=arms[bind]["red"], ci_low=arms[bind]["low"],
               ci_high=arms[bind]["high"], status=status, reason=reason)  # fmt: skip


def _advantage(summary: dict | None, src: str) -> dict:
    tid, text, thr = TARGETS[2]
    base = dict(id=tid, seed=TT, target=text, threshold=thr, source=src)
    adv = (summary or {}).get("protocol_advantage")
    if summary is None:
        return row(**base, status="inconclusive", reason=f"no summary.json: {RERUN}")
    if not isinstance(adv, dict):
        return row(**base, status="inconclusive",
                   reason="summary.json holds the withdrawn task-mix advantage (label "
                   f"agreement of the adaptive routers), not the outcome one: {RERUN}")  # fmt: skip
    run = (
        f"{adv.get('typed', '')}/{adv.get('variant', '')} vs {adv.get('prose', '')}/"
        f"{adv.get('variant', '')}"
    )
    oracle = adv.get("oracle")
    if not isinstance(oracle, dict):
        return row(**base, run=run, status="inconclusive",
                   reason=str(adv.get("note") or "no protocol advantage measured"))  # fmt: skip
    label = adv.get("label") or {}
    r, low, high = (_num(oracle, k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high"))
    n, tasks = _int(adv, "n_paired"), _int(adv, "n_tasks")
    measured = (f"{r:.2f}x outcome-oracle agreement ({_num(oracle, 'typed'):.3f} vs "
                f"{_num(oracle, 'prose'):.3f}; difference {_num(oracle, 'difference'):+.3f} "
                f"[{_num(oracle, 'difference_ci_low'):.3g}, "
                f"{_num(oracle, 'difference_ci_high'):.3g}]; n={n} examples over {tasks} "
                "tasks)")  # fmt: skip
    secondary = (f"label agreement ratio (secondary, set by the task mix): "
                 f"{_num(label, 'ratio'):.2f}x [{_num(label, 'ratio_ci_low'):.3g}, "
                 f"{_num(label, 'ratio_ci_high'):.3g}]")  # fmt: skip
    common = dict(**base, run=run, measured=measured, value=r, ci_low=low, ci_high=high)
    if oracle.get("verdict") != "measured":
        return row(
            **common,
            status="inconclusive",
            reason=f"outcomes at the floor: {oracle.get('note', '')}; {secondary}",
        )
    status = interval_status(_bounded(low), _bounded(high), thr)
    why = interval_reason(status, low, high, f"{thr:g}x")
    if status == "inconclusive":
        why += f": too wide to decide ({tasks} tasks as the unit)"
    return row(**common, status=status,
               reason=f"{why} ({adv.get('interval', 'jackknife t interval over tasks')}); "
               f"{secondary}")  # fmt: skip


def topology_rows(topology_dir: str | Path) -> list[dict]:
    """The v1.0 topology targets (TerseTalk design, section 16), from
    ``results/topology/`` when the study has run (``snakemake --cores all topology``):
    the TerseTalk-Adaptive row of ``six_policies.csv`` (and the fitted variant's row of
    ``policies.csv``) and ``summary.json``."""
    topology_dir = Path(topology_dir)
    src = "results/topology/six_policies.csv, policies.csv, summary.json"
    six_path = topology_dir / "six_policies.csv"
    six = pd.read_csv(six_path) if six_path.exists() else None
    adaptive = None
    if six is not None and "policy_label" in six:
        hit = six[six["policy_label"] == "TerseTalk-Adaptive"]
        adaptive = hit.iloc[0] if len(hit) else None
    if adaptive is None:
        why = (
            "not built yet (no results/topology): snakemake --cores all topology"
            if six is None
            else "results/topology/six_policies.csv has no TerseTalk-Adaptive row"
        )
        return [row(id=tid, seed=TT, target=text, threshold=thr, status="inconclusive",
                    reason=why, source=src) for tid, text, thr in TARGETS]  # fmt: skip
    run = f"{adaptive['system']}/{adaptive['variant']}"
    fitted = None
    pol_path = topology_dir / "policies.csv"
    if pol_path.exists():
        pol = pd.read_csv(pol_path)
        hit = pol[(pol["system"] == adaptive["system"]) & (pol["variant"] == "fitted")]
        fitted = hit.iloc[0] if len(hit) else None
    summary_path = topology_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    return [
        _agreement(adaptive, fitted, run, src),
        _tokens(adaptive, run, src),
        _advantage(summary, src),
    ]


PROVIDERS = (Provider("topology", lambda res: topology_rows(res.topology_dir), TT),)
