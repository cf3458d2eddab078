"""Choosing a system's settings on the calibration shard, deterministically.

Two criteria judge a grid point against the system's reference run on the same
shard (``calibration.<system>.reference``, by default ``evaluation.reference``):

accuracy
    the point's calibration accuracy is at least the reference's minus the
    non-inferiority margin (``evaluation.margin``).
answer preservation
    the point's gold-reaches-Worker and facts-reaching-Worker rates (means over
    answered examples, computed by :func:`tersetalk.metrics.per_record.per_record_metrics`
    exactly as the scores are) are each at least the reference's minus
    ``calibration.<system>.preservation_margin`` (default 0.05).

Accuracy can only tell points apart when the reference's accuracy says something.
It is **uninformative** when the reference's calibration accuracy is 0 (nothing was
answered correctly, so every point ties near 0), or when its 95% Wilson score
interval is wider (upper minus lower bound) than the margin: the reference's own
accuracy is then less certain than the difference the margin allows. At the
default 0.02 margin an interval that narrow takes about 9,600 examples at accuracy 0.5
(3,500 at 0.1); with n = 10 it is never narrower than 0.27, with n = 50 never narrower
than 0.07, so on the default and paper shards the choice always falls to
preservation. The reason is recorded in the file, so this is never silent.

The selection objective is explicit, one per system (``calibration.<system>.objective``):

``fewest_tokens_within_margin`` (the default)
    With an informative accuracy, a point qualifies when both criteria hold; with an
    uninformative one, when preservation holds. Take the qualified point with the
    fewest tokens per example (ties: higher accuracy, then better preservation, then
    grid order; with uninformative accuracy, preservation before accuracy). If no
    point qualifies, fall back to the most accurate one (informative accuracy; ties:
    fewer tokens, then grid order) or to the best-preserving one (uninformative: the
    highest gold-reaches-Worker rate, then facts-reaching-Worker rate, then fewer
    tokens, then grid order); the file says so in ``chosen_by`` and the point's
    ``qualified: false``.
``max_accuracy``
    The most accurate point (ties: fewer tokens, then grid order), whatever its
    tokens and preservation. ``qualified`` is still reported under the criteria
    above; when accuracy is uninformative, ``why`` says the choice rests on an
    accuracy that cannot tell the points apart.

Each ``chosen`` entry says which criterion decided (``decided_by``:
``accuracy_and_preservation``, ``preservation``, ``accuracy`` for ``max_accuracy``, or
``accuracy_fallback`` / ``preservation_fallback`` when no point qualified) and
``why``, with the reference's accuracy, interval and preservation rates; each
reference entry carries the same numbers.

Every point row also carries, for a system whose records have LLMLingua's
achieved-rate counters (``c_lingua_scope_rate``), the distribution of the
achieved compression rate (see :func:`tersetalk.metrics.summary.lingua_rate_distribution`).
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd
import yaml

from tersetalk.core.intervals import wilson
from tersetalk.core.io import load_yaml_text, read_run_spec, write_text_atomic
from tersetalk.metrics.per_record import per_record_metrics
from tersetalk.metrics.summary import example_scores, lingua_rate_distribution

log = logging.getLogger(__name__)

#: the two answer-preservation rates both criteria compare (per_record_metrics columns)
PRESERVATION_RATES = ("gold_reaches_worker", "facts_reaching_worker")
#: how the reference's accuracy interval is computed (recorded in the file)
ACCURACY_INTERVAL = "Wilson score interval, 95%"
_EPS = 1e-12  # a rate exactly on the margin qualifies despite float rounding

#: decided_by values, in the order the docstring gives them
DECIDED_BY = (
    "accuracy_and_preservation",
    "preservation",
    "accuracy",
    "accuracy_fallback",
    "preservation_fallback",
)


class CalibrationError(ValueError):
    """Calibration inputs are missing or inconsistent."""


def _grid_order(point: str) -> list:
    """Natural order of point names, so ``g100`` sorts after ``g99`` (grid order)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", point)]


