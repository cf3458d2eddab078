import json
import re
import shutil

import pytest

from tersetalk.tasks.loading import TaskDataError, load_records, read_sample, sample


@pytest.fixture(scope="module")
def gsm8k_records(request):
    repo = request.config.rootpath
    return load_records("gsm8k", data_dir=repo / "data")


def test_shipped_files_load_with_checksum(gsm8k_records, repo):
    assert len(gsm8k_records) == 1319
    hotpot = load_records("hotpotqa", data_dir=repo / "data")
    assert len(hotpot) == 1888
    assert {"id", "question", "answer", "supporting_facts", "context"} <= set(hotpot[0])


def test_checksum_mismatch_is_a_clear_error(tmp_path, repo):
    (tmp_path / "gsm8k").mkdir()
    bad = tmp_path / "gsm8k" / "test.jsonl.gz"
    shutil.copy(repo / "data" / "gsm8k" / "test.jsonl.gz", bad)
    with open(bad, "ab") as fh:
        fh.write(b"x")
    with pytest.raises(TaskDataError, match="checksum mismatch"):
        load_records("gsm8k", data_dir=tmp_path)
    with pytest.raises(TaskDataError, match="missing"):
        load_records("hotpotqa", data_dir=tmp_path)


def test_sampling_is_seeded_disjoint_and_prefix_stable(gsm8k_records):
    ev, cal = sample("gsm8k", gsm8k_records, n=10, calibration_n=20, seed=7)
    ev2, cal2 = sample("gsm8k", gsm8k_records, n=10, calibration_n=20, seed=7)
    assert ev.equals(ev2) and cal.equals(cal2)
    assert not set(ev["example_id"]) & set(cal["example_id"])
    bigger, _ = sample("gsm8k", gsm8k_records, n=15, calibration_n=5, seed=7)
    assert list(bigger["example_id"][:10]) == list(ev["example_id"])
    other, _ = sample("gsm8k", gsm8k_records, n=10, calibration_n=20, seed=8)
    assert list(other["example_id"]) != list(ev["example_id"])
    assert ev["gold"].str.fullmatch(r"-?[\d.]+").all()


def test_oversized_sample_and_empty_file(gsm8k_records, tmp_path):
    with pytest.raises(TaskDataError, match="lower n"):
        sample("gsm8k", gsm8k_records, n=1300, calibration_n=50, seed=0)
    ev, _ = sample("gsm8k", gsm8k_records, n=1, calibration_n=0, seed=0)
    path = tmp_path / "empty.parquet"
    ev.iloc[:0].to_parquet(path)
    with pytest.raises(TaskDataError, match="no rows"):
        read_sample(path)


@pytest.mark.parametrize("offline", ["", "1"])
def test_hub_unreachable_is_a_typed_error_that_says_what_to_do(monkeypatch, offline):
    import datasets

    def no_network(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "")
    with pytest.raises(TaskDataError) as info:
        load_records("gsm8k", source="hub")
    msg = str(info.value)
    assert "openai/gsm8k" in msg and "ConnectionError" in msg  # what failed, and why
    assert "data.source: local" in msg and "network" in msg  # how to fix it
    assert ("HF_HUB_OFFLINE" in msg) == bool(offline)
    assert isinstance(info.value.__cause__, ConnectionError)


def test_unknown_source_is_a_typed_error():
    with pytest.raises(TaskDataError, match="'local' or 'hub'"):
        load_records("gsm8k", source="ftp")


@pytest.mark.parametrize(
    ("task", "size", "gold_pattern"),
    [
        ("boolq", 3270, r"yes|no"),
        ("commonsenseqa", 1221, r'\{"label": "[A-E]", "options": .*'),
        ("socialiqa", 1954, r'\{"label": "[A-C]", "options": .*'),
        ("humaneval", 164, r'\{"entry_point": .*'),
    ],
)
def test_tersetalk_sample_works_for_the_topology_tasks(task, size, gold_pattern, repo, tmp_path):
    """`tersetalk sample` from the shipped, checksummed files, as the workflow calls it."""
    from tersetalk.cli import main

    out, cal = tmp_path / f"{task}.parquet", tmp_path / f"{task}.calibration.parquet"
    args = ["--n", "2", "--calibration-n", "1", "--seed", "3", "--data-dir", str(repo / "data")]
    code = main(["sample", "--task", task, *args, "--out", str(out), "--calibration-out", str(cal)])
    assert code == 0
    rows = read_sample(out)
    assert len(rows) == 2 and len(read_sample(cal)) == 1
    assert {r["example_id"] for r in rows}.isdisjoint(r["example_id"] for r in read_sample(cal))
    for row in rows:
        rec = row["record"]
        assert row["task"] == task and row["question"] == rec["question"]
        assert row["gold"] and re.fullmatch(gold_pattern, row["gold"], flags=re.S)
        assert row["example_id"] == str(rec["id"])
        if task in ("commonsenseqa", "socialiqa"):
            assert json.loads(row["gold"])["label"] == rec["answer"]
            assert [o[0] for o in rec["options"]] == list("ABCDE"[: len(rec["options"])])
        if task == "humaneval":
            assert json.loads(row["gold"])["entry_point"] == rec["entry_point"]
            assert "canonical_solution" not in json.loads(row["gold"])  # never in the gold
    assert len(load_records(task, data_dir=repo / "data")) == size


def test_a_topology_task_file_that_was_swapped_is_refused(repo, tmp_path):
    (tmp_path / "boolq").mkdir()
    shutil.copy(repo / "data" / "socialiqa" / "dev.jsonl.gz", tmp_path / "boolq" / "dev.jsonl.gz")
    with pytest.raises(TaskDataError, match="checksum mismatch"):
        load_records("boolq", data_dir=tmp_path)
