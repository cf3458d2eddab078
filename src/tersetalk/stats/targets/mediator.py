"""The mediator's targets (001/004): budget compliance and termination."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ._base import MMS, NAN, Provider, Results, answered_frames, row

__all__ = ["PROVIDERS", "mediator_rows"]


def mediator_rows(
    metrics: Mapping[tuple[str, str], pd.DataFrame], run: str, budget: int | None,
    recursion_limit: int | None,
) -> list[dict]:  # fmt: skip
    """The mediator's budget compliance (Req. 1) and termination within the recursion
    limit (Property 1), per task."""
    rows = []
    for task, df in answered_frames(metrics, run):
        src = f"results/metrics/{task}/{run}.parquet (c_mediator_*)"
        base = dict(seed=MMS, task=task, run=run, source=src)
        if "c_mediator_final_tokens" not in df or df.empty or budget is None:
            rows.append(row(**base, id="mediator_budget", target="messages fit the token budget",
                            status="inconclusive",
                            reason="no mediator counters or no budget in the config"))  # fmt: skip
            continue
        final = pd.to_numeric(df["c_mediator_final_tokens"], errors="coerce")
        within = int((final <= budget).sum())
        n = int(final.notna().sum())
        rows.append(row(
            **base, id="mediator_budget",
            target=f"compressed messages fit the token budget ({budget} tokens; Req. 1)",
            measured=f"{within}/{n} within budget, max {int(final.max())} tokens",
            value=within / n if n else NAN, threshold=1.0,
            status="met" if n and within == n else "not met" if n else "inconclusive",
            reason="every message within budget" if within == n
            else f"{n - within} message(s) still over budget when compression stopped "
            "(recursion limit reached or no meaningful reduction, Req. 1.4)",
        ))  # fmt: skip
        if recursion_limit is not None and "c_mediator_passes" in df:
            passes = pd.to_numeric(df["c_mediator_passes"], errors="coerce")
            ok = bool((passes <= recursion_limit).all())
            rows.append(row(
                **base, id="mediator_termination",
                target=f"compression stops within the recursion limit ({recursion_limit})",
                measured=f"max {int(passes.max())} passes", value=float(passes.max()),
                threshold=float(recursion_limit), status="met" if ok else "not met",
                reason="every message" if ok else "a message took more passes than the limit",
            ))  # fmt: skip
    return rows


def _rows(res: Results) -> list[dict]:
    med = res.variants("mediator").get("default", {})
    return mediator_rows(res.metrics, "mediator/default", med.get("budget"),
                         med.get("recursion_limit"))  # fmt: skip


PROVIDERS = (
    Provider("mediator", _rows, MMS, (
        ("mediator_budget", "mediator/default", "compressed messages fit the token budget"),
    )),
)  # fmt: skip
