"""What the tests that run the real Snakefile share: a copy of the workflow to run in."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: llama.cpp threads for a test's model: the cores shared among pytest's workers. More
#: threads than cores make llama.cpp's threads wait on each other's time slices (a 28-s
#: DAG test took 291 s beside another worker's model)
MODEL_THREADS = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 1)))

#: What a workdir needs to run the workflow (the package comes from the environment).
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "data", "envs")


def copy_workflow(repo: Path, dest: Path) -> Path:
    """Copy the workflow's files from ``repo`` into ``dest`` (made if missing); return it."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = repo / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest
