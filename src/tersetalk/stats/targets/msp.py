"""The Minimal Signaling Protocol's targets (003): compression ratio and adequacy."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ._base import MSP, NAN, Provider, answered_frames, row

__all__ = ["PROVIDERS", "msp_rows"]


def msp_rows(metrics: Mapping[tuple[str, str], pd.DataFrame], run: str) -> list[dict]:
    """MSP: compression ratio < 0.5, similarity >= 0.80 (with intent and target present)."""
    rows = []
    for task, df in answered_frames(metrics, run):
        src = f"results/metrics/{task}/{run}.parquet (c_msp_*)"
        base = dict(seed=MSP, task=task, run=run, source=src)
        if "c_msp_compression_ratio" not in df or df.empty:
            rows.append(row(**base, id="msp_ratio", target="compression ratio < 0.5",
                            status="inconclusive", reason="no MSP counters"))  # fmt: skip
            continue
        ratio = pd.to_numeric(df["c_msp_compression_ratio"], errors="coerce").dropna()
        n_below = int((ratio < 0.5).sum())
        mean = float(ratio.mean())
        rows.append(row(
            **base, id="msp_ratio", target="compression ratio < 0.5 (signal / original tokens)",
            measured=f"mean {mean:.3f}; {n_below}/{len(ratio)} messages below 0.5", value=mean,
            threshold=0.5, status="met" if mean < 0.5 else "not met",
            reason=f"mean ratio {mean:.3f} (n={len(ratio)})",
        ))  # fmt: skip
        sim = pd.to_numeric(df.get("c_msp_similarity"), errors="coerce").dropna()
        passed = pd.to_numeric(df.get("c_msp_judge_passed"), errors="coerce").dropna()
        n_pass = int(passed.astype(bool).sum())
        mean_sim = float(sim.mean()) if len(sim) else NAN
        met = len(passed) > 0 and n_pass == len(passed)
        rows.append(row(
            **base, id="msp_adequacy",
            target="semantic adequacy: similarity >= 0.80 and intent/target in the decoded text",
            measured=f"mean similarity {mean_sim:.3f}; {n_pass}/{len(passed)} judged adequate",
            value=mean_sim, threshold=0.80,
            status="inconclusive" if not len(passed) else "met" if met else "not met",
            reason="every message judged adequate" if met
            else f"{len(passed) - n_pass} of {len(passed)} messages not adequate (judge)",
        ))  # fmt: skip
    return rows


PROVIDERS = (
    Provider("msp", lambda res: msp_rows(res.metrics, "msp/default"), MSP, (
        ("msp_ratio", "msp/default", "compression ratio < 0.5"),
        ("msp_adequacy", "msp/default", "semantic adequacy: similarity >= 0.80, intent/target"),
    )),
)  # fmt: skip
