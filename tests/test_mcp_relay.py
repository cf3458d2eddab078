"""The proxy's data path is a JSON-RPC relay (tersetalk.mcp.relay).

The downstream here is raw JSON-RPC written by hand (no SDK), so it can send lines the
SDK would never write (keys in any order, spaces, fields MCP does not name); the client
is a plain pipe, so the test sees the proxy's lines byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from queue import Empty, Queue

from tersetalk.formats.solver import decode
from tersetalk.formats.tree import same_value

ROOT = Path(__file__).resolve().parents[1]
#: only a guard against a hung test (seconds), not a speed check
HANG_S = 120

ROWS = [{"id": i, "name": f"item {i}", "price": i * 1.5, "tags": ["a", "b"]} for i in range(12)]
#: lines the server writes as they are, for resources/list: a notification and the answer
ODD_NOTE = b'{"method": "notifications/custom",  "jsonrpc": "2.0", "params": {"b": 1, "a": 2}}'
ODD_ANSWER = b'{"result": {"resources": [], "x-extra": [1,  2]},  "jsonrpc": "2.0", "id": %s}'

SERVER = textwrap.dedent(
    """
    import json, sys

    seen = open(sys.argv[1], "a")
    rows = %(rows)r
    tools = {
        None: ([{"name": "lookup", "description": "Returns the contents of a file.",
                 "inputSchema": {"type": "object"}}], "p2"),
        "p2": ([{"name": "rows", "inputSchema": {"type": "object"}}], None),
    }

    def send(line):
        sys.stdout.buffer.write(line + b"\\n")
        sys.stdout.buffer.flush()

    for line in sys.stdin.buffer:
        msg = json.loads(line)
        seen.write(json.dumps([msg.get("method"), msg.get("id")]) + "\\n")
        seen.flush()
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if mid is None or method is None:
            continue
        if method == "initialize":
            result = {"protocolVersion": params["protocolVersion"],
                      "capabilities": {"resources": {"listChanged": True}},
                      "serverInfo": {"name": "raw", "version": "1"}}
        elif method == "tools/list":
            page, cursor = tools[params.get("cursor")]
            result = {"tools": page, **({"nextCursor": cursor} if cursor else {})}
        elif method == "tools/call":
            # each tool its own text (the same text twice would be a dedup reference)
            text = rows if params.get("name") == "lookup" else json.dumps(json.loads(rows)[::-1])
            result = {"content": [{"type": "text", "text": text}]}
        elif method == "resources/list":
            send(%(note)r)
            send(%(answer)r %% json.dumps(mid).encode())
            continue
        else:
            result = {}
        send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}).encode())
    """
) % {"rows": json.dumps(ROWS), "note": ODD_NOTE, "answer": ODD_ANSWER}

#: runs the proxy in-process and says, in the report file, which modules were loaded when
#: it started the downstream and which at its end
SPY = textwrap.dedent(
    """
    import atexit, json, subprocess, sys

    report, argv = sys.argv[1], sys.argv[2:]
    WATCH = ("mcp", "anyio", "pydantic", "tersetalk.mcp.config", "tersetalk.mcp.session",
             "tersetalk.formats", "tersetalk.core.tokens")
    seen = {}
    popen = subprocess.Popen.__init__

    def spawn(self, *args, **kwargs):
        seen.setdefault("at_spawn", [m for m in WATCH if m in sys.modules])
        popen(self, *args, **kwargs)

    subprocess.Popen.__init__ = spawn
    atexit.register(lambda: open(report, "w").write(json.dumps(
        {**seen, "at_exit": [m for m in WATCH if m in sys.modules]})))
    from tersetalk.cli import main

    sys.exit(main(argv))
    """
)


class Pipe:
    """The proxy as a client sees it: lines in, lines out (each line's bytes kept)."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
        self.lines: Queue[bytes] = Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def request(self, mid: int, method: str, params: dict | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params or {}})

    def line(self) -> bytes:
        try:
            return self.lines.get(timeout=HANG_S)
        except Empty:
            raise AssertionError("the proxy sent nothing (hung)") from None

    def answer(self, mid: int) -> dict:
        """The next message, which must be the answer to ``mid``."""
        msg = json.loads(self.line())
        assert msg.get("id") == mid, msg
        return msg

    def close(self) -> tuple[int, str]:
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            status = self.proc.wait(timeout=HANG_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return status, self.proc.stderr.read().decode()  # type: ignore[union-attr]


def _start(tmp_path: Path, spy: Path | None = None) -> tuple[Pipe, Path]:
    server, seen = tmp_path / "raw_server.py", tmp_path / "seen.jsonl"
    server.write_text(SERVER)
    proxy = ["mcp-proxy", "--call-timeout", "100000", "--", sys.executable, str(server), str(seen)]
    if spy is None:
        argv = [sys.executable, "-m", "tersetalk", *proxy]
    else:
        (tmp_path / "spy.py").write_text(SPY)
        argv = [sys.executable, str(tmp_path / "spy.py"), str(spy), *proxy]
    pipe = Pipe(argv)
    pipe.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "pipe", "version": "0"}})  # fmt: skip
    return pipe, seen