# ---- the evidence: accuracy's interval, preservation's rates ---------------------------


def accuracy_evidence(reference: Mapping, margin: float) -> tuple[bool, str]:
    """Whether the reference's calibration accuracy can decide, and the words that say why.

    Uninformative when it is 0 (no point can fall below it, so "within the margin"
    admits everything), or when its interval is wider than the margin (the reference's
    own accuracy is less certain than the difference the margin is meant to detect).
    """
    acc, n = float(reference["accuracy"]), int(reference["n"])
    lo, hi = wilson(acc, n)
    width = hi - lo
    said = (
        f"reference {reference.get('run') or 'run'} accuracy {acc:.3f} on n={n} "
        f"(Wilson 95% interval {lo:.3f}-{hi:.3f}, width {width:.3f}"
    )
    if acc <= 0:
        return False, (
            f"accuracy uninformative: {said}): no calibration example was answered "
            "correctly, so accuracy cannot tell the points apart"
        )
    if width > margin + _EPS:
        return False, f"accuracy uninformative: {said} > margin {margin:g})"
    return True, f"accuracy informative: {said} <= margin {margin:g})"


def preservation_rates(
    run: pd.DataFrame,
    samples: Mapping[str, dict],
    where: str = "run",
    scores: list[dict[str, float]] | None = None,
) -> dict[str, float | int]:
    """Gold-reaches-Worker and facts-reaching-Worker rates of one run, and over how many.

    ``samples``: the calibration sample, which every example of the run must be from.
    The per-example values come from the scoring's own
    :func:`~tersetalk.metrics.per_record.per_record_metrics` (no free-form pairing:
    only answer preservation is used), and the means are over answered examples, as in
    the run summary, so calibration and the score table measure the same thing.
    ``scores``: the run's example scores when the caller has them (not computed again).
    """
    missing = sorted(set(run["example_id"]) - set(samples))
    if missing:
        raise CalibrationError(
            f"{where}: examples {missing[:5]}{' ...' if len(missing) > 5 else ''} are not in "
            "the calibration sample (--sample); pass the sample the calibration runs were "
            "made on (results/samples/<task>.calibration.parquet)"
        )
    per_record = per_record_metrics(run, None, scores=scores, name=where)
    answered = per_record[per_record["error"].isna()]
    out: dict[str, float | int] = {}
    for col in PRESERVATION_RATES:
        values = pd.to_numeric(answered[col], errors="coerce").dropna()
        out[col] = float(values.mean()) if len(values) else float("nan")
    out["n_answered"] = int(len(answered))
    return out


def _rate(row: Mapping, col: str) -> float:
    """A preservation rate for ordering: an unmeasured (NaN) rate sorts below every rate."""
    value = row.get(col, float("nan"))
    return -1.0 if value is None or math.isnan(value) else float(value)


def preserves(row: Mapping, reference: Mapping, preservation_margin: float) -> bool:
    """Whether both preservation rates are each within the margin of the reference's.

    A rate the reference did not measure (NaN: e.g. no facts to check) constrains
    nothing; a rate the point did not measure while the reference did fails.
    """
    for col in PRESERVATION_RATES:
        ref = reference.get(col, float("nan"))
        if ref is None or math.isnan(ref):
            continue
        if _rate(row, col) < ref - preservation_margin - _EPS:
            return False
    return True


def _preservation_words(reference: Mapping, preservation_margin: float) -> str:
    rates = ", ".join(
        f"{col.replace('_', '-')} {reference.get(col, float('nan')):.3f}"
        for col in PRESERVATION_RATES
    )
    return f"reference preservation {rates} (preservation margin {preservation_margin:g})"


# ---- the objectives ---------------------------------------------------------------------


