"""A small file server on the official SDK, for the proxy's edit-safe tests (over stdio).

Its tools behave as the reference filesystem server's do where it matters here:
``read_text_file`` returns a file's text as it is on disk, ``edit_file`` replaces an
exact ``oldText`` and fails when it is not in the file, and ``read_query`` returns rows
as ``str()`` of a list of dicts (as mcp-server-sqlite does). The folder it serves is
its first argument.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()

TOOLS = [
    types.Tool(
        name="read_text_file",
        description="Read the complete contents of a file from the file system as text.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="edit_file",
        description="Replace exact text in a file; fails if oldText is not in it.",
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "oldText": {"type": "string"},
                "newText": {"type": "string"},
            },
        },
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
    ),  # fmt: skip
    types.Tool(
        name="read_query",
        description="Execute a SELECT query on the SQLite database",
        input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
    ),
]


def _text(s: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=s)], is_error=error)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    a = params.arguments or {}
    if params.name == "read_text_file":
        return _text((ROOT / a["path"]).read_text(encoding="utf-8"))
    if params.name == "edit_file":
        path = ROOT / a["path"]
        text = path.read_text(encoding="utf-8")
        if a["oldText"] not in text:
            return _text(f"Could not find exact match for edit:\n{a['oldText']}", error=True)
        path.write_text(text.replace(a["oldText"], a["newText"], 1), encoding="utf-8")
        return _text(f"edited {a['path']}")
    if params.name == "read_query":
        rows = [{"id": i, "name": f"row {i}", "ok": i % 2 == 0} for i in range(40)]
        return _text(str(rows))
    raise ValueError(params.name)


async def main() -> None:
    server = Server("editsafe-fixture", version="1.0", on_list_tools=list_tools,
                    on_call_tool=call_tool)  # fmt: skip
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
