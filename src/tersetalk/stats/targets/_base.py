"""What every row provider of the targets table shares: the columns, the designs,
one row, and the status of an interval against a threshold.

Why a module of its own: each study's provider (:mod:`.protocol`, :mod:`.bench`,
:mod:`.msp`, :mod:`.mediator`, :mod:`.formats`, :mod:`.topology`) builds its rows with
these, so a status is decided the same way in every row (see :mod:`tersetalk.stats.targets`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "COLUMNS",
    "FMT",
    "MMS",
    "MSP",
    "NAN",
    "NI_STATUS",
    "STATUSES",
    "TT",
    "Provider",
    "Results",
    "answered",
    "answered_frames",
    "counter_total",
    "index_metrics",
    "interval_reason",
    "interval_status",
    "row",
    "run_label",
]

STATUSES = ("met", "not met", "inconclusive")
COLUMNS = (
    "id", "seed", "target", "task", "run", "measured", "value", "ci_low", "ci_high",
    "threshold", "status", "reason", "source",
)  # fmt: skip

#: the designs (the designs the README cites)
TT = "TerseTalk-JSONL (000)"
MMS = "Mediated Minimal-Signaling (001/004)"
FMT = "Format-adaptive encoding (002)"
MSP = "Minimal Signaling Protocol (003)"

NAN = float("nan")
#: a non-inferiority verdict (:mod:`tersetalk.stats.noninferiority`) as a status
NI_STATUS = {"non-inferior": "met", "inferior": "not met", "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class Results:
    """Everything a provider may read: the workflow's results and the config's few values
    (:func:`tersetalk.stats.targets.targets_config`)."""

    summary: pd.DataFrame
    #: (task, system/variant) -> per-example metrics (:func:`index_metrics`)
    metrics: Mapping[tuple[str, str], pd.DataFrame]
    stats_table: pd.DataFrame | None
    config: Mapping[str, Any]
    bench_dir: Path
    formats_dir: Path
    topology_dir: Path

    @property
    def evaluation(self) -> Mapping[str, Any]:
        return self.config.get("evaluation", {})

    @property
    def reference(self) -> str:
        return self.evaluation.get("reference", "freeform/default")

    @property
    def margin(self) -> float:
        return float(self.evaluation.get("margin", 0.02))

    @property
    def boot(self) -> dict[str, int]:
        """The bootstrap's resample count and seed."""
        ev = self.evaluation
        return dict(n_resamples=int(ev.get("n_resamples", 2000)), seed=int(ev.get("seed", 0)))

    def variants(self, system: str) -> Mapping[str, Any]:
        """The config's variants of ``system`` ({} when absent)."""
        return self.config.get("systems", {}).get(system, {}).get("variants", {})


@dataclass(frozen=True)
class Provider:
    """One study's rows: ``rows`` reads the study's result files (through :class:`Results`);
    ``expected`` lists the (id, run, target) it measures on workflow runs, so that a run
    absent from the workflow still gets an inconclusive row (``seed`` is theirs)."""

    name: str
    rows: Callable[[Results], list[dict]]
    seed: str
    expected: tuple[tuple[str, str, str], ...] = ()


def row(**kw: Any) -> dict:
    """One row of the table: every column, empty or NaN unless given; a known status."""
    out = dict.fromkeys(COLUMNS, "")
    out.update(value=NAN, ci_low=NAN, ci_high=NAN, threshold=NAN)
    out.update(kw)
    if out["status"] not in STATUSES:
        raise ValueError(f"status {out['status']!r} is not one of {STATUSES}")
    return out


def interval_status(low: float, high: float, threshold: float, *, below: bool = False) -> str:
    """``met`` / ``not met`` / ``inconclusive`` of an interval against ``>= threshold``
    (or ``< threshold`` with ``below``)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    if below:
        return "met" if high < threshold else "not met" if low >= threshold else "inconclusive"
    return "met" if low >= threshold else "not met" if high < threshold else "inconclusive"


def interval_reason(status: str, low: float, high: float, what: str) -> str:
    if status == "inconclusive":
        return f"the 95% interval [{low:.3g}, {high:.3g}] straddles {what}"
    side = "clears" if status == "met" else "misses"
    return f"the whole 95% interval [{low:.3g}, {high:.3g}] {side} {what}"


def run_label(df: pd.DataFrame) -> str:
    return f"{df['system'].iloc[0]}/{df['variant'].iloc[0]}"


def index_metrics(frames: Iterable[pd.DataFrame]) -> dict[tuple[str, str], pd.DataFrame]:
    """(task, system/variant) -> per-example metrics."""
    return {(f["task"].iloc[0], run_label(f)): f for f in frames if len(f)}


def answered(df: pd.DataFrame) -> pd.Series:
    """The rows without an error."""
    if "error" not in df.columns:
        return pd.Series(True, index=df.index)
    err = df["error"].astype(object)
    return ~(err.notna() & (err.astype(str) != ""))


def answered_frames(
    metrics: Mapping[tuple[str, str], pd.DataFrame], run: str
) -> Iterator[tuple[str, pd.DataFrame]]:
    """(task, the rows without an error) of each task ``run`` has metrics for, by task."""
    for task in sorted({t for t, label in metrics if label == run}):
        df = metrics[(task, run)]
        yield task, df[answered(df)]


def counter_total(df: pd.DataFrame, col: str) -> int:
    """Sum of a counter column (0 when the column is absent)."""
    if col not in df.columns:
        return 0
    return int(pd.to_numeric(df[col], errors="coerce").fillna(0).sum())
