"""The MCP proxy's own install: the base install (no extra) runs a real proxied session.

A fresh virtual environment gets `pip install -c constraints.txt <repo>` (the README's
"The proxy alone"), then an MCP client in it talks to a small server through
`tersetalk mcp-proxy`: the proxy must import and re-encode with only the base packages,
and the workflow's heavy ones must be absent (nothing compiled, no torch).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SERVER = textwrap.dedent('''
    import json
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("rows")

    @app.tool()
    def rows(n: int = 30) -> str:
        """Rows of a table as JSON."""
        return json.dumps([{"id": i, "name": f"item {i}", "price": i * 1.5} for i in range(n)])

    app.run()
''')

CLIENT = textwrap.dedent("""
    import asyncio, json, sys
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main():
        params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                res = await s.call_tool("rows", {"n": 40})
                print(json.dumps([c.text for c in res.content]))

    asyncio.run(main())
""")


@pytest.mark.integration
@pytest.mark.xdist_group("proxy_install")
def test_the_base_install_runs_the_proxy_and_brings_nothing_heavy(tmp_path):
    # a copy of what the install reads: building in the checkout would leave build/ there
    src = tmp_path / "repo"
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info"))  # fmt: skip
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    done = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"), str(src)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for heavy in ("torch", "pandas", "llama_cpp", "snakemake", "transformers"):
        found = subprocess.run([str(py), "-c", f"import {heavy}"], capture_output=True)
        assert found.returncode != 0, f"{heavy} is in the proxy's install"
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    proxied = subprocess.run(
        [str(py), "client.py", str(env_dir / "bin" / "tersetalk"), "mcp-proxy", "--",
         str(py), "server.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proxied.returncode == 0, proxied.stderr[-3000:]
    text = "\n".join(json.loads(proxied.stdout))
    assert "[encoded:" in text and "item 39" in text  # re-encoded (a table), every row
    # a workflow command on this install says which install it needs
    run = subprocess.run([str(env_dir / "bin" / "tersetalk"), "sample", "--task", "gsm8k",
                          "--n", "1", "--out", str(tmp_path / "s.parquet")],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2 and "'.[workflow]'" in run.stderr, run.stderr
