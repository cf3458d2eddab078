"""``tersetalk mcp-proxy -- COMMAND [ARGS...]``: an MCP server in front of another one.

The proxy speaks MCP over its own stdin/stdout to the agent's client, starts the
downstream server given by the command (over stdio, with the official SDK's client),
and passes every request through: tools (listed unchanged, plus ``tersetalk_get``),
resources, resource templates and prompts, as far as the downstream offers them. Each
tool result's text goes through the session pipeline (:mod:`tersetalk.mcp.session`);
images, audio, embedded resources and ``structuredContent`` pass unchanged, and so do
results the downstream marks ``isError``.

The rest of the protocol passes both ways (:class:`_Upstream`): the client's ping,
cancellation (a cancelled call is cancelled downstream), roots/list_changed, setLevel,
completion and subscriptions go down; the server's log messages, list_changed and
resources/updated notifications come up, progress of a call comes back under the
client's own token, and the server's sampling, elicitation and roots requests reach the
client and its answers the server. The server's pings are answered by the proxy itself.

Faults come back as MCP errors, never as a hung client: a JSON-RPC error of the
downstream is returned as is; a downstream that does not answer within
``--call-timeout`` seconds is an ``INTERNAL_ERROR`` naming what happened; a downstream
that closes its stdout is one too, and every later request fails at once with the same
message. A downstream that exits ends the proxy: the calls in flight are answered with
that error, one line on stderr names the server and its exit status (the downstream's
own stderr is passed on as it writes it), and the proxy exits with status
``DOWNSTREAM_EXIT_STATUS``, well within a second, so the client sees a dead server and
can start it again instead of talking to a proxy that answers nothing.

Bytes the downstream writes that are not UTF-8 are each replaced by U+FFFD, never
fatal; a result that held some says how many in its ``_meta``
(``tersetalk/undecodable_bytes``) and in its ``--telemetry`` line.

A compaction boundary (the agent's context was summarised, earlier results may be gone
from it) is signalled by the notification ``notifications/tersetalk/compact``, by
SIGUSR1 to the proxy, or every ``dedup.compact_every`` calls.

Two logs, both optional: ``--telemetry FILE`` appends one JSON line per tools/call
(the experiment's per-call record); ``--telemetry-dir DIR`` writes the local telemetry
the tuner reads (:mod:`tersetalk.mcp.telemetry`: sampled per-response events without
payload text, and a session summary at close). Neither holds an argument's value or an
error's text: a call's arguments are logged as their names and sizes in bytes, an error
as its kind (``jsonrpc``, ``is_error``, ``timeout``, ``closed``, ``failed``,
``retrieval``) and code.
"""

from __future__ import annotations

import codecs
import json
import os
import signal
import sys
import threading
import time
import warnings
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR

from tersetalk.mcp.config import ProxyConfig
from tersetalk.mcp.session import (
    RETRIEVAL_TOOL,
    Processed,
    RetrievalError,
    SessionPipeline,
    fallback_kind,
)

if TYPE_CHECKING:
    from tersetalk.mcp.telemetry import TelemetryRecorder, TelemetrySettings

COMPACT_NOTIFICATION = "notifications/tersetalk/compact"
#: the proxy's exit status when its downstream server exited under it
DOWNSTREAM_EXIT_STATUS = 1
#: how often the downstream's exit status is looked at, and how long the calls in
#: flight get to be answered before the proxy exits (seconds)
EXIT_POLL_S, EXIT_GRACE_S = 0.05, 0.2
#: the codec error handler the downstream's stdout is decoded with (see _Undecodable)
UNDECODABLE = "tersetalk-undecodable"
#: the result ``_meta`` key that says how many bytes of it were not UTF-8
UNDECODABLE_META = "tersetalk/undecodable_bytes"


class _Undecodable:
    """Bytes read from the downstream that are not UTF-8: each becomes U+FFFD, and is
    counted here (the proxy has one downstream per process)."""

    count = 0
    told = False  # said so on stderr (once a session)

    @classmethod
    def replace(cls, exc: UnicodeError) -> tuple[str, int]:
        if not isinstance(exc, UnicodeDecodeError | UnicodeEncodeError):
            raise exc
        if isinstance(exc, UnicodeDecodeError):
            cls.count += exc.end - exc.start
        return "\ufffd", exc.end