def _most_accurate(rows: list[dict], order: dict[str, int]) -> dict:
    return min(rows, key=lambda r: (-r["accuracy"], r["tokens_mean"], order[r["point"]]))


def _best_preserving(rows: list[dict], order: dict[str, int]) -> dict:
    return min(
        rows,
        key=lambda r: (
            *(-_rate(r, c) for c in PRESERVATION_RATES),
            r["tokens_mean"],
            order[r["point"]],
        ),
    )


def _fewest_tokens_within_margin(
    rows: list[dict], order: dict[str, int], informative: bool
) -> tuple[dict, str, str]:
    qualified = [r for r in rows if r["qualified"]]
    if informative:
        if qualified:
            best = min(
                qualified,
                key=lambda r: (
                    r["tokens_mean"],
                    -r["accuracy"],
                    *(-_rate(r, c) for c in PRESERVATION_RATES),
                    order[r["point"]],
                ),
            )
            return (
                best,
                "accuracy_and_preservation",
                "fewest tokens among the points within both the accuracy and the "
                "preservation margins",
            )
        return (
            _most_accurate(rows, order),
            "accuracy_fallback",
            "fallback: no point within both margins, so the most accurate one",
        )
    if qualified:
        best = min(
            qualified,
            key=lambda r: (
                r["tokens_mean"],
                *(-_rate(r, c) for c in PRESERVATION_RATES),
                -r["accuracy"],
                order[r["point"]],
            ),
        )
        return best, "preservation", "fewest tokens among the points within the preservation margin"
    return (
        _best_preserving(rows, order),
        "preservation_fallback",
        "fallback: no point within the preservation margin, so the best-preserving one "
        "(gold-reaches-worker, then facts-reaching-worker, then fewer tokens)",
    )


def _max_accuracy(
    rows: list[dict], order: dict[str, int], informative: bool
) -> tuple[dict, str, str]:
    return _most_accurate(rows, order), "accuracy", "most accurate point (ties: fewer tokens)"


#: objective name -> chooser(rows, grid order, accuracy informative)
#: -> (best row, decided_by, how it was chosen).
#: Keep in step with the enum of calibration.<system>.objective in the config schema.
OBJECTIVES: dict[str, Callable[[list[dict], dict[str, int], bool], tuple[dict, str, str]]] = {
    "fewest_tokens_within_margin": _fewest_tokens_within_margin,
    "max_accuracy": _max_accuracy,
}

_CONSEQUENCE = {
    "accuracy_and_preservation": "so a point must be within the margin of the reference's "
    "accuracy and within the preservation margin of both its rates",
    "preservation": "so the choice falls to answer preservation",
    "preservation_fallback": "so the choice falls to answer preservation; no point is within "
    "the preservation margin, so the best-preserving point is taken and is not qualified",
    "accuracy_fallback": "no point meets both criteria, so the most accurate point is taken "
    "and is not qualified",
}


def _why(decided_by: str, evidence: str, informative: bool, preservation: str) -> str:
    if decided_by == "accuracy":
        tail = "the max_accuracy objective takes the most accurate point; preservation does "
        tail += "not enter the choice"
        if not informative:
            tail += (
                " and accuracy cannot tell the points apart here, so the choice rests on noise "
                "(fewest_tokens_within_margin would let preservation decide)"
            )
    else:
        tail = _CONSEQUENCE[decided_by]
    return f"{evidence}; {preservation}; {tail}"


def _accuracy(scores: list[dict[str, float]]) -> float:
    """A run's accuracy from its examples' scores, computed by the task's scorer as the
    score step computes them (:func:`~tersetalk.metrics.summary.example_scores`), not the
    column the run wrote."""
    return float(pd.Series([s["correct"] for s in scores], dtype="float64").mean())


