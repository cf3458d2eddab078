"""A new system is one new file.

A toy codec that upper-cases prose is written to a temporary folder (nothing in the
repository changes), named in ``TERSETALK_SYSTEMS``, and then runs through the
registry, a scripted-model run and the workflow's dry run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import yaml

TOY = textwrap.dedent(
    '''
    """A toy protocol: prose, upper-cased on the wire."""

    from tersetalk.agents.codecs.prose import ProseCodec
    from tersetalk.systems import register


    class UpperCodec(ProseCodec):
        def write(self, kind, sender, receiver, content):
            sent = super().write(kind, sender, receiver, content)
            sent.text = sent.text.upper()
            return sent


    register("toy_upper", codec=UpperCodec)
    '''
)

RUN = textwrap.dedent(
    """
    import json, sys
    from tersetalk.pipeline.config import load_config, run_spec
    from tersetalk.core.io import message_list
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.runner import run
    from tersetalk.systems import registered_systems, system
    from tersetalk.tasks.loading import load_records, sample

    assert "toy_upper" in registered_systems(), registered_systems()
    cfg = load_config("config/config.yaml", sys.argv[1])  # validated: a known system now
    spec = run_spec(cfg, "gsm8k", "toy_upper", "default")
    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir="data"), n=2, calibration_n=0, seed=5)
    ev.to_parquet(sys.argv[2])

    def model(messages):
        if messages[0]["content"].startswith("You are the Critic"):
            return "accept. fine"
        return "Answer: 42"

    df = run(spec, sys.argv[2], sys.argv[3], client=ScriptedClient(model), progress=False)
    print(json.dumps({
        "columns": list(df.columns),
        "layout": list(system("toy_upper").layout.columns()),
        "errors": int(df["error"].notna().sum()),
        "messages": [message_list(m) for m in df["messages"]],
        "prediction": list(df["prediction"]),
    }))
    """
)


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "toy_upper.py").write_text(TOY)
    layer = tmp_path / "toy.yaml"
    layer.write_text(yaml.safe_dump({"systems": {"toy_upper": {"variants": {"default": {}}}}}))
    env = {
        **os.environ,
        "TERSETALK_SYSTEMS": "toy_upper",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    return tmp_path, layer, env  # fmt: skip


def _status(repo) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def test_a_toy_system_from_one_file_runs_through_registry_and_a_scripted_run(toy, repo):
    tmp_path, layer, env = toy
    before = _status(repo)
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(layer), str(tmp_path / "s.parquet"),
         str(tmp_path / "run.parquet")],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == 0 and out["prediction"] == ["42", "42"]
    assert out["columns"][: len(out["layout"])] == out["layout"]  # the star's record layout
    for messages in out["messages"]:
        assert [(m["sender"], m["receiver"]) for m in messages] == [
            ("M", "W"), ("W", "C"), ("M", "C"), ("C", "W"), ("W", "M")
        ]  # fmt: skip
        assert all(m["content"] == m["content"].upper() for m in messages)
        assert "GOAL:" in messages[0]["content"]
    assert _status(repo) == before  # no file of the repository was touched


def test_the_workflow_schedules_the_toy_system(toy, repo):
    _, layer, env = toy
    before = _status(repo)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(layer)],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (
        "results/smollm2-135m-instruct/runs/gsm8k/toy_upper/default.parquet"
        in proc.stdout + proc.stderr
    )
    assert _status(repo) == before
