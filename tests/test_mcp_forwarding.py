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


async def _both(script, **session_kwargs):
    """Run ``script(session, init)`` on a direct session and on a proxied one (each with
    a downstream of its own; ``session_kwargs`` go to both clients' ``ClientSession``);
    returns (direct, proxied)."""
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
                session = await stack.enter_async_context(ClientSession(r, w, **session_kwargs))
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


async def _state(session) -> dict:
    return json.loads((await session.call_tool("state", {})).content[0].text)


async def _until(check, limit_s: float = 20.0):
    """Poll ``check()`` (async) until it returns something truthy or the limit passes
    (a hang detector: a notification that never arrives fails the comparison)."""
    with anyio.move_on_after(limit_s):
        while not (found := await check()):
            await anyio.sleep(0.02)
        return found
    return await check()


def test_progress_of_a_call_comes_back_under_the_clients_token():
    async def script(session, init):
        seen = []

        async def progress(value, total, message):
            seen.append((value, total, message))

        result = await session.call_tool("progress", {}, progress_callback=progress)
        return result.content[0].text, seen

    direct, proxied = anyio.run(_both, script)
    assert direct == ('"done"', [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")])
    assert proxied == direct


def test_log_messages_list_changed_and_resource_updates_reach_the_client():
    arms: list[list] = []  # what each arm's client was sent, one list per arm

    async def handler(message):
        if not isinstance(message, Exception):
            arms[-1].append(message.model_dump(mode="json", exclude_none=True, by_alias=True))

    async def script(session, init):
        arms.append([])
        await session.call_tool("notify", {})

        async def all_five():
            return len(arms[-1]) >= 5

        await _until(all_five)
        return sorted(arms[-1], key=lambda m: m["method"])

    direct, proxied = anyio.run(lambda: _both(script, message_handler=handler))
    assert [m["method"] for m in direct] == [
        "notifications/message", "notifications/prompts/list_changed",
        "notifications/resources/list_changed", "notifications/resources/updated",
        "notifications/tools/list_changed",
    ]  # fmt: skip
    assert direct[0]["params"] == {"level": "warning", "logger": "fixture",
                                   "data": {"note": "from the server"}}  # fmt: skip
    assert proxied == direct


def test_a_cancelled_call_is_cancelled_at_the_server():
    waiting: list = []  # one event per arm: the server said it has the call

    async def on_log(params):
        if params.data == "waiting":
            waiting[-1].set()

    async def script(session, init):
        waiting.append(anyio.Event())
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def call():
                with scope:
                    await session.call_tool("wait", {})

            tg.start_soon(call)
            await waiting[-1].wait()
            scope.cancel()  # the client gives up: it sends notifications/cancelled

        async def cancelled():
            return (await _state(session))["cancelled"]

        return await _until(cancelled)

    assert anyio.run(lambda: _both(script, logging_callback=on_log)) == (["wait"], ["wait"])


async def _sampling(context, params):
    asked = params.messages[0].content.text
    text = types.TextContent(text=f"answer to {asked}")
    return types.CreateMessageResult(role="assistant", model="fixture-model", content=text)


async def _elicitation(context, params):
    return types.ElicitResult(action="accept", content={"colour": f"blue ({params.message})"})


async def _roots(context):
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])


CALLBACKS = {"sampling_callback": _sampling, "elicitation_callback": _elicitation,
             "list_roots_callback": _roots}  # fmt: skip


def test_sampling_elicitation_and_roots_reach_the_client_and_its_answers_the_server():
    async def script(session, init):
        out = {}
        for tool in ("sample", "elicit", "roots"):
            result = await session.call_tool(tool, {})
            out[tool] = (result.is_error, json.loads(result.content[0].text))
        return out

    direct, proxied = anyio.run(lambda: _both(script, **CALLBACKS))
    assert direct["sample"][1]["content"]["text"] == "answer to hello?"
    colour = {"colour": "blue (Which colour?)"}
    assert direct["elicit"][1] == {"action": "accept", "content": colour}
    assert direct["roots"] == (False, ["file:///tmp/project"])
    assert proxied == direct


def test_a_client_without_sampling_declines_it_through_the_proxy_as_directly():
    # the server gets the client's own initialize (its capabilities) and the client's own
    # answer to the request: nothing of the proxy's stands in between
    async def script(session, init):
        result = await session.call_tool("sample", {})
        return result.is_error, result.content[0].text

    direct, proxied = anyio.run(_both, script)
    assert direct == (True, "Sampling not supported")
    assert proxied == direct


def test_roots_list_changed_reaches_the_server():
    async def script(session, init):
        await session.send_notification(types.RootsListChangedNotification())

        async def heard():
            return (await _state(session))["roots_changed"]

        return await _until(heard)

    assert anyio.run(lambda: _both(script, **CALLBACKS)) == (1, 1)


def test_ping_reaches_the_server_and_the_servers_ping_is_answered():
    async def script(session, init):
        await session.send_ping()
        pong = json.loads((await session.call_tool("ping_client", {})).content[0].text)
        return (await _state(session))["pings"], pong

    assert anyio.run(_both, script) == ((1, "pong"), (1, "pong"))