def point_row(point: str, settings: dict, run: pd.DataFrame, samples: Mapping[str, dict]) -> dict:
    """One row of the calibration table: accuracy, tokens, preservation and LLMLingua's rates."""
    ok = run[run["error"].isna()]
    scores = example_scores(run)
    row = {
        "point": point,
        "settings": settings,
        "n": int(len(run)),
        "n_errors": int(len(run) - len(ok)),
        "accuracy": _accuracy(scores),
        "tokens_mean": float(ok["tokens_total_cl100k"].mean()) if len(ok) else float("inf"),
        **preservation_rates(run, samples, f"calibration run of point {point}", scores),
    }
    row.update(lingua_rate_distribution(ok))
    return row


def choose(
    rows: list[dict],
    reference: Mapping,
    margin: float,
    objective: str | None = None,
    preservation_margin: float | None = None,
) -> dict:
    """The chosen row (a copy) under ``objective``; marks every row in place.

    ``reference`` carries the reference run's ``accuracy``, ``n`` and preservation
    rates (and its ``run`` label, for the words). Each row gets
    ``accuracy_within_margin``, ``preservation_within_margin`` and ``qualified`` (the
    criteria in force: both with an informative accuracy, preservation alone
    without). The copy carries ``objective``, ``decided_by`` (which criterion
    decided), ``chosen_by`` (what rule picked it, including a fallback when no point
    qualifies) and ``why`` (the reference's numbers behind the criterion). ``objective``
    and ``preservation_margin`` default to the config schema's (:func:`schema_defaults`).
    """
    if objective is None:
        objective = str(schema_defaults()["objective"])
    if preservation_margin is None:
        preservation_margin = float(schema_defaults()["preservation_margin"])
    if objective not in OBJECTIVES:
        raise CalibrationError(
            f"unknown calibration objective {objective!r}; choose one of {sorted(OBJECTIVES)}"
        )
    if not rows:
        raise CalibrationError("no calibration runs to choose from")
    if not 0 <= preservation_margin <= 1:
        raise CalibrationError(
            f"preservation margin {preservation_margin!r}: expected a rate between 0 and 1"
        )
    informative, evidence = accuracy_evidence(reference, margin)
    floor = reference["accuracy"] - margin
    for r in rows:
        r["accuracy_within_margin"] = bool(r["accuracy"] >= floor - _EPS)
        r["preservation_within_margin"] = preserves(r, reference, preservation_margin)
        r["qualified"] = r["preservation_within_margin"] and (
            r["accuracy_within_margin"] or not informative
        )
    order = {r["point"]: i for i, r in enumerate(rows)}
    best, decided_by, how = OBJECTIVES[objective](rows, order, informative)
    why = _why(
        decided_by, evidence, informative, _preservation_words(reference, preservation_margin)
    )
    return {
        **best,
        "objective": objective,
        "decided_by": decided_by,
        "chosen_by": how,
        "accuracy_informative": informative,
        "why": why,
    }


def _reference_entry(label: str, path: Path, samples: Mapping[str, dict], margin: float) -> dict:
    ref = pd.read_parquet(path)
    scores = example_scores(ref)
    accuracy, n = _accuracy(scores), int(len(ref))
    low, high = wilson(accuracy, n)
    entry = {
        "run": label,
        "accuracy": accuracy,
        "n": n,
        "accuracy_ci_low": low,
        "accuracy_ci_high": high,
        **preservation_rates(ref, samples, f"reference run {label} ({path})", scores),
    }
    if entry["n_answered"] == 0:
        raise CalibrationError(
            f"reference run {label} ({path}) has no answered example on the calibration shard, "
            "so neither its accuracy nor its answer preservation can judge a grid point; see "
            "its error column and rerun it"
        )
    entry["accuracy_informative"] = accuracy_evidence(entry, margin)[0]
    return entry


def _per_system(value, systems: Iterable[str], default, what: str) -> dict:
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(systems))
        if unknown:
            raise CalibrationError(
                f"a {what} is given for {unknown}, which have no calibration runs among the "
                f"inputs ({sorted(systems)})"
            )
        return {s: value.get(s, default) for s in sorted(systems)}
    return {s: default if value is None else value for s in sorted(systems)}


