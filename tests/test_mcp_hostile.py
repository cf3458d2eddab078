"""tersetalk mcp-proxy in front of a hostile server, and hostile files for the tuner.

The server is ``tests/mcp_fixture_server.py --hostile``: JSON-RPC written by hand, so
it can send what the SDK never would (a byte that is not UTF-8, a result of any size,
texts whose SHA-256 share their first 8 hex digits, errors that quote the arguments).
The proxy runs with ``--call-timeout`` far longer than any test: a call that waited for
it would trip the hang detector (``anyio.fail_after``) and fail the test.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tersetalk.cli import main
from tersetalk.formats.solver import decode
from tersetalk.formats.tree import same_value
from tersetalk.mcp import agent_logs as A
from tersetalk.mcp import config as C
from tersetalk.mcp import session as S
from tersetalk.mcp import telemetry as T
from tersetalk.mcp import tune
from tersetalk.mcp.proxy import UNDECODABLE_META

sys.path.insert(0, str(Path(__file__).parent))
from mcp_fixture_server import COLLIDING_NEAR, COLLIDING_PAGES, big, near, page  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "mcp_fixture_server.py"
NEVER = "100000"  # --call-timeout, in seconds: no test waits for it
HANG = 300  # the hang detector, in seconds: not a speed check
SECRET = "hunter2-6f1c0e"
_GET = re.compile(r"call tersetalk_get (\{.*\})\]$", re.M)


def run(tmp_path: Path, body: Any, config: str = "", local: Path | None = None) -> tuple[Any, list]:
    """``body(session)``'s value through the proxy in front of the hostile server, and the
    proxy's ``--telemetry`` lines."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cfg, tel = tmp_path / "proxy.yaml", tmp_path / "calls.jsonl"
    cfg.write_text(config or "{}\n")
    args = ["-m", "tersetalk", "mcp-proxy", "--telemetry", str(tel), "--call-timeout", NEVER,
            "--proxy-config", str(cfg)]  # fmt: skip
    if local is not None:
        args += ["--telemetry-dir", str(local)]
    args += ["--", sys.executable, str(FIXTURE), "--hostile"]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))

    async def session() -> Any:
        with anyio.fail_after(HANG):
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                return await body(s)

    out = anyio.run(session)
    rows = [json.loads(x) for x in tel.read_text().splitlines()] if tel.exists() else []
    return out, rows


def _text(result: Any) -> str:
    return result.content[0].text


# --- bytes that are not UTF-8, and a downstream that is gone -------------------------------


def test_a_byte_that_is_not_utf8_is_replaced_counted_and_the_session_goes_on(tmp_path):
    async def body(s):
        return await s.call_tool("bad_utf8", {}), await s.call_tool("ok", {})

    (bad, ok), log = run(tmp_path, body)
    assert decode(_text(bad))["name"] == "caf\ufffd"
    assert bad.meta[UNDECODABLE_META] == 1
    assert not ok.is_error and _text(ok) == "still here" and not ok.meta
    rows = {r["tool"]: r for r in log}
    assert rows["bad_utf8"]["undecodable_bytes"] == 1 and "undecodable_bytes" not in rows["ok"]


def test_the_call_in_flight_when_the_downstream_exits_gets_an_answer(tmp_path):
    """Its exit ends the proxy (tests/test_mcp_proxy_exit.py), but not before the call
    that was waiting is answered with what happened."""

    async def body(s):
        with pytest.raises(MCPError) as caught:
            await s.call_tool("exit", {})
        return caught.value.message

    said, log = run(tmp_path, body)
    assert "closed its connection" in said and "restart the proxy" in said
    assert [r["error_kind"] for r in log] == ["closed"]


# --- the size cap ----------------------------------------------------------------------------


def test_a_result_over_the_size_cap_is_sent_unread(tmp_path):
    async def body(s):
        return _text(await s.call_tool("big", {"chars": 2_000_000}))

    local = tmp_path / "local"
    text, log = run(tmp_path, body, "max_result_chars: 1000\n", local)
    assert text == big(2_000_000)
    (row,) = log
    assert row["kind"] == "passthrough" and row["fallback"] == "too_long"
    assert row["raw_tokens"] is None and row["sent_tokens"] is None and row["refs"] == []
    (summary,) = T.read_session_summaries(local)[0]
    assert summary["too_long"] == 1 and summary["written_events"] == 0


