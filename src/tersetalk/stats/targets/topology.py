"""The topology study's targets (000 section 16), from ``results/topology/``.

What ``tersetalk topology`` writes (:mod:`tersetalk.metrics.topology_cli`) is read here,
with the table's rules (:mod:`tersetalk.stats.targets`):

- ``topology_agreement`` (selection accuracy >= 0.85, TerseTalk-Adaptive with the seed's
  weights): the Wilson interval of ``six_policies.csv``'s ``selection_ci_low`` /
  ``selection_ci_high`` against 0.85; the fitted router's number, when it ran, is given
  beside it in the reason;
- ``topology_tokens`` (20-30% fewer tokens than the best fixed topology at <= 2% quality
  drop): both halves on the examples paired with the best fixed run, the token
  reduction's bootstrap interval against 20% (``token_reduction_ci_low`` / ``_high``) and
  the accuracy's non-inferiority verdict at the 0.02 margin (``quality_verdict``); met
  when both are met, not met when either is not, inconclusive otherwise;
- ``topology_protocol_advantage`` (~2x free-form's selection accuracy): the bootstrap
  interval of ``summary.json``'s ``protocol_advantage_ci_low`` / ``_high`` against 2.

A file written before these intervals existed gives an inconclusive row saying to rerun
the report, never a point-estimate verdict.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tersetalk.stats.intervals import wilson

from ._base import NAN, NI_STATUS, TT, Provider, interval_reason, interval_status, row

__all__ = ["PROVIDERS", "topology_rows"]

RERUN = "rerun the report (snakemake --cores all topology)"
TARGETS = (
    ("topology_agreement", "topology selection >= 85% agreement with task labels", 0.85),
    ("topology_tokens", "20-30% fewer tokens than the best fixed topology, <= 2% "
     "quality drop", 0.20),
    ("topology_protocol_advantage", "~2x selection accuracy of TerseTalk vs free-form", 2.0),
)  # fmt: skip


def _num(r: pd.Series | dict, key: str) -> float:
    """A number of a row (NaN when absent or empty)."""
    try:
        v = float(r.get(key, NAN))
    except (TypeError, ValueError):
        return NAN
    return v


def _bounded(x: float) -> float:
    """+inf as the largest float: an interval open to the right still decides."""
    return min(x, sys.float_info.max) if not math.isnan(x) else x


def _agreement(adaptive: pd.Series, fitted: pd.Series | None, run: str, src: str) -> dict:
    tid, text, thr = TARGETS[0]
    n = int(adaptive["n"])
    acc = float(adaptive["selection_accuracy"])
    k = int(round(acc * n))
    low, high = _num(adaptive, "selection_ci_low"), _num(adaptive, "selection_ci_high")
    if "selection_ci_low" not in adaptive.index:  # a report before the interval column
        low, high = wilson(k / n, n) if n > 0 else (NAN, NAN)
    status = interval_status(low, high, thr)
    reason = interval_reason(status, low, high, f"{thr:g}") + f" (Wilson, n={n})"
    if fitted is not None:
        f_n = int(fitted["n"])
        f_sel = _num(fitted, "selection_accuracy")
        f_low, f_high = _num(fitted, "selection_ci_low"), _num(fitted, "selection_ci_high")
        reason += (f"; fitted weights ({fitted['variant']}): {f_sel:.3f} "
                   f"[{f_low:.3g}, {f_high:.3g}], n={f_n}")  # fmt: skip
    return row(id=tid, seed=TT, target=text, run=run, measured=f"{k}/{n} routes agree",
               value=acc, ci_low=low, ci_high=high, threshold=thr, status=status,
               source=src, reason=reason)  # fmt: skip


def _tokens(adaptive: pd.Series, run: str, src: str) -> dict:
    tid, text, thr = TARGETS[1]
    base = dict(id=tid, seed=TT, target=text, run=run, threshold=thr, source=src)
    needed = ("token_reduction_ci_low", "token_reduction_ci_high", "quality_verdict")
    if any(c not in adaptive.index for c in needed):
        return row(**base, status="inconclusive",
                   reason="six_policies.csv has no paired comparison with the best fixed "
                   f"topology (written before its intervals): {RERUN}")  # fmt: skip
    best = adaptive.get("best_fixed", "")
    if not isinstance(best, str) or not best:
        return row(**base, status="inconclusive",
                   reason="no fixed star or chain run to compare with")  # fmt: skip
    n = int(_num(adaptive, "n_paired")) if np.isfinite(_num(adaptive, "n_paired")) else 0
    red = _num(adaptive, "token_reduction_paired")
    low, high = _num(adaptive, "token_reduction_ci_low"), _num(adaptive, "token_reduction_ci_high")
    verdict = adaptive.get("quality_verdict", "")
    verdict = verdict if isinstance(verdict, str) and verdict in NI_STATUS else "inconclusive"
    why_q = adaptive.get("quality_verdict_reason", "")
    why_q = why_q if isinstance(why_q, str) and why_q else "no paired example"
    diff = _num(adaptive, "quality_diff")
    tok_status = interval_status(low, high, thr)
    q_status = NI_STATUS[verdict]
    statuses = {tok_status, q_status}
    status = ("not met" if "not met" in statuses
              else "met" if statuses == {"met"} else "inconclusive")  # fmt: skip
    measured = (f"{red:.1%} fewer tokens than {best} [{low:.1%}, {high:.1%}], accuracy "
                f"{diff:+.3f} vs {best} (n={n} pairs)")  # fmt: skip
    reason = (f"tokens: {interval_reason(tok_status, low, high, f'{thr:.0%}')} (paired "
              f"bootstrap); quality: {verdict} at margin 0.02 ({why_q})")  # fmt: skip
    return row(**base, measured=measured, value=red, ci_low=low, ci_high=high, status=status,
               reason=reason)  # fmt: skip


def _advantage(summary: dict | None, src: str) -> dict:
    tid, text, thr = TARGETS[2]
    base = dict(id=tid, seed=TT, target=text, threshold=thr, source=src)
    adv = _num(summary or {}, "protocol_advantage")
    if not np.isfinite(adv):
        return row(**base, status="inconclusive",
                   reason="no protocol advantage in summary.json (free-form adaptive selection "
                   "accuracy 0 or not run)")  # fmt: skip
    if "protocol_advantage_ci_low" not in summary:
        return row(
            **base,
            status="inconclusive",
            measured=f"{adv:.2f}x",
            value=adv,
            reason=f"summary.json has no interval on the protocol advantage: {RERUN}",
        )
    low = _num(summary, "protocol_advantage_ci_low")
    high = _num(summary, "protocol_advantage_ci_high")
    n = int(summary.get("protocol_advantage_n") or 0)
    status = interval_status(_bounded(low), _bounded(high), thr)
    return row(
        **base, run="topology_tersetalk vs topology_freeform", measured=f"{adv:.2f}x (n={n})",
        value=adv, ci_low=low, ci_high=high, status=status,
        reason=interval_reason(status, low, high, f"{thr:g}x") + " (paired bootstrap of the "
        f"ratio of the adaptive routers' selection accuracies, n={n})",
    )  # fmt: skip


def topology_rows(topology_dir: str | Path) -> list[dict]:
    """The v1.0 topology targets (000 section 16), from ``results/topology/`` when the
    study has run (``snakemake --cores all topology``): the TerseTalk-Adaptive row of
    ``six_policies.csv`` (and the fitted variant's row of ``policies.csv``) and
    ``summary.json``."""
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
