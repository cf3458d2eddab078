"""What the tests that run the real Snakefile share: a copy of the workflow to run in."""

from __future__ import annotations

import shutil
from pathlib import Path

#: What a workdir needs to run the workflow (the package comes from the environment).
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "data", "envs")


def copy_workflow(repo: Path, dest: Path) -> Path:
    """Copy the workflow's files from ``repo`` into ``dest`` (made if missing); return it."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = repo / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest
