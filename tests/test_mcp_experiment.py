"""The MCP experiment: its servers' data, environments, the
scripted session against real servers with and without the proxy, and its summary.

The sessions need the servers' venvs: built on first use from the pins in ``envs/``
into ``$TERSETALK_MCP_ENVS`` (default ``~/.cache/tersetalk/mcp-envs``, shared with
tests/test_mcp_real_servers.py) and reused after; where they cannot be built (no
package registry) those tests skip and say why.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mcp_support import HOTPOT, TOOLRESPONSES
from mcp_support import server_env as _env

from tersetalk.core.records import deterministic_columns
from tersetalk.core.tokens import count_tokens
from tersetalk.mcp import experiment as E
from tersetalk.mcp import servers as S
from tersetalk.mcp.literal import parse_literal


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mcpdb") / "questions.sqlite"
    S.build_database(out, hotpotqa=HOTPOT, toolresponses=TOOLRESPONSES, rows=40)
    return out


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mcprepo") / "repo"
    S.create_repository(out)
    return out


# ---- data and environments ----------------------------------------------------------------


def test_the_database_holds_both_tables_as_rows_of_seven_columns(database):
    con = sqlite3.connect(database)
    con.row_factory = sqlite3.Row
    for table in ("questions", "payloads"):
        rows = [dict(r) for r in con.execute(f"SELECT * FROM {table}")]
        assert len(rows) == 40 and len(rows[0]) == 7
    # what the sqlite server prints: a Python literal the proxy can read back
    text = str([dict(r) for r in con.execute("SELECT * FROM questions")])
    assert parse_literal(text) == [dict(r) for r in con.execute("SELECT * FROM questions")]
    assert count_tokens(text, "o200k_base") > 2000


def test_the_repository_is_the_same_everywhere(repository, tmp_path):
    again = S.create_repository(tmp_path / "again")
    head = subprocess.run(["git", "-C", str(repository), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert again["head"] == head and again["commits"] == 4
    status = subprocess.run(["git", "-C", str(repository), "status", "--porcelain"], check=True,
                            capture_output=True, text=True).stdout  # fmt: skip
    assert status.strip() == "M wordcount.py"  # the edit the session stages and commits


def test_an_env_with_a_matching_stamp_is_reused_and_a_missing_one_named(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("mcp-server-git==2026.10.19\n")
    dest = tmp_path / "git"
    (dest / "bin").mkdir(parents=True)
    (dest / "bin" / "python").symlink_to(sys.executable)
    stamp = {"server": "git", "requirements_sha256": S.file_sha256(req), "version": "x"}
    (dest / S.STAMP).write_text(__import__("json").dumps(stamp))
    assert S.build_env("git", req, dest) == stamp  # nothing built, nothing fetched
    cmd = S.launch_command("git", dest, tmp_path)
    assert cmd[1:3] == ["-m", "mcp_server_git"] and cmd[-2] == "--repository"
    with pytest.raises(S.ServerEnvError, match="no built mcp-server-sqlite environment"):
        S.launch_command("sqlite", tmp_path / "nowhere", tmp_path / "db")
    with pytest.raises(S.ServerEnvError, match="does not exist"):
        S.build_env("git", tmp_path / "missing.txt", dest)
    with pytest.raises(S.ServerEnvError, match="unknown MCP server"):
        S.build_env("postgres", req, dest)


def test_a_failed_install_leaves_neither_the_env_nor_a_temporary_folder(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("this is not a requirement !!!\n")  # pip refuses it without any lookup
    with pytest.raises(S.ServerEnvError, match="pip could not install"):
        S.build_env("sqlite", req, tmp_path / "envs" / "sqlite")
    # only the builders' lock file, which outlives its builds
    assert [p.name for p in (tmp_path / "envs").iterdir()] == [".sqlite.lock"]


# ---- the client side ---------------------------------------------------------------------


def test_overflow_calls_read_both_ways_of_naming_the_retrieval_call():
    text = ("a,b\n1,2\n"
            '> [+3 more items of $.rows. call tersetalk_get '
            '{"ref":"ab12cd34","path":"$.rows[2:]"}]\n'
            '> [+1 more items of $. call tersetalk_get(ref="ab12cd34", path="$[5:]")]')  # fmt: skip
    assert E.overflow_calls(text) == [{"ref": "ab12cd34", "path": "$.rows[2:]"},
                                      {"ref": "ab12cd34", "path": "$[5:]"}]  # fmt: skip
    assert E.overflow_calls("> [ref: ab12cd34, byte-identical]") == []


def _frame(server: str, tokens: list[int], direct: list[int]) -> pd.DataFrame:
    n = len(tokens)
    return pd.DataFrame({
        "server": [server] * 2 * n, "arm": ["direct"] * n + ["lossless"] * n,
        "tool": [f"t{i}" for i in range(n)] * 2, "step": list(range(n)) * 2,
        "direct_tokens": direct * 2, "tokens": direct + tokens,
        "direct_tokens_cl100k": direct * 2, "tokens_cl100k": direct + [t + 1 for t in tokens],
        "round_trip": [""] * n + ["exact"] * (n - 1) + ["inexact"],
        "dedup_hit": [False] * (2 * n - 1) + [True], "invalidated": [0] * (2 * n - 1) + [2],
        "retrievals": [0] * 2 * n, "retrievals_exact": [0] * 2 * n,
        "retrieved_tokens": [0] * 2 * n, "is_error": [False] * 2 * n,
        "t_pipeline_ratio": [None] * n + [0.5] * n, "t_client_overhead_ratio": [0.0] * 2 * n,
        "t_added_ms": [0.0] * n + [float(10 * (i + 1)) for i in range(n)],
        "t_initialize_added_ms": [0.0] * n + [40.0] * n,
        "t_first_call_at_once_added_ms": [0.0] * n + [250.0] * n,
    })  # fmt: skip


def test_summary_totals_each_session_and_computes_the_saving():
    df = _frame("s", [40, 10], [100, 50])
    s = E.summarize(df).set_index(["server", "arm", "tool"])
    row = s.loc[("s", "lossless", "(session)")]
    assert row["tokens"] == 50 and row["saving"] == pytest.approx(1 - 50 / 150)
    assert row["saving_cl100k"] == pytest.approx(1 - 52 / 150)
    assert s.loc[("s", "lossless", "t1"), "dedup_hits"] == 1 and row["invalidated"] == 2
    assert (row["round_trips_exact"], row["round_trips_inexact"]) == (1, 1)
    assert row["t_added_ms_p50"] == pytest.approx(15.0)
    assert row["t_added_ms_p95"] == pytest.approx(19.5)
    assert row["t_initialize_added_ms"] == pytest.approx(40.0)
    assert row["t_first_call_at_once_added_ms"] == pytest.approx(250.0)
    assert pd.isna(s.loc[("s", "direct", "(session)"), "t_added_ms_p50"])
    assert pd.isna(s.loc[("s", "direct", "(session)"), "t_first_call_at_once_added_ms"])


def test_the_summary_weights_every_servers_sessions_by_their_tokens():
    # a large saving on a large session outweighs a loss on a small one: the mean of
    # the two savings (0.45) is not the weighted one
    df = pd.concat([_frame("big", [100], [1000]), _frame("small", [200], [100])])
    s = E.summarize(df).set_index(["server", "arm", "tool"])
    every = s.loc[("(all)", "lossless", "(session)")]
    assert every["direct_tokens"] == 1100 and every["tokens"] == 300
    assert every["saving"] == pytest.approx(1 - 300 / 1100)
    assert every["calls"] == 2


def test_a_round_trip_is_exact_only_when_the_client_decodes_what_the_server_sent():
    from tersetalk.formats.solver import encode
    from tersetalk.formats.tree import from_python

    value = [{"id": i, "name": f"n{i}", "ok": i % 2 == 0} for i in range(12)]
    direct = str(value)  # a Python literal, as mcp-server-sqlite sends rows
    sent = encode(from_python(value), "mckp").text
    assert E.round_trip(sent, direct) == "exact"
    assert E.round_trip(sent, str(value[:-1])) == "inexact"
    assert E.round_trip(sent.replace("n3", "n4", 1), direct) == "inexact"
    assert E.round_trip("not an encoding {", direct) == "inexact"
    table = ("| name       | value      | note       |\n|------------|------------|------------|\n"
             + "".join(f"| r{i:<9} | {i:<10} | n{i:<9} |\n" for i in range(12)))  # fmt: skip
    from tersetalk.formats.markdown import encode_markdown

    md = encode_markdown(table)
    assert md.text != table and E.round_trip(md.text, table) == "exact"
    assert E.round_trip(md.text, table + "\\n") == "inexact"


# ---- real servers, with and without the proxy ----------------------------------------------


@pytest.fixture(scope="module")
def sqlite_run(database) -> pd.DataFrame:
    # no pause after the tool list, and one start-up launch per arm (the target: 1 s, 3)
    return E.run_server("sqlite", _env("sqlite"), database, [None, 300], pause_s=0, launches=1)


def test_sqlite_session_through_the_proxy(sqlite_run):
    df = sqlite_run
    assert set(df["arm"]) == {"direct", "lossless", "budget_300"}
    assert not df["is_error"].any()
    by = {arm: d.reset_index(drop=True) for arm, d in df.groupby("arm")}
    direct, lossless, budget = by["direct"], by["lossless"], by["budget_300"]
    big = direct.index[direct["role"].eq("read") & direct["tool"].eq("read_query")][0]
    # a Python-literal result costs fewer tokens re-encoded, losslessly
    assert lossless.loc[big, "kind"] == "encoded"
    assert lossless.loc[big, "tokens"] < direct.loc[big, "tokens"]
    # the repeated SELECT is a reference; the write forgets it; the read after it is not
    repeat = direct.index[direct["role"].eq("repeat") & direct["tool"].eq("read_query")][0]
    assert lossless.loc[repeat, "kind"] == "ref" and lossless.loc[repeat, "dedup_hit"]
    writes = direct.index[direct["role"].eq("write")]
    assert lossless.loc[writes, "invalidated"].sum() > 0
    reread = direct.index[direct["role"].eq("reread") & direct["tool"].eq("read_query")][0]
    assert lossless.loc[reread, "kind"] == "encoded" and not lossless.loc[reread, "dedup_hit"]
    # the proxy lists the downstream's tools plus its retrieval tool
    assert lossless.loc[0, "tool"] == "tools/list"
    assert lossless.loc[0, "tokens"] > direct.loc[0, "tokens"]
    # the budget rule: what a budget sends, with all a reader fetches, costs the session
    # at most what lossless sends; any retrieval returns exactly what was left out
    spent = budget["tokens"].sum() + budget["retrieved_tokens"].sum()
    assert spent <= lossless["tokens"].sum()
    assert (budget["retrievals_exact"] == budget["retrievals"]).all()
    # the start-up launch timed initialize and a tool called at once, through the proxy
    # less direct (the direct arm's own difference is 0)
    for col in ("t_initialize_added_ms", "t_first_call_at_once_added_ms"):
        assert lossless[col].notna().all() and lossless[col].nunique() == 1
        assert (direct[col] == 0).all()
    # the telemetry agrees with the client on what was sent
    tel = lossless.dropna(subset=["proxy_sent_tokens"])
    assert (tel["proxy_sent_tokens"] == tel["tokens"]).all()
    assert (tel["proxy_raw_tokens"] == tel["direct_tokens"]).all()


def test_git_session_is_deterministic_apart_from_timings(repository):
    env = _env("git")
    a = E.run_server("git", env, repository, [None], pause_s=0, launches=0)
    b = E.run_server("git", env, repository, [None], pause_s=0, launches=0)
    cols = deterministic_columns(a)
    assert not any(c.startswith("t_") for c in cols) and "tokens" in cols
    pd.testing.assert_frame_equal(a[cols], b[cols])
    lossless = a[a["arm"] == "lossless"]
    assert lossless["dedup_hit"].sum() == 2  # git_log and git_show repeated
    assert lossless["invalidated"].sum() > 0  # git_add / git_commit
    assert not a["is_error"].any()
    # a git_log after the commit shows the new commit: not a reference to the old log
    last = lossless.iloc[-1]
    assert last["tool"] == "git_log" and last["kind"] != "ref"


def test_each_arm_gets_a_copy_of_the_repository_without_snakemakes_marker(repository, tmp_path):
    (repository / ".snakemake_timestamp").touch()  # what a directory() output holds
    try:
        copy = E._fresh_target("git", repository, tmp_path)
        status = subprocess.run(["git", "-C", str(copy), "status", "--porcelain"], check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        assert status.strip() == "M wordcount.py"
    finally:
        (repository / ".snakemake_timestamp").unlink()
