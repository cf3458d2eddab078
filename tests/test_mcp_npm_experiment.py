"""The mcp experiment's Node servers (filesystem, memory, everything from npm): each
installed with ``npm install --prefix`` and started with ``node`` on its entry script,
its scripted session run directly and through the proxy. Skips where npm is absent."""

from __future__ import annotations

import shutil

import pytest
from mcp_support import ENVS

from tersetalk.mcp import servers
from tersetalk.mcp.experiment import run_server
from tersetalk.mcp.experiment_cli import SERVER_CHOICES


def test_the_command_line_offers_every_server_the_experiment_knows():
    assert SERVER_CHOICES == servers.ALL_SERVERS


def _installed(server: str):
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip(f"the {server} server needs Node.js and npm (Debian: apt-get install "
                    "nodejs npm)")  # fmt: skip
    try:
        servers.build_npm_env(server, ENVS / f"{server}-exp")
    except servers.ServerEnvError as exc:
        pytest.skip(f"cannot install the {server} server with npm: {exc}")
    return ENVS / f"{server}-exp"


def test_the_launch_command_is_node_on_the_entry_script_without_npx(tmp_path):
    env = _installed("memory")
    cmd = servers.launch_command("memory", env, tmp_path / "graph.jsonl")
    assert cmd[0] == "env" and cmd[1] == f"MEMORY_FILE_PATH={tmp_path / 'graph.jsonl'}"
    assert cmd[2].endswith("node") and cmd[3].endswith("server-memory/dist/index.js")
    assert "npx" not in " ".join(cmd)


def test_the_memory_servers_session_direct_and_through_the_proxy():
    env = _installed("memory")
    df = run_server("memory", env, None, [None], pause_s=0, launches=0)
    assert set(df["arm"]) == {"direct", "lossless"} and not df["is_error"].any()
    proxied = df[df["arm"] == "lossless"].set_index("step")
    # the repeated graph read is a reference; the graph itself is re-encoded smaller
    assert proxied.loc[6, "kind"] == "ref" and bool(proxied.loc[6, "dedup_hit"])
    first = proxied.loc[3]
    assert first["tool"] == "read_graph" and first["tokens"] < first["direct_tokens"]
    # the write before the last read forgot the cached graph: it is sent again in full
    assert proxied.loc[8, "invalidated"] > 0 and proxied.loc[9, "kind"] == "encoded"
