"""``tersetalk mcp-proxy -- COMMAND [ARGS...]``: an MCP server in front of another one.

The proxy speaks MCP over its own stdin/stdout to the agent's client and starts the
downstream server given by the command (over stdio) before anything else, so the
server's start-up overlaps the proxy's own. Its data path (:mod:`tersetalk.mcp.relay`)
is a JSON-RPC relay: MCP over stdio is one JSON message per line, and every line passes
both ways as it came, byte for byte, except where the proxy owns the answer:

- the ``initialize`` answer says the server has tools (the proxy adds one);
- ``tools/list`` answers gain ``tersetalk_get`` on their last page (no ``nextCursor``),
  and the tools listed there (names, descriptions, annotations) decide what is
  re-encoded (:mod:`tersetalk.mcp.editsafe`); a tool called before the client listed
  any is decided after a listing the proxy asks for itself;
- each ``tools/call`` result's text goes through the session pipeline
  (:mod:`tersetalk.mcp.session`); images, audio, embedded resources and
  ``structuredContent`` pass unchanged, and so do results the downstream marks
  ``isError``; ``tersetalk_get`` is answered by the proxy.

Everything else passes as it is: the client's initialize and its capabilities (the
server learns what the client itself supports), ping, cancellation, roots/list_changed,
setLevel, completion, subscriptions, resources and prompts go down; log messages,
progress (under the client's own token), list_changed and resources/updated come up;
the server's sampling, elicitation, roots and ping requests reach the client and its
answers the server.

Faults come back as MCP errors, never as a hung client: a JSON-RPC error of the
downstream is returned as is; a downstream that does not answer within
``--call-timeout`` seconds is an ``INTERNAL_ERROR`` naming what happened (the request is
cancelled downstream); a downstream that closes its stdout is one too, and every later
request fails at once with the same message. A downstream that exits ends the proxy:
the calls in flight are answered with that error, one line on stderr names the server
and its exit status (the downstream's own stderr is passed on as it writes it), and the
proxy exits with status ``DOWNSTREAM_EXIT_STATUS``, well within a second, so the client
sees a dead server and can start it again instead of talking to a proxy that answers
nothing. A downstream that exits before it answered initialize is a start error (exit
status 2, the command named).

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

This module holds what the relay and ``--explain`` share; it imports nothing heavy (the
relay starts the downstream before the session pipeline and the SDK are loaded), and
``--explain`` alone uses the official SDK's client.
"""

from __future__ import annotations

import codecs
import json
import os
import signal
import sys
import threading
import time
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from tersetalk.mcp.config import ProxyConfig
    from tersetalk.mcp.session import Processed, SessionPipeline
    from tersetalk.mcp.telemetry import TelemetryRecorder

#: the tool the proxy adds (the same name as tersetalk.mcp.session.RETRIEVAL_TOOL, kept
#: here so that the relay need not import the session pipeline to recognise it)
RETRIEVAL_TOOL = "tersetalk_get"
COMPACT_NOTIFICATION = "notifications/tersetalk/compact"
#: the proxy's exit status when its downstream server exited under it
DOWNSTREAM_EXIT_STATUS = 1
#: the exit status of a start that failed (the downstream cannot run, or it exited
#: before it answered initialize), as for any other error of the command line
START_ERROR_STATUS = 2
#: how long the calls in flight get to be answered after the downstream exited, before
#: the proxy exits (seconds)
EXIT_GRACE_S = 0.2
#: JSON-RPC's code for an error of the server (here: of the proxy's downstream connection)
INTERNAL_ERROR = -32603
#: the codec error handler the downstream's stdout is decoded with (see _Undecodable)
UNDECODABLE = "tersetalk-undecodable"
#: the result ``_meta`` key that says how many bytes of it were not UTF-8
UNDECODABLE_META = "tersetalk/undecodable_bytes"


class _Undecodable:
    """Bytes read from the downstream that are not UTF-8: each becomes U+FFFD, and is
    counted here (the proxy has one downstream per process, read by one thread)."""

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


