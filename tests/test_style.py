"""The house style (ruff lint and ruff format) holds for the package and the tests."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(repo, args):
    res = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "src", "tests"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