def test_the_size_cap_comes_before_any_work(tmp_path, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a text over the size cap was read")

    for name in ("count_tokens", "digest", "_structured"):
        monkeypatch.setattr(S, name, refuse)
    monkeypatch.setattr(T, "describe", refuse)
    text = json.dumps(list(range(1000)))
    out = S.SessionPipeline(C.parse({"max_result_chars": 100})).process("t", {}, text)
    assert out.text is text and out.kind == "passthrough" and out.ref is None
    assert out.raw_tokens is None and out.sent_tokens is None
    rec = T.TelemetryRecorder(T.TelemetrySettings(tmp_path))
    assert rec.record("t", text, out) is None
    assert rec.summary()["too_long"] == 1 and rec.summary()["avg_response_chars"] == len(text)


# --- references that share 8 hex digits ------------------------------------------------------


def _get_args(text: str) -> dict:
    m = _GET.search(text)
    assert m, text
    return json.loads(m.group(1))


def _part(value: Any, args: dict) -> Any:
    part = S.resolve(value, args.get("path") or "$")
    return {k: part[k] for k in args["keys"]} if args.get("keys") else part


def test_pages_that_share_8_hex_digits_keep_their_own_references(tmp_path):
    async def body(s):
        sent = [_text(await s.call_tool("page", {"n": n})) for n in COLLIDING_PAGES]
        got = [_text(await s.call_tool("tersetalk_get", _get_args(t))) for t in sent]
        return sent, got

    (sent, got), log = run(tmp_path, body, "budget: 150\nbudget_within_lossless: false\n")
    refs = [_get_args(t)["ref"] for t in sent]
    assert refs[1][:8] == refs[0]
    assert [len(r) for r in refs] == [8, 64] and [r["refs"] for r in log[:2]] == [[x] for x in refs]
    for n, text, part in zip(COLLIDING_PAGES, sent, got, strict=True):
        assert json.loads(part) == _part(json.loads(page(n)), _get_args(text))


def test_a_near_reference_never_names_its_own_result(tmp_path):
    first, second = COLLIDING_NEAR

    async def body(s):
        a = _text(await s.call_tool("near", {"n": first}))
        b = _text(await s.call_tool("near", {"n": second}))
        ref = re.fullmatch(r"> \[near-ref: ([0-9a-f]+), .*\]", b).group(1)
        return a, b, _text(await s.call_tool("tersetalk_get", {"ref": ref}))

    (a, b, got), _ = run(tmp_path, body, "hints: {near_ref: true}\n")
    assert f"$.page: {first}→{second}. call tersetalk_get " in b
    # the downstream's text as it came, whatever was sent for it
    assert got == near(first) and same_value(decode(a), json.loads(got))


def test_the_pipeline_never_gives_one_reference_to_two_bodies():
    cfg = {"budget": 150, "budget_within_lossless": False, "hints": {"near_ref": True}}
    p = S.SessionPipeline(C.parse(cfg))
    a, b = (p.process("page", {}, page(n)) for n in COLLIDING_PAGES)
    assert (len(a.ref), len(b.ref)) == (8, 64) and a.ref == b.ref[:8]
    for n, out in zip(COLLIDING_PAGES, (a, b), strict=True):
        args = _get_args(out.text)
        assert args["ref"] == out.ref
        assert json.loads(p.retrieve(**args)) == _part(json.loads(page(n)), args)
    again = p.process("page", {}, page(COLLIDING_PAGES[1]))  # the same body: its own ref
    assert again.kind == "ref" and again.ref == b.ref and b.ref in again.text
    x, y = (p.process("near", {}, near(n)) for n in COLLIDING_NEAR)
    assert y.kind == "near-ref" and x.ref in y.text and y.ref != x.ref
    assert p.retrieve(x.ref) == near(COLLIDING_NEAR[0])


# --- what the logs keep ----------------------------------------------------------------------


def test_the_logs_keep_no_argument_value_and_no_error_text(tmp_path):
    async def body(s):
        with pytest.raises(MCPError) as caught:
            await s.call_tool("echo_error", {"secret": SECRET})
        failed = await s.call_tool("echo_is_error", {"secret": SECRET})
        missing = await s.call_tool("tersetalk_get", {"ref": "0123abcd", "path": f"$.{SECRET}"})
        ok = await s.call_tool("ok", {"secret": SECRET})
        await s.call_tool("tersetalk_get", {"ref": S.digest(_text(ok))[:8]})
        return caught.value.message, _text(failed), missing.is_error

    local = tmp_path / "local"
    (said, failed, missing), log = run(tmp_path, body, "", local)
    assert SECRET in said and SECRET in failed and missing  # the client is told, as it was
    written = (tmp_path / "calls.jsonl").read_text() + "".join(
        f.read_text() for f in local.iterdir()
    )
    assert SECRET not in written and "cannot open" not in written and "not held" not in written
    size = len(json.dumps(SECRET))
    assert [(r["tool"], r["kind"], r.get("error_kind"), r.get("args")) for r in log] == [
        ("echo_error", "error", "jsonrpc", {"secret": size}),
        ("echo_is_error", "error", "is_error", {"secret": size}),
        ("tersetalk_get", "error", "retrieval", {"ref": 10, "path": size + 2}),
        ("ok", "passthrough", None, {"secret": size}),
        ("tersetalk_get", "retrieval", None, {"ref": 10}),
    ]
    assert log[0]["error_code"] == -32602


# --- agent logs and settings files -----------------------------------------------------------


def test_a_deeply_nested_agent_log_line_is_skipped_and_counted(tmp_path, capsys):
    log = tmp_path / "s.jsonl"
    line = {"type": "assistant", "sessionId": "s1",
            "message": {"id": "m1", "model": "m", "content": [], "usage": {}}}  # fmt: skip
    deep = '{"type": "user", "message": ' + "[" * 20_000 + "]" * 20_000 + "}"
    log.write_text(f"{json.dumps(line)}\n{deep}\n{json.dumps(line)}\n")
    scan = A.scan_logs([log])
    assert scan.malformed == 1 and scan.malformed_at == [f"{log}:2 (nested too deeply)"]
    assert scan.sessions["s1"].models == {"m": 1}
    out = tmp_path / "first.yaml"
    main(["formats", "tune", "from-agent-logs", str(log), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "1 malformed line(s)" in printed and "(nested too deeply)" in printed
    assert out.is_file()


def test_a_session_summary_nested_too_deeply_is_skipped(tmp_path):
    (tmp_path / "summary-0.json").write_text("[" * 20_000 + "]" * 20_000)
    assert T.read_session_summaries(tmp_path) == ([], 1)


def _laughs() -> str:
    """Nine lines whose aliases stand for 9^9 strings."""
    text, prev = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n', "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        prev = name
    return text


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("laughs.yaml", _laughs(), "aliases (*name) expand to more than"),
        ("deep.yaml", "budget: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than 100"),
        ("block.yaml", "".join(" " * i + f"k{i}:\n" for i in range(200)), "nested deeper than"),
        ("loop.yaml", "a: &a [1, *a]\n", "is inside the value it names"),
        ("deep.toml", "budget = " + "[" * 20_000 + "]" * 20_000 + "\n", "nested too deeply"),
    ],
)
def test_settings_files_that_expand_or_nest_without_end_are_refused(tmp_path, name, text, says):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(C.ProxyConfigError, match=re.escape(says)) as proxy:
        C.load(p)
    with pytest.raises(tune.TuneError, match=re.escape(says)):
        tune.load_adaptive(p)
    assert str(p) in str(proxy.value)


def test_a_settings_file_may_still_use_a_few_aliases(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("dedup:\n  write_tools: &w [write_file, move_file]\n"
                 "tools:\n  write_file: {write: true}\n")  # fmt: skip
    assert C.load(p).dedup.write_tools == ("write_file", "move_file")
