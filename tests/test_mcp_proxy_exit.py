"""A downstream server that dies ends the proxy, so the client sees it and can restart it.

The downstream here is a few lines of raw JSON-RPC (no SDK): it answers initialize and
tools/list, and on a tools/call writes a line to its stderr and exits (or kills itself).
The client side is a plain pipe that keeps the proxy's stdin open, as a client does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: only a guard against a hung test: the proxy must be gone long before
HANG_S = 60

TINY = textwrap.dedent(
    """
    import json, os, signal, sys

    def send(msg):
        sys.stdout.write(json.dumps(msg) + "\\n")
        sys.stdout.flush()

    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "tiny-dying", "version": "0.1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{
                "name": "die", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            sys.stderr.write("tiny-dying: the disk is on fire\\n")
            sys.stderr.flush()
            if sys.argv[1] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(int(sys.argv[1]))
    """
)


def _request(mid: int, method: str, params: dict | None = None) -> bytes:
    msg = {"jsonrpc": "2.0", "id": mid, "method": method, "params": params or {}}
    return (json.dumps(msg) + "\n").encode()


@pytest.mark.parametrize(("how", "said"), [("7", "with status 7"),
                                            ("kill", "on signal 9 (SIGKILL)")])  # fmt: skip
def test_a_downstream_that_exits_ends_the_proxy_with_one_line_naming_it(tmp_path, how, said):
    server = tmp_path / "tiny.py"
    server.write_text(TINY)
    proxy = subprocess.Popen(
        [sys.executable, "-m", "tersetalk", "mcp-proxy", "--", sys.executable, str(server), how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proxy.stdin is not None and proxy.stdout is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}  # fmt: skip
        proxy.stdin.write(_request(1, "initialize", init))
        proxy.stdin.flush()
        answer = json.loads(proxy.stdout.readline())
        assert answer["result"]["serverInfo"]["version"] == "0.1"
        proxy.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proxy.stdin.write(_request(2, "tools/call", {"name": "die", "arguments": {}}))
        proxy.stdin.flush()
        # stdin stays open: the proxy must end by itself
        status = proxy.wait(timeout=HANG_S)
        err = proxy.stderr.read().decode()
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
    assert status == 1
    assert "tiny-dying: the disk is on fire" in err  # the downstream's stderr, passed on
    ours = [line for line in err.splitlines() if line.startswith("tersetalk mcp-proxy:")]
    assert len(ours) == 1, err
    assert "'tiny-dying'" in ours[0] and f"exited {said}" in ours[0]
