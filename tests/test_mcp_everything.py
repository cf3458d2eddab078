"""The protocol forwarded through ``tersetalk mcp-proxy`` in front of the reference
``@modelcontextprotocol/server-everything`` from npm: each feature asked of it directly
and through the proxy, with a client that offers sampling, elicitation and roots, and
the answers compared. Skips (saying why) where Node.js or npm cannot install it.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import ROOT, npm_server

EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


async def _sampling(context, params):
    return types.CreateMessageResult(role="assistant", model="fixture-model",
                                     content=types.TextContent(text="sampled"))  # fmt: skip


async def _elicitation(context, params):
    return types.ElicitResult(action="decline")


async def _roots(context):
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])


async def _session(params, logs: list, script):
    async def on_log(p):
        logs.append(p.level)

    async with AsyncExitStack() as stack:
        r, w = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(
            r, w, sampling_callback=_sampling, elicitation_callback=_elicitation,
            list_roots_callback=_roots, logging_callback=on_log))  # fmt: skip
        init = await session.initialize()
        return await script(session, init)


def _both(script):
    entry = npm_server(EVERYTHING, "everything-npm")
    server = ["node", str(entry), "stdio"]
    proxy = ["-m", "tersetalk", "mcp-proxy", "--call-timeout", "60", "--", *server]
    arms = {
        "direct": StdioServerParameters(command=server[0], args=server[1:]),
        "proxied": StdioServerParameters(command=sys.executable, args=proxy, cwd=str(ROOT)),
    }
    out = {}
    for arm, params in arms.items():
        logs: list = []

        async def run(params=params, logs=logs):
            with anyio.fail_after(120):  # a hang detector, not a speed check
                return await _session(params, logs, lambda s, i: script(s, i, logs))

        out[arm] = anyio.run(run)
    return out["direct"], out["proxied"]


def _texts(result) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


@pytest.fixture(scope="module")
def everything():
    """Both arms' answers to one script that uses every feature once (one server start
    per arm for the whole module)."""

    async def script(session, init, logs):
        out = {"info": init.server_info.model_dump(exclude_none=True),
               "instructions": init.instructions,
               "capabilities": init.capabilities.model_dump(exclude_none=True)}  # fmt: skip
        tools = [t.name for t in (await session.list_tools()).tools]
        out["tools"] = [t for t in tools if t != "tersetalk_get"]
        progress: list = []

        async def on_progress(value, total, message):
            progress.append((value, total))

        long = await session.call_tool("trigger-long-running-operation",
                                       {"duration": 0.3, "steps": 3},
                                       progress_callback=on_progress)  # fmt: skip
        out["long"], out["progress"] = _texts(long), progress
        sample = await session.call_tool("trigger-sampling-request",
                                         {"prompt": "hello", "maxTokens": 5})  # fmt: skip
        out["sampling"] = (sample.is_error, "sampled" in "".join(_texts(sample)))
        elicit = await session.call_tool("trigger-elicitation-request", {})
        out["elicitation"] = (elicit.is_error, _texts(elicit))
        roots = await session.call_tool("get-roots-list", {})
        out["roots"] = (roots.is_error, "file:///tmp/project" in "".join(_texts(roots)))
        await session.set_logging_level("debug")
        await session.call_tool("toggle-simulated-logging", {})
        with anyio.move_on_after(20):  # the server logs once at once, then every 5 s
            while not logs:
                await anyio.sleep(0.02)
        await session.call_tool("toggle-simulated-logging", {})
        out["logged"] = bool(logs)
        completion = await session.complete(types.PromptReference(name="completable-prompt"),
                                            {"name": "department", "value": "E"})  # fmt: skip
        out["completion"] = completion.completion.values
        await session.send_ping()
        return out

    return _both(script)


def test_the_servers_identity_and_capabilities_pass_as_they_are(everything):
    direct, proxied = everything
    for key in ("info", "instructions", "capabilities"):
        assert proxied[key] == direct[key], key


def test_the_tools_offered_to_a_capable_client_are_all_there(everything):
    direct, proxied = everything
    assert {"trigger-sampling-request", "trigger-elicitation-request",
            "get-roots-list"} <= set(direct["tools"])  # fmt: skip
    assert proxied["tools"] == direct["tools"]


def test_progress_comes_back_for_the_long_running_operation(everything):
    direct, proxied = everything
    assert direct["progress"] == [(1, 3), (2, 3), (3, 3)]
    assert (proxied["long"], proxied["progress"]) == (direct["long"], direct["progress"])


@pytest.mark.parametrize("feature", ["sampling", "elicitation", "roots"])
def test_a_request_from_the_server_reaches_the_client(everything, feature):
    direct, proxied = everything
    assert direct[feature][0] is False
    assert proxied[feature] == direct[feature]


def test_log_messages_and_completions_come_back(everything):
    direct, proxied = everything
    assert direct["logged"] and direct["completion"]
    assert (proxied["logged"], proxied["completion"]) == (True, direct["completion"])
