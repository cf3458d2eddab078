"""`tersetalk bench`: corpus -> mb1/mb2/mb3 (+ mb4) -> figure, end to end on a tiny corpus.

The benchmarks run with one repeat and tiny batches: these tests check the
tables' shape, the asserted equivalences and the figure, never a timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tersetalk.bench.codecs import CODECS
from tersetalk.bench.extract import METHODS
from tersetalk.bench.mb2 import FRAMERS
from tersetalk.bench.timing import measure
from tersetalk.cli import main

FAST = ["--repeats", "1", "--warmup", "0", "--min-batch-ms", "0.01"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    run = d / "run.parquet"
    msgs = [
        {"sender": "M", "receiver": "W", "kind": "brief",
         "content": "Goal: Solve it.\nFacts:\n- Dr. Lee has 3.5 kg.\nQuestion: How much?"},
        {"sender": "C", "receiver": "W", "kind": "verdict", "content": '["r","C"]\n["v","R"]'},
    ]  # fmt: skip
    pd.DataFrame([{"task": "gsm8k", "system": "freeform", "variant": "default",
                   "example_id": "e1", "messages": json.dumps(msgs)}]).to_parquet(run)  # fmt: skip
    corpus = d / "corpus.parquet"
    assert main(["bench", "corpus", "--runs", str(run), "--sizes", "1,8", "--per-size", "4",
                 "--out", str(corpus)]) == 0  # fmt: skip
    out = {"corpus": corpus}
    for which in ("mb1", "mb2", "mb3"):
        out[which] = d / f"{which}.parquet"
        extra = ["--chunk-sizes", "1,16", "--stream-bytes", "1024"] if which == "mb2" else []
        argv = ["bench", "run", "--which", which, "--corpus", str(corpus), "--out",
                str(out[which]), *FAST, *extra]  # fmt: skip
        assert main(argv) == 0
    out["mb4"] = d / "mb4.parquet"  # the M# store: no corpus
    assert main(["bench", "run", "--which", "mb4", "--memory-sizes", "50,200", "--out",
                 str(out["mb4"]), *FAST]) == 0  # fmt: skip
    out["stem"] = d / "fig" / "bench"
    assert main(["bench", "plot", "--mb1", str(out["mb1"]), "--mb2", str(out["mb2"]),
                 "--mb3", str(out["mb3"]), "--mb4", str(out["mb4"]),
                 "--out-stem", str(out["stem"])]) == 0  # fmt: skip
    return out


def test_corpus_holds_real_and_synthetic_messages(outputs):
    df = pd.read_parquet(outputs["corpus"])
    assert (df["group"] == "real").sum() == 2
    assert set(df["group"]) == {"real", "synthetic-001", "synthetic-008"}
    meta = json.loads(pq.read_schema(outputs["corpus"]).metadata[b"tersetalk"])
    assert meta["real"]["kept"] == 2 and meta["runs"]
    assert meta["n_real"] == 2 and meta["synthetic_only"] is False


def test_every_table_says_whether_its_rows_are_real_or_synthetic(outputs):
    corpus = pd.read_parquet(outputs["corpus"])
    assert set(corpus["source"]) == {"real", "synthetic"}
    assert ((corpus["source"] == "real") == (corpus["group"] == "real")).all()
    for which in ("mb1", "mb3"):
        df = pd.read_parquet(outputs[which])
        assert ((df["source"] == "real") == (df["group"] == "real")).all(), which
        assert set(df["source"]) == {"real", "synthetic"}, which
    mb2 = pd.read_parquet(outputs["mb2"])
    # one stream of both kinds of message (its real ones counted)
    assert (mb2["n_real_messages"] > 0).all() and (mb2["n_real_messages"] < mb2["n_messages"]).all()
    assert (mb2["source"] == "real+synthetic").all()


def test_a_corpus_without_real_messages_is_warned_about_and_labelled(tmp_path, caplog):
    corpus = tmp_path / "corpus.parquet"
    with caplog.at_level("WARNING", logger="tersetalk.bench"):
        assert main(["bench", "corpus", "--sizes", "1", "--per-size", "3",
                     "--out", str(corpus)]) == 0  # fmt: skip
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert any("NO real workflow messages" in r.getMessage() for r in warned)
    assert (pd.read_parquet(corpus)["source"] == "synthetic").all()
    caplog.clear()
    for which in ("mb1", "mb2", "mb3"):
        out = tmp_path / f"{which}.parquet"
        extra = ["--chunk-sizes", "16", "--stream-bytes", "1024"] if which == "mb2" else []
        with caplog.at_level("WARNING", logger="tersetalk.bench"):
            assert main(["bench", "run", "--which", which, "--corpus", str(corpus), "--out",
                         str(out), *FAST, *extra]) == 0  # fmt: skip
        assert (pd.read_parquet(out)["source"] == "synthetic").all(), which
        assert "NO real workflow messages" in caplog.text, which
        caplog.clear()


def test_mb1_table(outputs):
    df = pd.read_parquet(outputs["mb1"])
    assert set(df["method"]) == set(METHODS)
    assert set(df["group"]) == {"real", "synthetic-001", "synthetic-008"}
    assert df["fields_equal"].all()
    base = df[df["is_baseline"]]
    assert (base["method"] == "regex_freeform").all() and (base["speedup_vs_baseline"] == 1).all()
    jsonl = df[df["family"] == "jsonl"]
    assert (jsonl["seed_target"] == 10).all()
    assert (jsonl["meets_seed_target"] == (jsonl["speedup_vs_baseline"] >= 10)).all()
    assert jsonl["seed_target_verdict"].str.contains("design's 10x").all()
    assert (df["speedup_lo"] <= df["speedup_vs_baseline"] + 1e-9).all()
    assert (df["speedup_vs_baseline"] <= df["speedup_hi"] + 1e-9).all()
    for col in ("env_cpu", "env_python", "env_orjson", "env_msgpack", "env_protobuf", "median_ns"):
        assert df[col].notna().all(), col


def test_mb2_table(outputs):
    df = pd.read_parquet(outputs["mb2"])
    assert set(df["method"]) == set(FRAMERS) and set(df["chunk_size"]) == {1, 16}
    assert df["same_units_any_chunking"].all()
    newline = df[df["family"] == "newline"]
    assert (newline["seed_target"] == 5).all()
    assert (newline["meets_seed_target"] == (newline["speedup_vs_baseline"] >= 5)).all()
    framer = df[df["method"] == "newline_framer"]
    assert (framer["bytes"] >= 1024).all()


@pytest.mark.parametrize(
    ("which", "limit", "held"),
    [
        ("mb1", "jsonl_orjson_whole", {"jsonl_pydantic", "jsonl_strict_arrays"}),
        ("mb2", "newline_framer_orjson", {"stream_reader_strict", "stream_reader_strict_arrays"}),
    ],
)
def test_tables_report_the_ratio_to_the_limit(outputs, which, limit, held):
    df = pd.read_parquet(outputs[which])
    assert (df["limit"] == limit).all()
    assert (df.loc[df["method"] == limit, "ratio_vs_limit"] == 1).all()
    assert (df["ratio_vs_limit_lo"] <= df["ratio_vs_limit"] + 1e-9).all()
    assert (df["ratio_vs_limit"] <= df["ratio_vs_limit_hi"] + 1e-9).all()
    targeted = df[df["limit_target"].notna()]
    assert set(targeted["method"]) == held and (targeted["limit_target"] == 0.5).all()
    assert (targeted["meets_limit_target"] == (targeted["ratio_vs_limit"] >= 0.5)).all()
    csv = pd.read_csv(Path(outputs[which]).with_suffix(".csv"))
    assert list(csv.columns) == list(df.columns) and len(csv) == len(df)
    if which == "mb1":
        prose = df[df["method"] == "regex_prose"]
        assert (prose["speedup_vs_prose"] == 1).all()


def test_mb3_table(outputs):
    df = pd.read_parquet(outputs["mb3"])
    assert set(df["codec"]) == set(CODECS) and set(df["operation"]) == {"encode", "decode"}
    assert df["round_trip_equal"].all()
    base = df[df["codec"] == "freeform_text"]
    assert (base["bytes_vs_baseline"] == 1).all() and (base["speedup_vs_baseline"] == 1).all()
    assert (df["bytes"] > 0).all()


def test_figure_written(outputs):
    for ext in ("png", "pdf"):
        assert outputs["stem"].with_suffix(f".{ext}").stat().st_size > 10_000


def test_missing_run_file_is_a_clear_error(tmp_path, capsys):
    code = main(["bench", "corpus", "--runs", str(tmp_path / "nope.parquet"),
                 "--out", str(tmp_path / "c.parquet")])  # fmt: skip
    assert code == 2 and "nope.parquet" in capsys.readouterr().err


def test_present_runs_are_read_where_they_exist_and_the_rest_are_left_out(outputs, tmp_path):
    # the workflow names every run of its config; those not written yet are no error
    run = outputs["corpus"].parent / "run.parquet"
    corpus = tmp_path / "c.parquet"
    assert main(["bench", "corpus", "--present-runs", str(tmp_path / "not_yet.parquet"), str(run),
                 "--sizes", "1", "--per-size", "2", "--out", str(corpus)]) == 0  # fmt: skip
    meta = json.loads(pq.read_schema(corpus).metadata[b"tersetalk"])
    assert meta["runs"] == [str(run)] and meta["n_real"] == 2


def test_a_present_run_that_is_not_parquet_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "run.parquet"
    bad.write_bytes(b"PAR1 cut short by a crash")
    code = main(["bench", "corpus", "--present-runs", str(bad), "--sizes", "1", "--per-size", "1",
                 "--out", str(tmp_path / "c.parquet")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "not a readable Parquet file" in err and str(bad) in err
    assert not (tmp_path / "c.parquet").exists()


def test_measure_interleaves_and_counts_repeats():
    calls = []
    timings = measure({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                      repeats=3, warmup=1, min_batch_ns=1)  # fmt: skip
    assert {t.inner for t in timings.values()} == {1}
    assert all(len(t.samples_ns) == 3 and len(t.cpu_samples_ns) == 3 for t in timings.values())
    assert calls.count("a") == calls.count("b")
