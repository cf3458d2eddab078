"""A small MCP server on the official SDK that uses the protocol beyond tools, for the
proxy's forwarding tests (over stdio): a title, a description and instructions;
resources with subscriptions; completions; logging levels. The tool ``state`` returns
what the server was asked (the level set, the URIs subscribed, the calls cancelled, the
pings and roots changes it heard of), so a test sees that a request or notification
reached it through the proxy.

The other tools use the protocol from the server's side: ``progress`` reports progress
on its own call, ``notify`` sends a log message and every list_changed and
resources/updated notification, ``wait`` waits until it is cancelled, ``sample``,
``elicit``, ``roots`` and ``ping_client`` ask the client and return its answer as JSON.
"""

from __future__ import annotations

import json

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

STATE: dict = {"level": None, "subscribed": [], "cancelled": [], "pings": 0, "roots_changed": 0}
URI = "memo://one"
TOOLS = ("state", "progress", "notify", "wait", "sample", "elicit", "roots", "ping_client")


async def list_tools(ctx, params):
    tools = [types.Tool(name=name, description=f"the fixture's {name}",
                        input_schema={"type": "object"}) for name in TOOLS]  # fmt: skip
    return types.ListToolsResult(tools=tools)


def _text(value) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))])


async def call_tool(ctx, params):
    try:
        return await _call(params.name, ctx.session)
    except MCPError as exc:  # the client declined: an error result saying so
        return types.CallToolResult(content=[types.TextContent(text=exc.message)], is_error=True)


async def _call(name, session):
    if name == "progress":
        for step in (1, 2, 3):
            await session.report_progress(step, 3, f"step {step}")
        return _text("done")
    if name == "notify":
        await session.send_log_message("warning", {"note": "from the server"}, logger="fixture")
        await session.send_tool_list_changed()
        await session.send_resource_list_changed()
        await session.send_prompt_list_changed()
        await session.send_resource_updated(URI)
        return _text("sent")
    if name == "wait":
        await session.send_log_message("info", "waiting")  # the client knows it arrived
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            STATE["cancelled"].append(name)
            raise
    if name == "sample":
        message = types.SamplingMessage(role="user", content=types.TextContent(text="hello?"))
        result = await session.create_message([message], max_tokens=20)
        return _text(result.model_dump(mode="json", exclude_none=True))
    if name == "elicit":
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}}
        result = await session.elicit_form("Which colour?", schema)
        return _text(result.model_dump(mode="json", exclude_none=True))
    if name == "roots":
        result = await session.list_roots()
        return _text([str(r.uri) for r in result.roots])
    if name == "ping_client":
        await session.send_ping()
        return _text("pong")
    return _text(STATE)


async def ping(ctx, params):
    STATE["pings"] += 1
    return types.EmptyResult()


async def roots_changed(ctx, params):
    STATE["roots_changed"] += 1


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
        on_set_logging_level=set_level, on_ping=ping, on_roots_list_changed=roots_changed,
    )  # fmt: skip
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
