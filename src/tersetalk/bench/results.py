"""What every benchmark table shares: environment columns and the design's target.

Tables are written with :func:`tersetalk.core.io.write_parquet_atomic`.
"""

from __future__ import annotations

import logging

import pandas as pd

from .env import describe, environment
from .timing import Timing

log = logging.getLogger(__name__)

#: What the design hoped for: JSONL field extraction 10x faster than regex on free
#: text (MB-1) and newline framing 5x faster than sentence detection (MB-2).
SEED_TARGETS = {"mb1": 10.0, "mb2": 5.0}
#: the protocol's validating parsers should run at least at this share of
#: the limit (raw orjson over whole messages for MB-1; newline framing plus orjson
#: per line for MB-2), measured side by side in the same run.
LIMIT_TARGET = 0.5


def speedup_range(base: Timing, other: Timing) -> dict[str, float]:
    """An interquartile range for the ratio of medians: ``q1/q3`` to ``q3/q1``.

    Conservative (it combines both methods' spreads), and it always contains the
    ratio of the medians, so it can be drawn as an error bar around it.
    """
    return {
        "speedup_lo": base.q1_ns / other.q3_ns,
        "speedup_hi": base.q3_ns / other.q1_ns,
    }


def limit_columns(limit_name: str, limit: Timing, other: Timing, held: bool) -> dict:
    """The ratio to the limit (limit's median over the method's: 1 is the limit itself,
    0.5 half its speed), its interquartile range, and the verdict for the
    methods ``held`` to it."""
    ratio = limit.median_ns / other.median_ns
    return {
        "limit": limit_name,
        "ratio_vs_limit": ratio,
        "ratio_vs_limit_cpu": limit.cpu_median_ns / other.cpu_median_ns,
        "ratio_vs_limit_lo": limit.q1_ns / other.q3_ns,
        "ratio_vs_limit_hi": limit.q3_ns / other.q1_ns,
        "limit_target": LIMIT_TARGET if held else float("nan"),
        "meets_limit_target": (ratio >= LIMIT_TARGET) if held else None,
    }


def finish(rows: list[dict], benchmark: str, settings: dict) -> pd.DataFrame:
    """The result table: rows, the run's settings and the environment as columns."""
    env = environment()
    df = pd.DataFrame(rows)
    df.insert(0, "benchmark", benchmark)
    for key, value in settings.items():
        df[key] = value
    for key, value in env.items():
        df[key] = value
    return df


def target_verdict(ratio: float, target: float) -> str:
    """Plain words for the log and the ``seed_target_verdict`` column."""
    if ratio >= target:
        return f"meets the design's {target:g}x ({ratio:.2f}x)"
    return f"falls short of the design's {target:g}x ({ratio:.2f}x measured)"


def log_environment() -> None:
    log.info("environment: %s", describe(environment()))


class EquivalenceError(AssertionError):
    """Two compared methods did not recover the same content: the timing would be void.

    Raised explicitly (not with ``assert``), so ``python -O`` cannot skip the check.
    """
