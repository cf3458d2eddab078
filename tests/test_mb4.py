"""MB-4, the M# memory store against plain structures: tables, equivalence, CLI.

Tiny stores, one repeat and tiny batches: these tests check what the table says and
that a store disagreeing with its baseline voids the timing, never a timing itself.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tersetalk.bench import mb4
from tersetalk.bench.mb4 import OPERATIONS, check_equivalent, run_mb4, synthetic_texts
from tersetalk.bench.results import EquivalenceError
from tersetalk.cli import main

FAST = {"repeats": 1, "warmup": 0, "min_batch_ns": 10_000}


@pytest.fixture(scope="module")
def table():
    return run_mb4(sizes=[40, 10], **FAST)


def test_one_row_per_size_operation_and_method(table):
    assert table["benchmark"].eq("MB-4").all()
    assert sorted(table["size"].unique()) == [10, 40]
    for (_size, op), rows in table.groupby(["size", "operation"]):
        assert sorted(rows["method"]) == sorted(["memory", mb4.BASELINES[op][0]])
        assert rows["is_baseline"].sum() == 1
    assert set(table["operation"]) == set(OPERATIONS)
    assert table["equivalent"].all()


def test_ratios_are_what_the_columns_say(table):
    for _, rows in table.groupby(["size", "operation"]):
        base = rows[rows["is_baseline"]].iloc[0]
        for r in rows.itertuples():
            assert r.speedup_vs_baseline == pytest.approx(base.median_ns / r.median_ns)
            assert r.speedup_lo <= r.speedup_vs_baseline <= r.speedup_hi
            assert r.ns_per_op == pytest.approx(r.median_ns / r.size)
        assert base.speedup_vs_baseline == 1.0
    smallest = table[table["size"] == 10]
    assert (smallest["scaling_vs_smallest"] == 1.0).all()
    big = table[table["size"] == 40].set_index(["operation", "method"])
    small = smallest.set_index(["operation", "method"])
    ratio = big["ns_per_op"] / small["ns_per_op"]
    assert (big["scaling_vs_smallest"] - ratio).abs().max() < 1e-9


def test_texts_are_seeded_and_distinct():
    assert synthetic_texts(30, 3) == synthetic_texts(30, 3) != synthetic_texts(30, 4)
    assert len(set(synthetic_texts(500, 0))) == 500


def test_a_store_that_loses_a_text_voids_the_benchmark(monkeypatch):
    texts, more = synthetic_texts(20, 0), synthetic_texts(20, 1)
    check_equivalent(20, texts, more)  # the real store agrees
    real = mb4._fill_memory

    def lossy(texts, capacity):
        m = real(texts, capacity)
        m.put("an extra entry evicts the oldest one")
        return m

    monkeypatch.setattr(mb4, "_fill_memory", lossy)
    with pytest.raises(EquivalenceError, match="after inserting 20"):
        check_equivalent(20, texts, more)


def test_eviction_that_keeps_the_wrong_entries_voids_the_benchmark(monkeypatch):
    texts, more = synthetic_texts(12, 0), synthetic_texts(12, 1)

    class NewestFirst(mb4._FifoBaseline):  # a LIFO baseline keeps different ids
        def put_all(self, texts):
            for t in texts:
                self.od[f"M#{next(self.ids)}"] = t
                if len(self.od) > self.capacity:
                    self.od.popitem(last=True)

    monkeypatch.setattr(mb4, "_FifoBaseline", NewestFirst)
    with pytest.raises(EquivalenceError, match="after evicting"):
        check_equivalent(12, texts, more)


def test_cli_writes_parquet_and_csv_without_a_corpus(tmp_path):
    out = tmp_path / "mb4.parquet"
    argv = ["bench", "run", "--which", "mb4", "--memory-sizes", "10,30", "--repeats", "1",
            "--warmup", "0", "--min-batch-ms", "0.01", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    df = pd.read_parquet(out)
    assert sorted(df["size"].unique()) == [10, 30]
    assert pd.read_csv(out.with_suffix(".csv"))["speedup_vs_baseline"].notna().all()


def test_other_benchmarks_still_need_a_corpus(tmp_path):
    with pytest.raises(SystemExit, match="needs --corpus"):
        main(["bench", "run", "--which", "mb1", "--out", str(tmp_path / "x.parquet")])


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="positive"):
        run_mb4(sizes=[0], **FAST)
