"""The format study's targets (002): hint size, mckp's saving and accuracy, losslessness."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from tersetalk.stats.noninferiority import noninferiority

from ._base import FMT, NI_STATUS, Provider, Results, row

__all__ = ["PROVIDERS", "formats_rows"]


def formats_rows(
    formats_dir: str | Path,
    summary: pd.DataFrame | None,
    *,
    budgeted: Iterable[str] = (),
    margin: float = 0.02,
    n_resamples: int = 2000,
    seed: int = 0,
) -> list[dict]:
    """The format study's targets: hints <= 15 tokens, mckp's saving vs compact JSON
    (the design measured 16%) at no accuracy loss, and lossless encodings (``budgeted``:
    formats variants with a token budget, which trade value for tokens by design and
    are left out of the lossless target)."""
    formats_dir = Path(formats_dir)
    hint = "format study not run: snakemake --cores all formats"
    rows = []
    dedup = formats_dir / "dedup.parquet"
    base = dict(id="hint_tokens", seed=FMT, target="<= 15 tokens per in-response hint",
                threshold=15.0,
                source="results/formats/dedup.parquet (tokens_sent of hits)")  # fmt: skip
    if dedup.exists():
        d = pd.read_parquet(dedup)
        hits = d[d["hit"].astype(bool)]
        if hits.empty:
            rows.append(row(**base, status="inconclusive", reason="no dedup hit: no hint sent"))
        else:
            tok = hits["tokens_sent"].astype(float)
            over = int((tok > 15).sum())
            rows.append(row(
                **base, run=", ".join(sorted(hits["tokenizer"].unique())),
                measured=f"mean {tok.mean():.1f}, max {int(tok.max())} tokens; "
                f"{over}/{len(tok)} hints over 15",
                value=float(tok.max()), status="met" if over == 0 else "not met",
                reason="every hint within 15 tokens" if over == 0
                else f"{over} of {len(tok)} hints over 15 tokens (the design counted cl100k_base)",
            ))  # fmt: skip
    else:
        rows.append(row(**base, status="inconclusive", reason=hint))
    savings = formats_dir / "savings_by_shape.csv"
    base = dict(id="mckp_savings", seed=FMT,
                target="mckp saves >= 16% of compact-JSON tokens (the design's mckp_v2)",
                threshold=0.16,
                source="results/formats/savings_by_shape.csv (shape all)")  # fmt: skip
    if savings.exists():
        s = pd.read_csv(savings)
        for r in s[(s["shape"] == "all") & (s["encoder"] == "mckp")].to_dict("records"):
            v = r["savings_vs_json_compact_pct"] / 100
            rows.append(row(
                **base, run=f"mckp ({r['tokenizer']})", measured=f"{v:.1%} (n={r['n']})",
                value=v, status="met" if v >= 0.16 else "not met",
                reason="exact token counts over the whole corpus (no sampling)",
            ))  # fmt: skip
    else:
        rows.append(row(**base, status="inconclusive", reason=hint))
    comp = formats_dir / "comprehension.parquet"
    base = dict(id="mckp_accuracy", seed=FMT,
                target=f"mckp answers as accurately as compact JSON (non-inferior at {margin:g})",
                threshold=-margin, source="results/formats/comprehension.parquet")  # fmt: skip
    if comp.exists():
        c = pd.read_parquet(comp)
        c = c[c["encoder"].isin(["mckp", "json_compact"])]
        wide = c.pivot_table(index="qid", columns="encoder", values="correct", aggfunc="first")
        wide = wide.dropna().sort_index()
        if {"mckp", "json_compact"} <= set(wide.columns) and len(wide):
            ni = noninferiority(wide["mckp"].to_numpy(float), wide["json_compact"].to_numpy(float),
                                margin=margin, n_resamples=n_resamples, seed=seed)  # fmt: skip
            rows.append(row(
                **base, run="mckp vs json_compact",
                measured=f"accuracy {ni.mean_treatment:.3f} vs {ni.mean_control:.3f} (n={ni.n})",
                value=ni.mean_diff, ci_low=ni.lower_bound, ci_high=ni.upper_bound,
                status=NI_STATUS[ni.verdict], reason=f"{ni.verdict}: {ni.verdict_reason}",
            ))  # fmt: skip
        else:
            rows.append(row(**base, status="inconclusive",
                            reason="no question answered from both encodings"))  # fmt: skip
    else:
        rows.append(row(**base, status="inconclusive", reason=hint))
    if summary is not None and "c_format_lossless_mean" in summary:
        sub = summary[(summary["system"] == "formats") & summary["c_format_lossless_mean"].notna()]
        sub = sub[~sub["variant"].isin(list(budgeted))]
        for r in sub.to_dict("records"):
            v = float(r["c_format_lossless_mean"])
            rows.append(row(
                id="lossless", seed=FMT, task=r["task"], run=f"formats/{r['variant']}",
                target="encodings fail closed on data loss (every key recovered)",
                measured=f"{v:.0%} of payloads lossless", value=v, threshold=1.0,
                status="met" if v == 1.0 else "not met",
                reason="every payload decoded back whole" if v == 1.0
                else "some payloads lost data",
                source="results/summary.parquet (c_format_lossless_mean)",
            ))  # fmt: skip
    return rows


def _rows(res: Results) -> list[dict]:
    variants = res.variants("formats")
    budgeted = [v for v, s in variants.items() if (s or {}).get("budget") is not None]
    return formats_rows(res.formats_dir, res.summary, budgeted=budgeted, margin=res.margin,
                        **res.boot)  # fmt: skip


PROVIDERS = (
    Provider("formats", _rows, FMT, (
        ("lossless", "formats/mckp", "encodings fail closed on data loss (every key recovered)"),
    )),
)  # fmt: skip
