"""Loading the tasks' examples, and seeded sampling.

Each task declares its :class:`~tersetalk.tasks.base.DatasetFile` (its module under
``tasks/``, found through :mod:`tersetalk.tasks.registry`). Files are read through the
``datasets`` library. The shipped files in ``data/`` are the default: their SHA-256 is
checked before they are read, so a corrupted or swapped file stops the run instead of
quietly changing the numbers. ``source: hub`` loads the Hugging Face hub datasets
instead and maps them to the same layout (``DatasetFile.from_hub``).

A dataset with ``build`` (``toolqa``: questions generated from the checksummed
tool-response corpus) has no hub copy: its examples are built whatever the source.
``DatasetFile.to_record`` maps a line to the pipeline's record layout where the file's
own layout is not it (BoolQ, CommonsenseQA, Social IQa, HumanEval), and
``DatasetFile.gold`` gives the sample's ``gold``, which the task's scorer reads.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd

from tersetalk.core.io import file_sha256
from tersetalk.tasks.base import DatasetFile
from tersetalk.tasks.registry import get as get_task


class TaskDataError(RuntimeError):
    """A dataset could not be loaded or sampled; the message says how to fix it."""


log = logging.getLogger(__name__)


def dataset_of(task: str) -> DatasetFile:
    """The registered task's dataset; an unknown task is a :class:`TaskDataError`."""
    try:
        return get_task(task).dataset
    except KeyError as exc:
        raise TaskDataError(exc.args[0]) from None


SAMPLE_COLUMNS = ["example_id", "task", "split", "position", "row", "question", "gold", "record"]


def _truthy_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _checked_file(spec: DatasetFile, data_dir: str | Path) -> Path:
    """The shipped file, after its SHA-256 matched."""
    path = Path(data_dir) / spec.relpath
    if not path.exists():
        where = (
            "the task's module ships it beside itself"
            if Path(spec.relpath).is_absolute()
            else "run from the repository root or set data.dir; the file is shipped with the "
            f"repository (see data/{Path(spec.relpath).parts[0]}/README.md)"
        )
        raise TaskDataError(f"{path} is missing: {where}")
    digest = file_sha256(path)
    if digest != spec.sha256:
        fix = (
            "if you changed it on purpose, put its new SHA-256 (sha256sum "
            f"{path}) in the task's DatasetFile; else restore it"
            if Path(spec.relpath).is_absolute()  # a plug-in's own file, beside its module
            else f"restore the file from git (git checkout -- {path})"
        )
        raise TaskDataError(
            f"checksum mismatch for {path}: got {digest}, expected {spec.sha256}; {fix}"
        )
    return path


def _read_dataset(task: str, spec: DatasetFile, source: str, data_dir: str | Path) -> list[dict]:
    """A file-backed task's records through ``datasets``: the shipped file or the hub."""
    import datasets

    datasets.disable_progress_bars()
    if source == "local" or spec.hub_path is None:
        if source != "local":
            log.info("%s has no hub copy; its examples come from the shipped %s", task,
                     spec.relpath)  # fmt: skip
        path = _checked_file(spec, data_dir)
        return datasets.load_dataset("json", data_files=str(path), split="train").to_list()
    try:
        ds = datasets.load_dataset(spec.hub_path, spec.hub_name, split=spec.hub_split)
    except Exception as exc:  # network errors come in many types
        offline = [v for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if _truthy_env(v)]
        hint = f" ({' and '.join(offline)} set: unset to reach the hub)" if offline else ""
        raise TaskDataError(
            f"could not load {spec.hub_path} ({spec.hub_name}/{spec.hub_split}) from the "
            f"Hugging Face hub: {type(exc).__name__}: {exc}. Check the network{hint} or "
            "set data.source: local to use the shipped files"
        ) from exc
    rows = ds.to_list()
    return [spec.from_hub(r) for r in rows] if spec.from_hub is not None else rows


def load_records(
    task: str,
    source: str = "local",
    data_dir: str | Path = "data",
    options: dict | None = None,
) -> list[dict]:
    """Return every record of a task's evaluation split, in file order.

    ``options``: the task's config section; only the keys its ``DatasetFile.options``
    names are used (the rest, e.g. hotpotqa's ``facts``, shape briefs, not examples).
    """
    spec = dataset_of(task)
    if source not in ("local", "hub"):
        raise TaskDataError(f"data.source must be 'local' or 'hub', got {source!r}")
    if spec.build is not None:
        if source == "hub":
            log.info("%s has no hub copy; its examples come from the shipped %s", task,
                     spec.relpath)  # fmt: skip
        used = {k: v for k, v in (options or {}).items() if k in spec.options}
        records = spec.build(_checked_file(spec, data_dir), **used)
        if not records:
            raise TaskDataError(
                f"no {task} examples with options {used}: loosen them (config key '{task}')"
            )
    else:
        records = _read_dataset(task, spec, source, data_dir)
    if spec.to_record is not None:
        try:
            records = [spec.to_record(rec, i) for i, rec in enumerate(records)]
        except (KeyError, TypeError, ValueError) as exc:
            raise TaskDataError(
                f"a {task} line ({source}) does not have the layout data/"
                f"{Path(spec.relpath).parts[0]}/README.md describes: {type(exc).__name__}: "
                f"{exc}"
            ) from exc
    if not records:
        raise TaskDataError(f"the {task} dataset is empty ({source})")
    for i, rec in enumerate(records):
        if not rec.get("question") or rec.get("answer") is None:
            raise TaskDataError(f"{task} record {i} has no question or answer: {rec!r:.200}")
    return records


