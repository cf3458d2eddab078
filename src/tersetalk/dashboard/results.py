"""What the results browser reads: run files, the summary table, figures, and safe paths.

Everything is read from the workflow's own outputs (``results/runs/<task>/
<system>/<variant>.parquet``, ``results/summary.parquet``, ``figures/*.png``), so
the browser shows exactly what the paper's numbers come from. Run files are read
once per modification time and kept (a run file is small and written atomically).

:func:`safe_path` is the only way a request turns into a file: the path must be
relative, free of ``..`` and of backslashes, and its resolved target (symlinks
followed) must stay inside the folder it was asked of.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["PathRefused", "ResultsIndex", "safe_path"]

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


class PathRefused(ValueError):
    """A requested path that would leave its folder (or is not a plain relative path)."""


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
    """Reads a results folder and a figures folder for the browser."""

    def __init__(self, results: str | Path, figures: str | Path) -> None:
        self.results = Path(results)
        self.figures = Path(figures)
        self._cache: dict[Path, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    # -- run files ---------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """Every finished run file: task, system, variant, rows, path relative to results.

        The main study's (``runs/``) and the topology study's (``topology/runs/``, its
        routed systems beside the main systems on a task both studies sample)."""
        found = []
        paths = [
            *sorted((self.results / "runs").glob("*/*/*.parquet")),
            *sorted((self.results / "topology" / "runs").glob("*/*/*.parquet")),
        ]
        for path in paths:
            task, system_, variant = path.parts[-3], path.parts[-2], path.stem
            found.append(
                {
                    "task": task,
                    "system": system_,
                    "variant": variant,
                    "path": path.relative_to(self.results).as_posix(),
                    "mtime": path.stat().st_mtime,
                }
            )
        return found

    def _frame(self, path: Path):
        import pandas as pd
        import pyarrow.parquet as pq

        mtime = path.stat().st_mtime
        with self._lock:
            hit = self._cache.get(path)
            if hit and hit[0] == mtime:
                return hit[1]
        names = set(pq.read_schema(path).names)
        df = pd.read_parquet(path, columns=[c for c in _CONVERSATION_COLUMNS if c in names])
        df["example_id"] = df["example_id"].astype(str)
        with self._lock:
            self._cache[path] = (mtime, df)
        return df

    def tasks(self) -> list[dict[str, Any]]:
        counts: dict[str, int] = {}
        for run in self.runs():
            counts[run["task"]] = counts.get(run["task"], 0) + 1
        return [{"task": t, "n_runs": n} for t, n in sorted(counts.items())]

    def examples(self, task: str) -> list[dict[str, Any]]:
        """The task's examples over all its runs, in sample order, with their question."""
        seen: dict[str, dict[str, Any]] = {}
        for run in self.runs():
            if run["task"] != task:
                continue
            df = self._frame(self.results / run["path"])
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
        return sorted(seen.values(), key=lambda e: (e["position"] or 0, e["example_id"]))

    def conversation(self, task: str, example_id: str) -> dict[str, Any]:
        """Every run's record of one example: messages with tokens, verdict, prediction, score."""
        runs = []
        question = gold = None
        for run in self.runs():
            if run["task"] != task:
                continue
            df = self._frame(self.results / run["path"])
            rows = df[df["example_id"] == str(example_id)]
            if rows.empty:
                continue
            row = {k: _clean(v) for k, v in rows.iloc[0].to_dict().items()}
            try:
                messages = json.loads(row.pop("messages") or "[]")
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
        }

    # -- summary and figures -------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """``results/summary.parquet`` as columns and rows (``missing`` when not built yet)."""
        import pandas as pd

        path = self.results / "summary.parquet"
        if not path.is_file():
            return {"path": "summary.parquet", "missing": True, "columns": [], "rows": []}
        df = pd.read_parquet(path)
        rows = [[_clean(v) for v in rec] for rec in df.itertuples(index=False, name=None)]
        return {
            "path": "summary.parquet",
            "missing": False,
            "columns": list(df.columns),
            "rows": rows,
        }

    def figure_list(self) -> list[dict[str, str]]:
        """Figures the workflow drew (images only; the PDFs are for the paper)."""
        if not self.figures.is_dir():
            return []
        out = []
        for path in sorted(self.figures.rglob("*")):
            if path.suffix.lower() in FIGURE_SUFFIXES and path.is_file():
                rel = path.relative_to(self.figures).as_posix()
                try:
                    safe_path(self.figures, rel)
                except PathRefused:
                    continue  # a link out of the folder: not listed, and refused if asked
                out.append({"name": rel, "url": f"/files/figures/{rel}"})
        return out
