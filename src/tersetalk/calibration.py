"""Choosing a system's settings on the calibration shard, deterministically.

The objective is explicit: among the grid points whose calibration accuracy is
within the non-inferiority margin of the reference run, take the one with the
fewest tokens per example (ties: higher accuracy, then grid order). If no point
qualifies, take the most accurate one (ties: fewer tokens, then grid order) and
say so in the file.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import yaml


class CalibrationError(ValueError):
    """Calibration inputs are missing or inconsistent."""


def point_row(point: str, settings: dict, run: pd.DataFrame) -> dict:
    ok = run[run["error"].isna()]
    return {
        "point": point,
        "settings": settings,
        "n": int(len(run)),
        "n_errors": int(len(run) - len(ok)),
        "accuracy": float(run["correct"].mean()),
        "tokens_mean": float(ok["tokens_total_cl100k"].mean()) if len(ok) else float("inf"),
    }


def choose(rows: list[dict], reference_accuracy: float, margin: float) -> dict:
    if not rows:
        raise CalibrationError("no calibration runs to choose from")
    floor = reference_accuracy - margin
    for r in rows:
        r["qualified"] = bool(r["accuracy"] >= floor - 1e-12)
    order = {r["point"]: i for i, r in enumerate(rows)}
    qualified = [r for r in rows if r["qualified"]]
    if qualified:
        best = min(qualified, key=lambda r: (r["tokens_mean"], -r["accuracy"], order[r["point"]]))
    else:
        best = min(rows, key=lambda r: (-r["accuracy"], r["tokens_mean"], order[r["point"]]))
    return dict(best)


def calibrate(
    task: str,
    system_runs: dict[str, dict[str, tuple[dict, Path]]],
    reference_run: Path,
    reference_label: str,
    margin: float,
    objective: str = "fewest_tokens_within_margin",
) -> dict:
    """Build the calibration document for one task.

    ``system_runs`` maps system -> point -> (settings, run Parquet path).
    """
    ref = pd.read_parquet(reference_run)
    doc: dict = {
        "task": task,
        "objective": objective,
        "margin": margin,
        "reference": {
            "run": reference_label,
            "accuracy": float(ref["correct"].mean()),
            "n": int(len(ref)),
        },  # fmt: skip
        "chosen": {},
        "table": {},
    }
    for system, points in system_runs.items():
        rows = [point_row(p, s, pd.read_parquet(path)) for p, (s, path) in points.items()]
        best = choose(rows, doc["reference"]["accuracy"], margin)
        doc["chosen"][system] = copy.deepcopy(best)  # no YAML aliases into the table
        doc["table"][system] = rows
    return doc


def write(doc: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(out)


def chosen_settings(path: str | Path, system: str) -> dict:
    """The settings calibration chose for ``system``; a clear error if there are none."""
    path = Path(path)
    if not path.exists():
        raise CalibrationError(f"{path} is missing: run the calibrate rule first")
    doc = yaml.safe_load(path.read_text())
    try:
        return dict(doc["chosen"][system]["settings"])
    except (KeyError, TypeError):
        raise CalibrationError(
            f"{path} has no calibrated settings for {system!r}: add it under calibration in "
            "the config"
        ) from None
