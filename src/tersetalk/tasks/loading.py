"""Loading the tasks' examples, and seeded sampling.

HotpotQA and GSM8K are read through the ``datasets`` library. The shipped files in
``data/`` are the default: their SHA-256 is checked before they are read, so a
corrupted or swapped file stops the run instead of quietly changing the numbers.
``source: hub`` loads the Hugging Face hub datasets instead and maps them to the same
record layout.

``toolqa`` has no hub copy: its examples are built from the checksummed tool-response
corpus by :mod:`tersetalk.tasks.toolqa` (``DatasetFile.build``), whatever the source.

BoolQ, CommonsenseQA, Social IQa and HumanEval (the topology study's tasks) are read the
same way and then mapped line by line to the pipeline's record layout
(``DatasetFile.to_record``: :mod:`tersetalk.tasks.boolq`,
:mod:`tersetalk.tasks.multiple_choice`, :mod:`tersetalk.tasks.humaneval`), whose
``gold`` (``DatasetFile.gold``) is what their scorer in :mod:`tersetalk.tasks.registry`
reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import tersetalk.tasks.boolq as _boolq
import tersetalk.tasks.humaneval as _humaneval
import tersetalk.tasks.multiple_choice as _mc


class TaskDataError(RuntimeError):
    """A dataset could not be loaded or sampled; the message says how to fix it."""


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetFile:
    """A task's shipped file (checked by SHA-256) and where the hub keeps it.

    ``build`` turns the checked file into records when they are not the file's own
    lines (toolqa: questions generated from each payload), taking ``options``: the
    task's config keys that decide which examples exist (passed by `tersetalk sample`).
    A dataset without ``hub_path`` is read from the shipped file whatever the source.
    ``to_record(line, row)`` maps a line of the file (or a hub row already in the file's
    layout) to the pipeline's record, and ``gold(record)`` gives the sample's gold string.
    """

    task: str
    relpath: str
    sha256: str
    hub_path: str | None = None
    hub_name: str | None = None
    hub_split: str | None = None
    build: Callable[..., list[dict]] | None = None
    options: tuple[str, ...] = ()
    to_record: Callable[[dict, int], dict] | None = None
    gold: Callable[[dict], str] | None = None


def _build_toolqa(path: Path, **options) -> list[dict]:
    from tersetalk.tasks.toolqa import build_records

    return build_records(path.parent, **options)


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
    "toolqa": DatasetFile(
        "toolqa",
        "toolresponses/json.jsonl",
        "772dc695d8faa9f164656abb014e806eed5753fab03cc9f7e8113d105ae2e973",
        build=_build_toolqa,
        options=("max_payload_tokens", "questions_per_kind"),
    ),
    "boolq": DatasetFile(
        "boolq",
        "boolq/dev.jsonl.gz",
        "6e943fcb79eeaabb77e41b5e2df0ca1e5253666fcb2946d6f97572c5c78ad586",
        "google/boolq",
        None,
        "validation",
        to_record=_boolq.to_record,
    ),
    "commonsenseqa": DatasetFile(
        "commonsenseqa",
        "commonsenseqa/dev_rand_split.jsonl.gz",
        "18467ce05dc2cb17864eeb39a9c835526defc6d010dc19661f89d8d3f1ef828f",
        "tau/commonsense_qa",
        None,
        "validation",
        to_record=_mc.csqa_record,
        gold=_mc.gold_of,
    ),
    "socialiqa": DatasetFile(
        "socialiqa",
        "socialiqa/dev.jsonl.gz",
        "14c86079e1f840f9ebbd86677758e78bf800a3f3226a949b55d88d2e265dc25b",
        "allenai/social_i_qa",
        None,
        "validation",
        to_record=_mc.siqa_record,
        gold=_mc.gold_of,
    ),
    "humaneval": DatasetFile(
        "humaneval",
        "humaneval/HumanEval.jsonl.gz",
        "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        "openai/openai_humaneval",
        None,
        "test",
        to_record=_humaneval.to_record,
        gold=_humaneval.gold_of,
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
    if task == "boolq":  # the hub copy has no title
        return {"question": rec["question"], "title": "", "answer": rec["answer"],
                "passage": rec["passage"]}  # fmt: skip
    if task == "commonsenseqa":
        ch = rec["choices"]
        choices = [{"label": k, "text": t} for k, t in zip(ch["label"], ch["text"], strict=True)]
        return {
            "answerKey": rec["answerKey"],
            "id": rec["id"],
            "question": {
                "question_concept": rec.get("question_concept"),
                "choices": choices,
                "stem": rec["question"],
            },
        }
    if task in ("socialiqa", "humaneval"):  # the hub rows have the file's keys
        return dict(rec)
    return {"question": rec["question"], "answer": rec["answer"]}


def _truthy_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _checked_file(spec: DatasetFile, data_dir: str | Path) -> Path:
    """The shipped file, after its SHA-256 matched."""
    path = Path(data_dir) / spec.relpath
    if not path.exists():
        raise TaskDataError(
            f"{path} is missing: run from the repository root or set data.dir; the "
            f"file is shipped with the repository (see data/{Path(spec.relpath).parts[0]}"
            "/README.md)"
        )
    digest = sha256_file(path)
    if digest != spec.sha256:
        raise TaskDataError(
            f"checksum mismatch for {path}: got {digest}, expected {spec.sha256}. "
            f"Restore the file from git (git checkout -- {path})"
        )
    return path


def _read_dataset(task: str, spec: DatasetFile, source: str, data_dir: str | Path) -> list[dict]:
    """A file-backed task's records through ``datasets``: the shipped file or the hub."""
    import datasets

    datasets.disable_progress_bars()
    if source == "local":
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
    return [_hub_to_local(task, r) for r in ds.to_list()]


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
    if task not in DATASETS:
        raise TaskDataError(f"unknown task {task!r}; known tasks: {sorted(DATASETS)}")
    spec = DATASETS[task]
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


def _example_id(task: str, row: int, rec: dict) -> str:
    if task != "gsm8k":
        return str(rec["id"])
    return f"gsm8k-test-{row:04d}"


def _gold(task: str, rec: dict) -> str:
    if task == "gsm8k":
        from tersetalk.tasks.scoring import gsm8k_gold

        return gsm8k_gold(rec["answer"])
    spec = DATASETS.get(task)
    if spec is not None and spec.gold is not None:
        return spec.gold(rec)
    return str(rec["answer"])


def _options_hint(task: str) -> str:
    """How else to get more examples of a task whose options decide which exist."""
    return (
        f" (or loosen config key '{task}')" if task in DATASETS and DATASETS[task].options else ""
    )


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


def read_sample(path: str | Path, task: str | None = None) -> list[dict]:
    """Rows of a sample Parquet file, each with its original record decoded.

    With ``task``, every row must belong to it: a run of one task over another task's
    sample would score every answer with the wrong scorer and label the rows with the
    wrong task, and still finish (issue 28). Example ids must be unique in any case:
    checkpoints, resumption and per-example metrics are keyed on them, so a repeated id
    would silently merge two examples.
    """
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
