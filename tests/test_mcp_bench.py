"""MB-5, the MCP proxy's session pipeline: the table's shape and its checks, never a
wall-clock threshold (timings describe the machine, not the code)."""

from __future__ import annotations

import json

import pytest

from tersetalk.bench import mb5


def test_payloads_are_compact_json_just_past_the_size():
    for kib in (1, 4):
        text = mb5.payload(kib)
        size = len(text.encode())
        assert kib * 1024 <= size < kib * 1024 + 300
        rows = json.loads(text)
        assert len(rows[0]) == 7 and text == json.dumps(rows, separators=(",", ":"))
    assert mb5.payload(4, seed=1) != mb5.payload(4) and mb5.payload(4) == mb5.payload(4)


def test_the_table_has_every_method_with_ratios_to_sha256_and_the_seed_limit():
    df = mb5.run_mb5(sizes_kib=[4], calls=20, repeats=2, warmup=0, min_batch_ns=1)
    assert set(df["method"]) == {"sha256", "dedup_hit", "dedup_miss", "formats_dedup_hit",
                                 "process_ref", "encode", "process_encode"}  # fmt: skip
    sha = df[df["method"] == "sha256"].iloc[0]
    assert sha["ratio_vs_sha256"] == pytest.approx(1.0)
    assert (df["median_ns"] > 0).all() and (df["ns_per_kib"] > 0).all()
    held = df[df["ratio_to_seed_limit"].notna()]
    assert set(held["method"]) == set(mb5.SAMPLED)
    assert (held["seed_limit_ns"] == 9000.0).all() and (held["seed_limit_stat"] == "median").all()
    assert (held["p99_ns"] >= held["p50_ns"]).all()
    assert {"cpu", "python"} & set(df.columns) or "benchmark" in df.columns


def test_a_pipeline_that_misses_a_repeat_voids_the_timing(monkeypatch):
    class Never(mb5.DedupCache):
        def check(self, body, tool="", resources=None):
            return None

    monkeypatch.setattr(mb5, "DedupCache", Never)
    with pytest.raises(mb5.EquivalenceError, match="did not miss then hit"):
        mb5.run_mb5(sizes_kib=[1], calls=10, repeats=1, warmup=0, min_batch_ns=1)
