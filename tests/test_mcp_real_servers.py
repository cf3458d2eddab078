"""tersetalk mcp-proxy in front of real MCP servers nobody here wrote.

``mcp-server-sqlite`` (on the 1.x SDK, which it needs) and ``mcp-server-git`` (on the
2.x SDK), each from a virtual environment of its own as an MCP client would launch
them, driven through the proxy by the official SDK's client. The environments are built
once (tests/mcp_support.py); where they cannot be built (no package registry), these
tests skip and say why.
"""

from __future__ import annotations

import json
import os
import re
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp_support import HOTPOT, ROOT, TOOLRESPONSES
from mcp_support import server_env as _env

from tersetalk.formats.solver import decode
from tersetalk.formats.tree import same_value
from tersetalk.mcp import servers
from tersetalk.mcp.literal import parse_literal


async def _drive(command: list[str], script, tmp: Path, config: str, direct: bool = True):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cfg = tmp / "proxy.yaml"
    cfg.write_text(config)
    tel = tmp / "calls.jsonl"
    args = ["-m", "tersetalk", "mcp-proxy", "--proxy-config", str(cfg), "--telemetry", str(tel),
            "--call-timeout", "120", "--", *command]  # fmt: skip
    proxied = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    plain = StdioServerParameters(command=command[0], args=command[1:])
    out: dict = {}
    with anyio.fail_after(600):  # a hang detector, not a speed check
        async with AsyncExitStack() as stack:
            d = None
            if direct:
                r, w = await stack.enter_async_context(stdio_client(plain))
                d = await stack.enter_async_context(ClientSession(r, w))
                await d.initialize()
            r2, w2 = await stack.enter_async_context(stdio_client(proxied))
            p = await stack.enter_async_context(ClientSession(r2, w2))
            await p.initialize()
            await script(d, p, out)
    out["telemetry"] = [json.loads(x) for x in tel.read_text().splitlines()]
    return out


def _t(result) -> str:
    assert not result.is_error, result.content[0].text
    return result.content[0].text


_CALL = re.compile(
    r"^> \[\+(\d+) more (items|keys|chars) of (.*?)(?:: .*)?\. call tersetalk_get (.*)\]$"
)


def test_sqlite_server_through_the_proxy(tmp_path):
    env = _env("sqlite")
    db = tmp_path / "q.db"
    servers.build_database(db, hotpotqa=HOTPOT, toolresponses=TOOLRESPONSES, rows=60)
    command = servers.launch_command("sqlite", env, db)
    select = "SELECT * FROM questions ORDER BY id"

    async def script(d, p, out):
        out["tools_direct"] = [t.name for t in (await d.list_tools()).tools]
        out["tools_proxy"] = [t.name for t in (await p.list_tools()).tools]
        out["direct"] = _t(await d.call_tool("read_query", {"query": select}))
        out["first"] = _t(await p.call_tool("read_query", {"query": select}))
        out["again"] = _t(await p.call_tool("read_query", {"query": select}))
        out["ref_back"] = _t(await p.call_tool("tersetalk_get", {"ref": out["again"][8:16]}))
        # a write to another row, then the same SELECT: its rows are unchanged by the
        # first statement, yet the proxy must not claim the cached copy is current
        await p.call_tool("write_query", {"query": "UPDATE questions SET level = level "
                                                   "WHERE id = 'no-such-id'"})  # fmt: skip
        out["after_write"] = _t(await p.call_tool("read_query", {"query": select}))
        bad = {"query": "SELECT * FROM nope"}
        for name, session in (("bad_direct", d), ("bad", p)):
            try:
                res = await session.call_tool("read_query", bad)
                out[name] = (res.is_error, res.content[0].text)
            except Exception as exc:  # an MCP error
                out[name] = ("mcp-error", str(exc))

    out = anyio.run(
        _drive, command, script, tmp_path,
        "dedup:\n  write_tools: [write_query]\n",
    )  # fmt: skip
    assert out["tools_proxy"] == [*out["tools_direct"], "tersetalk_get"]
    rows = parse_literal(out["direct"])
    assert isinstance(rows, list) and len(rows) == 60  # str(list_of_dicts), not JSON
    assert same_value(decode(out["first"]), rows)
    assert (
        out["again"].startswith("> [ref: ")
        and ", byte-identical. call tersetalk_get" in out["again"]
    )
    assert out["ref_back"] == out["direct"]  # what the server sent, as it came
    assert not out["after_write"].startswith("> [ref: ")  # the write invalidated it
    assert same_value(decode(out["after_write"]), rows)
    kinds = [(r["tool"], r["kind"]) for r in out["telemetry"]]
    assert ("read_query", "ref") in kinds
    write = next(r for r in out["telemetry"] if r["tool"] == "write_query")
    assert write["invalidated"] >= 1
    first = next(r for r in out["telemetry"] if r["tool"] == "read_query")
    assert first["sent_tokens"] < first["raw_tokens"] and first["source"] == "literal"
    # the server's error for a missing table comes back as it sent it
    assert out["bad"] == out["bad_direct"] and "nope" in out["bad"][1]


