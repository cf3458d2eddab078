"""The topology study's targets (000 section 16), from ``results/topology/``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tersetalk.stats.intervals import wilson
from tersetalk.stats.noninferiority import min_n_for_margin

from ._base import NAN, TT, Provider, interval_reason, interval_status, row

__all__ = ["PROVIDERS", "topology_rows"]


def topology_rows(topology_dir: str | Path) -> list[dict]:
    """The v1.0 topology targets (000 section 16), from ``results/topology/`` when the
    study has run (``snakemake --cores all topology``): the
    TerseTalk-Adaptive row of ``six_policies.csv`` and ``summary.json``."""
    topology_dir = Path(topology_dir)
    targets = (
        ("topology_agreement", "topology selection >= 85% agreement with task labels", 0.85),
        ("topology_tokens", "20-30% fewer tokens than the best fixed topology, <= 2% "
         "quality drop", 0.20),
        ("topology_protocol_advantage", "~2x selection accuracy of TerseTalk vs free-form",
         2.0),
    )  # fmt: skip
    src = "results/topology/six_policies.csv, summary.json"
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
                    reason=why, source=src) for tid, text, thr in targets]  # fmt: skip
    run = f"{adaptive['system']}/{adaptive['variant']}"
    n = int(adaptive["n"])
    rows = []
    tid, text, thr = targets[0]
    acc = float(adaptive["selection_accuracy"])
    k = int(round(acc * n))
    # no route at all: no interval (NaN), as this table has always said
    low, high = wilson(k / n, n) if n > 0 else (NAN, NAN)
    status = interval_status(low, high, thr)
    rows.append(row(
        id=tid, seed=TT, target=text, run=run, measured=f"{k}/{n} routes agree", value=acc,
        ci_low=low, ci_high=high, threshold=thr, status=status, source=src,
        reason=interval_reason(status, low, high, f"{thr:g}") + " (Wilson)",
    ))  # fmt: skip
    tid, text, thr = targets[1]
    red, pres = float(adaptive["token_reduction"]), float(adaptive["quality_preservation"])
    n_min = min_n_for_margin(0.02, 0.05)
    measured = f"{red:.1%} fewer tokens than {adaptive['best_fixed']}, quality kept {pres:.3f}"
    if not np.isfinite(pres):
        status, why = "inconclusive", "the best fixed topology's accuracy is 0: no quality drop"
    elif n < n_min:
        status = "inconclusive"
        why = f"n = {n} is too small to tell a 2% quality drop (at least {n_min} are needed)"
    else:
        ok = red >= thr and pres >= 0.98
        status = "met" if ok else "not met"
        why = f"point estimates over {n} examples (tokens >= {thr:.0%}, quality >= 0.98)"
    rows.append(row(id=tid, seed=TT, target=text, run=run, measured=measured, value=red,
                    threshold=thr, status=status, reason=why, source=src))  # fmt: skip
    tid, text, thr = targets[2]
    summary_path = topology_dir / "summary.json"
    adv = NAN
    if summary_path.exists():
        adv = float(json.loads(summary_path.read_text()).get("protocol_advantage", NAN))
    if not np.isfinite(adv):
        rows.append(row(id=tid, seed=TT, target=text, threshold=thr, status="inconclusive",
                        source=src, reason="no protocol advantage in summary.json (free-form "
                        "adaptive selection accuracy 0 or not run)"))  # fmt: skip
    else:
        rows.append(row(
            id=tid, seed=TT, target=text, run="topology_tersetalk vs topology_freeform",
            measured=f"{adv:.2f}x", value=adv, threshold=thr,
            status="met" if adv >= thr else "not met",
            reason=f"ratio of the adaptive routers' selection accuracies (point estimate, n={n})",
        ))  # fmt: skip
    return rows


PROVIDERS = (Provider("topology", lambda res: topology_rows(res.topology_dir), TT),)