def calibrate(
    task: str,
    system_runs: dict[str, dict[str, tuple[dict, Path]]],
    reference_run: Path,
    reference_label: str,
    margin: float,
    objective: str | Mapping[str, str] | None = None,
    references: Mapping[str, tuple[str, Path]] | None = None,
    *,
    samples: Mapping[str, dict],
    preservation_margin: float | Mapping[str, float] | None = None,
) -> dict:
    """Build the calibration document for one task.

    ``system_runs`` maps system -> point -> (settings, run Parquet path).
    ``objective`` is one name for every system, or system -> name (systems not
    named, and None, use the schema's default, :func:`schema_defaults`);
    ``preservation_margin`` likewise, one value or system -> value. ``samples`` is the
    calibration sample the runs were made on (example id -> sample row with its
    decoded ``record``, see :func:`read_samples`): every run's examples must be from it.
    ``reference_run`` / ``reference_label`` is the default reference (``evaluation.reference``);
    ``references`` maps a system to its own (label, run path) on the same shard
    (``calibration.<system>.reference``, e.g. the hybrid against LLMLingua). The
    document keeps the default under ``reference`` and records, under ``references``
    and in each ``chosen`` entry, the reference each system was judged against, with
    its accuracy, interval and preservation rates. Systems are written in sorted
    order and points in grid order (natural order of their names ``g00``, ``g01``,
    ...), so the same inputs give the same file whatever order they were given in.
    """
    references = dict(references or {})
    unknown = sorted(set(references) - set(system_runs))
    if unknown:
        raise CalibrationError(
            f"a reference is given for {unknown}, which have no calibration runs among the "
            f"inputs ({sorted(system_runs)})"
        )
    defaults = schema_defaults()
    objectives = _per_system(objective, system_runs, defaults["objective"], "objective")
    margins = _per_system(
        preservation_margin, system_runs, defaults["preservation_margin"], "preservation margin"
    )
    default = _reference_entry(reference_label, Path(reference_run), samples, margin)
    entries: dict[str, dict] = {}  # label -> entry: each reference run is read once
    doc: dict = {
        "task": task,
        "objectives": objectives,
        "margin": margin,
        "preservation_margins": margins,
        "accuracy_interval": ACCURACY_INTERVAL,
        "reference": default,
        "references": {},
        "chosen": {},
        "table": {},
    }
    for system in sorted(system_runs):
        if system in references:
            label, path = references[system]
            if label not in entries:
                entries[label] = _reference_entry(label, Path(path), samples, margin)
            ref = entries[label]
        else:
            ref = default
        doc["references"][system] = dict(ref)
        points = system_runs[system]
        rows = [
            point_row(p, points[p][0], pd.read_parquet(points[p][1]), samples)
            for p in sorted(points, key=_grid_order)
        ]
        best = choose(rows, ref, margin, objectives[system], margins[system])
        best["reference"] = ref["run"]
        doc["chosen"][system] = copy.deepcopy(best)  # no YAML aliases into the table
        doc["table"][system] = rows
    return doc


def read_samples(path: str | Path) -> dict[str, dict]:
    """The calibration sample as example id -> sample row (with its decoded ``record``)."""
    from tersetalk.tasks.loading import read_sample

    return {row["example_id"]: row for row in read_sample(path)}


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


# ---- the options: one JSON object, from the config (the rule's param) or by hand ---------

#: the keys of calibrate's options (``tersetalk calibrate --spec-json``), and of each
#: entry of its ``systems``; see :func:`options` and :func:`check_options`
OPTION_KEYS = ("reference", "margin", "systems")
SYSTEM_OPTION_KEYS = ("objective", "preservation_margin", "reference")


