"""The protocol beyond tools, forwarded: each feature direct vs through the proxy.

The downstream is a small server on the official SDK (tests/mcp_protocol_server.py);
every test asks the same of it directly and through ``tersetalk mcp-proxy`` and
compares the answers.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack

import anyio
import mcp.types as types
from mcp_support import ROOT

SERVER = [sys.executable, str(ROOT / "tests" / "mcp_protocol_server.py")]


async def _both(script):
    """Run ``script(session, init)`` on a direct session and on a proxied one (each with
    a downstream of its own); returns (direct, proxied)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "tersetalk", "mcp-proxy", "--call-timeout", "60", "--", *SERVER]
    arms = {
        "direct": StdioServerParameters(command=SERVER[0], args=SERVER[1:]),
        "proxied": StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT)),
    }
    out = {}
    with anyio.fail_after(120):  # a hang detector, not a speed check
        for arm, params in arms.items():
            async with AsyncExitStack() as stack:
                r, w = await stack.enter_async_context(stdio_client(params))
                session = await stack.enter_async_context(ClientSession(r, w))
                init = await session.initialize()
                out[arm] = await script(session, init)
    return out["direct"], out["proxied"]


def test_name_title_version_description_and_instructions_pass_as_they_are():
    async def script(session, init):
        return init.server_info.model_dump(), init.instructions

    direct, proxied = anyio.run(_both, script)
    assert direct[0]["title"] == "Protocol Fixture"  # the fixture sends them
    assert proxied == direct


def test_capabilities_pass_as_they_are():
    async def script(session, init):
        return init.capabilities.model_dump(exclude_none=True)

    direct, proxied = anyio.run(_both, script)
    assert direct["logging"] == {} and direct["completions"] == {}
    assert direct["resources"]["subscribe"] is True
    assert proxied == direct


def test_logging_set_level_reaches_the_server():
    async def script(session, init):
        await session.set_logging_level("warning")
        return json.loads((await session.call_tool("state", {})).content[0].text)["level"]

    assert anyio.run(_both, script) == ("warning", "warning")


def test_completion_complete_is_forwarded():
    async def script(session, init):
        ref = types.ResourceTemplateReference(uri="memo://{name}")
        result = await session.complete(ref, {"name": "name", "value": "al"})
        return result.completion.model_dump()

    direct, proxied = anyio.run(_both, script)
    assert direct["values"] == ["alpha", "alpine"] and proxied == direct


def test_resources_subscribe_and_unsubscribe_are_forwarded():
    async def script(session, init):
        await session.subscribe_resource("memo://one")
        after_sub = json.loads((await session.call_tool("state", {})).content[0].text)
        await session.unsubscribe_resource("memo://one")
        after_unsub = json.loads((await session.call_tool("state", {})).content[0].text)
        return after_sub["subscribed"], after_unsub["subscribed"]

    direct, proxied = anyio.run(_both, script)
    assert direct == (["memo://one"], []) and proxied == direct
