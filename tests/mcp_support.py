"""What the MCP tests share: the real servers' venvs, built once, and the shipped data.

The venvs are built on first use from the exact pins in ``envs/`` (about 30 s for both,
from the package registry) into ``$TERSETALK_MCP_ENVS`` (default
``~/.cache/tersetalk/mcp-envs``) and reused after; where they cannot be built (no
registry), the tests that need them skip and say why.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from tersetalk.mcp import servers

ROOT = Path(__file__).resolve().parents[1]
_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tersetalk"
ENVS = Path(os.environ.get("TERSETALK_MCP_ENVS", _CACHE / "mcp-envs"))
HOTPOT = ROOT / "data/hotpotqa/hotpot_dev_distractor.jsonl.gz"
TOOLRESPONSES = ROOT / "data/toolresponses/json.jsonl"


@cache
def _built(server: str) -> Path | str:
    """The server's venv (built now if it is not yet), or why it cannot be."""
    env = ENVS / server
    try:
        servers.build_env(server, ROOT / "envs" / f"mcp-server-{server}.txt", env)
    except (servers.ServerEnvError, OSError) as exc:
        return str(exc)[-600:]
    return env


def server_env(server: str) -> Path:
    """The built venv of ``server`` (sqlite | git), or skip the test saying why not."""
    env = _built(server)
    if isinstance(env, str):
        pytest.skip(
            f"cannot build the {server} server's environment under {ENVS} (it needs the "
            f"package registry; TERSETALK_MCP_ENVS names another folder): {env}"
        )
    return env


@cache
def npm_server(package: str, folder: str) -> Path:
    """The entry script of an MCP server from npm, installed once with ``npm install
    --prefix ENVS/folder`` as a client would (no npx), or skip the test saying why not."""
    import json
    import shutil
    import subprocess

    name = package.rsplit("@", 1)[0] if package.count("@") > 1 else package
    prefix = ENVS / folder
    manifest = prefix / "node_modules" / name / "package.json"
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"{package} needs Node.js and npm (Debian: apt-get install nodejs npm)")
    from tersetalk.core.io import exclusive

    # one install at a time into one folder: two test workers writing the same
    # node_modules at once broke each other's (npm's TAR_ENTRY_ERROR)
    with exclusive(prefix.parent / f".{prefix.name}.lock"):
        if not manifest.exists():
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
                capture_output=True, text=True, timeout=600, env={**os.environ},
            )  # fmt: skip
            if done.returncode != 0 or not manifest.exists():
                tail = (done.stderr or done.stdout)[-600:]
                pytest.skip(f"cannot install {package} with npm: {tail}")
    bins = json.loads(manifest.read_text(encoding="utf-8")).get("bin")
    entry = next(iter(bins.values())) if isinstance(bins, dict) else bins
    return manifest.parent / entry
