"""``tersetalk compare-runs``: two results folders compared in their deterministic columns."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from tersetalk.pipeline.compare import compare_folders


def _run_frame(answer: str = "Paris", seconds: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame({
        "example_id": ["a", "b"],
        "prediction": [answer, "4"],
        "tokens_total_o200k": [120, 80],
        "messages": [[{"turn": 0, "content": "q"}], [{"turn": 0, "content": "r"}]],
        "t_example_s": [seconds, seconds * 2],  # a timing: never compared
        "cache_hits": [0, int(seconds)],
    })  # fmt: skip


def _write(root, rel: str, df: pd.DataFrame) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(path)


@pytest.fixture
def folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "runs/gsm8k/freeform/default.parquet", _run_frame())
    _write(b, "runs/gsm8k/freeform/default.parquet", _run_frame(seconds=7.5))
    return a, b


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tersetalk", "compare-runs", *map(str, args)],
                          capture_output=True, text=True)  # fmt: skip


def test_timings_differ_and_the_runs_are_the_same(folders):
    (found,) = compare_folders(*folders)
    assert found.status == "same"
    res = _cli(*folders)
    assert res.returncode == 0 and "same" in res.stdout
    assert "1 of 1 files the same" in res.stderr


def test_a_changed_answer_a_missing_file_and_a_damaged_one_are_each_named(folders):
    a, b = folders
    _write(b, "runs/gsm8k/freeform/default.parquet", _run_frame(answer="Lyon"))
    _write(a, "runs/gsm8k/tersetalk/default.parquet", _run_frame())
    _write(b, "runs/hotpotqa/freeform/default.parquet", _run_frame())
    (a / "runs/hotpotqa/freeform").mkdir(parents=True)
    (a / "runs/hotpotqa/freeform/default.parquet").write_bytes(b"not parquet")
    verdicts = {f.path: f for f in compare_folders(a, b)}
    changed = verdicts["runs/gsm8k/freeform/default.parquet"]
    assert changed.status == "differs" and changed.columns == {"prediction": 1}
    assert verdicts["runs/gsm8k/tersetalk/default.parquet"].status == "only in A"
    assert verdicts["runs/hotpotqa/freeform/default.parquet"].status == "unreadable"
    res = _cli(a, b, "--json")
    assert res.returncode == 1
    statuses = {d["path"]: d["status"] for d in json.loads(res.stdout)}
    assert sorted(statuses.values()) == ["differs", "only in A", "unreadable"]


def test_a_column_in_one_file_only_or_another_row_count_differs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "runs/t/s/v.parquet", _run_frame())
    _write(b, "runs/t/s/v.parquet", _run_frame().assign(extra=1))
    (found,) = compare_folders(a, b)
    assert found.status == "differs" and found.missing_columns == ["extra"]
    _write(b, "runs/t/s/v.parquet", _run_frame().iloc[:1])
    (found,) = compare_folders(a, b)
    assert found.status == "differs" and found.rows == (2, 1)
    assert "2 rows vs 1" in found.line()


def test_no_folder_or_no_file_is_a_clear_error(tmp_path):
    res = _cli(tmp_path / "nowhere", tmp_path)
    assert res.returncode != 0 and "no such results folder" in res.stderr
    res = _cli(tmp_path, tmp_path)
    assert res.returncode != 0 and "no file matches" in res.stderr


def test_the_same_values_in_another_dtype_are_told_apart_from_other_values(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "runs/t/s/v.parquet", _run_frame())
    nullable = _run_frame().astype({"tokens_total_o200k": "Int64"})
    _write(b, "runs/t/s/v.parquet", nullable)
    (found,) = compare_folders(a, b)
    assert found.status == "differs" and not found.columns
    assert found.dtypes == {"tokens_total_o200k": "int64 vs Int64"}
    assert "tokens_total_o200k (dtype int64 vs Int64, the same values)" in found.line()