@functools.cache
def schema_defaults() -> dict[str, object]:
    """What the options default to: the config schema's defaults (the one place they are
    written) of ``evaluation.margin`` (``margin``) and of ``calibration.<system>.objective``
    and ``.preservation_margin``. (An absent ``reference`` is the first reference run's.)"""
    from tersetalk.pipeline.config import schema_default

    return {
        "margin": schema_default("evaluation", "margin"),
        "objective": schema_default("calibration", "*", "objective"),
        "preservation_margin": schema_default("calibration", "*", "preservation_margin"),
    }


def options(config: Mapping, task: str) -> dict:
    """The options of ``task``'s calibration, from a validated config: the calibrate rule's
    one JSON param (``evaluation.reference`` and ``.margin``; per calibrated system that
    runs on ``task`` its objective, preservation margin and, when it names one, its own
    reference)."""
    from tersetalk.pipeline.config import calibration_reference_runs
    from tersetalk.pipeline.schedule import calibration_systems

    own = calibration_reference_runs(config)
    systems = {}
    for system in calibration_systems(config, task):
        spec = config["calibration"][system]
        entry = {"objective": spec["objective"], "preservation_margin": spec["preservation_margin"]}
        if system in own:
            entry["reference"] = own[system]
        systems[system] = entry
    ev = config["evaluation"]
    return {"reference": ev["reference"], "margin": ev["margin"], "systems": systems}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _label(value: object) -> bool:
    return (
        isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_-]+/[A-Za-z0-9_-]+", value) is not None
    )


def check_options(spec: Mapping, systems: Iterable[str]) -> dict:
    """The options (``--spec-json``) checked against the systems that have runs, with the
    schema's defaults filled in: ``reference`` (None: the first reference run's own label),
    ``margin``, and per system ``objective``, ``preservation_margin`` and ``reference``
    (None: the default reference). A wrong key, type or value names itself and the fix."""
    systems = sorted(set(systems))
    defaults = schema_defaults()

    def bad(key: str, what: str) -> CalibrationError:
        return CalibrationError(f"--spec-json key {key!r}: {what}")

    unknown = sorted(set(spec) - set(OPTION_KEYS))
    if unknown:
        raise bad(unknown[0], f"unknown; the keys are {', '.join(OPTION_KEYS)}")
    reference = spec.get("reference")
    if reference is not None and not _label(reference):
        raise bad("reference", f"expected a system/variant label, got {reference!r}")
    margin = spec.get("margin", defaults["margin"])
    if not _number(margin) or margin < 0:
        raise bad("margin", f"expected a non-negative number (e.g. 0.02), got {margin!r}")
    given = spec.get("systems", {})
    if not isinstance(given, Mapping):
        raise bad("systems", f"expected an object of system -> options, got {given!r}")
    unknown = sorted(set(given) - set(systems))
    if unknown:
        raise bad(
            "systems",
            f"{unknown} have no calibration runs among the inputs ({systems})",
        )
    out: dict = {"reference": reference, "margin": margin, "systems": {}}
    for system in systems:
        entry = given.get(system, {})
        key = f"systems.{system}"
        if not isinstance(entry, Mapping):
            raise bad(key, f"expected an object with keys {', '.join(SYSTEM_OPTION_KEYS)}")
        unknown = sorted(set(entry) - set(SYSTEM_OPTION_KEYS))
        if unknown:
            raise bad(
                f"{key}.{unknown[0]}", f"unknown; the keys are {', '.join(SYSTEM_OPTION_KEYS)}"
            )
        objective = entry.get("objective", defaults["objective"])
        if objective not in OBJECTIVES:
            raise bad(
                f"{key}.objective",
                f"unknown objective {objective!r}; choose one of {sorted(OBJECTIVES)}",
            )
        pm = entry.get("preservation_margin", defaults["preservation_margin"])
        if not _number(pm) or not 0 <= pm <= 1:
            raise bad(
                f"{key}.preservation_margin",
                f"expected a rate between 0 and 1 (e.g. 0.05), got {pm!r}",
            )
        own = entry.get("reference")
        if own is not None and not _label(own):
            raise bad(f"{key}.reference", f"expected a system/variant label, got {own!r}")
        out["systems"][system] = {
            "objective": objective,
            "preservation_margin": pm,
            "reference": own,
        }
    return out


