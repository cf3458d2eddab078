"""Loading HotpotQA and GSM8K through the ``datasets`` library, and seeded sampling.

The shipped files in ``data/`` are the default: their SHA-256 is checked before
they are read, so a corrupted or swapped file stops the run instead of quietly
changing the numbers. ``source: hub`` loads the Hugging Face hub datasets instead
and maps them to the same record layout.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


class TaskDataError(RuntimeError):
    """A dataset could not be loaded or sampled; the message says how to fix it."""


@dataclass(frozen=True)
class DatasetFile:
    task: str
    relpath: str
    sha256: str
    hub_path: str
    hub_name: str | None
    hub_split: str


DATASETS: dict[str, DatasetFile] = {
    "hotpotqa": DatasetFile(
        "hotpotqa",
        "hotpotqa/hotpot_dev_distractor.jsonl.gz",
        "9c21599828600d90bade97561777f43df6b920af509c7227e58e67956c342a95",
        "hotpotqa/hotpot_qa",
        "distractor",
        "validation",
    ),
    "gsm8k": DatasetFile(
        "gsm8k",
        "gsm8k/test.jsonl.gz",
        "1affc2f095eb08c525d0504bce7f620740776bcd7d67a12c71901700cb7ab73a",
        "openai/gsm8k",
        "main",
        "test",
    ),
}

SAMPLE_COLUMNS = ["example_id", "task", "split", "position", "row", "question", "gold", "record"]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _hub_to_local(task: str, rec: dict) -> dict:
    """Map a hub record to the shipped layout (lists, as in the original files)."""
    if task == "hotpotqa":
        sf = rec["supporting_facts"]
        ctx = rec["context"]
        return {
            "id": rec["id"],
            "question": rec["question"],
            "answer": rec["answer"],
            "type": rec.get("type"),
            "level": rec.get("level"),
            "supporting_facts": [list(p) for p in zip(sf["title"], sf["sent_id"], strict=True)],
            "context": [list(p) for p in zip(ctx["title"], ctx["sentences"], strict=True)],
        }
    return {"question": rec["question"], "answer": rec["answer"]}


def _truthy_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def load_records(task: str, source: str = "local", data_dir: str | Path = "data") -> list[dict]:
    """Return every record of a task's evaluation split, in file order."""
    if task not in DATASETS:
        raise TaskDataError(f"unknown task {task!r}; known tasks: {sorted(DATASETS)}")
    spec = DATASETS[task]
    import datasets

    datasets.disable_progress_bars()
    if source == "local":
        path = Path(data_dir) / spec.relpath
        if not path.exists():
            raise TaskDataError(
                f"{path} is missing: run from the repository root or set data.dir; the "
                f"file is shipped with the repository (see data/{task}/README.md)"
            )
        digest = sha256_file(path)
        if digest != spec.sha256:
            raise TaskDataError(
                f"checksum mismatch for {path}: got {digest}, expected {spec.sha256}. "
                f"Restore the file from git (git checkout -- {path})"
            )
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
        records = ds.to_list()
    elif source == "hub":
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
        records = [_hub_to_local(task, r) for r in ds.to_list()]
    else:
        raise TaskDataError(f"data.source must be 'local' or 'hub', got {source!r}")
    if not records:
        raise TaskDataError(f"the {task} dataset is empty ({source})")
    for i, rec in enumerate(records):
        if not rec.get("question") or rec.get("answer") is None:
            raise TaskDataError(f"{task} record {i} has no question or answer: {rec!r:.200}")
    return records


def _example_id(task: str, row: int, rec: dict) -> str:
    if task == "hotpotqa":
        return str(rec["id"])
    return f"gsm8k-test-{row:04d}"


def _gold(task: str, rec: dict) -> str:
    if task == "gsm8k":
        from tersetalk.tasks.scoring import gsm8k_gold

        return gsm8k_gold(rec["answer"])
    return str(rec["answer"])


def sample(
    task: str, records: list[dict], n: int, calibration_n: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seeded, disjoint evaluation and calibration samples.

    One permutation of all rows; the evaluation sample is its first ``n`` rows and
    the calibration shard its last ``calibration_n`` rows. A larger ``n`` extends
    the same sample, and changing ``calibration_n`` never moves the evaluation one.
    """
    total = len(records)
    if n < 1:
        raise TaskDataError("n must be at least 1")
    if n + calibration_n > total:
        raise TaskDataError(
            f"{task} has {total} examples but n={n} + calibration_n={calibration_n} were "
            "requested; lower n or calibration_n"
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
                    "example_id": _example_id(task, int(r), records[r]),
                    "task": task,
                    "split": split,
                    "position": pos,
                    "row": int(r),
                    "question": records[r]["question"],
                    "gold": _gold(task, records[r]),
                    "record": json.dumps(records[r], ensure_ascii=False, sort_keys=True),
                }
                for pos, r in enumerate(rows)
            ],
            columns=SAMPLE_COLUMNS,
        )
    return frames["eval"], frames["calibration"]


def read_sample(path: str | Path) -> list[dict]:
    """Rows of a sample Parquet file, each with its original record decoded."""
    from tersetalk.io import InputFileError, read_parquet

    try:
        df = read_parquet(path, "sample")
    except InputFileError as exc:
        raise TaskDataError(f"{exc} (`tersetalk sample` writes it)") from exc
    if df.empty:
        raise TaskDataError(f"sample file {path} has no rows; rerun `tersetalk sample`")
    missing = set(SAMPLE_COLUMNS) - set(df.columns)
    if missing:
        raise TaskDataError(f"sample file {path} lacks columns {sorted(missing)}")
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
