import subprocess
import sys

import pytest

from tersetalk.cli import build_parser, main

COMMANDS = ["sample", "run", "score", "aggregate", "stats", "calibrate", "plot", "plot-ablation"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_option_is_explained(cmd):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[cmd]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, f"tersetalk {cmd} {action.option_strings or action.dest} has no help"


def test_help_runs_as_a_command():
    out = subprocess.run([sys.executable, "-m", "tersetalk", "run", "--help"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "--spec-json" in out.stdout and "resume" in out.stdout


def test_bad_config_is_a_clean_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nn_eval: 0\ntasks: [gsm8k]\n")
    code = main(["sample", "--task", "gsm8k", "--config", str(bad), "--out", str(tmp_path / "x")])
    assert code == 2
    err = capsys.readouterr().err
    assert "config key 'n_eval'" in err
