"""tersetalk mcp-proxy: the session pipeline, its config, and the proxy over stdio.

The end-to-end tests start ``tersetalk mcp-proxy`` in front of a small server written
on the official SDK (tests/mcp_fixture_server.py) and talk to it with the SDK's own
client; tests/test_mcp_real_servers.py does the same in front of servers nobody here wrote.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tersetalk.formats.solver import decode
from tersetalk.formats.tree import same_value
from tersetalk.mcp import config as C
from tersetalk.mcp.literal import parse_literal
from tersetalk.mcp.session import (
    DedupCache,
    RetrievalError,
    SessionPipeline,
    apply_delta,
    resolve,
    scalar_delta,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "mcp_fixture_server.py"


def rows(n: int, start: int = 0) -> list[dict]:
    return [
        {"id": i, "login": f"user-{i}", "admin": i % 3 == 0, "score": None if i % 4 else i / 2,
         "url": f"https://example.org/users/user-{i}", "team": {"id": i % 2, "name": "core"}}
        for i in range(start, start + n)
    ]  # fmt: skip


def pipeline(**cfg) -> SessionPipeline:
    return SessionPipeline(C.parse(cfg))


# --- config -----------------------------------------------------------------------


def test_config_yaml_and_toml_read_the_same(tmp_path):
    y = tmp_path / "p.yaml"
    y.write_text("budget: 300\ndedup:\n  lru_size: 9\ntools:\n  write_query: {write: true}\n")
    t = tmp_path / "p.toml"
    t.write_text("budget = 300\n[dedup]\nlru_size = 9\n[tools.write_query]\nwrite = true\n")
    assert C.load(y) == C.load(t)
    cfg = C.load(y)
    assert cfg.budget_for("x") == 300 and cfg.dedup.lru_size == 9
    assert cfg.tool("write_query").write is True
    assert C.load(None) == C.ProxyConfig()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("budget: -3\n", "budget"),
        ("dedup:\n  lru_size: 0\n", "dedup.lru_size"),
        ("tokenizer: gpt2\n", "tokenizer"),
        ("buget: 3\n", "buget"),
        ("- a\n- b\n", "mapping"),
        ("budget: [\n", "not valid YAML"),
    ],
)
def test_config_errors_name_the_setting(tmp_path, text, says):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(C.ProxyConfigError, match=re.escape(says)):
        C.load(p)


def test_config_refuses_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(C.ProxyConfigError, match="no such config file"):
        C.load(tmp_path / "none.yaml")
    p = tmp_path / "p.json"
    p.write_text("{}")
    with pytest.raises(C.ProxyConfigError, match=r"\.yaml, \.yml or \.toml"):
        C.load(p)


# --- the literal parser (what mcp-server-sqlite prints) -----------------------------


def test_literal_reads_what_str_of_rows_prints():
    data = rows(5)
    assert parse_literal(str(data)) == data
    assert parse_literal(str({"a": [1, 2.5, None, True, "it's"]})) == {
        "a": [1, 2.5, None, True, "it's"]
    }


@pytest.mark.parametrize(
    "text",
    [
        "(1, 2)",  # a tuple has no exact JSON form
        "[(1, 2)]",
        "[{1: 'a'}]",  # a non-string key
        "[float('nan')]",  # a call: literal_eval refuses it
        "[1e400]",  # infinity
        "[{1, 2}]",  # a set
        "[b'x']",
        "__import__('os')",
        "[" * 5000 + "]" * 5000,  # deeper than MAX_DEPTH: refused before parsing
        "[" + "9" * 5000 + "]",  # more digits than Python will convert
        "not a literal",
        "",
    ],
)
def test_literal_refuses_what_json_cannot_hold_or_is_hostile(text):
    assert parse_literal(text) is None


def test_literal_refuses_text_over_the_size_cap():
    assert parse_literal(str(rows(3)), max_chars=10) is None


# --- L0 dedup -----------------------------------------------------------------------


def test_dedup_cache_lru_min_body_and_invalidation():
    c = DedupCache(lru_size=2, min_body_chars=10)
    assert c.check("short") is None and c.check("short") is None  # below the minimum
    a, b, d = "a" * 20, "b" * 20, "d" * 20
    assert c.check(a, resources=frozenset({"x"})) is None
    hint = c.check(a)
    assert hint is not None and re.fullmatch(
        r'> \[ref: ([0-9a-f]{8}), byte-identical\. call tersetalk_get \{"ref":"\1"\}\]', hint
    )
    c.check(b, resources=frozenset({"y"}))
    c.check(d, resources=frozenset({"y"}))  # evicts a (least recently used)
    assert c.check(a) is None  # a miss again: no dangling reference
    assert c.invalidate(frozenset({"y"})) >= 1
    assert c.check(d) is None  # invalidated by a write to y
    assert c.hits == 1


def test_repeat_is_a_reference_and_a_write_to_the_resource_invalidates_it():
    p = pipeline(dedup={"write_tools": ["write"]})
    body = json.dumps({"path": "a.txt", "rows": rows(12)})
    first = p.process("read", {"path": "a.txt"}, body)
    assert first.kind == "encoded"
    again = p.process("read", {"path": "a.txt"}, body)
    assert again.kind == "ref" and again.text == (
        f'> [ref: {first.ref}, byte-identical. call tersetalk_get {{"ref":"{first.ref}"}}]'
    )
    # the reference is retrievable: the text that was sent for it, which decodes to the body
    assert same_value(decode(p.retrieve(first.ref)), json.loads(body))
    assert p.before_call("write", {"path": "b.txt"}) == 0  # another resource: kept
    assert p.process("read", {"path": "a.txt"}, body).kind == "ref"
    assert p.before_call("write", {"path": "a.txt"}) == 1
    assert p.process("read", {"path": "a.txt"}, body).kind == "encoded"


def test_write_without_resource_invalidates_everything_and_compaction_too():
    p = pipeline(dedup={"write_tools": ["write_query"]}, tools={"exec": {"write": True}})
    body = json.dumps(rows(12))
    p.process("read_query", {"query": "SELECT 1"}, body)
    assert p.before_call("write_query", {"query": "INSERT ..."}) == 1
    p.process("read_query", {"query": "SELECT 1"}, body)
    assert p.before_call("exec", {}) == 1  # a per-tool write: true
    p.process("read_query", {}, body)
    assert p.compaction_boundary() == 1
    assert p.process("read_query", {}, body).kind == "encoded"


def test_compact_every_n_calls():
    p = pipeline(dedup={"compact_every": 2})
    body = json.dumps(rows(12))
    p.before_call("t", {})
    p.process("t", {}, body)
    assert p.before_call("t", {}) == 0
    assert p.process("t", {}, body).kind == "ref"
    assert p.before_call("t", {}) == 1  # the third call starts after a boundary
    assert p.process("t", {}, body).kind == "encoded"


def test_short_bodies_and_tools_with_dedup_off_are_never_references():
    p = pipeline(tools={"poll": {"dedup": False}})
    body = json.dumps(rows(12))
    p.process("poll", {}, body)
    assert p.process("poll", {}, body).kind == "encoded"
    small = json.dumps({"a": 1})
    p.process("t", {}, small)
    assert p.process("t", {}, small).kind != "ref"


# --- near-reference -------------------------------------------------------------------


def _status(state: str, took: int) -> str:
    return json.dumps({"pipeline": {"id": 7, "status": state, "duration": took,
                                    "stages": rows(8)}})  # fmt: skip


def test_near_ref_is_behind_its_setting_and_its_delta_is_exact():
    off = pipeline()
    off.process("status", {}, _status("running", 10))
    assert off.process("status", {}, _status("success", 32)).kind == "encoded"

    on = pipeline(hints={"near_ref": True})
    first = on.process("status", {}, _status("running", 10))
    near = on.process("status", {}, _status("success", 32))
    assert near.kind == "near-ref"
    m = re.fullmatch(r"> \[near-ref: ([0-9a-f]{8}), (.*)\. call tersetalk_get (.*)\]", near.text)
    assert m and m.group(1) == first.ref and json.loads(m.group(3)) == {"ref": near.ref}
    assert m.group(2) == '$.pipeline.status: "running"→"success", $.pipeline.duration: 10→32'
    # the claim: the earlier value with the delta applied is this one
    earlier, now = json.loads(_status("running", 10)), json.loads(_status("success", 32))
    assert apply_delta(earlier, scalar_delta(earlier, now)) == now


def test_near_ref_not_for_other_shapes_tools_or_long_deltas():
    p = pipeline(hints={"near_ref": True})
    p.process("status", {}, _status("running", 10))
    assert p.process("other", {}, _status("success", 11)).kind == "encoded"  # another tool
    longer = json.dumps({"pipeline": {"id": 7, "status": "x" * 80, "duration": 1,
                                      "stages": rows(8)}})  # fmt: skip
    assert p.process("status", {}, longer).kind == "encoded"  # delta over 50 bytes
    shape = json.dumps({"pipeline": {"id": 7, "status": "a", "stages": rows(9)}})
    assert p.process("status", {}, shape).kind == "encoded"


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=12),
       st.data())  # fmt: skip
@settings(max_examples=60, deadline=None)
def test_scalar_delta_applied_gives_the_new_value(value, data):
    def mutate(v):
        if isinstance(v, dict):
            return {k: mutate(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mutate(x) for x in v]
        return data.draw(st.sampled_from([v, 1, "z", None]))

    new = mutate(value)
    delta = scalar_delta(value, new)
    assert delta is not None
    assert same_value(apply_delta(value, delta), new)


# --- encoding, hints, retrieval -------------------------------------------------------


def test_json_and_literal_results_decode_to_the_downstream_value():
    p = pipeline()
    data = rows(30)
    for text in (json.dumps(data), str(data)):
        out = p.process("t", {}, text)
        assert out.kind == "encoded" and out.sent_tokens < out.raw_tokens
        assert same_value(decode(out.text), data)
    assert p.process("t", {}, str(data)).kind == "ref"


def test_text_and_unhelpful_encodings_pass_through_byte_identical():
    p = pipeline()
    for text in ("All good. " * 40, "[1, 2, 3", "(1, 2)", '{"a":1}', "x" * 10):
        out = p.process("t", {}, text)
        assert out.kind in ("passthrough", "ref") and (out.kind == "ref" or out.text == text)


def test_markdown_tables_are_re_encoded_and_prose_kept():
    p = pipeline()
    table = "| id | name |\n|---|---|\n" + "".join(f"| {i} | name {i} |\n" for i in range(20))
    text = "# Users\n\nSome prose.\n\n" + table + "\nThe end.\n"
    out = p.process("t", {}, text)
    assert out.kind == "encoded" and out.source == "markdown"
    assert out.text.startswith("# Users\n\nSome prose.\n") and out.text.endswith("The end.\n")


def test_metadata_hint_only_on_a_page_of_a_larger_set():
    p = pipeline()
    page = p.process("search", {"q": "x"}, json.dumps({"total_count": 247, "items": rows(20)}))
    assert (
        page.text.splitlines()[0]
        == '> [query: "search {\\"q\\":\\"x\\"}" | total=247 | returned=20]'
    )
    assert same_value(decode(page.text), {"total_count": 247, "items": rows(20)})
    whole = p.process("search", {"q": "y"}, json.dumps({"total_count": 20, "items": rows(20)}))
    assert "[query:" not in whole.text
    off = pipeline(hints={"metadata": False})
    assert "[query:" not in off.process("s", {}, json.dumps({"total": 99, "items": rows(20)})).text


_HINT = re.compile(
    r"^> \[\+(\d+) more (items|keys|chars) of (.*?)(?:: .*)?\. call tersetalk_get (.*)\]$"
)


@pytest.mark.parametrize("budget", [120, 250, 400])
def test_budget_elides_and_each_overflow_call_returns_exactly_the_elided_part(budget):
    value = {"repo": "octo/x", "description": "d" * 300, "items": rows(40),
             "owner": {"login": "octo", "id": 1}}  # fmt: skip
    p = pipeline(budget=budget, budget_within_lossless=False)  # a cap: it elides
    out = p.process("t", {}, json.dumps(value))
    assert out.sent_tokens <= budget and not out.lossless
    calls = [m for line in out.text.splitlines() if (m := _HINT.match(line))]
    assert calls, out.text
    for m in calls:
        n, what, at, args = int(m.group(1)), m.group(2), m.group(3), json.loads(m.group(4))
        got = json.loads(p.retrieve(**args))
        whole = resolve(value, at)
        if what == "items":  # the last n items
            assert got == whole[len(whole) - n :]
        elif what == "chars":  # the last n characters
            assert got == whole[len(whole) - n :]
        else:  # the named keys, in the object's order
            assert list(got) == args["keys"] and len(got) == n
            assert all(got[k] == whole[k] for k in got)


def test_retrieval_errors_say_what_to_do():
    p = pipeline(retrieval={"keep": 1})
    a = p.process("t", {}, json.dumps(rows(12)))
    p.process("t", {}, json.dumps(rows(12, 50)))
    with pytest.raises(RetrievalError, match="call the tool again"):
        p.retrieve(a.ref)
    b = p.process("t", {}, json.dumps(rows(12, 80)))
    with pytest.raises(RetrievalError, match=r"no key 'nope'"):
        p.retrieve(b.ref, "$[0].nope")
    with pytest.raises(RetrievalError, match="must start with"):
        p.retrieve(b.ref, "rows")
    with pytest.raises(RetrievalError, match="no item 99"):
        p.retrieve(b.ref, "$[99]")
    assert json.loads(p.retrieve(b.ref, "$[1:3]")) == rows(12, 80)[1:3]
    assert json.loads(p.retrieve(b.ref, '$[0]["login"]')) == "user-80"


def test_results_above_the_size_cap_pass_through():
    p = pipeline(max_result_chars=100)
    text = json.dumps(rows(12))
    out = p.process("t", {}, text)
    assert out.kind == "passthrough" and out.text == text and "max_result_chars" in out.fallback


_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12)
_records = st.lists(
    st.dictionaries(st.sampled_from(["id", "name", "state", "user", "tags"]),
                    _scalars | st.dictionaries(st.sampled_from(["a", "b"]), _scalars, max_size=2)
                    | st.lists(_scalars, max_size=2), max_size=5),
    min_size=1, max_size=12,
)  # fmt: skip


@given(_records, st.sampled_from(["json", "literal"]))
@settings(max_examples=60, deadline=None)
def test_every_encoded_result_decodes_to_the_downstream_value(value, form):
    text = json.dumps(value) if form == "json" else str(value)
    out = pipeline().process("t", {}, text)
    if out.kind == "encoded":
        assert same_value(decode(out.text), value)
    else:
        assert out.kind == "passthrough" and out.text == text


# --- the proxy over stdio, with the SDK's client ---------------------------------------


async def _session(config: Path | None, telemetry: Path, body):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "tersetalk", "mcp-proxy", "--telemetry", str(telemetry),
            "--call-timeout", "20"]  # fmt: skip
    if config is not None:
        args += ["--proxy-config", str(config)]
    args += ["--", sys.executable, str(FIXTURE)]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    with anyio.fail_after(300):  # a hang detector, not a speed check
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return await body(s)


def _text(result) -> str:
    return result.content[0].text


def test_proxy_end_to_end_over_stdio(tmp_path):
    from mcp.shared.exceptions import MCPError

    cfg = tmp_path / "proxy.yaml"
    cfg.write_text("budget_within_lossless: false\ndedup:\n  write_tools: [write]\ntools:\n"
                   "  rows: {budget: 200}\n")  # fmt: skip
    tel = tmp_path / "calls.jsonl"
    seen: dict = {}

    async def body(s):
        tools = await s.list_tools()
        seen["tools"] = [t.name for t in tools.tools]
        seen["search"] = _text(await s.call_tool("search", {"q": "x"}))
        seen["literal"] = _text(await s.call_tool("literal_rows", {"n": 30}))
        seen["read1"] = _text(await s.call_tool("read", {"path": "a"}))
        seen["read2"] = _text(await s.call_tool("read", {"path": "a"}))
        await s.call_tool("write", {"path": "a"})
        seen["read3"] = _text(await s.call_tool("read", {"path": "a"}))
        seen["plain"] = _text(await s.call_tool("plain", {}))
        seen["budget"] = _text(await s.call_tool("rows", {"n": 40}))
        m = next(_HINT.match(x) for x in seen["budget"].splitlines() if _HINT.match(x))
        seen["hint"] = m.groups()
        seen["got"] = _text(await s.call_tool("tersetalk_get", json.loads(m.group(4))))
        bad = await s.call_tool("tersetalk_get", {"ref": "00000000"})
        seen["bad"] = (bad.is_error, _text(bad))
        fails = await s.call_tool("fails", {})
        seen["fails"] = (fails.is_error, _text(fails))
        for name in ("rpc_error", "crash"):  # crash last: its exit ends the proxy
            try:
                await s.call_tool(name, {})
            except MCPError as exc:
                seen[name] = exc.message

    anyio.run(_session, cfg, tel, body)
    assert seen["tools"][-1] == "tersetalk_get" and "search" in seen["tools"]
    assert same_value(decode(seen["search"]), {"total_count": 247, "incomplete_results": False,
                                               "items": rows(20)})  # fmt: skip
    assert same_value(decode(seen["literal"]), rows(30))
    assert seen["read2"].startswith("> [ref: ") and not seen["read3"].startswith("> [ref: ")
    assert same_value(decode(seen["read3"]), {"path": "a", "rows": rows(12)})
    assert seen["plain"] == "All good. " * 40  # text passes through byte-identical
    n, _, at, _ = seen["hint"]
    assert at == "$" and json.loads(seen["got"]) == rows(40)[40 - int(n) :]
    assert seen["bad"][0] and "not held" in seen["bad"][1]
    assert seen["fails"] == (True, "no such thing")  # the downstream's isError, unchanged
    assert "bad params on purpose" in seen["rpc_error"]  # its JSON-RPC error, as sent
    assert "closed its connection" in seen["crash"]  # a dead downstream: an error, not a hang
    log = [json.loads(x) for x in tel.read_text().splitlines()]
    kinds = [(r["tool"], r["kind"]) for r in log]
    assert ("read", "ref") in kinds and ("tersetalk_get", "retrieval") in kinds
    write = next(r for r in log if r["tool"] == "write")
    # read's entry (path a), and search's and literal_rows' (no resource argument: a write
    # may have changed what they read)
    assert write["invalidated"] == 3
    first = next(r for r in log if r["tool"] == "search")
    assert first["sent_tokens"] < first["raw_tokens"] and first["downstream_s"] >= 0


def test_proxy_times_out_a_silent_downstream(tmp_path):
    from mcp.shared.exceptions import MCPError

    cfg = tmp_path / "p.toml"
    cfg.write_text("budget = 500\n")
    out: dict = {}

    async def body(s):
        try:
            await s.call_tool("hang", {})
        except MCPError as exc:
            out["hang"] = exc.message

    async def run():
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        args = ["-m", "tersetalk", "mcp-proxy", "--call-timeout", "2", "--proxy-config", str(cfg),
                "--", sys.executable, str(FIXTURE)]  # fmt: skip
        params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
        with anyio.fail_after(300):
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await body(s)

    anyio.run(run)
    assert "did not answer within 2 s" in out["hang"]


def test_cli_errors_are_clear(tmp_path):
    import subprocess

    def run(*args):
        return subprocess.run([sys.executable, "-m", "tersetalk", "mcp-proxy", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip

    r = run()
    assert r.returncode == 2 and "give the downstream server's command after --" in r.stderr
    bad = tmp_path / "p.yaml"
    bad.write_text("budget: zero\n")
    r = run("--proxy-config", str(bad), "--", "true")
    assert r.returncode == 2 and "budget" in r.stderr
    r = run("--", str(tmp_path / "no-such-server"))
    assert r.returncode == 2 and "cannot start" in r.stderr
    r = run("--", sys.executable, "-c", "import sys; sys.exit(3)")  # dies before initialize
    assert r.returncode == 2 and "did not complete MCP's initialize" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("--print-schema")
    assert r.returncode == 0 and "dedup" in json.loads(r.stdout)["properties"]


def test_a_reference_is_only_sent_while_tersetalk_get_can_return_it():
    # the retrieval store (keep 1) forgets the body before the dedup cache (5) does
    p = pipeline(retrieval={"keep": 1})
    body = json.dumps(rows(12))
    p.process("t", {}, body)
    p.process("t", {}, json.dumps(rows(12, 40)))
    again = p.process("t", {}, body)
    assert again.kind == "encoded" and same_value(decode(again.text), rows(12))
    ref = p.process("t", {}, body)
    assert ref.kind == "ref" and same_value(decode(p.retrieve(ref.ref)), rows(12))


@pytest.mark.parametrize(
    "text",
    [
        "[" + "9" * 100_000 + "]",  # past Python's integer digit limit: not JSON to us
        '[{"a": "\\ud800", "b": 1}, {"a": "x", "b": 2}]',  # decodes to a lone surrogate
        "[" * 5000 + "]" * 5000,
        "{" * 200_000,
    ],
)
def test_hostile_results_pass_through_as_they_came(text):
    # not paged here: the first is over the default page bound (tests/test_mcp_paging.py)
    out = pipeline(page_tokens=None).process("t", {}, text)
    assert out.kind == "passthrough" and out.text == text
    out.text.encode("utf-8")  # what goes over stdio stays encodable
