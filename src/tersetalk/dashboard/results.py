"""What the results browser reads: run files, the summary table, figures, and safe paths.

Everything is read from the workflow's own outputs, one model's at a time
(``results/<model>/runs/<task>/<system>/<variant>.parquet``, ``results/<model>/
summary.parquet``, ``figures/<model>/*.png``; :func:`tersetalk.core.paths.model_keys` lists
the models), so the browser shows exactly what the paper's numbers come from. A
results folder of the older flat layout (``results/runs/...`` with no model folder) is
read as one model named :data:`LEGACY`. Run files are read
once per modification time and kept (a run file is small and written atomically).
A run file that cannot be read, or a symlink that leads out of the results folder,
is skipped with a warning in the response, and the other runs still show.

:func:`safe_path` is the only way a request turns into a file: the path must be
relative, free of ``..`` and of backslashes, and its resolved target (symlinks
followed) must stay inside the folder it was asked of.
"""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from tersetalk.core.io import message_list

__all__ = ["LEGACY", "PathRefused", "ResultsIndex", "UnknownModel", "safe_path"]

log = logging.getLogger(__name__)

#: the columns of a run file the conversation view needs
_CONVERSATION_COLUMNS = [
    "task",
    "system",
    "variant",
    "example_id",
    "position",
    "question",
    "gold",
    "prediction",
    "em",
    "f1",
    "correct",
    "error",
    "tokens_total_cl100k",
    "tokens_total_model",
    "n_messages",
    "n_model_calls",
    "messages",
]
FIGURE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg")
#: the model name of a results folder in the flat layout of before per-model results
LEGACY = "(flat layout)"
LEGACY_NOTE = (
    "this results folder has the flat layout of before per-model results (results/runs/...); "
    "move its files under results/<model key>/ (see tersetalk.core.paths) to compare models"
)


class PathRefused(ValueError):
    """A requested path that would leave its folder (or is not a plain relative path)."""


#: folders of the flat layout (and of one model's folder): never a model key
_STUDY_FOLDERS = frozenset(
    {"runs", "metrics", "scores", "calibration", "topology", "formats", "stats", "tables"}
    | {"screenshots", "sensitivity"}
)


def _model_keys(results: Path) -> list[str]:
    from tersetalk.core.paths import model_keys

    return [k for k in model_keys(results) if k not in _STUDY_FOLDERS]


class UnknownModel(LookupError):
    """A model name with no results folder."""


class UnreadableRun(ValueError):
    """A run file that exists but cannot be read as one (torn, not Parquet, wrong columns)."""


