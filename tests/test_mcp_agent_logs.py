"""``tersetalk formats tune from-agent-logs``.

The shipped sample (tests/data/agent_logs/sample-session.jsonl) is made up and written so
that every count below is known by construction: 12 assistant turns (11 by the Sonnet
id, one of them written as two lines that share a message id, and 1 by Haiku) plus one
``<synthetic>`` API error; 10 tool calls, of which 5 are read-class (Read 3, Grep 1,
Glob 1) and 5 go to MCP tools on two servers (tracker/list_issues 2, tracker/get_issue 1,
ci/get_pipeline 2, one of those an error); one compaction (a compact_boundary line and
its summary message); one title line; three lines of types not read; one malformed line.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.cli import main
from tersetalk.mcp import agent_logs as A
from tersetalk.mcp import tune as T

SAMPLE = Path(__file__).parent / "data" / "agent_logs" / "sample-session.jsonl"
SID = "5e551017-0000-4000-8000-00000000a001"
SONNET, HAIKU = "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"


@pytest.fixture(scope="module")
def scan():
    return A.scan_logs([SAMPLE])


# -- logs written by the tests ------------------------------------------------------------------


def write_session(path: Path, sid: str, model: str = "qwen3-coder:30b", *, turns: int = 3,
                  tools: dict[str, int] | None = None, result_chars: int = 300,
                  compactions: int = 0) -> Path:  # fmt: skip
    """A session log in Claude Code's shape: each tool call its own turn and result."""
    rows = [{"type": "user", "sessionId": sid, "message": {"role": "user", "content": "go"}}]
    n = 0
    for m in range(turns):
        rows.append(
            {
                "type": "assistant",
                "sessionId": sid,
                "message": {
                    "id": f"{sid}-m{m}",
                    "model": model,
                    "role": "assistant",
                    "content": [{"type": "text", "text": "ok"}],
                    "usage": {"input_tokens": 10},
                },
            }
        )
    for tool, count in sorted((tools or {}).items()):
        for _ in range(count):
            n += 1
            tid = f"{sid}-t{n}"
            rows.append(
                {
                    "type": "assistant",
                    "sessionId": sid,
                    "message": {
                        "id": f"{sid}-c{n}",
                        "model": model,
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": tid, "name": tool, "input": {}}],
                    },
                }
            )
            rows.append(
                {
                    "type": "user",
                    "sessionId": sid,
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tid,
                                "content": "x" * result_chars,
                            }
                        ],
                    },
                }
            )
    for _ in range(compactions):
        rows.append({"type": "system", "subtype": "compact_boundary", "sessionId": sid})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- parsing ------------------------------------------------------------------------------------


def test_the_sample_is_one_session_with_the_counts_it_was_written_with(scan):
    assert list(scan.sessions) == [SID]
    s = scan.sessions[SID]
    assert scan.lines == 33 and scan.malformed == 1
    assert scan.malformed_at == [f"{SAMPLE}:25"]
    assert scan.skipped == Counter(
        {"file-history-snapshot": 1, "progress": 1, "system/stop_hook_summary": 1}
    )
    assert s.models == Counter({SONNET: 11, HAIKU: 1})
    assert s.assistant_turns == 12 and s.api_errors == 1 and s.user_prompts == 2
    assert s.tool_calls == Counter({"Read": 3, "Grep": 1, "Glob": 1,
                                    "mcp__tracker__list_issues": 2, "mcp__tracker__get_issue": 1,
                                    "mcp__ci__get_pipeline": 2})  # fmt: skip
    assert s.events == 10 and s.read_share == 0.5
    assert s.compact_boundaries == 1 and s.compact_summaries == 1 and s.compactions == 1
    assert s.titles == 1
    assert s.result_errors == 1
    assert s.result_chars["mcp__tracker__list_issues"] == [596, 596]
    assert s.result_chars["mcp__tracker__get_issue"] == [201]
    assert s.result_chars["mcp__ci__get_pipeline"] == [64]
    assert s.result_chars["Read"] == [651, 300, 651]
    # usage counted once per message id: the first Sonnet message is on two lines
    assert s.tokens == Counter(
        {"input": 29_500, "output": 340, "cache_read": 83_500, "cache_creation": 2_000}
    )
    assert s.first_ts == "2025-10-02T09:00:07.000Z" and s.calls_per_turn == 10 / 12


