"""A small MCP server on the official SDK, for the proxy's tests (started over stdio).

Its tools return what real servers return: JSON (a page of a larger set), a Python
literal (as mcp-server-sqlite does), plain text, Markdown with a table; a counter a write
tool bumps; an isError result; a JSON-RPC error; and a tool that kills the server.
"""

from __future__ import annotations

import json
import os

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


if __name__ == "__main__":
    anyio.run(main)
