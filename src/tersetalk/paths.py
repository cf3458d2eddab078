"""Where the repository's files are, found from the package or the working directory."""

from __future__ import annotations

from pathlib import Path


def _repo_root() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "workflow" / "schemas" / "config.schema.yaml").exists():
            return parent
    return Path.cwd()


REPO_ROOT = _repo_root()
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"
