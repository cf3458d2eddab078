"""What every benchmark table shares: environment columns and the seed's target.

Tables are written with :func:`tersetalk.io.write_parquet_atomic`.
"""

from __future__ import annotations

import logging

import pandas as pd

from .env import describe, environment
from .timing import Timing

log = logging.getLogger(__name__)

#: What the seed hoped for: JSONL field extraction 10x faster than regex on free
#: text (MB-1) and newline framing 5x faster than sentence detection (MB-2).
SEED_TARGETS = {"mb1": 10.0, "mb2": 5.0}


def speedup_range(base: Timing, other: Timing) -> dict[str, float]:
    """An interquartile range for the ratio of medians: ``q1/q3`` to ``q3/q1``.

    Conservative (it combines both methods' spreads), and it always contains the
    ratio of the medians, so it can be drawn as an error bar around it.
    """
    return {
        "speedup_lo": base.q1_ns / other.q3_ns,
        "speedup_hi": base.q3_ns / other.q1_ns,
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
        return f"meets the seed's {target:g}x ({ratio:.2f}x)"
    return f"falls short of the seed's {target:g}x ({ratio:.2f}x measured)"


def log_environment() -> None:
    log.info("environment: %s", describe(environment()))


class EquivalenceError(AssertionError):
    """Two compared methods did not recover the same content: the timing would be void.

    Raised explicitly (not with ``assert``), so ``python -O`` cannot skip the check.
    """
