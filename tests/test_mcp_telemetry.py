"""The proxy's local telemetry (tersetalk.mcp.telemetry).

Events without payload text, deterministic sampling, buffered writes, the session
roll-up, per-endpoint fingerprints with known answers, the window, malformed lines, the
TERSETALK_TELEMETRY switch, the tuner reading what the telemetry wrote, and the proxy
writing it over stdio in front of tests/mcp_fixture_server.py.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import anyio
import pandas as pd
import pytest
import yaml

from tersetalk.cli import main
from tersetalk.mcp import config as C
from tersetalk.mcp import telemetry as T
from tersetalk.mcp.session import SessionPipeline
from tersetalk.mcp.tune import TelemetryKnobs, endpoint_stats, session_stats

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "mcp_fixture_server.py"
SECRET = "ZEBRA-QUOKKA-7731"  # a string no file the telemetry writes may hold
SECRET_KEY = "zq_secret_field_name"


def rows(n: int, start: int = 0) -> list[dict]:
    return [
        {"id": i, "login": f"user-{i}", "url": f"https://example.org/users/{i}",
         "commit": f"{i:04d}abcdef1234567", "team": {"id": i % 2, "name": "core"}}
        for i in range(start, start + n)
    ]  # fmt: skip


def recorder(tmp_path: Path, **kw) -> tuple[T.TelemetryRecorder, SessionPipeline]:
    settings = T.TelemetrySettings(
        tmp_path / "tel",
        kw.pop("sample_rate", 1.0),
        kw.pop("flush_every_n", 25),
        kw.pop("tokenizers", ()),
    )
    return T.TelemetryRecorder(settings, session_id=kw.pop("session_id", "s1"), **kw), (
        SessionPipeline(C.parse({}))
    )


def feed(rec: T.TelemetryRecorder, pipe: SessionPipeline, tool: str, text: str):
    p = pipe.process(tool, {}, text)
    return rec.record(tool, text, p, context_partition=pipe.compactions, downstream_s=0.01)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# --- events -------------------------------------------------------------------------------


def test_events_are_written_with_the_fields_the_tuner_needs(tmp_path):
    rec, pipe = recorder(tmp_path, tokenizers=("cl100k_base",))
    body = json.dumps({"total_count": 99, "items": rows(12)})
    feed(rec, pipe, "search", body)
    feed(rec, pipe, "search", body)  # a repeat: the pipeline's reference hint
    feed(rec, pipe, "plain", "All good. " * 40)
    rec.close()
    ev = lines(rec.events_path)
    assert [e["seq"] for e in ev] == [1, 2, 3]
    first, repeat, plain = ev
    assert first["endpoint_class"] == "search" and first["shape"] == "nested_object"
    assert {"url", "hash"} <= set(first["inner_formats"])
    assert first["kind"] == "encoded" and first["layer"] == "L2" and first["encoders"]
    assert set(first["tokens"]) == {"o200k_base", "cl100k_base"}
    orig, sent = first["tokens"]["o200k_base"]
    assert sent < orig and first["response_chars"] == len(body)
    assert (
        first["depth"] == 4
        and first["content_sha_prefix"] == T.hashlib.sha256(body.encode()).hexdigest()[:32]
    )
    assert repeat["dedup_hit"] and repeat["dup_in_partition"] and repeat["layer"] == "L0"
    assert repeat["repeat_distance"] == 0 and repeat["hints"] == ["ref"]
    assert not first["dup_in_partition"] and first["repeat_distance"] is None
    assert plain["shape"] == "prose" and plain["kind"] == "passthrough"
    assert plain["encoders"] == {} and plain["depth"] is None
    assert set(first["timings"]) == {"pipeline_s", "downstream_s", "describe_s"}


@pytest.mark.parametrize(
    ("text", "shape", "cols"),
    [
        (json.dumps(rows(3)), "array_of_objects", 5),
        (json.dumps({"a": 1, "b": "x"}), "flat_object", None),
        (json.dumps([1, 2, 3]), "array_of_scalars", None),
        ("42", "scalar", None),
        ("[]", "empty", None),
        ("   ", "empty", None),
        (str(rows(2)), "array_of_objects", 5),  # a Python literal, as mcp-server-sqlite prints
        ("| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n", "markdown_table", 3),
        ("1. one\n2. two\n3. three\n", "numbered_list", None),
        ("- one\n- two\n+ three\n", "numbered_list", None),
        ("```py\nx = 1\n```\n", "code", None),
        ("diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n", "code", None),
        ("Just a sentence about things.", "prose", None),
    ],
)
def test_shapes(text, shape, cols):
    d = T.describe(text)
    assert d["shape"] == shape and d["n_cols"] == cols


def test_inner_formats():
    found = T.inner_formats(
        [
            "2026-01-02T10:00:00 ERROR boom at https://ci.example.org/job/7",
            "sha 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "see src/tersetalk/cli.py",
            'Traceback (most recent call last):\n  File "x.py", line 3',
            '{"nested": [1, 2]}',
        ]
    )
    assert found == ["hash", "json", "log", "path", "stack_trace", "timestamp", "url"]
    assert T.inner_formats(["plain words only"]) == []


# --- sampling and flushing -------------------------------------------------------------


def test_sampling_is_a_deterministic_function_of_session_and_sequence():
    picks = [T.sampled("abcd", i, 0.3) for i in range(1, 20_001)]
    assert picks == [T.sampled("abcd", i, 0.3) for i in range(1, 20_001)]
    assert abs(sum(picks) / len(picks) - 0.3) < 0.02  # about 9 standard deviations
    assert picks != [T.sampled("abce", i, 0.3) for i in range(1, 20_001)]
    assert all(T.sampled("x", i, 1.0) for i in range(100))
    assert not any(T.sampled("x", i, 0.0) for i in range(100))


def test_a_sample_rate_keeps_the_same_events_on_a_replay_and_counts_all(tmp_path):
    written = []
    for run in ("a", "b"):
        rec, pipe = recorder(tmp_path / run, sample_rate=0.5, session_id="same")
        for i in range(40):
            feed(rec, pipe, "t", json.dumps(rows(3, i)))
        rec.close()
        written.append([e["seq"] for e in lines(rec.events_path)])
        summary = json.loads(rec.summary_path.read_text())
        assert summary["total_events"] == 40 and summary["sampled_events"] == len(written[-1])
        assert summary["events_sample_rate"] == 0.5 and summary["sample_rate_applied"] == 1.0
    assert written[0] == written[1]
    assert written[0] == [i for i in range(1, 41) if T.sampled(rec.session_hash, i, 0.5)]
    assert 0 < len(written[0]) < 40


def test_rate_zero_writes_no_event_but_the_summary(tmp_path):
    rec, pipe = recorder(tmp_path, sample_rate=0.0)
    for i in range(5):
        feed(rec, pipe, "t", json.dumps(rows(2, i)))
    rec.close()
    assert not rec.events_path.exists()
    assert json.loads(rec.summary_path.read_text())["total_events"] == 5


def test_events_are_flushed_every_n_and_at_close(tmp_path):
    rec, pipe = recorder(tmp_path, flush_every_n=3)
    count = []
    for i in range(7):
        feed(rec, pipe, "t", json.dumps(rows(2, i)))
        count.append(len(lines(rec.events_path)) if rec.events_path.exists() else 0)
    assert count == [0, 0, 3, 3, 3, 6, 6]  # a kill now would lose the 7th: one buffer
    rec.close()
    assert len(lines(rec.events_path)) == 7
    assert rec.close() == rec.summary_path  # closing twice is harmless


def test_a_session_without_results_writes_nothing(tmp_path):
    rec, _ = recorder(tmp_path)
    assert rec.close() is None and not (tmp_path / "tel").exists()


def test_an_unwritable_folder_costs_the_events_not_the_call(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rec = T.TelemetryRecorder(T.TelemetrySettings(blocker / "tel", 1.0, 1), session_id="s")
    pipe = SessionPipeline(C.parse({}))
    feed(rec, pipe, "t", json.dumps(rows(2)))  # no exception
    assert rec.write_errors == 1 and rec.close() is None


# --- the roll-up ----------------------------------------------------------------------------


def test_summary_rolls_up_every_result(tmp_path):
    clock = iter(range(1_000_000, 2_000_000, 500))
    rec, pipe = recorder(tmp_path, clock=lambda: next(clock), server="fixture")
    body = json.dumps(rows(10))
    feed(rec, pipe, "a", body)
    feed(rec, pipe, "a", body)  # dedup hit
    pipe.compaction_boundary()
    feed(rec, pipe, "a", body)  # a new partition: not a dup, not a hit
    feed(rec, pipe, "b", "short")
    rec.note("error")
    rec.note("retrieval")
    path = rec.close()
    s = json.loads(path.read_text())
    assert path.name == f"summary-{rec.session_hash}.json" and len(rec.session_hash) == 16
    assert s["total_events"] == 4 and s["sampled_events"] == 4 and s["written_events"] == 4
    assert s["compaction_count"] == 1 and s["dedup_hits"] == 1 and s["dup_in_partition"] == 1
    assert s["dedup_hit_rate"] == 0.25 and s["errors"] == 1 and s["retrievals"] == 1
    assert s["started_at_ms"] == 1_000_000 and s["ended_at_ms"] > s["started_at_ms"]
    ev = lines(rec.events_path)
    assert s["total_baseline_tokens"] == sum(e["tokens"]["o200k_base"][0] for e in ev)
    assert s["total_final_tokens"] == sum(e["tokens"]["o200k_base"][1] for e in ev)
    assert s["total_final_tokens"] < s["total_baseline_tokens"]
    assert s["endpoint_mix"] == {"a": 3, "b": 1} and s["server"] == "fixture"
    assert s["kinds"]["ref"] == 1
    (stats,) = session_stats([s])  # what the tuner's R3 reads
    assert stats.total_events == 4 and stats.compaction_count == 1


# --- fingerprints on a hand-made folder ----------------------------------------------------

DAY = T.DAY_MS
NOW = 1_800_000_000_000


def event(endpoint: str, chars: int, ts_ms: int, session: str = "s1", **kw) -> dict:
    return {"v": 1, "session_hash": session, "seq": 1, "ts_ms": ts_ms,
            "endpoint_class": endpoint, "shape": kw.pop("shape", "prose"),
            "response_chars": chars, "inner_formats": kw.pop("inner_formats", []),
            "dup_in_partition": kw.pop("dup", False),
            "repeat_distance": kw.pop("distance", None), "n_cols": kw.pop("n_cols", None),
            "n_rows": kw.pop("n_rows", None), "depth": kw.pop("depth", None),
            "sample_rate": kw.pop("sample_rate", 1.0), **kw}  # fmt: skip


def hand_made(folder: Path) -> None:
    """Endpoint a: 10 calls in two sessions, sizes 100..1000; 3 repeats at distances
    0, 2, 5; 6 tables (4 and 6 columns), 4 prose; url in 5, hash and log in 4, path in 1;
    one an hour, the last an hour before NOW.
    Endpoint b: 2 events sampled at 0.5 (4 calls). Endpoint old: 40 days ago."""
    a = []
    for i in range(10):
        table = i < 6
        fmts = (["url"] if i < 5 else []) + (["hash", "log"] if i % 3 == 0 else [])
        fmts += ["path"] if i == 9 else []
        a.append(event("a", 100 * (i + 1), NOW - (10 - i) * 3_600_000, "s1" if i < 5 else "s2",
                       shape="markdown_table" if table else "prose", inner_formats=fmts,
                       dup=i in (2, 5, 8), distance={2: 0, 5: 2, 8: 5}.get(i),
                       n_cols=(4 if i % 2 else 6) if table else None,
                       n_rows=10 if table else None))  # fmt: skip
    b = [event("b", 50, NOW - DAY, "s3", shape="nested_object", depth=d, sample_rate=0.5)
         for d in (2, 4)]  # fmt: skip
    old = [event("old", 10, NOW - 40 * DAY, "s0")]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events-s1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in a[:5]))
    (folder / "events-s2.jsonl").write_text("".join(json.dumps(e) + "\n" for e in a[5:]))
    (folder / "events-s3.jsonl").write_text("".join(json.dumps(e) + "\n" for e in b + old))


def test_fingerprints_have_the_known_answers(tmp_path):
    hand_made(tmp_path)
    fp = {r["endpoint_class"]: r for r in T.endpoint_fingerprints(tmp_path, now_ms=NOW)}
    assert list(fp) == ["a", "b", "old"]
    a = fp["a"]
    assert tuple(a) == T.FINGERPRINT_COLUMNS
    assert a["call_count"] == 10 and a["avg_response_chars"] == 550
    # weighted nearest rank: the smallest size whose share of calls reaches q
    assert (a["response_chars_p25"], a["response_chars_p50"], a["response_chars_p90"]) == (
        300, 500, 900)  # fmt: skip
    assert a["dup_rate"] == pytest.approx(0.3) and a["repeat_burst_p90"] == 5
    assert a["shape_dominant"] == "markdown_table"
    assert json.loads(a["shape_mix"]) == pytest.approx({"markdown_table": 0.6, "prose": 0.4})
    assert a["shape_entropy"] == pytest.approx(-(0.6 * math.log2(0.6) + 0.4 * math.log2(0.4)))
    assert json.loads(a["inner_formats_top3"]) == ["url", "hash", "log"]
    assert a["avg_cols"] == 5 and a["avg_rows"] == 10 and a["nested_object_depth_p95"] is None
    assert a["source_sessions"] == 2
    assert (a["first_seen_ms"], a["last_seen_ms"]) == (NOW - 10 * 3_600_000, NOW - 3_600_000)
    b = fp["b"]
    assert b["call_count"] == 4  # two events sampled at 0.5 stand for four calls
    assert b["nested_object_depth_p95"] == 4 and b["dup_rate"] == 0
    assert b["repeat_burst_p90"] == 0 and b["shape_entropy"] == 0
    assert b["avg_cols"] is None and json.loads(b["inner_formats_top3"]) == []
    stats = endpoint_stats(fp.values())  # they validate as the tuner's input
    assert [s.endpoint_class for s in stats] == ["a", "b", "old"]


def test_the_window_keeps_only_recent_events(tmp_path):
    hand_made(tmp_path)
    names = [r["endpoint_class"] for r in T.endpoint_fingerprints(tmp_path, 30, now_ms=NOW)]
    assert names == ["a", "b"]
    recent = T.endpoint_fingerprints(tmp_path, 0.25, now_ms=NOW)  # the last 6 hours
    assert [(r["endpoint_class"], r["call_count"]) for r in recent] == [("a", 6)]
    with pytest.raises(T.TelemetryError, match="positive number of days"):
        T.endpoint_fingerprints(tmp_path, 0, now_ms=NOW)
    with pytest.raises(T.TelemetryError, match="no such telemetry folder"):
        T.endpoint_fingerprints(tmp_path / "nowhere")


def test_malformed_lines_are_skipped_and_counted(tmp_path, caplog):
    hand_made(tmp_path)
    good = json.dumps(event("a", 100, NOW))
    with (tmp_path / "events-s1.jsonl").open("a") as fh:
        fh.write("not json at all\n")
        fh.write("[1, 2]\n")
        fh.write(json.dumps(event("a", -5, NOW)) + "\n")  # a negative size
        fh.write(json.dumps({**event("a", 5, NOW), "ts_ms": "yesterday"}) + "\n")
        fh.write(json.dumps({**event("a", 5, NOW), "sample_rate": 0}) + "\n")
        fh.write("\n")
        fh.write(good[: len(good) // 2])  # what a kill mid-write leaves
    (tmp_path / "events-bin.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    with caplog.at_level(logging.WARNING, logger="tersetalk.mcp.telemetry"):
        events, skipped = T.read_events(tmp_path)
        fp = {r["endpoint_class"]: r for r in T.endpoint_fingerprints(tmp_path, now_ms=NOW)}
    assert skipped == 7 and len(events) == 13
    assert fp["a"]["call_count"] == 10  # the good lines only
    assert "skipped 6 malformed line(s)" in caplog.text and "events-bin.jsonl" in caplog.text


def test_fingerprints_parquet_round_trip(tmp_path):
    hand_made(tmp_path / "tel")
    out = T.write_fingerprints(tmp_path / "tel", tmp_path / "fp.parquet", now_ms=NOW)
    df = pd.read_parquet(out)
    assert list(df.columns) == list(T.FINGERPRINT_COLUMNS) and len(df) == 3
    assert str(df["call_count"].dtype) == "int64" and str(df["avg_cols"].dtype) == "float64"
    stats = {s.endpoint_class: s for s in endpoint_stats(df.to_dict("records"))}
    assert stats["b"].avg_cols is None and stats["a"].inner_formats_top3 == ("url", "hash", "log")
    empty = tmp_path / "empty"
    empty.mkdir()
    df = pd.read_parquet(T.write_fingerprints(empty, tmp_path / "e.parquet"))
    assert list(df.columns) == list(T.FINGERPRINT_COLUMNS) and df.empty


# --- on and off ---------------------------------------------------------------------------


def test_off_by_default_and_the_environment_switch_wins(tmp_path):
    assert T.resolve_settings(None, environ={})[0] is None
    on, why = T.resolve_settings(tmp_path, environ={})
    assert on is not None and on.folder == tmp_path and "telemetry on" in why
    for value in ("off", "OFF", "0", "false", "no"):
        off, why = T.resolve_settings(tmp_path, environ={"TERSETALK_TELEMETRY": value})
        assert off is None and "TERSETALK_TELEMETRY" in why
    off, why = T.resolve_settings(tmp_path, TelemetryKnobs(), True,
                                  environ={"TERSETALK_TELEMETRY": "of"})  # fmt: skip
    assert off is None and "not understood" in why  # a mistyped kill switch still kills
    assert T.resolve_settings(tmp_path, environ={"TERSETALK_TELEMETRY": "on"})[0] is not None


def test_a_tuned_telemetry_section_turns_it_on_into_the_default_folder(tmp_path):
    knobs = TelemetryKnobs(sample_rate=0.25, flush_every_n=7)
    env = {"XDG_STATE_HOME": str(tmp_path)}
    s, _ = T.resolve_settings(None, knobs, True, environ=env)
    assert s.folder == tmp_path / "tersetalk" / "telemetry"
    assert (s.sample_rate, s.flush_every_n) == (0.25, 7)
    assert T.resolve_settings(None, knobs, False, environ=env)[0] is None


def test_no_payload_text_reaches_any_file(tmp_path):
    rec, pipe = recorder(tmp_path, tokenizers=("cl100k_base",))
    payloads = {
        "json": json.dumps(
            {SECRET_KEY: SECRET, "items": [{"note": SECRET, "n": i} for i in range(30)]}
        ),
        "literal": str([{SECRET_KEY: f"{SECRET} {i}", "i": i} for i in range(20)]),
        "table": "| who | what |\n|---|---|\n"
        + "".join(f"| {SECRET} | {i} |\n" for i in range(20)),
        "text": f"The password is {SECRET}. " * 30,
        "bad": "{" + SECRET + " not json",
    }
    for tool, text in payloads.items():
        p = pipe.process(tool, {"query": SECRET}, text)
        rec.record(tool, text, p, context_partition=0)
        rec.record(tool, text, pipe.process(tool, {}, text), context_partition=0)
    rec.close()
    files = list((tmp_path / "tel").iterdir())
    assert len(files) == 2
    for f in files:
        data = f.read_bytes()
        assert SECRET.encode() not in data and SECRET_KEY.encode() not in data, f
        assert b"password" not in data


# --- the tuner on what the telemetry wrote ---------------------------------------------------


def _two_sessions(tel: Path, pad: int) -> None:
    """Two sessions of 15 rounds: a fresh job_logs body (``pad`` characters of trace
    added), then one of four poll bodies in turn; between two copies of a poll body
    come 3 other poll bodies and 4 job_logs ones."""
    for session in ("one", "two"):
        rec = T.TelemetryRecorder(T.TelemetrySettings(tel, 1.0, 5), session_id=session)
        pipe = SessionPipeline(C.parse({}))
        for i in range(15):
            log_body = json.dumps({"job": {"id": i, "trace": [
                f"[ERROR] step {i} failed at https://ci.example.org/job/{session}{i} "
                f"sha {i:04d}deadbeef{i:04d}" + " ok" * pad]}})  # fmt: skip
            feed(rec, pipe, "job_logs", log_body)
            feed(rec, pipe, "poll", json.dumps({"status": rows(6, 100 * (i % 4))}))
        rec.close()


def test_tune_analyze_reads_a_folder_the_telemetry_wrote(tmp_path, capsys):
    # job_logs bodies of 113 characters: under the cache's 200, so between two copies
    # of a poll body the cache holds only the 3 other poll bodies: the default LRU of 5
    # catches every repeat, and no knob would save a token
    tel = tmp_path / "tel"
    _two_sessions(tel, 0)
    out, evidence = tmp_path / "tuned.yaml", tmp_path / "evidence.csv"
    main(["formats", "tune", "analyze", "--telemetry-dir", str(tel), "--out", str(out),
          "--evidence", str(evidence)])  # fmt: skip
    printed = capsys.readouterr().out
    assert "2 endpoint(s)" in printed and "2 session summaries" in printed
    assert "measured rules on 60 event(s)" in printed and "no change" in printed
    assert yaml.safe_load(out.read_text()) == {"schema_version": 2}
    assert pd.read_csv(evidence).empty
    # the aggregates alone (no replay) follow their thresholds: R1 turns job_logs' dedup
    # off and sizes the LRU from the all-bodies distance (7), R2 names a template
    fp = tmp_path / "fp.parquet"
    main(["formats", "telemetry", "fingerprints", "--dir", str(tel), "--out", str(fp)])
    again = tmp_path / "again.yaml"
    main(["formats", "tune", "analyze", "--fingerprints", str(fp), "--summaries-dir", str(tel),
          "--out", str(again)])  # fmt: skip
    aggregates = yaml.safe_load(again.read_text())
    assert aggregates["dedup"]["enabled_per_endpoint"] == {"job_logs": False}
    assert aggregates["dedup"]["lru_size"] == 8
    assert aggregates["templates"]["endpoint_overrides"] == {"job_logs": "pipeline_deep_mckp"}
    capsys.readouterr()
    main(["formats", "telemetry", "show", "--dir", str(tel)])
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].split()[0] == "session" and len(shown) == 3
    assert all(" 30 " in x for x in shown[1:])


def test_tune_sizes_the_lru_from_the_repeat_distances_the_cache_sees(tmp_path, capsys):
    # job_logs bodies over 200 characters: the cache holds them, a poll repeat comes 7
    # distinct cached bodies after its copy, and the default LRU of 5 misses every one
    tel = tmp_path / "tel"
    _two_sessions(tel, 40)
    out, evidence = tmp_path / "tuned.yaml", tmp_path / "evidence.csv"
    main(["mcp", "tune", "analyze", "--telemetry-dir", str(tel), "--out", str(out),
          "--evidence", str(evidence)])  # fmt: skip
    tuned = yaml.safe_load(out.read_text())
    assert tuned["dedup"] == {"lru_size": 8}  # nothing else saves a token
    assert tuned["tuned"] == {"dedup.lru_size": "R3"}
    ev = pd.read_csv(evidence)
    assert ev["rule"].tolist() == ["R3"] and ev["statistic"].tolist() == ["replayed_saving_q95"]
    assert ev["value"].tolist() == [8.0] and "repeats (22, 22 beyond 5)" in ev["threshold"][0]
    assert ev["tokens_saved"][0] > 0
    capsys.readouterr()
    # the proposal again from its own output: nothing left to change
    main(["mcp", "tune", "analyze", "--telemetry-dir", str(tel), "--adaptive-config",
          str(out), "--out", str(tmp_path / "again.yaml")])  # fmt: skip
    assert "no change" in capsys.readouterr().out


def test_cli_errors_are_clear(tmp_path, capsys):
    for argv in (["fingerprints", "--dir", str(tmp_path / "no"), "--out", str(tmp_path / "f")],
                 ["show", "--dir", str(tmp_path / "no")]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(["formats", "telemetry", *argv])
        assert exc.value.code == 2
        assert "no such telemetry folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["formats", "telemetry", "show", "--dir", str(tmp_path), "--days", "-1"])
    assert "positive number of days" in capsys.readouterr().err


# --- the proxy writes it -------------------------------------------------------------------


def _proxy(extra: list[str], env: dict[str, str], body) -> None:
    import os

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "tersetalk", "mcp-proxy", "--call-timeout", "20", *extra,
            "--", sys.executable, str(FIXTURE)]  # fmt: skip
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH", "TIKTOKEN_CACHE_DIR",
                                       "XDG_CACHE_HOME") if k in os.environ}  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT),
                                   env={**keep, **env})  # fmt: skip

    async def run():
        with anyio.fail_after(300):  # a hang detector, not a speed check
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await body(s)

    anyio.run(run)


def test_the_proxy_writes_telemetry_beside_its_call_log(tmp_path):
    tel, calls = tmp_path / "tel", tmp_path / "calls.jsonl"

    async def body(s):
        await s.list_tools()
        await s.call_tool("search", {"q": SECRET})
        await s.call_tool("read", {"path": "a"})
        await s.call_tool("read", {"path": "a"})
        await s.call_tool("table", {})
        await s.call_tool("plain", {})
        await s.call_tool("fails", {})
        await s.call_tool("tersetalk_get", {"ref": "00000000"})

    _proxy(["--telemetry", str(calls), "--telemetry-dir", str(tel)], {}, body)
    (events_file,) = tel.glob("events-*.jsonl")
    (summary_file,) = tel.glob("summary-*.json")
    ev = lines(events_file)
    assert [e["endpoint_class"] for e in ev] == ["search", "read", "read", "table", "plain"]
    assert [e["shape"] for e in ev] == ["nested_object", "nested_object", "nested_object",
                                        "markdown_table", "prose"]  # fmt: skip
    assert ev[2]["dedup_hit"] and ev[2]["dup_in_partition"] and ev[0]["server"] == "fixture"
    s = json.loads(summary_file.read_text())
    assert s["total_events"] == 5 and s["dedup_hits"] == 1 and s["errors"] == 1
    assert s["retrievals"] == 1 and summary_file.name == f"summary-{s['session_hash']}.json"
    # the per-call log is still written as before, one line per tools/call
    log = lines(calls)
    assert [r["tool"] for r in log] == ["search", "read", "read", "table", "plain", "fails",
                                        "tersetalk_get"]  # fmt: skip
    assert log[2]["kind"] == "ref"
    for f in tel.iterdir():
        assert SECRET.encode() not in f.read_bytes()


def test_the_proxy_telemetry_from_a_tuned_file_and_the_off_switch(tmp_path):
    tuned = tmp_path / "tuned.yaml"
    tuned.write_text("schema_version: 2\ntelemetry: {sample_rate: 1.0, flush_every_n: 1}\n")

    async def body(s):
        await s.call_tool("search", {"q": "x"})

    state = tmp_path / "state"
    _proxy(["--tuned", str(tuned)], {"XDG_STATE_HOME": str(state)}, body)
    folder = state / "tersetalk" / "telemetry"
    assert len(list(folder.glob("events-*.jsonl"))) == 1
    assert len(list(folder.glob("summary-*.json"))) == 1
    off = tmp_path / "off"
    env = {"TERSETALK_TELEMETRY": "off", "XDG_STATE_HOME": str(tmp_path / "s2")}
    _proxy(["--telemetry-dir", str(off), "--tuned", str(tuned)], env, body)
    assert not off.exists() and not (tmp_path / "s2").exists()


def test_the_experiment_writes_telemetry_only_when_asked(tmp_path):
    from tersetalk.mcp.experiment import PASSED_ENV, proxy_command

    plain = proxy_command(tmp_path / "p.yaml", tmp_path / "t.jsonl", ["server"])
    assert "--telemetry-dir" not in plain and plain[-2:] == ["--", "server"]
    on = proxy_command(tmp_path / "p.yaml", tmp_path / "t.jsonl", ["server"], tmp_path / "tel")
    assert on[on.index("--telemetry-dir") + 1] == str(tmp_path / "tel")
    assert on.index("--telemetry-dir") < on.index("--")
    assert "TERSETALK_TELEMETRY" in PASSED_ENV  # the off switch reaches the proxy