def test_no_text_is_kept(scan):
    """The statistics hold counts, ids of the tools and sizes: no prompt or result text."""
    text = repr(vars(scan.sessions[SID])) + repr(vars(scan))
    for secret in ("widget", "Which open", "click", "timed out", "Summary:"):
        assert secret not in text


def test_mcp_endpoints(scan):
    assert A.mcp_endpoint("mcp__tracker__list_issues") == ("tracker", "list_issues")
    assert A.mcp_endpoint("mcp__a-b__c__d") == ("a-b", "c__d")
    assert A.mcp_endpoint("Read") is None and A.mcp_endpoint("mcp__x") is None
    assert scan.mcp_calls() == Counter(
        {("tracker", "list_issues"): 2, ("tracker", "get_issue"): 1, ("ci", "get_pipeline"): 2}
    )


def test_malformed_and_foreign_lines_are_counted_never_fatal(tmp_path):
    log = tmp_path / "s.jsonl"
    good = {
        "type": "assistant",
        "sessionId": "s1",
        "message": {"id": "m1", "model": "m", "content": "not a list", "usage": "bad"},
    }
    log.write_bytes(b"\n".join([
        b"{not json", b"[1, 2]", b'"a string"', b"\xff\xfe", json.dumps(good).encode(),
        json.dumps({"type": "user", "sessionId": "s1", "message": None}).encode(),
        json.dumps({"type": "weird-new-type", "sessionId": "s1"}).encode(),
        json.dumps({"no": "type"}).encode(), b"", b"   ",
    ]))  # fmt: skip
    scan = A.scan_logs([log])
    assert scan.malformed == 4 and scan.lines == 8
    assert scan.skipped == Counter({"user/(no message)": 1, "weird-new-type": 1, "(no type)": 1})
    assert scan.sessions["s1"].models == Counter({"m": 1})


def test_a_folder_is_walked_and_a_session_over_two_files_is_one(tmp_path):
    (tmp_path / "p1" / "a" / "subagents").mkdir(parents=True)
    write_session(tmp_path / "p1" / "a.jsonl", "s1", tools={"Read": 2})
    write_session(tmp_path / "p1" / "a" / "subagents" / "x.jsonl", "s1", tools={"Grep": 1})
    (tmp_path / "p1" / "notes.txt").write_text("not a log")
    scan = A.scan_logs([tmp_path])
    assert list(scan.sessions) == ["s1"] and len(scan.files) == 2
    assert scan.sessions["s1"].tool_calls == Counter({"Read": 2, "Grep": 1})


def test_lines_without_a_session_id_join_their_files_session(tmp_path):
    log = tmp_path / "abc.jsonl"
    log.write_text(json.dumps({"type": "summary", "summary": "t"}) + "\n")
    assert list(A.scan_logs([log]).sessions) == ["abc"]  # no id at all: the file's name
    write_session(log, "s9")
    with log.open("a") as f:
        f.write(json.dumps({"type": "summary", "summary": "t"}) + "\n")
    scan = A.scan_logs([log])
    assert list(scan.sessions) == ["s9"] and scan.sessions["s9"].titles == 1


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.jsonl", "no such file or folder"),
    (lambda p: p, "no session logs"),
    (lambda p: (p / "x.jsonl").write_text("{oops\n[]\n") and p / "x.jsonl", "no session found"),
])  # fmt: skip
def test_unusable_inputs_are_clear_errors(tmp_path, make, message):
    with pytest.raises(A.AgentLogError, match=message):
        A.scan_logs([make(tmp_path)])


# -- the rules on the sample --------------------------------------------------------------------