codecs.register_error(UNDECODABLE, _Undecodable.replace)


class ProxyStartError(RuntimeError):
    """The downstream server could not be started or did not answer initialize."""


def retrieval_tool():
    import mcp.types as types

    return types.Tool(
        name=RETRIEVAL_TOOL,
        description=(
            "Get what a hint names: every '> [ref: ...]', '> [near-ref: ...]' and "
            "'> [+N more ...]' line ends with 'call tersetalk_get {...}'; pass those "
            "arguments. With ref alone: the tool result as the server sent it. A long "
            "result comes in pages: '> [page k of n ...]' names the call for the next."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "ref": {"type": "string", "pattern": "^[0-9a-f]{8}([0-9a-f]{56})?$"},
                "path": {"type": "string"},
                "keys": {"type": "array", "items": {"type": "string"}},
                "page": {"type": "integer", "minimum": 1},
                "original": {"type": "boolean"},
            },
            "required": ["ref"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )


class Telemetry:
    """One JSON line per tools/call, flushed as it is written (survives a kill)."""

    def __init__(self, path: Path | None) -> None:
        self.seq = 0
        self._fh = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    def write(self, **row: Any) -> None:
        """Append one row; its values are sizes, counts, names and kinds, never an
        argument's value or an error's text."""
        self.seq += 1
        if self._fh is None:
            return
        self._fh.write(json.dumps({"seq": self.seq, **row}, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def arg_sizes(args: dict[str, Any]) -> dict[str, int]:
    """A call's arguments as the logs keep them: each name and its value's size in bytes
    (as compact JSON), never the value."""
    return {
        str(k): len(json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
                    .encode("utf-8", "surrogatepass"))
        for k, v in args.items()
    }  # fmt: skip


def _total(values: list[int | None]) -> int | None:
    """The sum, or None if any part was not counted."""
    return None if None in values else sum(v for v in values if v is not None)


def warm_up(tokenizer: str) -> None:
    """Load what the first tool result needs (the tokenizer's tables, the encoders and
    their decoders); a failure here is the first call's to report, so it passes."""
    try:
        from tersetalk.formats import markdown, solver  # noqa: F401
        from tersetalk.tokens import count_tokens

        count_tokens("warm up", tokenizer)
    except Exception:  # noqa: BLE001 - the first call loads it again and says why
        pass


def _row(tool: str, parts: list[Processed], kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "tool": tool,
        "kind": kind,
        "source": parts[0].source if parts else "",
        "raw_chars": sum(p.raw_chars for p in parts),
        "raw_tokens": _total([p.raw_tokens for p in parts]),
        "sent_tokens": _total([p.sent_tokens for p in parts]),
        "dedup_hit": any(p.kind == "ref" for p in parts),
        "hints": [h for p in parts for h in p.hints],
        "refs": [p.ref for p in parts if p.ref],
        "lossless": all(p.lossless for p in parts),
        "verbatim": any(p.verbatim for p in parts),
        "fallback": next((fallback_kind(p.fallback) for p in parts if p.fallback), None),
        "pipeline_s": sum(p.pipeline_s for p in parts),
        "pages": max((p.pages for p in parts), default=1),
        **extra,
    }


async def serve(
    command: list[str],
    config: ProxyConfig,
    *,
    telemetry: Path | None = None,
    call_timeout_s: float = 600.0,
    cwd: str | None = None,
    local_telemetry: TelemetrySettings | None = None,
) -> None:
    """Run the proxy on this process's stdio until the client closes it.

    ``local_telemetry`` (None: off) records every tool-result text for the tuner; its
    summary is written when the session ends, and a fault in it is reported on stderr
    once and never fails a call."""
    import anyio
    import mcp.types as types
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ),
                                   cwd=cwd)  # fmt: skip
    # the SDK hands this name to the codec: bytes that are not UTF-8 become U+FFFD and
    # are counted, where "strict" would end the session at the first one
    params.encoding_error_handler = UNDECODABLE  # type: ignore[assignment]
    log = Telemetry(telemetry)
    pipeline = SessionPipeline(config)
    local: _Local | None = None
    spawned: list[Any] = []
    # the tokenizer and the encoders load while the downstream starts and the client
    # initializes, not in the first tool call (about a third of a second)
    threading.Thread(target=warm_up, args=(config.tokenizer,), daemon=True).start()
    async with AsyncExitStack() as stack:
        with _keep_process(spawned):
            read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        upstream = _Upstream(call_timeout_s)
        down = await stack.enter_async_context(ClientSession(read, write, **upstream.callbacks()))
        try:
            with anyio.fail_after(call_timeout_s):
                init = await down.initialize()
        except Exception as exc:  # it exited, printed garbage, or never answered
            raise ProxyStartError(
                f"the downstream server {' '.join(command)!r} did not complete MCP's initialize "
                f"({type(exc).__name__}: {exc}); run that command by itself to see its error"
            ) from None
        caps = init.capabilities
        lock = anyio.Lock()
        if local_telemetry is not None:
            from tersetalk.mcp.telemetry import TelemetryRecorder

            local = _Local(TelemetryRecorder(local_telemetry, tokenizer=config.tokenizer,
                                             server=init.server_info.name))  # fmt: skip

        dead: list[_Fault] = []  # the fault that ended the downstream connection, if any

        def gone(fault: _Fault) -> _Fault:
            """The connection is over: this fault answers every later request at once."""
            if not dead:
                dead.append(fault)
            return dead[0]

        async def forward(call, *args: Any, **kwargs: Any):
            """A downstream request; its faults as MCP errors the client can read."""
            if dead:
                raise _Fault(dead[0].kind, dead[0].message)
            try:
                with anyio.fail_after(call_timeout_s):
                    return await call(*args, **kwargs)
            except MCPError as exc:
                if exc.code != types.CONNECTION_CLOSED:
                    raise  # the downstream's own JSON-RPC error, as it sent it
                raise gone(_Fault("closed", f"the downstream server {command[0]!r} closed its "
                                  "connection (it exited or closed its stdout); restart the "
                                  "proxy to start it again")) from None  # fmt: skip
            except TimeoutError:
                raise _Fault("timeout", f"the downstream server did not answer within "
                             f"{call_timeout_s:g} s ({command[0]})") from None  # fmt: skip
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                    OSError) as exc:  # fmt: skip
                raise gone(_Fault("closed", f"the connection to the downstream server "
                                  f"{command[0]!r} broke ({type(exc).__name__}); restart the "
                                  "proxy to start it again")) from None  # fmt: skip
            except Exception as exc:  # one answer the SDK could not read: this call fails
                raise _Fault("failed", f"the downstream server failed ({type(exc).__name__}: "
                             f"{exc}; {command[0]})") from None  # fmt: skip

        async def list_tools(ctx, params):
            result = await forward(down.list_tools, params=params)
            for tool in result.tools:
                if tool.name == RETRIEVAL_TOOL:
                    raise MCPError(types.INTERNAL_ERROR, f"the downstream server has its own "
                                   f"tool {RETRIEVAL_TOOL!r}; the proxy cannot add it")  # fmt: skip
                ann = tool.annotations
                if ann is not None and ann.read_only_hint is False:
                    pipeline.annotated_writes.add(tool.name)
                pipeline.note_tool(tool)
            if result.next_cursor is None:
                result = result.model_copy(update={"tools": [*result.tools, retrieval_tool()]})
            return result

        async def call_tool(ctx, params):
            name, args = params.name, dict(params.arguments or {})
            if name == RETRIEVAL_TOOL:
                async with lock:
                    if local is not None:
                        local.note("retrieval")
                    return _retrieve(pipeline, args, log)
            async with lock:
                invalidated = pipeline.before_call(name, args)
            t0 = time.perf_counter()
            undecodable = _Undecodable.count
            shape = {"args": arg_sizes(args), "invalidated": invalidated}
            # the client asked for progress: the downstream is asked too, and each of its
            # progress notifications goes back under the client's own token
            asked = _progress_token(params) is not None
            progress = {"progress_callback": ctx.session.report_progress} if asked else {}
            try:
                result = await forward(down.call_tool, name, args, **progress)
            except MCPError as exc:
                took = time.perf_counter() - t0
                log.write(**_row(name, [], "error", **shape, downstream_s=took,
                                 error_kind=exc.kind if isinstance(exc, _Fault) else "jsonrpc",
                                 error_code=exc.code,
                                 **_replaced(undecodable)))  # fmt: skip
                if local is not None:
                    local.note("error")
                raise
            downstream_s = time.perf_counter() - t0
            replaced = _replaced(undecodable)
            if replaced:
                result = _with_meta(result, replaced)
            if result.is_error:
                log.write(**_row(name, [], "error", **shape, downstream_s=downstream_s,
                                 error_kind="is_error", **replaced))  # fmt: skip
                if local is not None:
                    local.note("error")
                return result
            parts: list[Processed] = []
            content = []
            for item in result.content:
                if isinstance(item, types.TextContent):
                    # the knapsack is CPU work: off the event loop, so pings and other
                    # requests are still answered; one result at a time (session state)
                    async with lock:
                        p = await anyio.to_thread.run_sync(_process, pipeline, local, name,
                                                           args, item.text, downstream_s,
                                                           len(parts))  # fmt: skip
                    parts.append(p)
                    item = item.model_copy(update={"text": p.text})
                content.append(item)
            kinds = {p.kind for p in parts}
            kind = kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "passthrough")
            log.write(**_row(name, parts, kind, **shape, downstream_s=downstream_s,
                             tokenizer=config.tokenizer, **replaced))  # fmt: skip
            return result.model_copy(update={"content": content})

        handlers: dict[str, Any] = {"on_list_tools": list_tools, "on_call_tool": call_tool}
        if caps.resources is not None:
            handlers["on_list_resources"] = lambda ctx, p: forward(down.list_resources, params=p)
            handlers["on_list_resource_templates"] = lambda ctx, p: forward(
                down.list_resource_templates, params=p
            )
            handlers["on_read_resource"] = lambda ctx, p: forward(down.read_resource, p.uri)
        if caps.prompts is not None:
            handlers["on_list_prompts"] = lambda ctx, p: forward(down.list_prompts, params=p)
            handlers["on_get_prompt"] = lambda ctx, p: forward(down.get_prompt, p.name,
                                                                p.arguments)  # fmt: skip
        if caps.resources is not None and caps.resources.subscribe:
            handlers["on_subscribe_resource"] = lambda ctx, p: forward(
                down.send_request, types.SubscribeRequest(params=p), types.EmptyResult
            )
            handlers["on_unsubscribe_resource"] = lambda ctx, p: forward(
                down.send_request, types.UnsubscribeRequest(params=p), types.EmptyResult
            )
        if caps.completions is not None:
            handlers["on_completion"] = lambda ctx, p: forward(
                down.send_request, types.CompleteRequest(params=p), types.CompleteResult
            )
        if caps.logging is not None:
            handlers["on_set_logging_level"] = lambda ctx, p: forward(
                down.send_request, types.SetLevelRequest(params=p), types.EmptyResult
            )
        handlers["on_ping"] = lambda ctx, p: forward(down.send_ping)

        async def roots_changed(ctx, params) -> None:
            await down.send_notification(types.RootsListChangedNotification())

        handlers["on_roots_list_changed"] = roots_changed
        info = init.server_info
        with warnings.catch_warnings():  # the SDK warns of features a 2026 peer drops
            warnings.simplefilter("ignore")
            server = Server(info.name, version=info.version, instructions=init.instructions,
                            **handlers)  # fmt: skip

        async def initialized(ctx, params) -> None:
            upstream.connected(ctx.session)

        server.add_notification_handler("notifications/initialized", types.NotificationParams,
                                        initialized)  # fmt: skip

        async def compact(ctx, params) -> None:
            async with lock:
                pipeline.compaction_boundary()

        server.add_notification_handler(COMPACT_NOTIFICATION, types.NotificationParams, compact)
        _on_sigusr1(lambda: compact(None, None))

        def close_logs() -> None:
            log.close()
            if local is not None:
                local.close()

        name = info.name or command[0]
        try:
            read_in, write_out = await stack.enter_async_context(stdio_server())
            async with anyio.create_task_group() as tg:
                if spawned:
                    tg.start_soon(_exit_with, spawned[0], name, command[0], close_logs)
                await server.run(read_in, write_out, _as_downstream(init))
                tg.cancel_scope.cancel()  # the client closed the session: a normal end
        finally:
            close_logs()


