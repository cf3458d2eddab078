"""The tuned configuration against the default one, on held-out sessions.

The pipeline (training sessions with telemetry, the real tuner, evaluation sessions
directly, with the default config and with ``--tuned``) runs here through the real
proxy in front of tests/mcp_fixture_server.py, so no package registry is needed: the
split is disjoint, the tuned arm runs with the tuned file (its changed knob shows in its
rows), the summary's numbers come back from the rows, and a tuner that changes nothing
gives identical arms. The real servers' run is the workflow's (`snakemake mcp_tuned`).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tersetalk.cli import main
from tersetalk.core.records import deterministic_columns
from tersetalk.mcp import servers as S
from tersetalk.mcp import tuned as TU
from tersetalk.mcp.experiment import LIST_STEP, Step
from tersetalk.mcp.tune import AdaptiveConfig, save_adaptive, tune

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "mcp_fixture_server.py"
BUDGET = 150  # small enough that the fixture's row lists overflow and are retrieved


def fixture_server(copy):
    return [sys.executable, str(FIXTURE)]


def training_session(seed: int):
    """Reads of 8 distinct paths, then the same 8 again (each repeat 7 distinct results
    after its copy: the default LRU of 5 misses them all, one of 8 catches them), and a
    few row lists; the seed shifts the paths, so two training sessions differ."""
    paths = [{"path": f"t{seed}-{i}"} for i in range(8)]
    steps = [Step("list", LIST_STEP)]
    steps += [Step("read", "read", p) for p in paths]
    steps += [Step("repeat", "read", p) for p in paths]
    steps += [Step("read", "rows", {"n": 5 + i}) for i in range(3)]
    return lambda copy: steps


def evaluation_session(seed: int):
    """A `read` repeated 6 distinct results later (beyond the default LRU, within the
    tuned one) and a row list repeated at once (within both)."""
    a = {"path": f"e{seed}-a"}
    steps = [Step("list", LIST_STEP), Step("read", "read", a)]
    steps += [Step("read", "read", {"path": f"e{seed}-{i}"}) for i in range(5)]
    steps += [Step("repeat", "read", a), Step("read", "rows", {"n": 8}),
              Step("repeat", "rows", {"n": 8}), Step("read", "plain")]  # fmt: skip
    return lambda copy: steps


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """Train on seed 0, tune with `tersetalk formats tune analyze`, evaluate seed EVAL_SEED."""
    tmp = tmp_path_factory.mktemp("tuned")
    train_seeds, eval_seeds = TU.split_seeds(1, 1)
    tel = tmp / "tel"
    train = TU.train("fixture", fixture_server, None, train_seeds, training_session, BUDGET, tel)
    tuned, evidence = tmp / "tuned.yaml", tmp / "evidence.csv"
    main(["formats", "tune", "analyze", "--telemetry-dir", str(tel), "--out", str(tuned),
          "--evidence", str(evidence)])  # fmt: skip
    ev = TU.evaluate("fixture", fixture_server, None, eval_seeds, evaluation_session, BUDGET,
                     tuned, evidence)  # fmt: skip
    return {"train": train, "eval": ev, "tuned": tuned, "evidence": evidence, "tmp": tmp}


# ---- the split ----------------------------------------------------------------------------


def test_the_split_is_disjoint_and_the_sessions_differ():
    train, ev = TU.split_seeds(4, 4)
    assert train == [0, 1, 2, 3] and ev == [2000, 2001, 2002, 2003]
    assert not set(train) & set(ev)
    for server in ("sqlite", "git"):
        sessions = {s: TU.generate_session(server, s, 40, "/repo") for s in train + ev}
        # the same seed, the same session; different seeds, different sessions
        assert TU.generate_session(server, 0, 40, "/repo") == sessions[0]
        calls = {s: tuple((st.tool, str(st.arguments)) for st in v) for s, v in sessions.items()}
        assert len(set(calls.values())) == len(calls)
        for steps in sessions.values():
            assert len(steps) == 40 and steps[0].tool == LIST_STEP
            roles = {st.role for st in steps}
            assert {"read", "repeat"} <= roles
        assert any(st.role == "write" for v in sessions.values() for st in v)
    with pytest.raises(TU.TunedExperimentError, match="at least one training"):
        TU.split_seeds(0, 3)
    with pytest.raises(TU.TunedExperimentError, match="at most 2000"):
        TU.split_seeds(2001, 1)
    with pytest.raises(TU.TunedExperimentError, match="repository"):
        TU.generate_session("git", 0, 10)


def test_the_pipeline_trains_and_evaluates_on_disjoint_seeds(pipeline):
    train, ev = pipeline["train"], pipeline["eval"]
    assert set(train["split"]) == {"train"} and set(ev["split"]) == {"eval"}
    assert not set(train["seed"]) & set(ev["seed"])
    assert set(train["arm"]) == {"default"} and set(ev["arm"]) == {"direct", "default", "tuned"}
    assert any((pipeline["tmp"] / "tel").glob("summary-*.json"))


# ---- the tuned arm ------------------------------------------------------------------------


def test_the_tuned_arm_runs_with_the_tuned_file(pipeline):
    tuned = yaml.safe_load(pipeline["tuned"].read_text())
    # the training repeats come 7 distinct results later: the LRU covering them is 8,
    # and nothing else would save a token
    assert tuned["dedup"] == {"lru_size": 8} and tuned["tuned"] == {"dedup.lru_size": "R3"}
    evidence = pd.read_csv(pipeline["evidence"])
    assert evidence["rule"].tolist() == ["R3"] and evidence["tokens_saved"].iloc[0] > 0
    ev = pipeline["eval"]
    assert (ev["n_changes"] == len(evidence)).all() and (ev["n_applied"] == 1).all()
    tuned_rows, default_rows = ev[ev["arm"] == "tuned"], ev[ev["arm"] == "default"]
    assert tuned_rows["tuned_applied"].str.contains("dedup.lru_size").all()
    assert (default_rows["tuned_applied"] == "").all()
    # the changed knob in the rows: the far repeat of a read is a dedup hit only tuned
    reads = lambda d: d[(d["tool"] == "read") & (d["role"] == "repeat")]  # noqa: E731
    assert not reads(default_rows)["dedup_hit"].any() and reads(tuned_rows)["dedup_hit"].all()
    # the row list keeps its dedup in both arms
    rows = lambda d: d[(d["tool"] == "rows") & (d["role"] == "repeat")]  # noqa: E731
    assert rows(default_rows)["dedup_hit"].all() and rows(tuned_rows)["dedup_hit"].all()
    # every retrieval of an overflow hint returned exactly the elided part (the proxy may
    # send a row list whole instead, where its hints and retrievals would cost more)
    proxied = ev[ev["arm"] != "direct"]
    assert (proxied["retrievals_exact"] == proxied["retrievals"]).all()


def test_the_tuned_arm_needs_its_file():
    with pytest.raises(TU.TunedExperimentError, match="needs the tuned file"):
        TU.run_arm(fixture_server, None, evaluation_session(0), "tuned", TU.default_config(None))


def test_hint_columns_count_only_hint_lines():
    text = "[1, 2]\n> [ref: ab12, byte-identical]\n> [+3 more items of $. call get($[2:])]"
    got = TU.hint_columns(text)
    assert got["hint_lines"] == 2 and got["hint_tokens"] > 0
    assert TU.hint_columns("no hints here") == {"hint_lines": 0, "hint_tokens": 0}


# ---- the summary --------------------------------------------------------------------------


def test_the_summary_is_recomputed_from_the_rows(pipeline):
    df = pd.concat([pipeline["train"], pipeline["eval"]], ignore_index=True)
    summary = TU.summarize(df).set_index(["server", "arm"])
    ev = df[df["split"] == "eval"]
    for arm in ("direct", "default", "tuned"):
        d = ev[ev["arm"] == arm]
        calls = d[d["tool"] != LIST_STEP]
        s = summary.loc[("fixture", arm)]
        n = d["seed"].nunique()
        assert s["sessions"] == n == 1 and s["calls"] == len(calls)
        assert s["tokens_per_session"] == d["tokens"].sum() / n
        assert s["hint_tokens_per_session"] == d["hint_tokens"].sum() / n
        assert s["dedup_hits"] == calls["dedup_hit"].sum()
        assert s["dedup_hit_rate"] == pytest.approx(calls["dedup_hit"].sum() / len(calls))
        assert s["retrievals"] == calls["retrievals"].sum()
        assert s["retrieved_tokens_per_session"] == d["retrieved_tokens"].sum() / n
    for col in TU.COMPARED:
        diff = summary[col] - summary.loc[("fixture", "default"), col]
        assert (summary[f"{col}_vs_default"] == diff).all()
    assert summary.loc[("fixture", "direct"), "hint_tokens_per_session"] == 0
    assert summary.loc[("fixture", "tuned"), "dedup_hits"] > summary.loc[
        ("fixture", "default"), "dedup_hits"]  # fmt: skip
    head = TU.headline(TU.summarize(df)).set_index("server").loc["fixture"]
    assert head["tuned_tokens"] < head["default_tokens"] and head["tuned_saving_pct"] > 0
    with pytest.raises(TU.TunedExperimentError, match="no evaluation rows"):
        TU.summarize(pipeline["train"])


def test_the_report_writes_the_table_and_the_figure(pipeline, tmp_path):
    runs = []
    for split in ("train", "eval"):
        runs.append(tmp_path / f"{split}.parquet")
        pipeline[split].to_parquet(runs[-1])
    out, csv, stem = tmp_path / "tuned.parquet", tmp_path / "summary.csv", tmp_path / "fig"
    main(["mcp-experiment", "tuned-report", "--runs", *map(str, runs), "--out", str(out),
          "--csv", str(csv), "--out-stem", str(stem)])  # fmt: skip
    back = pd.read_csv(csv)
    assert list(back["arm"]) == ["direct", "default", "tuned"]
    assert back["n_changes"].nunique() == 1 and len(pd.read_parquet(out)) == sum(
        len(pipeline[s]) for s in ("train", "eval"))  # fmt: skip
    assert stem.with_suffix(".png").stat().st_size > 0 and stem.with_suffix(".pdf").exists()


# ---- a tuner that changes nothing ---------------------------------------------------------


def test_a_tuner_with_no_changes_gives_identical_arms(tmp_path):
    config, changes = tune(AdaptiveConfig(), [])
    assert changes == []
    tuned = save_adaptive(config, tmp_path / "tuned.yaml")
    evidence = tmp_path / "evidence.csv"
    evidence.write_text("rule,knob,endpoint,old,new,statistic,value,threshold\n")
    ev = TU.evaluate("fixture", fixture_server, None, [TU.EVAL_SEED], evaluation_session,
                     BUDGET, tuned, evidence)  # fmt: skip
    assert (ev["n_changes"] == 0).all() and (ev["n_applied"] == 0).all()
    keep = [c for c in deterministic_columns(ev) if c not in ("arm", "tuned_applied")]
    default = ev[ev["arm"] == "default"][keep].reset_index(drop=True)
    tuned_rows = ev[ev["arm"] == "tuned"][keep].reset_index(drop=True)
    pd.testing.assert_frame_equal(default, tuned_rows)
    assert (ev[ev["arm"] == "tuned"]["tuned_applied"] == "none").all()
    summary = TU.summarize(ev).set_index("arm")
    for col in TU.COMPARED:
        assert summary.loc["tuned", f"{col}_vs_default"] == 0


# ---- the CLI ------------------------------------------------------------------------------


def test_the_cli_says_what_is_wrong(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["mcp-experiment", "tuned-eval", "--server", "sqlite", "--env-info", "x",
              "--target", "y", "--tuned", "t", "--budget", "300,500", "--out", "o"])  # fmt: skip
    assert "one budget" in capsys.readouterr().err
    info = tmp_path / "env.json"
    info.write_text('{"env": "%s"}' % (tmp_path / "nowhere"))
    with pytest.raises(SystemExit):
        main(["mcp-experiment", "tuned-train", "--server", "sqlite", "--env-info", str(info),
              "--target", str(tmp_path), "--sessions", "0", "--telemetry-dir",
              str(tmp_path / "tel"), "--out", str(tmp_path / "o.parquet")])  # fmt: skip
    assert "at least one training" in capsys.readouterr().err


# ---- held-out sessions with repeats from far back, and the headline per server ------------


def test_sessions_come_back_to_reads_beyond_the_last_few():
    # a repeat names a call; how many distinct reads came since that call was last made
    for server in ("sqlite", "git"):
        far = total = 0
        for seed in range(8):
            reads: list[tuple] = []
            for st in TU.generate_session(server, seed, 40, "/repo"):
                key = (st.tool, str(st.arguments))
                if st.role == "repeat":
                    total += 1
                    far += reads[::-1].index(key) >= TU.RECENT
                if st.role in ("read", "repeat"):
                    reads = [k for k in reads if k != key] + [key]
        assert total and 0.15 < far / total < 0.5, (server, far, total)


def test_training_and_evaluation_refuse_each_others_seeds(tmp_path):
    with pytest.raises(TU.TunedExperimentError, match="evaluation seeds"):
        TU.train("fixture", fixture_server, None, [0, TU.EVAL_SEED], training_session, None,
                 tmp_path / "tel")  # fmt: skip
    with pytest.raises(TU.TunedExperimentError, match="training seeds"):
        TU.evaluate("fixture", fixture_server, None, [3], evaluation_session, None,
                    tmp_path / "none.yaml")  # fmt: skip
    assert not (tmp_path / "tel").exists()


def _eval_rows(server: str, tokens: dict[str, list[int]], retrieved: int = 0) -> pd.DataFrame:
    rows = []
    for arm, per_seed in tokens.items():
        for i, t in enumerate(per_seed):
            for step, tool in enumerate((LIST_STEP, "read_query")):
                rows.append({"server": server, "split": "eval", "seed": TU.EVAL_SEED + i,
                             "arm": arm, "step": step, "tool": tool,
                             "tokens": t if step else 0, "hint_tokens": 0,
                             "retrieved_tokens": retrieved if step and arm != "direct" else 0,
                             "dedup_hit": False, "retrievals": 0, "retrievals_exact": 0,
                             "is_error": False, "n_changes": 1, "n_applied": 1,
                             "tuned_applied": "dedup.lru_size (rule R3)" if arm == "tuned"
                             else ""})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_summary_gives_each_servers_saving_against_the_target():
    df = pd.concat([
        _eval_rows("sqlite", {"direct": [2000, 2000], "default": [1000, 1200],
                              "tuned": [900, 1080]}),  # 10% saved
        _eval_rows("git", {"direct": [900, 900], "default": [500, 500], "tuned": [480, 480]},
                   retrieved=100),  # (600 - 580) / 600: 3.3% saved
    ], ignore_index=True)  # fmt: skip
    summary = TU.summarize(df)
    head = TU.headline(summary).set_index("server")
    assert (
        head.loc["sqlite", "default_tokens"] == 1100 and head.loc["sqlite", "tuned_tokens"] == 990
    )
    assert head.loc["sqlite", "tuned_saving_pct"] == pytest.approx(10.0)
    assert head.loc["git", "default_tokens"] == 600 and head.loc["git", "tuned_tokens"] == 580
    assert head.loc["git", "tuned_saving_pct"] == pytest.approx(100 * 20 / 600)
    assert head.loc["sqlite", "meets_target"] == True and head.loc["git", "meets_target"] == False  # noqa: E712
    assert head.loc["sqlite", "tuned_applied"] == "dedup.lru_size (rule R3)"
    assert (summary["target_saving_pct"] == TU.TARGET_SAVING_PCT).all()
    # the same per-server values on every row of the server
    assert summary.groupby("server")["tuned_saving_pct"].nunique().eq(1).all()


# ---- the coding agent's project and its sessions ------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("project") / "repo"
    main(["mcp-experiment", "repository", "--project", "--out", str(out)])
    return out


def test_the_project_has_a_history_of_real_diffs_and_is_the_same_everywhere(project, tmp_path):
    assert S.PROJECT_COMMITS >= 30 and len(S.project_files()) >= 25
    log = _git(project, "log", "--format=%H %at %s").splitlines()
    assert len(log) == S.PROJECT_COMMITS
    assert len({line.split()[1] for line in log}) == len(log)  # a date per commit
    assert _git(project, "ls-files").split() == S.project_files()
    # every commit after the first changes 1 to 4 files; lines are added and removed
    added = removed = 0
    for line in log[:-1]:
        stat = _git(project, "show", "--numstat", "--format=", line.split()[0]).splitlines()
        assert 1 <= len(stat) <= 4, line
        added += sum(int(s.split()[0]) for s in stat)
        removed += sum(int(s.split()[1]) for s in stat)
    assert added > 300 and removed > 10
    # one edit left uncommitted: what a session's git_add stages
    status = _git(project, "status", "--porcelain").splitlines()
    assert [s.split()[-1] for s in status] == S.project_pending_files()
    again = S.create_project_repository(tmp_path / "again")
    assert again["head"] == log[0].split()[0] and again["files"] == len(S.project_files())


def test_the_repeat_distance_follows_the_stated_zipf_law():
    rng = random.Random(7)
    n = 40_000
    draws = Counter(TU.repeat_distance(rng, 100) for _ in range(n))
    assert set(draws) == set(range(1, TU.FAR + 1))
    norm = sum(1 / d**TU.REPEAT_ZIPF_S for d in range(1, TU.FAR + 1))
    for d in (1, 2, 5, 10, TU.FAR):
        assert draws[d] / n == pytest.approx(1 / d**TU.REPEAT_ZIPF_S / norm, abs=0.01)
    # a third of the repeats beyond the default LRU's 5, as stated
    assert sum(v for d, v in draws.items() if d > 5) / n == pytest.approx(0.32, abs=0.02)
    # never further back than there are distinct reads
    assert {TU.repeat_distance(rng, 3) for _ in range(200)} == {1, 2, 3}


def test_a_repeat_is_the_read_at_the_drawn_stack_distance():
    # replay each session's reads as an LRU stack: a repeat's distance is at most FAR, and
    # the near ones are the most frequent
    for server in ("sqlite", "git", "memory"):
        dist: Counter = Counter()
        for seed in range(10):
            stack: list[tuple] = []
            for st in TU.generate_session(server, seed, 40, "/repo"):
                key = (st.tool, str(st.arguments))
                if st.role == "repeat":
                    dist[stack[::-1].index(key) + 1] += 1
                if st.role in ("read", "repeat"):
                    stack = [k for k in stack if k != key] + [key]
        assert max(dist) <= TU.FAR and dist[1] == max(dist.values()), (server, dist)
        assert dist[1] > 1.5 * dist[3]  # P(1) / P(3) is 3 under the Zipf law
        assert sum(v for d, v in dist.items() if d > 5) > 0


def test_a_git_session_is_a_coding_agent_on_the_project():
    files, tools, writes, n, top = Counter(), Counter(), 0, 0, 0
    for seed in range(20):
        steps = TU.generate_session("git", seed, 40, "/repo")
        mine = Counter(s.arguments["revision"] for s in steps
                       if s.arguments.get("revision", "").startswith("HEAD:"))  # fmt: skip
        top += sum(v for _, v in mine.most_common(5))
        assert [s.tool for s in steps[1:3]] == ["git_status", "git_log"]  # it looks first
        for st in steps:
            n += 1
            tools[st.tool] += 1
            if st.role == "write":
                writes += 1
                if st.tool == "git_add":
                    assert st.arguments["files"] == S.project_pending_files()
            rev = st.arguments.get("revision", "")
            if rev.startswith("HEAD:"):
                assert rev[5:] in S.project_files()
                files[rev[5:]] += 1
            elif rev:
                k = int(rev[5:] or 0) if rev.startswith("HEAD~") else 0
                assert 0 <= k < S.PROJECT_COMMITS
    # files are what it reads most; in a session a few (its task's) more than the rest
    assert tools["git_show"] == max(tools.values()) and len(files) >= 20
    assert top > 0.5 * sum(files.values())
    # writes are rare: a few per cent of the steps
    assert 0 < writes / n < 0.08


def test_the_memory_graph_is_what_the_memory_server_reads(tmp_path):
    out = tmp_path / "graph.jsonl"
    main(["mcp-experiment", "graph", "--out", str(out)])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    entities = [x for x in lines if x["type"] == "entity"]
    relations = [x for x in lines if x["type"] == "relation"]
    assert [e["name"] for e in entities] == S.memory_entity_names()
    assert len(entities) >= 25 and len(relations) >= 40
    assert all(3 <= len(e["observations"]) <= 5 for e in entities)
    names = set(S.memory_entity_names())
    assert all(r["from"] in names and r["to"] in names for r in relations)
    S.build_memory_graph(tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()


def test_a_memory_session_recalls_then_searches_opens_and_notes():
    tools, writes, n = Counter(), [], 0
    names = set(S.memory_entity_names())
    for seed in range(20):
        steps = TU.generate_session("memory", seed, 40)
        assert steps[1].tool == "read_graph"  # it recalls its memory first
        for st in steps:
            n += 1
            tools[st.tool] += 1
            if st.tool == "open_nodes":
                assert 1 <= len(st.arguments["names"]) <= 3
                assert set(st.arguments["names"]) <= names
            if st.role == "write":
                (obs,) = st.arguments["observations"]
                assert obs["entityName"] in names
                writes.append(obs["contents"][0])
    assert tools["search_nodes"] > tools["read_graph"] and tools["open_nodes"] > 0
    assert 0 < len(writes) / n < 0.1
    assert TU.generate_session("memory", 3, 40) == TU.generate_session("memory", 3, 40)
