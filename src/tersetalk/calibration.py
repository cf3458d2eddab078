"""Choosing a system's settings on the calibration shard, deterministically.

The selection objective is explicit, one per system (``calibration.<system>.objective``):

``fewest_tokens_within_margin`` (the default)
    Among the grid points whose calibration accuracy is within the
    non-inferiority margin of the system's reference run (``calibration.<system>.reference``,
    by default ``evaluation.reference``), take the one with the fewest
    tokens per example (ties: higher accuracy, then grid order). If no point
    qualifies, fall back to the most accurate one (ties: fewer tokens, then grid
    order); the file says so in ``chosen_by`` and the point's ``qualified: false``.
``max_accuracy``
    The most accurate point (ties: fewer tokens, then grid order), whatever its
    tokens. ``qualified`` is still reported against the margin.

Every point row also carries, for a system whose records have LLMLingua's
achieved-rate counters (``c_lingua_scope_rate``), the distribution of the
achieved compression rate (see :func:`tersetalk.metrics.summary.lingua_rate_distribution`).
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd
import yaml

from tersetalk.io import read_run_spec, write_text_atomic
from tersetalk.metrics.summary import lingua_rate_distribution

log = logging.getLogger(__name__)

DEFAULT_OBJECTIVE = "fewest_tokens_within_margin"


class CalibrationError(ValueError):
    """Calibration inputs are missing or inconsistent."""


def _grid_order(point: str) -> list:
    """Natural order of point names, so ``g100`` sorts after ``g99`` (grid order)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", point)]


def _most_accurate(rows: list[dict], order: dict[str, int]) -> dict:
    return min(rows, key=lambda r: (-r["accuracy"], r["tokens_mean"], order[r["point"]]))


def _fewest_tokens_within_margin(rows: list[dict], order: dict[str, int]) -> tuple[dict, str]:
    qualified = [r for r in rows if r["qualified"]]
    if qualified:
        best = min(qualified, key=lambda r: (r["tokens_mean"], -r["accuracy"], order[r["point"]]))
        return best, "fewest tokens among the points within the margin"
    return (
        _most_accurate(rows, order),
        "fallback: no point within the margin, so the most accurate one",
    )


def _max_accuracy(rows: list[dict], order: dict[str, int]) -> tuple[dict, str]:
    return _most_accurate(rows, order), "most accurate point (ties: fewer tokens)"


#: objective name -> chooser(rows, grid order) -> (best row, how it was chosen).
#: Keep in step with the enum of calibration.<system>.objective in the config schema.
OBJECTIVES: dict[str, Callable[[list[dict], dict[str, int]], tuple[dict, str]]] = {
    "fewest_tokens_within_margin": _fewest_tokens_within_margin,
    "max_accuracy": _max_accuracy,
}


def point_row(point: str, settings: dict, run: pd.DataFrame) -> dict:
    """One row of the calibration table: accuracy, tokens and, for LLMLingua, achieved rates."""
    ok = run[run["error"].isna()]
    row = {
        "point": point,
        "settings": settings,
        "n": int(len(run)),
        "n_errors": int(len(run) - len(ok)),
        "accuracy": float(run["correct"].mean()),
        "tokens_mean": float(ok["tokens_total_cl100k"].mean()) if len(ok) else float("inf"),
    }
    row.update(lingua_rate_distribution(ok))
    return row


def choose(
    rows: list[dict],
    reference_accuracy: float,
    margin: float,
    objective: str = DEFAULT_OBJECTIVE,
) -> dict:
    """The chosen row (a copy) under ``objective``; marks every row ``qualified`` in place.

    The copy carries ``objective`` and ``chosen_by`` (what rule picked it, including
    the fallback when no point is within the margin).
    """
    if objective not in OBJECTIVES:
        raise CalibrationError(
            f"unknown calibration objective {objective!r}; choose one of {sorted(OBJECTIVES)}"
        )
    if not rows:
        raise CalibrationError("no calibration runs to choose from")
    floor = reference_accuracy - margin
    for r in rows:
        r["qualified"] = bool(r["accuracy"] >= floor - 1e-12)
    order = {r["point"]: i for i, r in enumerate(rows)}
    best, how = OBJECTIVES[objective](rows, order)
    return {**best, "objective": objective, "chosen_by": how}


def _reference_entry(label: str, path: Path) -> dict:
    ref = pd.read_parquet(path)
    return {"run": label, "accuracy": float(ref["correct"].mean()), "n": int(len(ref))}