async def explain(command: list[str], config: ProxyConfig, *, call_timeout_s: float = 600.0,
                  cwd: str | None = None) -> list[str]:  # fmt: skip
    """``tersetalk mcp-proxy --explain``: start the downstream, list its tools (every
    page), and return what the proxy would do with each one's results and why
    (:mod:`tersetalk.mcp.editsafe`); the downstream is stopped again."""
    import anyio
    import mcp.types as types
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from tersetalk.mcp.editsafe import decide_tool, explain_lines

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ),
                                   cwd=cwd)  # fmt: skip
    params.encoding_error_handler = UNDECODABLE  # type: ignore[assignment]
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        down = await stack.enter_async_context(ClientSession(read, write))
        try:
            with anyio.fail_after(call_timeout_s):
                init = await down.initialize()
                tools, cursor = [], None
                while True:
                    asked = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await down.list_tools(params=asked)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except Exception as exc:
            raise ProxyStartError(
                f"the downstream server {' '.join(command)!r} did not list its tools "
                f"({type(exc).__name__}: {exc}); run that command by itself to see its error"
            ) from None
    info = init.server_info
    decisions = [decide_tool(config, t) for t in tools]
    return explain_lines(info.name, info.version, decisions, config, RETRIEVAL_TOOL)


def _as_downstream(init: Any) -> Any:
    """The proxy's initialize answer: the downstream's name, title, version, description,
    website, icons, instructions and capabilities as it sent them, with ``tools``
    advertised in any case (the proxy adds ``tersetalk_get``)."""
    import mcp.types as types
    from mcp.server.models import InitializationOptions

    info, caps = init.server_info, init.capabilities
    if caps.tools is None:
        caps = caps.model_copy(update={"tools": types.ToolsCapability()})
    return InitializationOptions(
        server_name=info.name, server_version=info.version, title=info.title,
        description=info.description, website_url=info.website_url, icons=info.icons,
        capabilities=caps, instructions=init.instructions,
    )  # fmt: skip