def test_p1_p2_p3_on_the_sample(scan):
    config, changes = A.bootstrap(T.AdaptiveConfig(), scan)
    rows = {(c.rule, c.knob, c.endpoint): c for c in changes}
    # P1: 11 of 12 turns; the Sonnet id resolves to the built-in claude profile by its glob
    p1 = rows[("P1", "profiles.llm.active", None)]
    assert (p1.old, p1.new, p1.value) == ("auto", "claude-sonnet-4.6", 11 / 12)
    # P2: 10 calls, read share 0.5: file_search_heavy holds every call
    p2 = rows[("P2", "profiles.agent.active", None)]
    assert (p2.old, p2.new, p2.value) == ("auto", "file_search_heavy", 1.0)
    # P3: three placeholders, the reference hint where the median answer is >= 175 chars
    data = config.profiles.data.variants
    assert list(data) == ["mcp__ci__get_pipeline", "mcp__tracker__get_issue",
                          "mcp__tracker__list_issues"]  # fmt: skip
    assert data["mcp__ci__get_pipeline"] == T.DataProfile(endpoint_pattern="get_pipeline")
    assert data["mcp__tracker__list_issues"].hint_set == ("ref",)
    assert data["mcp__tracker__get_issue"].preferred_format is None
    assert rows[("P3", "profiles.data.variants", "mcp__tracker__get_issue")].value == 201
    assert len(changes) == 5  # 4 MCP results < 20: min_body_chars is left alone
    assert config.dedup == T.DedupKnobs() and "dedup" not in T.dump_adaptive(config)
    assert config.tuned["profiles.agent.active"] == "P2"
    effective = T.resolve(config, T.SessionContext(model_id=SONNET))
    assert (effective.llm, effective.agent, effective.tokenizer) == (
        "claude-sonnet-4.6", "file_search_heavy", "anthropic_class")  # fmt: skip
    assert effective.mckp.recursion_depth == 3  # the agent profile's
    assert effective.data_profile("list_issues")[0] == "mcp__tracker__list_issues"


def test_an_unknown_model_gets_its_own_llm_variant(tmp_path):
    scan = A.scan_logs([write_session(tmp_path / "a.jsonl", "s1", "qwen3-coder:30b")])
    config, changes = A.bootstrap(T.AdaptiveConfig(), scan)
    variant = config.profiles.llm.variants["qwen3-coder:30b"]
    assert variant.tokenizer == "ollama_bpe" and variant.context_window == 8192
    assert config.profiles.llm.active == "qwen3-coder:30b"
    assert [c.knob for c in changes if c.rule == "P1"] == [
        "profiles.llm.variants", "profiles.llm.active"]  # fmt: skip
    dated = A.scan_logs([write_session(tmp_path / "b.jsonl", "s2", "acme-large-20250101")])
    config, _ = A.bootstrap(T.AdaptiveConfig(), dated)
    v = config.profiles.llm.variants["acme-large-20250101"]
    assert v.match == ("acme-large-*",) and v.tokenizer == "openai_o200k"
    assert T.resolve_llm(config.model_copy(), "acme-large-20260101") == "acme-large-20250101"


def test_no_dominant_model_no_pin(tmp_path):
    a = write_session(tmp_path / "a.jsonl", "s1", "model-a", turns=7)
    b = write_session(tmp_path / "b.jsonl", "s2", "model-b", turns=3)
    config, changes = A.bootstrap(T.AdaptiveConfig(), A.scan_logs([a, b]))
    assert config.profiles.llm.active == "auto" and not [c for c in changes if c.rule == "P1"]
    assert A.p1(T.AdaptiveConfig(), Counter({A.UNKNOWN_MODEL: 9}))[2] == []  # no model id


def test_p2_marathon_sessions(tmp_path):
    a = write_session(tmp_path / "a.jsonl", "s1", tools={"Edit": 600}, compactions=4)
    b = write_session(tmp_path / "b.jsonl", "s2", tools={"Read": 30})
    config, _ = A.bootstrap(T.AdaptiveConfig(), A.scan_logs([a, b]))
    assert config.profiles.agent.active == "marathon_refactor"  # 600 of 630 calls


def test_p3_sets_min_body_from_20_results_and_skips_known_endpoints(tmp_path):
    log = write_session(tmp_path / "a.jsonl", "s1", tools={
        "mcp__gh__list_pull_requests": 5, "mcp__gh__get_file": 15}, result_chars=150)  # fmt: skip
    config, changes = A.bootstrap(T.AdaptiveConfig(), A.scan_logs([log]))
    assert list(config.profiles.data.variants) == ["mcp__gh__get_file"]  # *pull* is built in
    assert config.profiles.data.variants["mcp__gh__get_file"].hint_set == ()  # 150 < 175
    assert config.dedup.min_body_chars == 150
    row = [c for c in changes if c.knob == "dedup.min_body_chars"][0]
    assert (row.rule, row.old, row.new, row.value) == ("P3", 200, 150, 150.0)


