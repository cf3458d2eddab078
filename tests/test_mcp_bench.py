"""MB-5, the MCP proxy's session pipeline: the table's shape and its checks, never a
wall-clock threshold (timings describe the machine, not the code)."""

from __future__ import annotations

import json
from pathlib import Path

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
                                 "process_ref", "encode", "process_encode", "direct_call",
                                 "proxied_call", "added_call"}  # fmt: skip
    sha = df[df["method"] == "sha256"].iloc[0]
    assert sha["ratio_vs_sha256"] == pytest.approx(1.0)
    assert (df["median_ns"] > 0).all() and (df["ns_per_kib"] > 0).all()
    held = df[df["ratio_to_seed_limit"].notna() & (df["method"] != "added_call")]
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


def test_the_added_latency_per_call_is_measured_up_to_100_kib_beside_the_direct_call():
    import yaml

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    assert max(config["mcp"]["bench"]["payload_kib"]) == 100 and 100 in mb5.DEFAULT_PAYLOAD_KIB
    df = mb5.run_mb5(sizes_kib=[2], calls=40, repeats=1, warmup=0, min_batch_ns=1)
    calls = df[df["method"].isin(["direct_call", "proxied_call", "added_call"])]
    assert (calls["calls_sampled"] == 20).all()  # calls // 20, at least 20
    assert (calls["p99_ns"] >= calls["p95_ns"]).all() and (calls["p95_ns"] >= calls["p50_ns"]).all()
    added = calls.set_index("method").loc["added_call"]
    assert added["seed_limit_stat"] == "p50/p95" and added["seed_limit_ns"] == 20e6
    ratio = max(added["p50_ns"] / 20e6, added["p95_ns"] / 50e6)
    assert added["ratio_to_seed_limit"] == pytest.approx(ratio)
    assert added["meets_seed_limit"] == (ratio <= 1)


def test_a_proxied_call_that_loses_the_payload_voids_the_timing(monkeypatch):
    real = mb5.SessionPipeline.process

    def lossy(self, tool, arguments, text):
        return real(self, tool, arguments, json.dumps(json.loads(text)[:-1]))

    monkeypatch.setattr(mb5.SessionPipeline, "process", lossy)
    with pytest.raises(mb5.EquivalenceError, match="proxied call does not carry"):
        mb5.run_mb5(sizes_kib=[1], calls=10, repeats=1, warmup=0, min_batch_ns=1)