def retrieval_tool() -> dict[str, Any]:
    """The proxy's own tool as ``tools/list`` lists it (MCP's JSON)."""
    return {
        "name": RETRIEVAL_TOOL,
        "description": (
            "Get what a hint names: every '> [ref: ...]', '> [near-ref: ...]' and "
            "'> [+N more ...]' line ends with 'call tersetalk_get {...}'; pass those "
            "arguments. With ref alone: the tool result as the server sent it. A long "
            "result comes in pages: '> [page k of n ...]' names the call for the next."
        ),
        "inputSchema": {
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
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    }


class Telemetry:
    """One JSON line per tools/call, flushed as it is written (survives a kill); any
    thread may write, and a row written after :meth:`close` is dropped (the session
    ended while a call was still being answered)."""

    def __init__(self, path: Path | None) -> None:
        self.seq = 0
        self._fh = None
        self._lock = threading.Lock()
        self.closed = False
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    def write(self, **row: Any) -> None:
        """Append one row; its values are sizes, counts, names and kinds, never an
        argument's value or an error's text."""
        with self._lock:
            if self.closed:
                return
            self.seq += 1
            if self._fh is None:
                return
            self._fh.write(json.dumps({"seq": self.seq, **row}, ensure_ascii=False) + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self.closed = True
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
        from tersetalk.core.tokens import count_tokens
        from tersetalk.formats import markdown, solver  # noqa: F401

        count_tokens("warm up", tokenizer)
    except Exception:  # noqa: BLE001 - the first call loads it again and says why
        pass


def _row(tool: str, parts: list[Processed], kind: str, **extra: Any) -> dict[str, Any]:
    from tersetalk.mcp.session import fallback_kind

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


def exit_status_text(code: int) -> str:
    """A process's exit as a person reads it: ``status 3``, ``signal 9 (SIGKILL)``."""
    if code >= 0:
        return f"with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown"
    return f"on signal {-code} ({name})"


def retrieve(pipeline: SessionPipeline, args: dict[str, Any], log: Telemetry) -> dict[str, Any]:
    """A ``tersetalk_get`` call answered: its ``CallToolResult`` as MCP's JSON (an
    ``isError`` result saying what to do when the arguments name nothing held)."""
    from tersetalk.mcp.session import RetrievalError

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
        return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
    note = pipeline.changed_note(ref)
    log.write(tool=RETRIEVAL_TOOL, kind="retrieval", args=arg_sizes(args), raw_chars=len(text),
              sent_tokens=None, pipeline_s=time.perf_counter() - t0,
              changed=note is not None)  # fmt: skip
    # the text stays exact in its own item; the notice of a later write is a second one
    content = [{"type": "text", "text": text}]
    if note is not None:
        content.append({"type": "text", "text": note})
    return {"content": content}


def _retrieve(pipeline: SessionPipeline, args: dict[str, Any], log: Telemetry) -> Any:
    """:func:`retrieve` as the official SDK's ``CallToolResult``."""
    import mcp.types as types

    return types.CallToolResult.model_validate(retrieve(pipeline, args, log))


class _Local:
    """The local telemetry recorder, kept from ever failing a tool call: its first fault
    is reported on stderr and turns it off for the rest of the session. Any thread may
    call it; nothing is recorded after :meth:`close`."""

    def __init__(self, recorder: TelemetryRecorder) -> None:
        self.recorder: TelemetryRecorder | None = recorder
        self._lock = threading.RLock()

    def _failed(self, exc: Exception) -> None:
        print(f"tersetalk mcp-proxy: telemetry stopped ({type(exc).__name__}: {exc}); "
              "tool calls go on unrecorded", file=sys.stderr)  # fmt: skip
        self.recorder = None

    def record(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            if self.recorder is not None:
                try:
                    self.recorder.record(*args, **kwargs)
                except Exception as exc:  # a bug or a full disk must not cost the answer
                    self._failed(exc)

    def note(self, what: str) -> None:
        with self._lock:
            if self.recorder is not None:
                self.recorder.note(what)

    def close(self) -> None:
        with self._lock:
            if self.recorder is not None:
                try:
                    self.recorder.close()
                except Exception as exc:
                    self._failed(exc)
                self.recorder = None


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
