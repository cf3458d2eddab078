"""Every failure says why in one line: a failed job in Snakemake's own output, an
unknown task, system or variant with the valid ones, a subcommand without a workflow
config, and help texts as they are now."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml
from workflow_support import copy_workflow

from tersetalk.cli import build_parser, main
from tersetalk.pipeline import joberrors

MAIN_LOG = """\
[Sat Dec  5 14:23:16 2026]
localrule sample:
    output: results/samples/gsm8k.parquet
    log: results/logs/sample/gsm8k.log
    jobid: 3
[Sat Dec  5 14:23:18 2026]
Error in rule sample:
    message: None
    jobid: 3
    output: results/samples/gsm8k.parquet
    log: results/logs/sample/gsm8k.log (check log file(s) for error details)
    shell:
        tersetalk sample --task gsm8k > results/logs/sample/gsm8k.log 2>&1
        (command exited with non-zero exit code)
[Sat Dec  5 14:23:18 2026]
Error in rule plot:
    message: None
    jobid: 7
    log: a.log, b.log (check log file(s) for error details)
Shutting down, this might take some time.
"""


# ---- a failed job's reason --------------------------------------------------------


def test_failed_jobs_are_read_with_their_logs():
    assert joberrors.failed_jobs(MAIN_LOG) == [
        ("sample", ["results/logs/sample/gsm8k.log"]),
        ("plot", ["a.log", "b.log"]),
    ]


def test_the_reason_is_the_commands_one_line_error_not_the_progress_after_it(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(
        "2026-12-05 INFO root: loading\n"
        "examples:  10%|#         | 1/10\r examples:  20%|##        | 2/10\n"
        "tersetalk run: error: 3 of 10 examples failed (more than 20%); see the error rows\n"
        "\n"
    )
    assert joberrors.reason(log).startswith("tersetalk run: error: 3 of 10 examples failed")


def test_a_traceback_gives_its_last_line_and_a_missing_log_says_so(tmp_path):
    log = tmp_path / "job.log"
    log.write_text('Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n')
    assert joberrors.reason(log) == "ValueError: bad"
    assert "cannot be read" in joberrors.reason(tmp_path / "gone.log")
    (tmp_path / "empty.log").write_text("")
    assert "is empty" in joberrors.reason(tmp_path / "empty.log")


def test_explain_names_rule_reason_and_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/logs/sample").mkdir(parents=True)
    (tmp_path / "results/logs/sample/gsm8k.log").write_text("tersetalk sample: error: too few\n")
    (tmp_path / "main.log").write_text(MAIN_LOG)
    lines = joberrors.explain([str(tmp_path / "main.log")])
    assert lines[0] == (
        "rule sample failed: tersetalk sample: error: too few (log: results/logs/sample/gsm8k.log)"
    )
    assert len(lines) == 3 and "a.log" in lines[1] and "b.log" in lines[2]


@pytest.mark.integration
def test_snakemake_shows_a_failed_jobs_error_line(repo, tmp_path):
    work = copy_workflow(repo, tmp_path / "w")
    path = work / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["n_eval"] = 100_000  # more than GSM8K has: the sample job fails, saying so
    path.write_text(yaml.safe_dump(cfg))
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "results/samples/gsm8k.parquet"],
        cwd=work, capture_output=True, text=True,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert re.search(
        r"rule sample failed: tersetalk sample: error: gsm8k has \d+ examples but "
        r"n=100000 \+ calibration_n=10 were requested; lower n or calibration_n "
        r"\(log: results/logs/sample/gsm8k\.log\)",
        out,
    ), out[-3000:]


@pytest.mark.integration
def test_a_task_plugin_typo_stops_snakemake_in_one_message(repo):
    env = {**os.environ, "TERSETALK_TASKS": "capitalz"}
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1"],
        cwd=repo, capture_output=True, text=True, env=env,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "TERSETALK_TASKS module 'capitalz' cannot be imported" in out
    assert "TaskPluginError" not in out and out.count('  File "') <= 1, out[-3000:]


# ---- unknown names list the valid ones --------------------------------------------


@pytest.fixture
def gsm8k_sample_file(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    out = tmp_path / "s.parquet"
    argv = ["sample", "--task", "gsm8k", "--n", "1", "--calibration-n", "0", "--out", str(out)]
    assert main(argv) == 0
    return out


UNKNOWN = [
    (
        ["--task", "gsmk", "--system", "freeform"],
        "unknown task 'gsmk'; known tasks: boolq, gsm8k, ",
    ),
    (
        ["--task", "gsm8k", "--system", "freefrom"],
        "unknown system 'freefrom'; the configured systems: freeform, tersetalk",
    ),
    (
        ["--task", "gsm8k", "--system", "freeform", "--variant", "defualt"],
        "system 'freeform' has no variant 'defualt'; its variants: default, cod",
    ),
]


@pytest.mark.parametrize("names, said", UNKNOWN)
def test_run_with_an_unknown_name_lists_the_valid_ones(names, said, gsm8k_sample_file, capsys):
    argv = ["run", *names, "--sample", str(gsm8k_sample_file), "--out", "never.parquet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_unknown_task_is_a_config_error_and_still_a_key_error():
    from tersetalk.core.configio import ConfigError
    from tersetalk.systems import system
    from tersetalk.tasks.registry import get

    for lookup, name in ((get, "gsmk"), (system, "freefrom")):
        with pytest.raises(ConfigError) as info:
            lookup(name)
        assert isinstance(info.value, KeyError) and not str(info.value).startswith(("'", '"'))


def test_dashboard_with_a_missing_mediator_config_is_one_line(tmp_path, capsys):
    argv = ["dashboard", "--port", "0", "--mediator-config", str(tmp_path / "none.yaml")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "tersetalk dashboard: error: mediator config file" in err and "Traceback" not in err


# ---- the workflow config: found the same way, or refused ---------------------------


def test_sample_outside_a_workflow_folder_refuses_to_guess_the_seed(repo, tmp_path, monkeypatch,
                                                                   capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    argv = ["sample", "--task", "gsm8k", "--n", "2", "--calibration-n", "0",
            "--data-dir", str(repo / "data"), "--out", "s.parquet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no workflow config here" in err and "--seed" in err and "--n," not in err
    assert not (tmp_path / "s.parquet").exists()


# ---- help texts --------------------------------------------------------------------

#: what a help text must not show: argparse's escape of "%" in a description (printed
#: as is) and a results path from before results lived per model (results/<key>/...)
STALE = re.compile(r"%%|\bresults/(?:runs|summary|tables|stats|metrics|calibration)\b")


def test_no_help_text_shows_a_doubled_percent_or_a_path_without_the_model_key():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(getattr(a, "choices", None), dict))
    found = {name: STALE.findall(sub.choices[name].format_help()) for name in list(sub.choices)}
    assert not {k: v for k, v in found.items() if v}


def test_the_dashboard_outside_a_workflow_folder_says_which_model_it_uses(
    tmp_path, monkeypatch, caplog
):
    from tersetalk.dashboard.cli import _live_models

    monkeypatch.chdir(tmp_path)
    with caplog.at_level("WARNING"):
        models, seed = _live_models([])
    assert models == {"backend": "llamacpp"} and seed == 0
    assert "no workflow config here" in caplog.text and "embedded model" in caplog.text