def safe_path(root: str | Path, relative: str) -> Path:
    """``root/relative`` if it is a file inside ``root``; :class:`PathRefused` otherwise."""
    if not relative or "\x00" in relative or "\\" in relative:
        raise PathRefused(f"refused path {relative!r}: empty, NUL or backslash")
    rel = PurePosixPath(relative)
    if rel.is_absolute() or relative.startswith("/") or ".." in rel.parts:
        raise PathRefused(f"refused path {relative!r}: absolute or climbing out with '..'")
    base = Path(root).resolve()
    target = (base / rel).resolve()  # follows symlinks: a link out of root is caught here
    if target != base and base not in target.parents:
        raise PathRefused(f"refused path {relative!r}: it resolves outside {base}")
    return target


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class ResultsIndex:
    """Reads a results folder and a figures folder for the browser.

    A run file that cannot be read (torn by a crash, half-copied, not Parquet) and a
    symlink that leads out of the results folder are skipped, each with a warning
    that is logged once and returned beside the data (``warnings``), so one bad file
    never hides the other runs' examples.
    """

    def __init__(self, results: str | Path, figures: str | Path) -> None:
        self.results = Path(results)
        self.figures = Path(figures)
        #: path -> ((mtime, size), frame or the reason it could not be read)
        self._cache: dict[Path, tuple[tuple[float, int], Any]] = {}
        self._lock = threading.Lock()
        self._logged: set[tuple[str, str]] = set()

    def _warn(self, rel: str, message: str) -> dict[str, str]:
        """A warning for the response; logged the first time it is seen."""
        with self._lock:
            first = (rel, message) not in self._logged
            if first and len(self._logged) < 10_000:
                self._logged.add((rel, message))
        if first:
            log.warning("results browser: %s: %s", rel, message)
        return {"path": rel, "message": message}

    # -- models ------------------------------------------------------------------
    def _legacy(self) -> bool:
        return (self.results / "runs").is_dir() or (self.results / "summary.parquet").is_file()

    def models(self) -> dict[str, Any]:
        """The models with results, the default one (the only one, else the one whose
        results changed last) and a note when the folder has the old flat layout."""
        keys = _model_keys(self.results)
        stamps = {}
        for key in keys:
            folder = self.results / key
            marks = [folder / m for m in ("summary.parquet", "runs", "topology", "formats")]
            stamps[key] = max((m.stat().st_mtime for m in marks if m.exists()), default=0.0)
        legacy = self._legacy()
        if legacy:
            keys = [*keys, LEGACY]
            stamps[LEGACY] = -1.0  # a migrated model is the default over the old layout
        default = max(keys, key=lambda k: (stamps[k], k)) if keys else None
        return {
            "models": [{"model": k, "updated": stamps[k]} for k in keys],
            "default": default,
            "note": LEGACY_NOTE if legacy else None,
        }

    def _base(self, model: str | None) -> tuple[Path, str]:
        """The results folder of ``model`` (None: the default) and its path relative to
        the results folder ("" for the flat layout); :class:`UnknownModel` if it has none."""
        if model is None:
            model = self.models()["default"]
            if model is None:
                return self.results, ""
        if model == LEGACY and self._legacy():
            return self.results, ""
        if model not in _model_keys(self.results):
            raise UnknownModel(f"no results of model {model!r} under {self.results}/")
        return self.results / model, f"{model}/"

    # -- run files ---------------------------------------------------------------
    def _scan(
        self, model: str | None = None
    ) -> tuple[list[tuple[dict[str, Any], Path]], list[dict[str, str]]]:
        """Every run file inside the results folder, with its real path; and what was skipped.

        ``glob`` follows symlinked folders and files, so each hit's real path is checked
        to lie inside the results folder's real path; one that leaves it is not read."""
        found: list[tuple[dict[str, Any], Path]] = []
        warnings: list[dict[str, str]] = []
        root = self.results.resolve()
        base, _ = self._base(model)
        paths = [
            *sorted((base / "runs").glob("*/*/*.parquet")),
            *sorted((base / "topology" / "runs").glob("*/*/*.parquet")),
        ]
        for path in paths:
            rel = path.relative_to(self.results).as_posix()
            real = path.resolve()
            if root not in real.parents:
                warnings.append(
                    self._warn(rel, "skipped: a symlink that leads outside the results folder")
                )
                continue
            try:
                mtime = real.stat().st_mtime
            except OSError as exc:  # a dangling link, or removed since the glob
                warnings.append(self._warn(rel, f"skipped: cannot stat ({exc.strerror or exc})"))
                continue
            task, system_, variant = path.parts[-3], path.parts[-2], path.stem
            run = {"task": task, "system": system_, "variant": variant, "path": rel, "mtime": mtime}
            found.append((run, real))
        return found, warnings

    def runs(self, model: str | None = None) -> list[dict[str, Any]]:
        """Every finished run file of ``model``: task, system, variant, rows, path relative
        to results.

        The main study's (``runs/``) and the topology study's (``topology/runs/``, its
        routed systems beside the main systems on a task both studies sample)."""
        return [run for run, _ in self._scan(model)[0]]

    def _frame(self, path: Path):
        """The run file's columns the browser needs; raises if the file cannot be read
        (the failure is remembered until the file changes, so it is read once)."""
        import pandas as pd
        import pyarrow.parquet as pq

        st = path.stat()
        stamp = (st.st_mtime, st.st_size)
        with self._lock:
            hit = self._cache.get(path)
        if hit and hit[0] == stamp:
            if isinstance(hit[1], str):
                raise UnreadableRun(hit[1])
            return hit[1]
        try:
            names = set(pq.read_schema(path).names)
            if "example_id" not in names:
                raise ValueError("no example_id column: not a run file")
            df = pd.read_parquet(path, columns=[c for c in _CONVERSATION_COLUMNS if c in names])
            df["example_id"] = df["example_id"].astype(str)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a torn file
            why = f"{type(exc).__name__}: {exc}"[:500]
            with self._lock:
                self._cache[path] = (stamp, why)
            raise UnreadableRun(why) from exc
        with self._lock:
            self._cache[path] = (stamp, df)
        return df

    def _task_frames(
        self, task: str, model: str | None = None
    ) -> tuple[list[tuple[dict[str, Any], Any]], list[dict]]:
        """Each readable run file of ``task`` with its frame; warnings for what was skipped."""
        found, warnings = self._scan(model)
        frames = []
        for run, real in found:
            if run["task"] != task:
                continue
            try:
                frames.append((run, self._frame(real)))
            except UnreadableRun as exc:  # one bad file must not hide the others
                warnings.append(self._warn(run["path"], f"skipped: unreadable run file ({exc})"))
            except OSError as exc:  # removed or replaced since the scan
                why = exc.strerror or str(exc)
                warnings.append(self._warn(run["path"], f"skipped: cannot read ({why})"))
        return frames, warnings

    def tasks(self, model: str | None = None) -> list[dict[str, Any]]:
        counts: dict[str, int] = {}
        for run in self.runs(model):
            counts[run["task"]] = counts.get(run["task"], 0) + 1
        return [{"task": t, "n_runs": n} for t, n in sorted(counts.items())]

    def examples(self, task: str, model: str | None = None) -> dict[str, Any]:
        """The task's examples over all its runs, in sample order, with their question;
        ``warnings`` names the files skipped (unreadable, or leading outside)."""
        seen: dict[str, dict[str, Any]] = {}
        frames, warnings = self._task_frames(task, model)
        for _, df in frames:
            for row in df.itertuples(index=False):
                ex = seen.setdefault(
                    row.example_id,
                    {
                        "example_id": row.example_id,
                        "position": _clean(getattr(row, "position", 0)),
                        "question": str(getattr(row, "question", ""))[:300],
                        "n_runs": 0,
                    },
                )
                ex["n_runs"] += 1
        ordered = sorted(seen.values(), key=lambda e: (e["position"] or 0, e["example_id"]))
        return {"task": task, "examples": ordered, "warnings": warnings}

    def conversation(self, task: str, example_id: str, model: str | None = None) -> dict[str, Any]:
        """Every run's record of one example: messages with tokens, verdict, prediction, score."""
        runs = []
        question = gold = None
        frames, warnings = self._task_frames(task, model)
        for run, df in frames:
            rows = df[df["example_id"] == str(example_id)]
            if rows.empty:
                continue
            raw = rows.iloc[0].to_dict()
            row = {k: _clean(v) for k, v in raw.items() if k != "messages"}
            try:  # a nested list of structs, or a JSON string in older run files
                messages = [{k: _clean(v) for k, v in m.items()}
                            for m in message_list(raw.get("messages"))]  # fmt: skip
            except (TypeError, ValueError):
                messages = []
            question = question or row.get("question")
            gold = gold or row.get("gold")
            runs.append(
                {
                    **{k: row.get(k) for k in _CONVERSATION_COLUMNS if k != "messages"},
                    "path": run["path"],
                    "messages": messages,
                }
            )
        return {
            "task": task,
            "example_id": str(example_id),
            "question": question,
            "gold": gold,
            "runs": runs,
            "warnings": warnings,
        }

    # -- summary and figures -------------------------------------------------------
    def summary(self, model: str | None = None) -> dict[str, Any]:
        """``results/<model>/summary.parquet`` as columns and rows (``missing`` when not
        built yet)."""
        import pandas as pd

        _, prefix = self._base(model)
        rel = f"{prefix}summary.parquet"
        empty = {"path": rel, "missing": False, "columns": [], "rows": []}
        try:
            path = safe_path(self.results, rel)
        except PathRefused:
            warning = self._warn(rel, "skipped: it leads outside the results folder")
            return {**empty, "warnings": [warning]}
        if not path.is_file():
            return {**empty, "missing": True, "warnings": []}
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # noqa: BLE001 - a torn summary is a warning, not a 500
            why = f"{type(exc).__name__}: {exc}"[:500]
            warning = self._warn(rel, f"skipped: unreadable ({why})")
            return {**empty, "warnings": [warning]}
        rows = [[_clean(v) for v in rec] for rec in df.itertuples(index=False, name=None)]
        return {
            "path": rel,
            "missing": False,
            "columns": list(df.columns),
            "rows": rows,
            "warnings": [],
        }

    def figure_list(self, model: str | None = None) -> list[dict[str, str]]:
        """Figures the workflow drew for ``model`` (``figures/<model>/``, and the shared
        ones outside any model's folder; images only, the PDFs are for the paper)."""
        if not self.figures.is_dir():
            return []
        _, prefix = self._base(model)
        others = {k for k in _model_keys(self.results) if f"{k}/" != prefix}
        out = []
        for path in sorted(self.figures.rglob("*")):
            top = path.relative_to(self.figures).parts[0]
            if top in others:
                continue
            if path.suffix.lower() in FIGURE_SUFFIXES and path.is_file():
                rel = path.relative_to(self.figures).as_posix()
                try:
                    safe_path(self.figures, rel)
                except PathRefused:
                    continue  # a link out of the folder: not listed, and refused if asked
                out.append({"name": rel, "url": f"/files/figures/{rel}"})
        return out