def _progress_token(params: Any) -> str | int | None:
    """The progress token a request's ``_meta`` carries, if the client asked for progress."""
    meta = getattr(params, "meta", None) or {}
    token = meta.get("progressToken", meta.get("progress_token"))
    return None if isinstance(token, bool) else token


class _Upstream:
    """The proxy's side toward its client, for what the downstream server starts.

    The downstream is started (and initialized) before the client connects, so the
    proxy offers it sampling, elicitation and roots (with ``listChanged``) in any case;
    a request for one waits until the client has initialized, goes to the client as it
    is, and the client's answer (or error) goes back. A client that did not declare the
    capability gets no request: the downstream is answered with the error the SDK's own
    client gives for a feature it lacks, saying the proxy's client declined it.
    Notifications (log messages, list_changed, resources/updated) wait for the client
    the same way and are then passed on unchanged; progress goes back through the call
    it belongs to (``report_progress``), never here."""

    def __init__(self, timeout_s: float) -> None:
        import anyio

        self.timeout_s = timeout_s
        self.session: Any = None
        self.ready = anyio.Event()

    def connected(self, session: Any) -> None:
        if self.session is None:
            self.session = session
            self.ready.set()

    def callbacks(self) -> dict[str, Any]:
        import mcp.types as types

        async def sampling(context, params):
            answer = types.CreateMessageResult
            if params.tools:  # a request that offers tools may be answered with tool use
                answer = types.CreateMessageResultWithTools
            return await self._ask(types.CreateMessageRequest(params=params), answer,
                                   types.ClientCapabilities(sampling=types.SamplingCapability()),
                                   "sampling")  # fmt: skip

        async def elicitation(context, params):
            return await self._ask(types.ElicitRequest(params=params), types.ElicitResult,
                                   types.ClientCapabilities(elicitation=types.ElicitationCapability()),
                                   "elicitation")  # fmt: skip

        async def list_roots(context):
            return await self._ask(types.ListRootsRequest(), types.ListRootsResult,
                                   types.ClientCapabilities(roots=types.RootsCapability()),
                                   "roots")  # fmt: skip

        return {"sampling_callback": sampling, "elicitation_callback": elicitation,
                "list_roots_callback": list_roots, "message_handler": self._notify}  # fmt: skip

    async def _client(self) -> Any:
        import anyio

        with anyio.fail_after(self.timeout_s):
            await self.ready.wait()
        return self.session

    async def _ask(self, request: Any, result_type: Any, needs: Any, feature: str) -> Any:
        import mcp.types as types

        try:
            session = await self._client()
        except TimeoutError:
            return types.ErrorData(code=types.INTERNAL_ERROR, message="no client connected to "
                                   f"tersetalk mcp-proxy within {self.timeout_s:g} s")  # fmt: skip
        if not session.check_client_capability(needs):
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"the client of "
                                   f"tersetalk mcp-proxy does not support {feature}")  # fmt: skip
        try:
            return await session.send_request(request, result_type)
        except MCPError as exc:  # the client's own error, passed back as it sent it
            return exc.error

    async def _notify(self, message: Any) -> None:
        import mcp.types as types

        if isinstance(message, Exception):
            return  # a transport fault: the calls in flight report it
        if isinstance(message, types.CancelledNotification | types.ProgressNotification):
            return  # applied by the SDK / routed through the call's own progress callback
        try:
            session = await self._client()
            await session.send_notification(message)
        except Exception as exc:  # the client went away: nothing to tell it any more
            print(f"tersetalk mcp-proxy: a notification from the downstream server could "
                  f"not be passed on ({type(exc).__name__})", file=sys.stderr)  # fmt: skip