def _initialized(pipe: Pipe) -> dict:
    init = pipe.answer(1)["result"]
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return init


def test_the_downstream_is_started_before_anything_heavy_and_the_sdk_never_loads(tmp_path):
    report = tmp_path / "report.json"
    pipe, _ = _start(tmp_path, spy=report)
    _initialized(pipe)
    pipe.request(2, "tools/list")
    pipe.request(3, "tools/list", {"cursor": "p2"})
    assert pipe.answer(2) and pipe.answer(3)
    pipe.request(4, "tools/call", {"name": "rows", "arguments": {}})
    text = pipe.answer(4)["result"]["content"][0]["text"]
    assert same_value(decode(text), ROWS[::-1])  # the session pipeline ran
    status, err = pipe.close()
    assert status == 0, err
    seen = json.loads(report.read_text())
    assert seen["at_spawn"] == []  # neither the SDK, the settings nor the pipeline yet
    loaded = set(seen["at_exit"])
    assert {"tersetalk.mcp.session", "pydantic"} <= loaded  # (the spy sees imports)
    assert "mcp" not in loaded and "anyio" not in loaded


def test_lines_the_proxy_does_not_own_pass_byte_for_byte(tmp_path):
    pipe, _ = _start(tmp_path)
    init = _initialized(pipe)
    # the server declared no tools; the proxy adds one, so it says so; the rest as sent
    assert init["capabilities"] == {"resources": {"listChanged": True}, "tools": {}}
    assert init["serverInfo"] == {"name": "raw", "version": "1"}
    pipe.request(2, "resources/list")
    assert pipe.line() == ODD_NOTE + b"\n"
    assert pipe.line() == ODD_ANSWER % b"2" + b"\n"
    status, err = pipe.close()
    assert status == 0, err


def test_a_call_before_any_listing_is_decided_from_the_tools_the_proxy_listed(tmp_path):
    pipe, seen = _start(tmp_path)
    _initialized(pipe)
    # lookup's description (on the first page) says it returns a file's contents: its
    # result passes byte-exact; rows (on the second page) says nothing: re-encoded
    pipe.request(2, "tools/call", {"name": "lookup", "arguments": {"path": "a"}})
    assert pipe.answer(2)["result"]["content"][0]["text"] == json.dumps(ROWS)
    pipe.request(3, "tools/call", {"name": "rows", "arguments": {}})
    encoded = pipe.answer(3)["result"]["content"][0]["text"]
    assert encoded != json.dumps(ROWS[::-1]) and same_value(decode(encoded), ROWS[::-1])
    # the client lists: its pages as the server sent them, tersetalk_get on the last
    pipe.request(4, "tools/list")
    first = pipe.answer(4)["result"]
    assert [t["name"] for t in first["tools"]] == ["lookup"] and first["nextCursor"] == "p2"
    pipe.request(5, "tools/list", {"cursor": "p2"})
    last = pipe.answer(5)["result"]
    assert [t["name"] for t in last["tools"]] == ["rows", "tersetalk_get"]
    status, err = pipe.close()
    assert status == 0, err
    got = [tuple(json.loads(x)) for x in seen.read_text().splitlines()]
    own = [
        mid for method, mid in got if method == "tools/list" and str(mid).startswith("tersetalk")
    ]
    # the proxy's own listing (both pages, ids of its own namespace) came before the call
    assert len(own) == 2 and all(m.startswith("tersetalk-proxy/") for m in own)
    assert got.index(("tools/list", own[1])) < got.index(("tools/call", 2))


def test_a_compaction_boundary_by_notification_or_sigusr1_ends_the_references(tmp_path):
    import signal

    pipe, _ = _start(tmp_path)
    _initialized(pipe)

    def call(mid: int) -> str:
        pipe.request(mid, "tools/call", {"name": "rows", "arguments": {}})
        return pipe.answer(mid)["result"]["content"][0]["text"]

    assert not call(2).startswith("> [ref: ")
    assert call(3).startswith("> [ref: ")  # the same text again: a reference
    pipe.send({"jsonrpc": "2.0", "method": "notifications/tersetalk/compact"})
    assert not call(4).startswith("> [ref: ")  # the earlier copy may be gone from context
    assert call(5).startswith("> [ref: ")
    pipe.proc.send_signal(signal.SIGUSR1)
    # A signal is asynchronous: its handler runs when the proxy's main thread is next
    # scheduled, which a loaded machine may put after the next call or two. So calls go on
    # (each before the boundary is a reference) until one is sent whole again.
    for mid in range(6, 206):
        if not call(mid).startswith("> [ref: "):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("200 calls after SIGUSR1 were all references: no boundary")
    assert call(mid + 1).startswith("> [ref: ")  # and the references start again
    status, err = pipe.close()
    assert status == 0, err