def _example_id(spec: DatasetFile, row: int, rec: dict) -> str:
    return spec.example_id(row, rec) if spec.example_id is not None else str(rec["id"])


def _gold(spec: DatasetFile, rec: dict) -> str:
    return spec.gold(rec) if spec.gold is not None else str(rec["answer"])


def _options_hint(task: str) -> str:
    """How else to get more examples of a task whose options decide which exist."""
    return f" (or loosen config key '{task}')" if dataset_of(task).options else ""


def sample(
    task: str, records: list[dict], n: int, calibration_n: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seeded, disjoint evaluation and calibration samples.

    One permutation of all rows; the evaluation sample is its first ``n`` rows and
    the calibration shard its last ``calibration_n`` rows. A larger ``n`` extends
    the same sample, and changing ``calibration_n`` never moves the evaluation one.
    """
    spec = dataset_of(task)
    total = len(records)
    if n < 1:
        raise TaskDataError("n must be at least 1")
    if calibration_n < 0:  # a negative count would slice the permutation from its end
        raise TaskDataError(f"calibration_n must be 0 or more, got {calibration_n}")
    if n + calibration_n > total:
        raise TaskDataError(
            f"{task} has {total} examples but n={n} + calibration_n={calibration_n} were "
            f"requested; lower n or calibration_n{_options_hint(task)}"
        )
    perm = np.random.default_rng(seed).permutation(total)
    parts = {
        "eval": perm[:n],
        "calibration": perm[total - calibration_n :] if calibration_n else perm[:0],
    }
    frames = {}
    for split, rows in parts.items():
        frames[split] = pd.DataFrame(
            [
                {
                    "example_id": _example_id(spec, int(r), records[r]),
                    "task": task,
                    "split": split,
                    "position": pos,
                    "row": int(r),
                    "question": records[r]["question"],
                    "gold": _gold(spec, records[r]),
                    "record": json.dumps(records[r], ensure_ascii=False, sort_keys=True),
                }
                for pos, r in enumerate(rows)
            ],
            columns=SAMPLE_COLUMNS,
        )
    return frames["eval"], frames["calibration"]


def read_sample(path: str | Path, task: str | None = None) -> list[dict]:
    """Rows of a sample Parquet file, each with its original record decoded.

    With ``task``, every row must belong to it: a run of one task over another task's
    sample would score every answer with the wrong scorer and label the rows with the
    wrong task, and still finish. Example ids must be unique in any case:
    checkpoints, resumption and per-example metrics are keyed on them, so a repeated id
    would silently merge two examples.
    """
    from tersetalk.core.io import InputFileError, read_parquet

    try:
        df = read_parquet(path, "sample")
    except InputFileError as exc:
        raise TaskDataError(f"{exc} (`tersetalk sample` writes it)") from exc
    if df.empty:
        raise TaskDataError(f"sample file {path} has no rows; rerun `tersetalk sample`")
    missing = set(SAMPLE_COLUMNS) - set(df.columns)
    if missing:
        raise TaskDataError(f"sample file {path} lacks columns {sorted(missing)}")
    if task is not None:
        tasks = sorted(set(df["task"].astype(str)))
        if tasks != [task]:
            held = " and ".join(tasks)
            raise TaskDataError(
                f"sample file {path} holds {held} examples, not {task}: give the sample of "
                f"{task} (`tersetalk sample --task {task}` writes it), or --task {held}"
                if len(tasks) == 1
                else f"sample file {path} mixes tasks {held}; `tersetalk sample` writes one "
                f"task per file: rerun it for {task}"
            )
    repeated = df["example_id"][df["example_id"].duplicated()]
    if not repeated.empty:
        first = repeated.iloc[0]
        rows_of = [int(i) for i in df.index[df["example_id"] == first]]
        raise TaskDataError(
            f"sample file {path} repeats example id {first!r} (rows {rows_of}"
            f"{f'; {repeated.nunique()} ids repeat in all' if repeated.nunique() > 1 else ''}); "
            "runs, checkpoints and metrics are keyed on the id: rerun `tersetalk sample`, "
            "or give each example its own id"
        )
    rows = df.to_dict("records")
    for i, row in enumerate(rows):
        try:
            row["record"] = json.loads(row["record"])
        except (TypeError, ValueError) as exc:
            raise TaskDataError(
                f"sample file {path}, row {i} (example {row.get('example_id')!r}): its 'record' "
                f"column is not JSON ({exc}); the file was not written by `tersetalk sample` or "
                "was altered: delete it and rerun `tersetalk sample`"
            ) from exc
        if not isinstance(row["record"], dict):
            raise TaskDataError(
                f"sample file {path}, row {i} (example {row.get('example_id')!r}): its 'record' "
                "column holds JSON that is not an object; rerun `tersetalk sample`"
            )
    return rows