class _keep_process:
    """Keep the downstream's process handle while the SDK's ``stdio_client`` starts it.

    The SDK does not hand the process out, and its exit status is what a client needs
    to hear when the server dies; the SDK's spawn function is wrapped for the duration
    of the start only. If a later SDK renames it, nothing is kept and the proxy falls
    back to answering every later call with the "closed" error."""

    def __init__(self, into: list[Any]) -> None:
        self.into = into
        self.module: Any = None
        self.original: Any = None

    def __enter__(self) -> None:
        import mcp.client.stdio as sdk

        original = getattr(sdk, "_create_platform_compatible_process", None)
        if original is None:
            return
        into = self.into

        async def spawn(*args: Any, **kwargs: Any) -> Any:
            process = await original(*args, **kwargs)
            into.append(process)
            return process

        self.module, self.original = sdk, original
        sdk._create_platform_compatible_process = spawn

    def __exit__(self, *exc: object) -> None:
        if self.module is not None:
            self.module._create_platform_compatible_process = self.original


def exit_status_text(code: int) -> str:
    """A process's exit as a person reads it: ``status 3``, ``signal 9 (SIGKILL)``."""
    if code >= 0:
        return f"with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown"
    return f"on signal {-code} ({name})"


async def _exit_with(process: Any, name: str, program: str, close_logs: Any) -> None:
    """Wait for the downstream to exit, then end the proxy with one line on stderr.

    The proxy's own stdin is read in a worker thread that no cancellation reaches (the
    client keeps it open), so after the logs are closed the process ends at once."""
    import anyio

    while process.returncode is None:
        await anyio.sleep(EXIT_POLL_S)
    await anyio.sleep(EXIT_GRACE_S)  # the calls in flight get their "closed" answer
    print(f"tersetalk mcp-proxy: the downstream server {name!r} ({program}) exited "
          f"{exit_status_text(process.returncode)}; the proxy exits with status "
          f"{DOWNSTREAM_EXIT_STATUS} so the client can start it again",
          file=sys.stderr)  # fmt: skip
    try:
        close_logs()
    finally:
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(DOWNSTREAM_EXIT_STATUS)