def test_a_glob_character_in_a_tool_name_matches_only_itself():
    pattern = A.glob_literal("get[x]*?")
    assert fnmatchcase("get[x]*?", pattern) and not fnmatchcase("getx-ab", pattern)


# -- determinism, idempotence, the base config ----------------------------------------------


def test_the_same_logs_give_the_same_bytes_and_the_output_as_base_changes_nothing(tmp_path):
    outs = []
    for n in (1, 2):
        out = tmp_path / f"run{n}.yaml"
        T.save_adaptive(A.bootstrap(T.AdaptiveConfig(), A.scan_logs([SAMPLE]))[0], out)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    base = T.load_adaptive(tmp_path / "run1.yaml")
    again, changes = A.bootstrap(base, A.scan_logs([SAMPLE]))
    assert changes == [] and again == base
    T.save_adaptive(again, tmp_path / "run3.yaml")
    assert (tmp_path / "run3.yaml").read_bytes() == outs[0]


def test_a_base_config_keeps_what_the_rules_do_not_touch(tmp_path, scan):
    base = T.parse_adaptive({"schema_version": 1, "dedup": {"lru_size": 9}})
    config, _ = A.bootstrap(base, scan)
    assert config.dedup.lru_size == 9 and "mcp__ci__get_pipeline" in config.profiles.data.variants
    edited = T.parse_adaptive({"schema_version": 2, "profiles": {"data": {"variants": {
        "mine": {"endpoint_pattern": "get_*", "preferred_format": "csv"}}}}})  # fmt: skip
    config, _ = A.bootstrap(edited, scan)
    assert list(config.profiles.data.variants) == ["mine", "mcp__tracker__list_issues"]


# -- properties ---------------------------------------------------------------------------------


def session(events: int, read: int, compactions: int) -> A.SessionLog:
    s = A.SessionLog("s")
    s.tool_calls.update({"Read": read, "Bash": events - read})
    s.compact_boundaries = compactions
    return s


ORDER = {"default": 0, "file_search_heavy": 1}


@given(st.integers(1, 400), st.integers(0, 400), st.integers(0, 400), st.integers(0, 10))
def test_p2_is_monotone_in_the_read_share(events, r1, r2, compactions):
    """More read calls in the same session never move it out of file_search_heavy."""
    lo, hi = sorted((min(r1, events), min(r2, events)))
    config = T.AdaptiveConfig()
    a = A.classify_session(config, session(events, lo, compactions))
    b = A.classify_session(config, session(events, hi, compactions))
    assert not (a == "file_search_heavy" and b != "file_search_heavy")


@given(st.integers(0, 2000), st.integers(0, 20), st.integers(0, 20))
def test_p2_is_monotone_in_compactions(events, c1, c2):
    lo, hi = sorted((c1, c2))
    config = T.AdaptiveConfig()
    a = A.classify_session(config, session(events, 0, lo))
    b = A.classify_session(config, session(events, 0, hi))
    assert not (a == "marathon_refactor" and b != "marathon_refactor")


@given(st.lists(st.tuples(st.integers(0, 700), st.integers(0, 700), st.integers(0, 5)),
                min_size=1, max_size=6), st.integers(0, 5), st.integers(1, 300))  # fmt: skip
def test_p2_share_grows_with_a_class_s_calls(rows, pick, extra):
    """Adding calls to a session that stays in its class never lowers that class's share,
    and the pinned class (if any) is the one with the largest share, over 0.5."""
    config = T.AdaptiveConfig()
    sessions = [session(max(e, r), min(r, e), c) for e, r, c in rows]
    before = A.agent_shares(config, sessions)
    cls, _ = A.p2(config, sessions)
    if cls is not None:
        assert before[cls] == max(before.values()) and before[cls] > A.P2_MIN_SHARE
    s = sessions[pick % len(sessions)]
    grown = session(s.events + extra, s.tool_calls["Read"] + extra, s.compactions)
    if A.classify_session(config, grown) != A.classify_session(config, s):
        return
    after = A.agent_shares(config, [*sessions[: pick % len(sessions)], grown,
                                    *sessions[pick % len(sessions) + 1 :]])  # fmt: skip
    k = A.classify_session(config, s)
    assert after[k] >= before.get(k, 0.0) - 1e-12


