"""A new task is one new file.

A toy task (arithmetic questions in a tiny JSONL shipped beside its module, with its own
scorer) is written to a temporary folder (nothing in the repository changes), named in
``TERSETALK_TASKS``, and then goes through the task registry, the config check, the
workflow's dry run and a scripted-model run.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

QUESTIONS = [
    {"id": f"arith-{i}", "question": f"What is {a} plus {b}?", "answer": str(a + b)}
    for i, (a, b) in enumerate([(2, 3), (7, 5), (10, 32), (4, 4), (9, 0), (6, 7)])
]

TOY = textwrap.dedent(
    '''
    """Arithmetic: "What is 2 plus 3?", answered with a whole number."""

    import re
    from pathlib import Path

    from tersetalk.tasks.base import Answer, Brief, DatasetFile, Metric, Task

    _INT = re.compile(r"-?\\d+")


    def last_integer(text):
        found = _INT.findall(text)
        return found[-1] if found else ""


    def correct(prediction, gold):
        return last_integer(prediction) == gold


    TASK = Task(
        name="arith",
        title="Arithmetic (accuracy)",
        dataset=DatasetFile(str(Path(__file__).with_name("arith.jsonl")), "{sha256}"),
        brief=lambda record, options: Brief(goal="Add the numbers.", question=record["question"]),
        worker_system="You are the Worker. Reply with the sum only.",
        answer=Answer("a whole number"),
        metric=Metric("accuracy", "the last integer of the reply equals the sum"),
        correct=correct,
        extract=last_integer,
    )
    '''
)

RUN = textwrap.dedent(
    """
    import json, sys
    from tersetalk.pipeline.config import load_config, run_spec
    from tersetalk.metrics.summary import run_metrics
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.runner import run
    from tersetalk.tasks.loading import load_records, sample
    from tersetalk.tasks.registry import display_name, get, names

    assert "arith" in names(), names()
    cfg = load_config("config/config.yaml", sys.argv[1])  # validated: a known task now
    spec = run_spec(cfg, "arith", "freeform", "default")
    ev, _ = sample("arith", load_records("arith", data_dir="data"), n=4, calibration_n=0, seed=1)
    ev.to_parquet(sys.argv[2])
    answers = {r.question: r.gold for r in ev.itertuples()}
    wrong = ev["question"].iloc[0]

    def model(messages):
        if messages[0]["content"].startswith("You are the Critic"):
            return "ACCEPT. fine"
        question = messages[-1]["content"].rpartition("Question: ")[2].strip()
        return "It is 1000." if question == wrong else f"The sum is {answers[question]}."

    df = run(spec, sys.argv[2], sys.argv[3], client=ScriptedClient(model), progress=False)
    m = run_metrics(df)
    print(json.dumps({
        "errors": int(df["error"].notna().sum()),
        "task": sorted(set(df["task"])),
        "prediction": list(df["prediction"]),
        "gold": list(df["gold"]),
        "correct": list(df["correct"]),
        "accuracy": float(m["accuracy"].iloc[0]),
        "title": get("arith").title,
        "display": display_name("arith"),
    }))
    """
)


@pytest.fixture
def toy(tmp_path):
    data = "".join(json.dumps(q) + "\n" for q in QUESTIONS).encode()
    (tmp_path / "arith.jsonl").write_bytes(data)
    module = TOY.replace("{sha256}", hashlib.sha256(data).hexdigest())
    (tmp_path / "arith_task.py").write_text(module)
    # the default systems, on the toy task alone (calibration needs no sweep to plan)
    layer = tmp_path / "toy.yaml"
    layer.write_text(yaml.safe_dump({"tasks": ["arith"]}))
    env = {
        **os.environ,
        "TERSETALK_TASKS": "arith_task",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    return tmp_path, layer, env  # fmt: skip


def _status(repo) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def test_a_toy_task_from_one_file_runs_through_registry_config_and_a_scripted_run(toy, repo):
    tmp_path, layer, env = toy
    before = _status(repo)
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(layer), str(tmp_path / "s.parquet"),
         str(tmp_path / "run.parquet")],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == 0 and out["task"] == ["arith"]
    assert out["title"] == "Arithmetic (accuracy)"
    assert out["display"] == "Arithmetic"  # no display_name given: the title's name
    # its own extraction (the last integer) and scorer: one answer wrong on purpose
    assert out["prediction"][0] == "1000" and out["prediction"][1:] == out["gold"][1:]
    assert out["correct"] == [0.0, 1.0, 1.0, 1.0]
    assert out["accuracy"] == pytest.approx(0.75)
    assert _status(repo) == before  # no file of the repository was touched


def test_the_workflow_schedules_the_toy_task(toy, repo):
    _, layer, env = toy
    before = _status(repo)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(layer)],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert "results/samples/arith.parquet" in log
    assert "results/smollm2-135m-instruct/runs/arith/freeform/default.parquet" in log
    assert _status(repo) == before


def test_without_its_plug_in_the_task_is_a_config_error_naming_the_known_tasks(toy, repo):
    _, layer, env = toy
    env = {k: v for k, v in env.items() if k != "TERSETALK_TASKS"}
    code = (
        "import sys; from tersetalk.pipeline.config import load_config; load_config(*sys.argv[1:])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "config/config.yaml", str(layer)],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "config key 'tasks': unknown task(s) ['arith']" in proc.stderr
    assert "registered tasks are ['boolq', 'gsm8k', 'hotpotqa'" in proc.stderr


BROKEN_PLUGINS = {
    "not_there": (None, "cannot be imported (No module named 'not_there'); put its folder on "
                        "PYTHONPATH"),
    "needs_a_package": ("import package_nobody_installed\n",
                        "cannot be imported (No module named 'package_nobody_installed')"),
    "raises": ("raise RuntimeError('the data folder is gone')\n",
               "failed while being imported (RuntimeError: the data folder is gone); fix the "
               "module or remove it from TERSETALK_TASKS"),
    "declares_nothing": ("TITLE = 'a task, one day'\n",
                         "declares no task: a task module declares TASK = Task(...)"),
    "wrong_task": ("TASK = {'name': 'arith'}\n",
                   "does not declare a usable task (register() takes a "
                   "tersetalk.tasks.base.Task, got dict)"),
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(BROKEN_PLUGINS))
def test_a_broken_plug_in_is_an_error_line_naming_it_and_the_fix(toy, repo, module):
    tmp_path, _, env = toy
    text, said = BROKEN_PLUGINS[module]
    if text is not None:
        (tmp_path / f"{module}.py").write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "tersetalk", "sample", "--task", "gsm8k", "--n", "1",
         "--out", str(tmp_path / "s.parquet")],
        cwd=repo, env={**env, "TERSETALK_TASKS": f"arith_task,{module}"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"tersetalk: error: TERSETALK_TASKS module {module!r} ")
    assert said in proc.stderr


def test_every_built_in_task_is_named_to_readers_by_its_own_display_name():
    from tersetalk.core.display import task_display
    from tersetalk.tasks.registry import display_name, get, names

    expected = {"hotpotqa": "HotpotQA", "gsm8k": "GSM8K", "boolq": "BoolQ",
                "commonsenseqa": "CommonsenseQA", "socialiqa": "Social IQa",
                "humaneval": "HumanEval", "toolqa": "ToolQA"}  # fmt: skip
    assert {t: get(t).display_name for t in names()} == expected
    assert {t: display_name(t) for t in names()} == expected
    assert task_display("socialiqa") == "Social IQa"  # the registry named it on loading
    assert display_name("not_a_task_here") == "not_a_task_here"


def test_the_shipped_tasks_are_found_in_their_package_not_listed_by_hand():
    from pathlib import Path

    from tersetalk.tasks import registry

    folder = Path(registry.__file__).parent
    modules = sorted(
        f"tersetalk.tasks.{p.stem}"
        for p in folder.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    )
    assert registry.builtin_modules() == [
        m for m in modules if m.rsplit(".", 1)[1] not in registry.MACHINERY
    ]
    assert "tersetalk.tasks.humaneval" in registry.builtin_modules()  # a sub-package too
    assert set(registry.names()) >= {"hotpotqa", "gsm8k", "humaneval", "socialiqa"}