def test_sqlite_budget_elides_and_retrieval_returns_the_rest(tmp_path):
    env = _env("sqlite")
    db = tmp_path / "q.db"
    servers.build_database(db, hotpotqa=HOTPOT, toolresponses=TOOLRESPONSES, rows=60)
    command = servers.launch_command("sqlite", env, db)
    select = "SELECT * FROM questions ORDER BY id LIMIT 40"

    async def script(d, p, out):
        out["direct"] = _t(await d.call_tool("read_query", {"query": select}))
        out["budgeted"] = _t(await p.call_tool("read_query", {"query": select}))
        calls = [m for x in out["budgeted"].splitlines() if (m := _CALL.match(x))]
        out["calls"] = []
        for m in calls:
            got = _t(await p.call_tool("tersetalk_get", json.loads(m.group(4))))
            out["calls"].append((m.groups(), got))

    # a cap (budget_within_lossless off): it elides whatever fetching the rest costs
    out = anyio.run(
        _drive, command, script, tmp_path, "budget: 600\nbudget_within_lossless: false\n"
    )
    rows = parse_literal(out["direct"])
    assert out["calls"], out["budgeted"][-400:]
    for (n, what, at, _args), got in out["calls"]:
        assert what == "items" and at == "$"
        assert json.loads(got) == rows[len(rows) - int(n) :]  # exactly the elided rows
    (rec,) = [r for r in out["telemetry"] if r["tool"] == "read_query"]
    assert rec["sent_tokens"] <= 600 and rec["lossless"] is False


def _kill_serving(path: Path) -> int:
    """SIGKILL the server process (not the proxy) whose command line names ``path``."""
    import signal

    killed = 0
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(path).encode() in argv and b"mcp-proxy" not in argv:
            os.kill(int(proc.name), signal.SIGKILL)
            killed += 1
    return killed


def test_a_real_server_that_dies_is_an_mcp_error_not_a_hung_client(tmp_path):
    from mcp.shared.exceptions import MCPError

    env = _env("sqlite")
    db = tmp_path / "crash.db"
    servers.build_database(db, hotpotqa=HOTPOT, toolresponses=TOOLRESPONSES, rows=5)
    command = servers.launch_command("sqlite", env, db)

    async def script(d, p, out):
        out["before"] = _t(await p.call_tool("list_tables", {}))
        out["killed"] = _kill_serving(db)
        for name in ("after", "again"):
            try:
                await p.call_tool("read_query", {"query": "SELECT * FROM questions"})
                out[name] = None
            except MCPError as exc:
                out[name] = exc.message

    out = anyio.run(_drive, command, script, tmp_path, "{}\n", False)
    assert "questions" in out["before"]
    assert out["killed"] == 1
    assert out["after"] and out["again"]  # both calls answered with an error, none hung
    assert [r["kind"] for r in out["telemetry"]][-2:] == ["error", "error"]


def test_git_server_through_the_proxy(tmp_path):
    env = _env("git")
    repo = tmp_path / "repo"
    servers.create_repository(repo)
    command = servers.launch_command("git", env, repo)
    r = {"repo_path": str(repo)}

    async def script(d, p, out):
        out["tools_direct"] = [t.name for t in (await d.list_tools()).tools]
        out["tools_proxy"] = [t.name for t in (await p.list_tools()).tools]
        out["log_direct"] = _t(await d.call_tool("git_log", {**r, "max_count": 10}))
        out["log"] = _t(await p.call_tool("git_log", {**r, "max_count": 10}))
        out["log_again"] = _t(await p.call_tool("git_log", {**r, "max_count": 10}))
        await p.call_tool("git_add", {**r, "files": sorted(servers.PENDING)})
        out["log_after"] = _t(await p.call_tool("git_log", {**r, "max_count": 10}))
        try:
            res = await p.call_tool("git_show", {**r, "revision": "no-such-revision"})
            out["bad"] = (res.is_error, res.content[0].text)
        except Exception as exc:
            out["bad"] = (True, str(exc))

    out = anyio.run(_drive, command, script, tmp_path, "dedup:\n  write_tools: [git_add]\n")
    assert out["tools_proxy"] == [*out["tools_direct"], "tersetalk_get"]
    # git's answers are text: byte-identical through the proxy, or a reference to them
    assert out["log"] == out["log_direct"] and "commit" in out["log"].lower()
    assert out["log_again"].startswith("> [ref: ")
    assert out["log_after"] == out["log_direct"]  # git_add (a write) invalidated it
    assert out["bad"][0]  # the server's error comes back as an error
    kinds = [(r["tool"], r["kind"]) for r in out["telemetry"]]
    assert ("git_log", "ref") in kinds and ("git_log", "passthrough") in kinds
