"""The one home of table writing: atomic writes and the metadata run files carry."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tersetalk.core.io import (
    InputFileError,
    exclusive,
    read_metadata,
    read_run_spec,
    run_metadata,
    write_csv_atomic,
    write_parquet_atomic,
    write_text_atomic,
)
from tersetalk.models import ScriptedClient

DF = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})


def test_writers_create_folders_and_leave_no_temporary_file(tmp_path):
    out = tmp_path / "deep" / "er"
    assert write_parquet_atomic(DF, out / "t.parquet", {"k": 1}) == out / "t.parquet"
    assert write_csv_atomic(DF, out / "t.csv") == out / "t.csv"
    assert write_text_atomic("é\n", out / "t.tex") == out / "t.tex"
    assert sorted(p.name for p in out.iterdir()) == ["t.csv", "t.parquet", "t.tex"]
    assert (out / "t.csv").read_bytes() == DF.to_csv(index=False).encode()
    assert (out / "t.tex").read_bytes() == "é\n".encode()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "t.parquet"), DF)


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    from tersetalk.core.io import _atomic

    out = write_text_atomic("old", tmp_path / "t.yaml")

    def half_then_crash(tmp):
        tmp.write_text("half")
        raise KeyboardInterrupt  # a kill mid-write

    with pytest.raises(KeyboardInterrupt):
        _atomic(out, half_then_crash)
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.yaml"]


def test_metadata_round_trip_and_bytes_of_json_native_metadata(tmp_path):
    import pyarrow.parquet as pq

    meta = {"spec": {"task": "gsm8k", "b": [1, 2.5, None]}, "spec_hash": "abc", "n": 3}
    path = write_parquet_atomic(DF, tmp_path / "r.parquet", meta)
    stored = pq.read_schema(path).metadata[b"tersetalk"]
    assert stored == json.dumps(meta, sort_keys=True).encode()  # default=str changes nothing
    assert read_metadata(path) == meta
    assert read_run_spec(path) == meta["spec"]
    assert read_run_spec(path, task="gsm8k") == meta["spec"]
    with pytest.raises(InputFileError, match="is a gsm8k run, not hotpotqa"):
        read_run_spec(path, task="hotpotqa")


def test_metadata_that_is_not_json_native_is_written_as_text(tmp_path):
    path = write_parquet_atomic(DF, tmp_path / "r.parquet", {"n": np.int64(3), "p": tmp_path})
    assert read_metadata(path) == {"n": "3", "p": str(tmp_path)}


def test_read_metadata_errors_name_the_file(tmp_path):
    with pytest.raises(InputFileError, match="does not exist"):
        read_metadata(tmp_path / "missing.parquet", "corpus")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InputFileError, match="bad.parquet is not a readable Parquet"):
        read_metadata(bad)
    plain = tmp_path / "plain.parquet"
    DF.to_parquet(plain)
    assert read_metadata(plain) == {}
    with pytest.raises(InputFileError, match="carries no run spec"):
        read_run_spec(plain)


def test_run_metadata_names_spec_hash_and_model():
    client = ScriptedClient(["x"])
    meta = run_metadata({"task": "t"}, "0123456789ab", client)
    assert meta == {"spec": {"task": "t"}, "spec_hash": "0123456789ab",
                    "model": client.describe()}  # fmt: skip


#: another process trying the lock without waiting: "held" or "free"
_TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as fh:
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def test_exclusive_holds_other_processes_off_for_the_block_only(tmp_path):
    lock = tmp_path / "deep" / "env.lock"

    def other() -> str:
        args = [sys.executable, "-c", _TRY_LOCK, str(lock)]
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()

    with exclusive(lock):
        assert lock.is_file() and other() == "held"
    assert other() == "free"
    with pytest.raises(RuntimeError), exclusive(lock):  # an error in the block frees it too
        raise RuntimeError("build failed")
    assert other() == "free"


def test_a_manifest_lists_its_files_and_tells_a_missing_or_changed_one(tmp_path):
    from tersetalk.core.io import check_manifest, write_manifest

    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    a.write_bytes(b"first")
    b.write_bytes(b"second")
    manifest = tmp_path / "batch.json"
    write_manifest(manifest, [str(a), str(b)], "tersetalk run")
    assert check_manifest(manifest) == [str(a), str(b)]
    b.write_bytes(b"other")  # replaced since the job wrote it
    with pytest.raises(InputFileError, match=r"b\.parquet changed since tersetalk run wrote it"):
        check_manifest(manifest)
    b.unlink()
    with pytest.raises(InputFileError, match=r"b\.parquet is missing .*delete the manifest"):
        check_manifest(manifest)
    manifest.write_text(json.dumps({"files": [{"path": "x" * 5000, "sha256": "0"}]}))
    with pytest.raises(InputFileError, match=r"x+ is missing"):  # a name too long for a file
        check_manifest(manifest)
    manifest.write_text("{not json")
    with pytest.raises(InputFileError, match="manifest .* is unreadable"):
        check_manifest(manifest)
    manifest.write_text("[" * 100_000 + "]" * 100_000)  # nested past the parser's stack
    with pytest.raises(InputFileError, match="manifest .* is unreadable.*nested deeper"):
        check_manifest(manifest)