def calibrate(
    task: str,
    system_runs: dict[str, dict[str, tuple[dict, Path]]],
    reference_run: Path,
    reference_label: str,
    margin: float,
    objective: str | Mapping[str, str] = DEFAULT_OBJECTIVE,
    references: Mapping[str, tuple[str, Path]] | None = None,
) -> dict:
    """Build the calibration document for one task.

    ``system_runs`` maps system -> point -> (settings, run Parquet path).
    ``objective`` is one name for every system, or system -> name (systems not
    named use the default). ``reference_run`` / ``reference_label`` is the default
    reference (``evaluation.reference``); ``references`` maps a system to its own
    (label, run path) on the same shard (``calibration.<system>.reference``, e.g. the
    hybrid against LLMLingua). The document keeps the default under ``reference``
    and records, under ``references`` and in each ``chosen`` entry, the reference
    each system was judged against. Systems are written in sorted order and points
    in grid order (natural order of their names ``g00``, ``g01``, ...), so the same
    inputs give the same file whatever order they were given in.
    """
    references = dict(references or {})
    unknown = sorted(set(references) - set(system_runs))
    if unknown:
        raise CalibrationError(
            f"a reference is given for {unknown}, which have no calibration runs among the "
            f"inputs ({sorted(system_runs)})"
        )
    objectives = {
        system: (
            objective if isinstance(objective, str) else objective.get(system, DEFAULT_OBJECTIVE)
        )
        for system in sorted(system_runs)
    }
    default = _reference_entry(reference_label, reference_run)
    entries: dict[str, dict] = {}  # label -> entry: each reference run is read once
    doc: dict = {
        "task": task,
        "objectives": objectives,
        "margin": margin,
        "reference": default,
        "references": {},
        "chosen": {},
        "table": {},
    }
    for system in sorted(system_runs):
        if system in references:
            label, path = references[system]
            if label not in entries:
                entries[label] = _reference_entry(label, Path(path))
            ref = entries[label]
        else:
            ref = default
        doc["references"][system] = dict(ref)
        points = system_runs[system]
        rows = [
            point_row(p, points[p][0], pd.read_parquet(points[p][1]))
            for p in sorted(points, key=_grid_order)
        ]
        best = choose(rows, ref["accuracy"], margin, objectives[system])
        best["reference"] = ref["run"]
        doc["chosen"][system] = copy.deepcopy(best)  # no YAML aliases into the table
        doc["table"][system] = rows
    return doc


def read_runs(paths: Iterable[str | Path], task: str) -> dict[str, dict[str, tuple[dict, str]]]:
    """system -> point -> (settings, path) of calibration runs, from each file's run spec.

    The spec in the file's metadata says which system and grid point it is, so the
    files can be given in any order; a file of another task is refused.
    """
    runs: dict[str, dict[str, tuple[dict, str]]] = {}
    for path in paths:
        spec = read_run_spec(path, task)
        runs.setdefault(spec["system"], {})[spec["variant"]] = (spec["variant_settings"], path)
    return runs


def read_references(items: Iterable[str], task: str) -> dict[str, tuple[str, Path]]:
    """``SYSTEM=RUN_PARQUET`` items -> system: (the run's own system/variant label, path)."""
    references: dict[str, tuple[str, Path]] = {}
    for item in items:
        system, sep, path = item.partition("=")
        if not sep or not system or not path:
            raise CalibrationError(f"--system-reference {item}: expected SYSTEM=RUN_PARQUET")
        spec = read_run_spec(path, task)  # the label is the run's own system/variant
        references[system] = (f"{spec['system']}/{spec['variant']}", Path(path))
    return references


def parse_objectives(given: Iterable[str], systems: set[str]) -> dict[str, str]:
    """``--objective`` values (``NAME`` for every system, or ``SYSTEM=NAME``) -> system: name."""
    default, per_system = DEFAULT_OBJECTIVE, {}
    for item in given:
        system, sep, name = item.rpartition("=")
        if name not in OBJECTIVES:
            raise CalibrationError(
                f"--objective {item}: unknown objective {name!r}; choose one of "
                f"{sorted(OBJECTIVES)}"
            )
        if not sep:
            default = name
        elif system not in systems:
            raise CalibrationError(
                f"--objective {item}: no calibration run of system {system!r} among the inputs "
                f"({sorted(systems)})"
            )
        else:
            per_system[system] = name
    return {system: per_system.get(system, default) for system in sorted(systems)}


def log_choices(doc: dict) -> None:
    """Log each system's choice and, where recorded, LLMLingua's achieved rates per point."""
    task = doc["task"]
    for system, best in doc["chosen"].items():
        log.info(
            "%s %s: chose %s %s by %s: %s (accuracy %.3f vs reference %s %.3f, %.1f tokens, %s)",
            task,
            system,
            best["point"],
            best["settings"],
            best["objective"],
            best["chosen_by"],
            best["accuracy"],
            best["reference"],
            doc["references"][system]["accuracy"],
            best["tokens_mean"],
            "within margin" if best["qualified"] else "NOT within margin",
        )
        for row in doc["table"][system]:
            if "lingua_n_messages" in row:
                log.info(
                    "%s %s %s: LLMLingua target %.3g, achieved p10/p50/p90 %.3g/%.3g/%.3g, "
                    "%s of reachable messages within 20%%, %d of %d unreachable",
                    task,
                    system,
                    row["point"],
                    row["lingua_target_rate"],
                    row["lingua_achieved_rate_p10"],
                    row["lingua_achieved_rate_p50"],
                    row["lingua_achieved_rate_p90"],
                    f"{row['lingua_within_20pct_share']:.0%}",
                    row["lingua_unreachable_n"],
                    row["lingua_n_messages"],
                )


def write(doc: dict, out: Path) -> None:
    """The calibration document as YAML (keys in document order), written atomically."""
    write_text_atomic(yaml.safe_dump(doc, sort_keys=False), out)


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
