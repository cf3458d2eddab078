"""The proxy's data path: a JSON-RPC relay over stdio (see :mod:`tersetalk.mcp.proxy`).

MCP's stdio transport is one JSON-RPC message per line. :class:`Relay` starts the
downstream server as the first thing it does, then moves lines: from the client to the
server and back, each as it came. The proxy's own settings, the session pipeline and the
tokenizer load once the server answered ``initialize`` (:meth:`Relay.wait_answered`), so
the client's ``initialize`` is answered as soon as the server answers it: neither after
the proxy's imports nor slowed by them on a busy CPU.

The relay runs on threads, each with one job, and imports nothing beyond the standard
library until the session pipeline is needed:

- *client*: reads the client's lines; requests are forwarded and remembered (method,
  deadline) until answered, ``tools/call`` go through *session* first;
- *downstream*: reads the server's lines (bytes that are not UTF-8 become U+FFFD,
  counted per line); an answer to a remembered request is matched by its id: the
  ``initialize`` and ``tools/list`` answers get what the proxy adds, ``tools/call``
  results go through *session*, the rest (and every request and notification of the
  server) pass to the client at once;
- *session*: everything that touches the session pipeline, one at a time in arrival
  order: a call's ``before_call`` (writes forget what they may change) before it is sent,
  a result's re-encoding, ``tersetalk_get``, a compaction boundary;
- *deadlines*: a request unanswered after ``--call-timeout`` seconds is answered with
  ``INTERNAL_ERROR`` and cancelled downstream (its late answer is dropped);
- *exit*: waits for the downstream's exit and ends the proxy (see the proxy's docstring).

Ids: the client's requests keep their ids (the server sees the client's messages as
sent); the proxy's own requests (a ``tools/list`` when a tool is called before any was
listed) use string ids starting ``tersetalk-proxy/``, a namespace no client is expected
to use, and their answers never reach the client.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from queue import SimpleQueue
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from tersetalk.mcp.proxy import (
    COMPACT_NOTIFICATION,
    DOWNSTREAM_EXIT_STATUS,
    EXIT_GRACE_S,
    INTERNAL_ERROR,
    RETRIEVAL_TOOL,
    START_ERROR_STATUS,
    UNDECODABLE,
    UNDECODABLE_META,
    _Local,
    _Undecodable,
    arg_sizes,
    exit_status_text,
    retrieval_tool,
    retrieve,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tersetalk.mcp.config import ProxyConfig
    from tersetalk.mcp.telemetry import TelemetrySettings

#: the prefix of the ids of the proxy's own requests to the downstream
OWN_ID = "tersetalk-proxy/"
#: the longest the proxy waits for the downstream's initialize answer before it loads its
#: settings and the session pipeline anyway (seconds; see Relay.wait_answered)
INIT_WAIT_S = 2.0
#: how long a downstream gets to exit after the client closed the session and the proxy
#: closed the server's stdin, then after SIGTERM (seconds)
STOP_WAIT_S = 1.0


class _Call:
    """A tools/call on its way: what its result and its log line need."""

    __slots__ = ("args", "invalidated", "name", "t0")

    def __init__(self, name: str, args: dict[str, Any], invalidated: int) -> None:
        self.name, self.args, self.invalidated = name, args, invalidated
        self.t0 = time.perf_counter()


class _Pending:
    """A request sent downstream and not yet answered; ``own``: the proxy's own request
    (its answer is the proxy's)."""

    __slots__ = ("call", "deadline", "id", "method", "own")

    def __init__(self, rid: Any, method: str, deadline: float, call: _Call | None = None,
                 own: bool = False) -> None:  # fmt: skip
        self.id, self.method, self.deadline, self.call, self.own = rid, method, deadline, call, own


class _Fault:
    """A fault of the downstream connection, answered as ``INTERNAL_ERROR``; ``kind``
    (timeout, closed, failed) is what the logs keep of it."""

    __slots__ = ("kind", "message")

    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message


def _key(rid: Any) -> str:
    """A request id as a dict key: 1 and "1" are different ids."""
    return json.dumps(rid, sort_keys=True)


def _dump(message: Any) -> bytes:
    """One message as a line; text that cannot be UTF-8 (a lone surrogate the server
    escaped) is written as JSON escapes, as it came."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, separators=(",", ":")) + "\n").encode("ascii")


def _error(rid: Any, code: int, message: str) -> bytes:
    return _dump({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


class Relay:
    """``tersetalk mcp-proxy`` on this process's stdio, in front of ``command``.

    :meth:`spawn` starts the downstream and the threads that relay lines; :meth:`serve`
    (once the settings are read) adds the session pipeline and waits for the end: it
    returns the proxy's exit status (or the process exits from the *exit* thread, with
    ``DOWNSTREAM_EXIT_STATUS``). :meth:`abort` stops the downstream when the settings
    turned out bad."""

    def __init__(self, command: list[str], *, call_timeout_s: float = 600.0,
                 cwd: str | None = None) -> None:  # fmt: skip
        self.command = list(command)
        self.timeout_s = call_timeout_s
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.start_error: OSError | None = None
        self.server_name: str | None = None
        self.initialized = False  # the downstream answered initialize
        self.closing = False  # the client closed the session
        self.exit_status = 0
        self._out = sys.stdout.buffer
        self._out_lock = threading.Lock()
        self._down_lock = threading.Lock()
        self._state = threading.Condition()  # guards the four below
        self._pending: dict[str, _Pending] = {}
        self._abandoned: set[str] = set()  # answered by the proxy: a late answer is dropped
        self._queued: set[str] = set()  # tools/calls not yet sent (in the session's queue)
        self._cancelled: set[str] = set()  # of those, the ones the client cancelled
        self._dead: _Fault | None = None
        self._jobs: SimpleQueue[Callable[[], None]] = SimpleQueue()
        self._setup = threading.Event()  # set when serve() has the pipeline, or abort()
        self._ok = False
        self._answered = threading.Event()  # initialize answered, or the downstream gone
        self._listed = threading.Event()  # the downstream's tools were listed
        self._list_asked = False
        self._unnoted: list[dict[str, Any]] = []  # tools listed, not yet in the pipeline
        self._own_ids = itertools.count(1)
        self._finished = threading.Event()
        self._logs_closed = False
        self._logs_lock = threading.Lock()
        self.pipeline: Any = None
        self.config: ProxyConfig | None = None
        self.log: Any = None
        self._local_settings: TelemetrySettings | None = None
        self._local: _Local | None = None

    # --- start and end -----------------------------------------------------------------

    def spawn(self) -> None:
        """Start the downstream (its stderr is the proxy's) and the relay's threads; a
        command that cannot run is kept in :attr:`start_error`, for the caller to report
        after it checked its settings."""
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=self.cwd,
                start_new_session=True,  # its own group: stopping it stops what it started
            )  # fmt: skip
        except OSError as exc:
            self.start_error = exc
            return
        for target in (self._from_client, self._from_downstream, self._deadlines,
                       self._session, self._watch_exit):  # fmt: skip
            threading.Thread(target=target, name=f"relay{target.__name__}", daemon=True).start()
        try:  # a compaction boundary waits in the session's queue until the pipeline is
            signal.signal(signal.SIGUSR1, lambda *_: self._jobs.put(self._compact))
        except (ValueError, AttributeError, OSError):  # not the main thread, or no SIGUSR1
            pass

    def wait_answered(self, limit_s: float = INIT_WAIT_S) -> None:
        """Wait until the downstream answered initialize (or exited or closed its stdout),
        at most ``limit_s``. The proxy's own start-up work (its settings, the session
        pipeline, the tokenizer: about half a second of CPU) comes after it, so it never
        competes with the downstream's start for the CPU while the client waits; the first
        tool call, which needs it, comes later (tools/list does not wait for it)."""
        if self.proc is not None:
            self._answered.wait(limit_s)

    def abort(self) -> None:
        """The proxy will not serve (its settings are bad): stop the downstream."""
        self._setup.set()
        self._stop()

    def serve(self, config: ProxyConfig, *, telemetry: Path | None = None,
              local_telemetry: TelemetrySettings | None = None) -> int:  # fmt: skip
        """Load the session pipeline (the tokenizer and encoders warm up beside it), then
        relay until the session ends; the proxy's exit status."""
        from tersetalk.mcp.proxy import Telemetry, warm_up

        try:
            threading.Thread(target=warm_up, args=(config.tokenizer,), daemon=True).start()
            from tersetalk.core.tokens import start_count_helper
            from tersetalk.mcp.session import HELPER_PRELOAD, SessionPipeline

            if config.count_helper:  # long results counted, first rows weighed, on another core
                start_count_helper((config.tokenizer,), preload=HELPER_PRELOAD)

            self.config = config
            self.log = Telemetry(telemetry)
            self.pipeline = SessionPipeline(config)
            self._local_settings = local_telemetry
            self._ok = True
        except BaseException:  # it cannot serve (an install without a package): say why
            self.abort()
            raise
        finally:
            self._setup.set()
        try:
            while not self._finished.wait(1.0):
                pass
        finally:
            if not self._finished.is_set():  # interrupted: the downstream goes too
                self._close_logs()
                self._stop()
        return self.exit_status

    def _finish(self, status: int) -> None:
        self.exit_status = status
        self._finished.set()

    def _stop(self) -> int | None:
        """Stop the downstream: its stdin closed, then SIGTERM to its group, then
        SIGKILL; its exit status (None if it could not be waited for)."""
        proc = self.proc
        if proc is None:
            return None
        try:
            proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
            if sig is not None:
                try:
                    if hasattr(os, "killpg"):
                        os.killpg(proc.pid, sig)
                    else:  # no process groups here: the process alone
                        proc.send_signal(sig)
                except OSError:  # gone already
                    pass
            try:
                return proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                continue
        return proc.poll()

    def _close_logs(self) -> None:
        """Close both logs (once; a row or event after this is dropped). A session
        without a call still gets its local telemetry summary."""
        with self._logs_lock:
            if self._logs_closed:
                return
            self._logs_closed = True
            local = self._new_local() if self._local is None else self._local
        if self.log is not None:
            self.log.close()
        if local is not None:
            local.close()

    def _local_recorder(self) -> _Local | None:
        """The local telemetry (None: off or closed), started at its first use: it is
        named after the server, whose name the initialize answer gives."""
        with self._logs_lock:
            if self._local is None and not self._logs_closed:
                self._local = self._new_local()
            return None if self._logs_closed else self._local

    def _new_local(self) -> _Local | None:
        if not self._ok or self._local_settings is None:
            return None
        from tersetalk.mcp.telemetry import TelemetryRecorder

        recorder = TelemetryRecorder(self._local_settings, server=self.server_name or "",
                                     tokenizer=self.config.tokenizer)  # type: ignore[union-attr]  # fmt: skip
        self._local = _Local(recorder)
        return self._local

    def _note(self, what: str) -> None:
        local = self._local_recorder()
        if local is not None:
            local.note(what)

    def _start_failed(self, code: int) -> str:
        return (f"the downstream server {' '.join(self.command)!r} did not complete MCP's "
                f"initialize (it exited {exit_status_text(code)}); run that command by "
                "itself to see its error")  # fmt: skip

    def _watch_exit(self) -> None:
        """The downstream exited: the calls in flight are answered, one line says so, and
        the proxy exits (with the start error's status if it never answered initialize)."""
        assert self.proc is not None
        code = self.proc.wait()
        self._answered.set()
        self._setup.wait()
        if not self._ok or self.closing:
            return  # the caller reports the bad settings / the session ended normally
        time.sleep(EXIT_GRACE_S)  # the downstream's stdout ends: the calls get "closed"
        if self.closing:
            return
        self._gone(self._closed())  # anything still waiting (a child kept stdout open)
        if self.initialized:
            name = self.server_name or self.command[0]
            print(f"tersetalk mcp-proxy: the downstream server {name!r} ({self.command[0]}) "
                  f"exited {exit_status_text(code)}; the proxy exits with status "
                  f"{DOWNSTREAM_EXIT_STATUS} so the client can start it again",
                  file=sys.stderr)  # fmt: skip
            status = DOWNSTREAM_EXIT_STATUS
        else:
            print(f"tersetalk mcp-proxy: error: {self._start_failed(code)}", file=sys.stderr)
            status = START_ERROR_STATUS
        try:
            self._close_logs()
        finally:
            sys.stderr.flush()
            with self._out_lock:
                self._out.flush()
            os._exit(status)  # the client's stdin is read by a thread nothing can wake

    # --- writing -----------------------------------------------------------------------

    def _up(self, line: bytes) -> None:
        """A line to the client."""
        if not line.endswith(b"\n"):
            line += b"\n"
        with self._out_lock:
            try:
                self._out.write(line)
                self._out.flush()
            except (OSError, ValueError):  # the client is gone: its stdin ends the session
                pass

    def _down(self, line: bytes) -> bool:
        """A line to the downstream; False (and every request failed) if it broke."""
        if not line.endswith(b"\n"):
            line += b"\n"
        stdin = self.proc.stdin  # type: ignore[union-attr]
        with self._down_lock:
            try:
                stdin.write(line)  # type: ignore[union-attr]
                stdin.flush()  # type: ignore[union-attr]
                return True
            except (OSError, ValueError) as exc:
                broke = exc
        self._gone(_Fault("closed", f"the connection to the downstream server "
                          f"{self.command[0]!r} broke ({type(broke).__name__}); restart the "
                          "proxy to start it again"))  # fmt: skip
        return False

    def _closed(self) -> _Fault:
        return _Fault("closed", f"the downstream server {self.command[0]!r} closed its "
                      "connection (it exited or closed its stdout); restart the proxy to "
                      "start it again")  # fmt: skip

    def _answer_fault(self, pending: _Pending, fault: _Fault) -> None:
        """A request the downstream will not answer: the client gets the fault."""
        if pending.own:
            self._listed.set()  # the calls waiting for the listing go on without it
            return
        call = pending.call
        if call is not None:  # logged first: the answer may end the session
            self._log_error(call, fault.kind, INTERNAL_ERROR)
        self._up(_error(pending.id, INTERNAL_ERROR, fault.message))

    def _log_error(self, call: _Call, kind: str, code: int | None, **extra: Any) -> None:
        from tersetalk.mcp.proxy import _row

        took = time.perf_counter() - call.t0
        row = _row(call.name, [], "error", args=arg_sizes(call.args),
                   invalidated=call.invalidated, downstream_s=took, error_kind=kind,
                   **({} if code is None else {"error_code": code}), **extra)  # fmt: skip
        self.log.write(**row)
        self._note("error")

    def _gone(self, fault: _Fault) -> None:
        """The downstream connection is over: every request waiting, and every later one,
        is answered with ``fault`` (the first such fault)."""
        with self._state:
            if self._dead is None:
                self._dead = fault
            fault = self._dead
            waiting = list(self._pending.values())
            self._abandoned.update(self._pending)
            self._pending.clear()
        self._listed.set()
        for p in waiting:
            self._answer_fault(p, fault)

    def _forward(self, rid: Any, method: str, line: bytes, call: _Call | None = None,
                 own: bool = False) -> None:  # fmt: skip
        """A request to the downstream, remembered until it is answered."""
        key = _key(rid)
        pending = _Pending(rid, method, time.monotonic() + self.timeout_s, call, own)
        with self._state:
            fault = self._dead
            if fault is None:
                self._pending[key] = pending
                self._state.notify_all()
        if fault is not None:
            self._answer_fault(pending, fault)
            return
        self._down(line)

    # --- the client's side -------------------------------------------------------------

    def _from_client(self) -> None:
        stdin = sys.stdin.buffer
        while line := stdin.readline():
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                msg = None
            if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
                # an answer to the server's request, a batch, or not JSON: the server's
                self._pass_down(line)
            elif "id" in msg:
                self._client_request(msg, line)
            else:
                self._client_notification(msg, line)
        self._client_closed()

    def _pass_down(self, line: bytes) -> None:
        if self._dead is None:
            self._down(line)

    def _client_request(self, msg: dict[str, Any], line: bytes) -> None:
        if msg["method"] == "tools/call":
            with self._state:
                self._queued.add(_key(msg["id"]))
            self._jobs.put(partial(self._call, msg, line))
        else:
            self._forward(msg["id"], msg["method"], line)

    def _client_notification(self, msg: dict[str, Any], line: bytes) -> None:
        method = msg["method"]
        if method == COMPACT_NOTIFICATION:  # the proxy's own: the server never knew it
            self._jobs.put(self._compact)
            return
        if method == "notifications/cancelled":
            params = msg.get("params")
            if isinstance(params, dict) and "requestId" in params:
                key = _key(params["requestId"])
                with self._state:
                    if self._pending.pop(key, None) is not None:
                        self._abandoned.add(key)  # the client ignores any answer to it
                    elif key in self._queued:
                        self._cancelled.add(key)  # not sent yet: it never will be
        self._pass_down(line)

    def _client_closed(self) -> None:
        """The client closed the session: the logs are closed, the downstream stopped."""
        self._answered.set()  # no initialize to wait for any more
        self._setup.wait()
        if not self._ok:
            return  # the settings were bad: the caller says so and exits
        self.closing = True
        self._close_logs()
        code = self._stop()
        status = 0
        if not self.initialized and code is not None and code > 0:
            # it failed by itself before it ever answered initialize (a proxy that was
            # started and closed without a session stops a server that answered nothing)
            print(f"tersetalk mcp-proxy: error: {self._start_failed(code)}", file=sys.stderr)
            status = START_ERROR_STATUS
        self._finish(status)

    # --- the downstream's side ---------------------------------------------------------

    def _from_downstream(self) -> None:
        out = self.proc.stdout  # type: ignore[union-attr]
        while raw := out.readline():  # type: ignore[union-attr]
            if not raw.strip():
                continue
            before = _Undecodable.count
            text = raw.decode("utf-8", UNDECODABLE)
            replaced = _Undecodable.count - before
            line = raw if not replaced else text.encode("utf-8")
            try:
                msg = json.loads(text)
            except (ValueError, RecursionError):
                print(f"tersetalk mcp-proxy: the downstream server wrote a line that is not "
                      f"JSON-RPC ({len(raw)} bytes); it is not passed on",
                      file=sys.stderr)  # fmt: skip
                continue
            if replaced:
                self._tell_replaced(replaced)
            if isinstance(msg, dict) and "method" not in msg and "id" in msg:
                self._answer(msg, line, replaced)
            else:  # the server's request or notification (or a batch): the client's
                self._up(line)
        self._answered.set()
        self._gone(self._closed())

    def _answer(self, msg: dict[str, Any], line: bytes, replaced: int) -> None:
        key = _key(msg["id"])
        with self._state:
            pending = self._pending.pop(key, None)
            late = pending is None and key in self._abandoned
            self._abandoned.discard(key)
        if late:
            return  # timed out or cancelled: the client has had its answer
        if pending is None:
            self._up(line)  # not a request the proxy saw: the client's to judge
        elif pending.own:
            self._own_listing(msg)
        elif pending.method == "initialize":
            self._up(self._initialize_answer(msg, line))
            self._answered.set()
        elif pending.method == "tools/list":
            self._up(self._tools_listed(msg, line))
        elif pending.call is not None:
            self._jobs.put(partial(self._called, pending.call, msg, line, replaced))
        else:
            self._up(line)

    def _initialize_answer(self, msg: dict[str, Any], line: bytes) -> bytes:
        """The server's initialize answer as it came, with ``tools`` among its
        capabilities (the proxy adds ``tersetalk_get``)."""
        result = msg.get("result")
        if not isinstance(result, dict):
            return line
        info = result.get("serverInfo")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            self.server_name = info["name"]
        self.initialized = True
        caps = result.get("capabilities")
        if not isinstance(caps, dict):
            caps = result["capabilities"] = {}
        if caps.get("tools") is not None:
            return line
        caps["tools"] = {}
        return _dump(msg)

    def _tell_replaced(self, n: int) -> None:
        if not _Undecodable.told:
            _Undecodable.told = True
            print(f"tersetalk mcp-proxy: the downstream server wrote {n} byte(s) that are not "
                  "UTF-8; each was replaced by U+FFFD (the result's _meta and its --telemetry "
                  "line say how many); the session goes on", file=sys.stderr)  # fmt: skip

    # --- the proxy's own listing of the tools ------------------------------------------

    def _ask_tools(self, cursor: Any = None) -> None:
        rid = f"{OWN_ID}{next(self._own_ids)}"
        message = {"jsonrpc": "2.0", "id": rid, "method": "tools/list"}
        if cursor is not None:
            message["params"] = {"cursor": cursor}
        self._forward(rid, "tools/list", _dump(message), own=True)

    def _own_listing(self, msg: dict[str, Any]) -> None:
        result = msg.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            self._listed.set()  # an error: the calls are decided by the tools' names
            return
        self._learn(result["tools"])
        cursor = result.get("nextCursor")
        if cursor is not None:
            self._ask_tools(cursor)
        else:
            self._listed.set()

    # --- the session (one thread: every use of the pipeline) ---------------------------

    def _session(self) -> None:
        self._setup.wait()
        if not self._ok:
            return
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception as exc:  # a bug of the proxy: said, and the session goes on
                print(f"tersetalk mcp-proxy: internal error ({type(exc).__name__}: {exc})",
                      file=sys.stderr)  # fmt: skip

    def _compact(self) -> None:
        self.pipeline.compaction_boundary()

    def _note_tools(self, tools: list[Any]) -> None:
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            annotations = tool.get("annotations")
            if not isinstance(annotations, dict):
                annotations = None
            elif annotations.get("readOnlyHint") is False:
                self.pipeline.annotated_writes.add(tool["name"])
            description = tool.get("description")
            self.pipeline.note_tool(SimpleNamespace(
                name=tool["name"], annotations=annotations,
                description=description if isinstance(description, str) else None,
            ))  # fmt: skip

    def _learn(self, tools: list[Any]) -> None:
        """Tools the downstream listed, for the session to note (see _drain)."""
        with self._state:
            self._unnoted += [t for t in tools if isinstance(t, dict)]

    def _drain(self) -> None:
        """The tools listed so far into the pipeline (the session's thread)."""
        with self._state:
            tools, self._unnoted = self._unnoted, []
        self._note_tools(tools)

    def _tools_listed(self, msg: dict[str, Any], line: bytes) -> bytes:
        """A page of the server's tools as the client gets it: ``tersetalk_get`` added
        on the last page; the tools are kept for the edit-safe decisions."""
        result = msg.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return line  # an error, or nothing the proxy can add to
        tools = result["tools"]
        if any(isinstance(t, dict) and t.get("name") == RETRIEVAL_TOOL for t in tools):
            return _error(msg["id"], INTERNAL_ERROR, f"the downstream server has its own "
                          f"tool {RETRIEVAL_TOOL!r}; the proxy cannot add it")  # fmt: skip
        self._learn(tools)
        self._listed.set()
        if result.get("nextCursor") is not None:
            return line
        tools.append(retrieval_tool())
        return _dump(msg)

    def _ensure_listed(self) -> None:
        """The tools' names, descriptions and annotations are known before a call is
        decided: when the client calls before it listed them, the proxy lists them
        (every page; waiting at most ``--call-timeout``)."""
        if not self._listed.is_set() and not self._list_asked:
            self._list_asked = True
            self._ask_tools()
        self._listed.wait(self.timeout_s)
        self._drain()

    def _call(self, msg: dict[str, Any], line: bytes) -> None:
        """A tools/call from the client: ``tersetalk_get`` answered here, any other one
        sent downstream after the pipeline saw it (a write forgets what it may change)."""
        rid, params = msg["id"], msg.get("params")
        with self._state:
            key = _key(rid)
            self._queued.discard(key)
            if key in self._cancelled:
                self._cancelled.discard(key)
                return
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            self._forward(rid, "tools/call", line)  # malformed: the server answers it
            return
        args = params.get("arguments")  # type: ignore[union-attr]
        args = args if isinstance(args, dict) else {}
        if name == RETRIEVAL_TOOL:
            self._note("retrieval")
            result = retrieve(self.pipeline, args, self.log)
            self._up(_dump({"jsonrpc": "2.0", "id": rid, "result": result}))
            return
        if self._dead is None:
            self._ensure_listed()
        call = _Call(name, args, self.pipeline.before_call(name, args))
        self._forward(rid, "tools/call", line, call)

    def _called(self, call: _Call, msg: dict[str, Any], line: bytes, replaced: int) -> None:
        """A tools/call's answer for the client: each text item through the pipeline,
        one line in each log."""
        from tersetalk.mcp.proxy import _row

        downstream_s = time.perf_counter() - call.t0
        self._drain()  # a listing that came while the call was out
        shape = {"args": arg_sizes(call.args), "invalidated": call.invalidated}
        counted = {"undecodable_bytes": replaced} if replaced else {}
        result = msg.get("result")
        if "error" in msg or not isinstance(result, dict):
            error = msg.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            self._log_error(call, "jsonrpc" if "error" in msg else "failed", code, **counted)
            self._up(line)  # the downstream's own JSON-RPC error, as it sent it
            return
        changed = False
        if replaced:
            meta = result.get("_meta")
            result["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                               UNDECODABLE_META: replaced}  # fmt: skip
            changed = True
        if result.get("isError"):
            self.log.write(**_row(call.name, [], "error", **shape, downstream_s=downstream_s,
                                  error_kind="is_error", **counted))  # fmt: skip
            self._note("error")
            self._up(_dump(msg) if changed else line)
            return
        parts = []
        content = result.get("content")
        local = self._local_recorder()
        for item in content if isinstance(content, list) else []:
            if not (isinstance(item, dict) and item.get("type") == "text"
                    and isinstance(item.get("text"), str)):  # fmt: skip
                continue
            text = item["text"]
            p = self.pipeline.process(call.name, call.args, text)
            if local is not None:
                local.record(call.name, text, p, context_partition=self.pipeline.compactions,
                             downstream_s=downstream_s, part=len(parts))  # fmt: skip
            parts.append(p)
            if p.text != text:
                item["text"] = p.text
                changed = True
        kinds = {p.kind for p in parts}
        kind = kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "passthrough")
        self.log.write(**_row(call.name, parts, kind, **shape, downstream_s=downstream_s,
                              tokenizer=self.config.tokenizer, **counted))  # type: ignore[union-attr]  # fmt: skip
        self._up(_dump(msg) if changed else line)

    # --- deadlines ---------------------------------------------------------------------

    def _deadlines(self) -> None:
        while True:
            with self._state:
                now = time.monotonic()
                due = [k for k, p in self._pending.items() if p.deadline <= now]
                expired = [self._pending.pop(k) for k in due]
                self._abandoned.update(due)
                if not expired:
                    soonest = min((p.deadline for p in self._pending.values()), default=None)
                    self._state.wait(None if soonest is None else max(soonest - now, 0.001))
                    continue
            fault = _Fault("timeout", f"the downstream server did not answer within "
                           f"{self.timeout_s:g} s ({self.command[0]})")  # fmt: skip
            for p in expired:
                self._answer_fault(p, fault)
                if p.method != "initialize":  # the server may stop working on it
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": p.id, "reason": fault.message}}  # fmt: skip
                    self._pass_down(_dump(cancel))