def read_reference_runs(paths: Iterable[str | Path], task: str) -> dict[str, Path]:
    """Reference runs on the calibration shard as label -> path, each labelled by its own
    run spec (``system/variant``, read from the file); in the order given."""
    found: dict[str, Path] = {}
    for path in paths:
        spec = read_run_spec(path, task)
        label = f"{spec['system']}/{spec['variant']}"
        if label in found and found[label] != Path(path):
            raise CalibrationError(
                f"--reference-run: {found[label]} and {path} are both runs of {label}; pass one"
            )
        found[label] = Path(path)
    return found


def calibrate_files(
    task: str,
    run_paths: Iterable[str | Path],
    reference_paths: Iterable[str | Path],
    sample: str | Path,
    spec: Mapping,
) -> dict:
    """:func:`calibrate` on files: the grid points' runs, the reference runs (the default
    one and each system's own, told apart by their run specs), the calibration sample, and
    the options (``--spec-json``, checked by :func:`check_options`)."""
    runs = read_runs(run_paths, task)
    opts = check_options(spec, runs)
    refs = read_reference_runs(reference_paths, task)
    if not refs:
        raise CalibrationError("no --reference-run given: pass the reference's calibration run")

    def ref_path(label: str, who: str) -> Path:
        if label not in refs:
            raise CalibrationError(
                f"{who} is {label}, but no --reference-run is a run of it (given: "
                f"{sorted(refs)}); pass its run on the calibration shard"
            )
        return refs[label]

    default = opts["reference"] or next(iter(refs))
    default_path = ref_path(default, "the reference (--spec-json key 'reference')")
    own = {
        system: (label, ref_path(label, f"the reference of {system}"))
        for system, entry in opts["systems"].items()
        if (label := entry["reference"]) is not None
    }
    return calibrate(
        task,
        runs,
        default_path,
        default,
        opts["margin"],
        objective={s: e["objective"] for s, e in opts["systems"].items()},
        references=own,
        samples=read_samples(sample),
        preservation_margin={s: e["preservation_margin"] for s, e in opts["systems"].items()},
    )


def log_choices(doc: dict) -> None:
    """Log each system's choice, the criterion that decided and why, and LLMLingua's rates."""
    task = doc["task"]
    for system, best in doc["chosen"].items():
        ref = doc["references"][system]
        log.info(
            "%s %s: chose %s %s by %s, decided by %s: %s (accuracy %.3f vs reference %s %.3f; "
            "gold reaches Worker %.3f vs %.3f, facts %.3f vs %.3f; %.1f tokens; %s)",
            task,
            system,
            best["point"],
            best["settings"],
            best["objective"],
            best["decided_by"],
            best["chosen_by"],
            best["accuracy"],
            best["reference"],
            ref["accuracy"],
            best["gold_reaches_worker"],
            ref["gold_reaches_worker"],
            best["facts_reaching_worker"],
            ref["facts_reaching_worker"],
            best["tokens_mean"],
            "qualified" if best["qualified"] else "NOT qualified",
        )
        log.info("%s %s: why: %s", task, system, best["why"])
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
    doc = load_yaml_text(path.read_text(encoding="utf-8"), f"calibration file {path}",
                         error=CalibrationError)  # fmt: skip
    try:
        return dict(doc["chosen"][system]["settings"])
    except (KeyError, TypeError):
        raise CalibrationError(
            f"{path} has no calibrated settings for {system!r}: add it under calibration in "
            "the config"
        ) from None