@given(st.dictionaries(st.sampled_from(["m-a", "m-b", "m-c", "gpt-x", "llama3:8b"]),
                       st.integers(1, 50), min_size=1))  # fmt: skip
def test_p1_pins_only_a_model_with_80_percent_and_is_idempotent(models):
    config, variant, rows = A.p1(T.AdaptiveConfig(), Counter(models))
    top, share = A.dominant_model(Counter(models))
    assert (config is not None) == (share >= A.P1_MIN_SHARE)
    if config is not None:
        data = {"schema_version": 2, "profiles": {"llm": {"active": config}}}
        if variant is not None:
            data["profiles"]["llm"]["variants"] = {config: variant}
        pinned = T.parse_adaptive(data)
        assert A.p1(pinned, Counter(models))[2] == []
        assert T.resolve(pinned, T.SessionContext(model_id=top)).llm == config


# -- the command --------------------------------------------------------------------------------


def test_the_command_end_to_end(tmp_path, capsys):
    out, evidence = tmp_path / "first.yaml", tmp_path / "evidence.csv"
    main(["formats", "tune", "from-agent-logs", str(SAMPLE.parent), "--out", str(out),
          "--evidence", str(evidence)])  # fmt: skip
    printed = capsys.readouterr().out
    assert "1 file(s), 33 line(s), 1 session(s); 1 malformed line(s)" in printed
    assert f"malformed at {SAMPLE}:25" in printed and "tracker/list_issues 2" in printed
    saved = yaml.safe_load(out.read_text())
    assert saved["schema_version"] == 2 and saved["profiles"]["agent"]["active"] == (
        "file_search_heavy")  # fmt: skip
    T.resolve(T.load_adaptive(out))
    rows = list(csv.DictReader(evidence.open()))
    assert list(rows[0]) == ["rule", "knob", "endpoint", "old", "new", "statistic", "value",
                             "threshold", "tokens_saved"]  # fmt: skip
    assert [r["rule"] for r in rows] == ["P1", "P2", "P3", "P3", "P3"]
    # its own output as the base: no change, the same bytes
    again = tmp_path / "again.yaml"
    main(["formats", "tune", "from-agent-logs", str(SAMPLE), "--base", str(out),
          "--out", str(again)])  # fmt: skip
    assert "no change" in capsys.readouterr().out
    assert again.read_bytes() == out.read_bytes()
    main(["formats", "tune", "show", "--adaptive-config", str(out), "--model-id", SONNET])
    assert "profiles.agent = file_search_heavy  [file]" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["nowhere.jsonl"], "nowhere.jsonl: no such file or folder"),
    (["EMPTY"], "no session logs (*.jsonl) in this folder"),
    (["BAD"], "no session found in 1 file(s): 2 line(s), 2 malformed"),
    ([str(SAMPLE), "--out", "x.json"], "give a .yaml, .yml or .toml file"),
    ([str(SAMPLE), "--base", "nope.yaml"], "no such tuner config file"),
])  # fmt: skip
def test_the_command_s_errors_name_the_problem(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "BAD").mkdir()
    (tmp_path / "BAD" / "x.jsonl").write_text("{oops\n[]\n")
    if "--out" not in args:
        args = [*args, "--out", "o.yaml"]
    with pytest.raises(SystemExit) as exc:
        main(["formats", "tune", "from-agent-logs", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.yaml").exists()


def test_the_command_in_a_subprocess(tmp_path):
    out = tmp_path / "c.toml"
    done = subprocess.run(
        [sys.executable, "-m", "tersetalk", "formats", "tune", "from-agent-logs", str(SAMPLE),
         "--out", str(out)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert T.load_adaptive(out).profiles.llm.active == "claude-sonnet-4.6"
    help_ = subprocess.run(
        [sys.executable, "-m", "tersetalk", "formats", "tune", "from-agent-logs", "--help"],
        capture_output=True, text=True, check=True).stdout  # fmt: skip
    for flag in ("--base", "--out", "--evidence", "PATH"):
        assert flag in help_
