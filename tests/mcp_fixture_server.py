"""A small MCP server on the official SDK, for the proxy's tests (started over stdio).

Its tools return what real servers return: JSON (a page of a larger set), a Python
literal (as mcp-server-sqlite does), plain text, Markdown with a table; a counter a write
tool bumps; an isError result; a JSON-RPC error; and a tool that kills the server.

With ``--hostile`` it is a server written by hand on raw JSON-RPC instead, sending what a
careless or hostile server can: a byte that is not UTF-8, a result of any size, texts
whose SHA-256 share their first 8 hex digits, errors that quote the call's arguments.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

STATE = {"writes": 0}


def _rows(n: int) -> list[dict]:
    return [
        {"id": i, "login": f"user-{i}", "admin": i % 3 == 0, "score": None if i % 4 else i / 2,
         "url": f"https://example.org/users/user-{i}", "team": {"id": i % 2, "name": "core"}}
        for i in range(n)
    ]  # fmt: skip


def _tool(name: str, **props) -> types.Tool:
    return types.Tool(name=name, description=name,
                      input_schema={"type": "object", "properties": props})  # fmt: skip


TOOLS = [
    _tool("search", q={"type": "string"}),
    _tool("rows", n={"type": "integer"}),
    _tool("literal_rows", n={"type": "integer"}),
    _tool("status"),
    _tool("plain"),
    _tool("table"),
    _tool("write", path={"type": "string"}),
    _tool("read", path={"type": "string"}),
    _tool("fails"),
    _tool("rpc_error"),
    _tool("crash"),
    _tool("hang"),
]


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


def _text(s: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=s)])


async def call_tool(ctx, params):
    a = params.arguments or {}
    name = params.name
    if name == "search":
        return _text(json.dumps({"total_count": 247, "incomplete_results": False,
                                 "items": _rows(20)}))  # fmt: skip
    if name == "rows":
        return _text(json.dumps(_rows(int(a.get("n", 30)))))
    if name == "literal_rows":
        return _text(str(_rows(int(a.get("n", 30)))))
    if name == "status":
        return _text(json.dumps({"pipeline": {"id": 7, "status": "running" if STATE["writes"] == 0
                                 else "success", "stages": _rows(8)}}))  # fmt: skip
    if name == "plain":
        return _text("All good. " * 40)
    if name == "table":
        head = "| id | name | ok |\n|---|---|---|\n"
        body = "".join(
            f"| {i} | name number {i} | {'yes' if i % 2 else 'no'} |\n" for i in range(25)
        )
        return _text("# Users\n\n" + head + body + "\nThe end.\n")
    if name == "write":
        STATE["writes"] += 1
        return _text(f"wrote {a.get('path')}")
    if name == "read":
        return _text(json.dumps({"path": a.get("path"), "rows": _rows(12)}))
    if name == "fails":
        failed = [types.TextContent(text="no such thing")]
        return types.CallToolResult(content=failed, is_error=True)
    if name == "rpc_error":
        from mcp.shared.exceptions import MCPError

        raise MCPError(types.INVALID_PARAMS, "rpc_error: bad params on purpose")
    if name == "crash":
        os._exit(3)
    if name == "hang":
        await anyio.sleep(3600)
    raise ValueError(name)


async def main() -> None:
    server = Server("fixture", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


# --- --hostile: JSON-RPC written by hand, so it can send what the SDK never would ------

#: two pages whose JSON texts share the first 8 hex digits of their SHA-256 (found by
#: trying numbers, as any server could): different rows
COLLIDING_PAGES = (15099, 120033)
#: the same for two texts that differ in one number only (a near-reference apart)
COLLIDING_NEAR = (34410, 65836)


def page(n: int) -> str:
    return json.dumps({"page": n, "rows": _rows_from(30, 1000 * n)})


def big(chars: int) -> str:
    """A JSON array of about ``chars`` characters."""
    return "[" + "1," * (chars // 2) + "1]"


def near(n: int) -> str:
    return json.dumps({"page": n, "rows": _rows(30)})


def _rows_from(n: int, start: int) -> list[dict]:
    return [dict(r, id=r["id"] + start, login=f"user-{r['id'] + start}") for r in _rows(n)]


HOSTILE_TOOLS = [
    _tool("ok"),
    _tool("bad_utf8"),
    _tool("big", chars={"type": "integer"}),
    _tool("page", n={"type": "integer"}),
    _tool("near", n={"type": "integer"}),
    _tool("exit"),
    _tool("echo_error", secret={"type": "string"}),
    _tool("echo_is_error", secret={"type": "string"}),
]


def _hostile_call(name: str, a: dict) -> tuple[dict | None, bytes | None]:
    """(result, raw bytes to put in place of the text's ``@@``)."""

    def text(s: str, **extra) -> dict:
        return {"content": [{"type": "text", "text": s}], **extra}

    if name == "ok":
        return text("still here"), None
    if name == "bad_utf8":  # one byte that is not UTF-8, inside the result's text
        return text(json.dumps({"name": "caf@@", "rows": _rows(10)})), b"\xff"
    if name == "big":
        return text(big(int(a.get("chars", 1000)))), None
    if name == "page":
        return text(page(int(a.get("n", 0)))), None
    if name == "near":
        return text(near(int(a.get("n", 0)))), None
    if name == "exit":
        os._exit(3)
    if name == "echo_is_error":
        return text(f"no access to {a.get('secret')}", isError=True), None
    return None, None


def hostile() -> None:
    out = sys.stdout.buffer

    def send(message: dict, raw: bytes | None = None) -> None:
        line = json.dumps(message).encode()
        if raw is not None:
            line = line.replace(b"@@", raw)
        out.write(line + b"\n")
        out.flush()

    for line in sys.stdin.buffer:
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue  # a notification or a response
        reply: dict = {"jsonrpc": "2.0", "id": msg["id"]}
        method, params = msg["method"], msg.get("params") or {}
        raw = None
        if method == "initialize":
            reply["result"] = {"protocolVersion": params.get("protocolVersion"),
                               "capabilities": {"tools": {}},
                               "serverInfo": {"name": "hostile", "version": "1.0"}}  # fmt: skip
        elif method == "tools/list":
            reply["result"] = {"tools": [t.model_dump(by_alias=True, exclude_none=True)
                                         for t in HOSTILE_TOOLS]}  # fmt: skip
        elif method == "tools/call":
            args = params.get("arguments") or {}
            if params.get("name") == "echo_error":  # as servers do: the argument in the text
                reply["error"] = {"code": -32602, "message": f"cannot open {args.get('secret')}"}
            else:
                reply["result"], raw = _hostile_call(params.get("name"), args)
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": f"no method {method}"}
        send(reply, raw)


if __name__ == "__main__":
    if sys.argv[1:] == ["--hostile"]:
        hostile()
    else:
        anyio.run(main)