class _Fault(MCPError):
    """A fault of the downstream connection, sent as ``INTERNAL_ERROR``; ``kind`` (timeout,
    closed, failed) is what the logs keep of it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(INTERNAL_ERROR, message)
        self.kind = kind


def _replaced(before: int) -> dict[str, int]:
    """``{"undecodable_bytes": n}`` for the bytes replaced since the count was ``before``
    (those read while a call was outstanding), or nothing if there were none."""
    n = _Undecodable.count - before
    if n and not _Undecodable.told:
        _Undecodable.told = True
        print(f"tersetalk mcp-proxy: the downstream server wrote {n} byte(s) that are not "
              "UTF-8; each was replaced by U+FFFD (the result's _meta and its --telemetry "
              "line say how many); the session goes on", file=sys.stderr)  # fmt: skip
    return {"undecodable_bytes": n} if n else {}


def _with_meta(result: Any, replaced: dict[str, int]) -> Any:
    """``result`` with the count of its replaced bytes in its ``_meta``."""
    meta = {**(result.meta or {}), UNDECODABLE_META: replaced["undecodable_bytes"]}
    return result.model_copy(update={"meta": meta})


class _Local:
    """The local telemetry recorder, kept from ever failing a tool call: its first fault
    is reported on stderr and turns it off for the rest of the session."""

    def __init__(self, recorder: TelemetryRecorder) -> None:
        self.recorder: TelemetryRecorder | None = recorder

    def _failed(self, exc: Exception) -> None:
        print(f"tersetalk mcp-proxy: telemetry stopped ({type(exc).__name__}: {exc}); "
              "tool calls go on unrecorded", file=sys.stderr)  # fmt: skip
        self.recorder = None

    def record(self, *args: Any, **kwargs: Any) -> None:
        if self.recorder is not None:
            try:
                self.recorder.record(*args, **kwargs)
            except Exception as exc:  # a bug or a full disk must not cost the answer
                self._failed(exc)

    def note(self, what: str) -> None:
        if self.recorder is not None:
            self.recorder.note(what)

    def close(self) -> None:
        if self.recorder is not None:
            try:
                self.recorder.close()
            except Exception as exc:
                self._failed(exc)


def _process(pipeline: SessionPipeline, local: _Local | None, tool: str,
             args: dict[str, Any], text: str, downstream_s: float,
             part: int) -> Processed:  # fmt: skip
    """One result through the pipeline, then into the local telemetry (in the worker
    thread, so hashing and describing the payload stay off the event loop)."""
    p = pipeline.process(tool, args, text)
    if local is not None:
        local.record(tool, text, p, context_partition=pipeline.compactions,
                     downstream_s=downstream_s, part=part)  # fmt: skip
    return p


def _retrieve(pipeline: SessionPipeline, args: dict[str, Any], log: Telemetry):
    import mcp.types as types

    t0 = time.perf_counter()
    ref, path, keys = args.get("ref"), args.get("path"), args.get("keys")
    page, original = args.get("page"), args.get("original", False)
    try:
        if not isinstance(ref, str):
            raise RetrievalError("give ref, the hex digits a hint names after 'ref'")
        if path is not None and not isinstance(path, str):
            raise RetrievalError("path is a string such as $.rows[5:]")
        if keys is not None and not (
            isinstance(keys, list) and all(isinstance(k, str) for k in keys)
        ):
            raise RetrievalError("keys is a list of strings")
        if not isinstance(original, bool):
            raise RetrievalError("original is true or false")
        text = pipeline.retrieve(ref, path, keys, page=page, original=original)
    except RetrievalError as exc:
        log.write(tool=RETRIEVAL_TOOL, kind="error", args=arg_sizes(args),
                  error_kind="retrieval", pipeline_s=time.perf_counter() - t0)  # fmt: skip
        return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
    note = pipeline.changed_note(ref)
    log.write(tool=RETRIEVAL_TOOL, kind="retrieval", args=arg_sizes(args), raw_chars=len(text),
              sent_tokens=None, pipeline_s=time.perf_counter() - t0,
              changed=note is not None)  # fmt: skip
    # the text stays exact in its own item; the notice of a later write is a second one
    content = [types.TextContent(text=text)]
    if note is not None:
        content.append(types.TextContent(text=note))
    return types.CallToolResult(content=content)


def _on_sigusr1(compact) -> None:
    """SIGUSR1 starts a compaction boundary (under the session's lock, on the loop)."""
    import asyncio

    loop = asyncio.get_running_loop()
    tasks: set = set()

    def fire() -> None:
        task = loop.create_task(compact())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        loop.add_signal_handler(signal.SIGUSR1, fire)
    except (NotImplementedError, RuntimeError, AttributeError):  # not on this platform/loop
        pass
