"""The Minimal Signaling Protocol's targets (003): compression ratio and adequacy."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from tersetalk.stats.bootstrap import bootstrap_ci

from ._base import MSP, NAN, Provider, answered_frames, interval_reason, interval_status, row

__all__ = ["PROVIDERS", "msp_rows"]


def msp_rows(
    metrics: Mapping[tuple[str, str], pd.DataFrame],
    run: str,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> list[dict]:
    """MSP: compression ratio < 0.5, similarity >= 0.80 (with intent and target present).

    The ratio is decided on the percentile bootstrap interval of its mean over the
    examples: met only when the whole interval is below 0.5."""
    rows = []
    for task, df in answered_frames(metrics, run):
        src = f"results/metrics/{task}/{run}.parquet (c_msp_*)"
        base = dict(seed=MSP, task=task, run=run, source=src)
        if "c_msp_compression_ratio" not in df or df.empty:
            rows.append(row(**base, id="msp_ratio", target="compression ratio < 0.5",
                            status="inconclusive", reason="no MSP counters"))  # fmt: skip
            continue
        ratio = pd.to_numeric(df["c_msp_compression_ratio"], errors="coerce").dropna()
        ratio_base = dict(**base, id="msp_ratio", threshold=0.5,
                          target="compression ratio < 0.5 (signal / original tokens)")  # fmt: skip
        if ratio.empty:
            rows.append(row(**ratio_base, status="inconclusive",
                            reason="no compression ratio recorded"))  # fmt: skip
        else:
            n_below = int((ratio < 0.5).sum())
            ci = bootstrap_ci(ratio.to_numpy(float), n_resamples=n_resamples, seed=seed)
            status = interval_status(ci.ci_low, ci.ci_high, 0.5, below=True)
            rows.append(row(
                **ratio_base, value=ci.estimate, ci_low=ci.ci_low, ci_high=ci.ci_high,
                measured=f"mean {ci.estimate:.3f}; {n_below}/{len(ratio)} below 0.5",
                status=status,
                reason=interval_reason(status, ci.ci_low, ci.ci_high, "< 0.5")
                + f" (bootstrap of the mean ratio, n={len(ratio)})",
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
    Provider("msp", lambda res: msp_rows(res.metrics, "msp/default", **res.boot), MSP, (
        ("msp_ratio", "msp/default", "compression ratio < 0.5"),
        ("msp_adequacy", "msp/default", "semantic adequacy: similarity >= 0.80, intent/target"),
    )),
)  # fmt: skip
