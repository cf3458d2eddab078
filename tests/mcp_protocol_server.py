"""A small MCP server on the official SDK that uses the protocol beyond tools, for the
proxy's forwarding tests (over stdio): a title, a description and instructions;
resources with subscriptions; completions; logging levels. The tool ``state`` returns
what the server was asked (the level set, the URIs subscribed), so a test sees that a
request reached it through the proxy.
"""

from __future__ import annotations

import json

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

STATE: dict = {"level": None, "subscribed": []}
URI = "memo://one"


async def list_tools(ctx, params):
    tool = types.Tool(name="state", description="what the server was asked",
                      input_schema={"type": "object"})  # fmt: skip
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(STATE))])


async def list_resources(ctx, params):
    return types.ListResourcesResult(resources=[types.Resource(uri=URI, name="one")])


async def read_resource(ctx, params):
    text = types.TextResourceContents(uri=URI, text="memo one")
    return types.ReadResourceResult(contents=[text])


async def subscribe(ctx, params):
    STATE["subscribed"].append(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx, params):
    STATE["subscribed"].remove(str(params.uri))
    return types.EmptyResult()


async def complete(ctx, params):
    prefix = params.argument.value
    values = [v for v in ("alpha", "alpine", "beta") if v.startswith(prefix)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values)))


async def set_level(ctx, params):
    STATE["level"] = params.level
    return types.EmptyResult()


async def main() -> None:
    server = Server(
        "protocol-fixture", version="2.5", title="Protocol Fixture",
        description="a server for forwarding tests", instructions="Ask state first.",
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
        on_read_resource=read_resource, on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe, on_completion=complete,
        on_set_logging_level=set_level,
    )  # fmt: skip
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
