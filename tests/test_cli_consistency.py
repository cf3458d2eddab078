"""The CLI behaves one way across its subcommands.

Plain help text, a user-facing error for a missing subcommand, one meaning of
``--config`` (a workflow config layered over config/config.yaml, as
``snakemake --configfile`` layers it), ``--version``, one line and exit 130 on Ctrl-C,
and the model's HTTP requests logged only with ``-v``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fake_openai_server import FakeServer

import tersetalk
from tersetalk.cli import build_parser, main, plain_text
from tersetalk.pipeline.config import load_config, load_workflow_config


def _parsers(parser: argparse.ArgumentParser):
    """Every parser of the command tree, the top one first."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                yield from _parsers(sub)


def tersetalk_cli(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tersetalk", *args], cwd=cwd,
                          capture_output=True, text=True, **kw)  # fmt: skip


# -- help text -----------------------------------------------------------------------------

RST = [r"``", r":[a-z]+:`", r"`_\b", r"::\s*$", r"\*\*\w"]


def test_no_help_text_shows_rst_markup():
    seen = 0
    for parser in _parsers(build_parser()):
        text = parser.format_help()
        for pattern in RST:
            match = re.search(pattern, text, re.M)
            assert match is None, f"{parser.prog} --help shows RST: {text[match.start() - 60 :]}"
        seen += 1
    assert seen > 30  # the plug-ins' parsers were walked too


def test_formats_help_is_plain(repo):
    out = tersetalk_cli("formats", "--help", cwd=repo, check=True).stdout
    assert "tersetalk formats: encode your own payloads" in out and "``" not in out


def test_plain_text_strips_roles_literals_and_links():
    text = (
        "Use ``tersetalk run`` and :func:`tersetalk.pipeline.config.merge` or "
        ":mod:`~tersetalk.core.io`;\n"
        "see `the docs <https://example.org>`_ and **this**. Example::\n\n    x = 1\n"
    )
    assert plain_text(text) == (
        "Use tersetalk run and tersetalk.pipeline.config.merge or io;\n"
        "see the docs (https://example.org) and this. Example:\n\n    x = 1\n"
    )
    assert plain_text("results/*.parquet, `tersetalk sample`") == (
        "results/*.parquet, `tersetalk sample`"
    )
    # a glob's ** is no bold, even with two of them on a line
    globs = "default: runs/**/*.parquet; 'scores/**/*.parquet' or '**/*.parquet'"
    assert plain_text(globs) == globs


def test_every_subcommand_has_a_description():
    for parser in _parsers(build_parser()):
        assert parser.description, f"{parser.prog} has no description"


# -- a missing subcommand ------------------------------------------------------------------


def test_models_without_a_subcommand_names_the_choices_not_an_internal_argument(capsys):
    with pytest.raises(SystemExit) as info:
        main(["models"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "tersetalk models: error: choose a subcommand: compare" in err
    assert "models_command" not in err


@pytest.mark.parametrize("argv", [[], ["formats"], ["mediator"], ["mcp-experiment"]])
def test_every_missing_subcommand_is_the_same_error(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: choose a subcommand" in err and "_command" not in err


# -- --config ------------------------------------------------------------------------------


def test_config_means_a_workflow_config_in_every_subcommand():
    seen = []
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            if "--config" not in action.option_strings or action.help == argparse.SUPPRESS:
                continue  # hidden: a deprecated alias of a renamed flag
            seen.append(parser.prog)
            assert action.help.startswith("workflow config YAML"), parser.prog
            assert "layered" in action.help and action.nargs == "+", parser.prog
    expected = {"sample", "run", "topology-signals", "dashboard"}
    assert expected <= {prog.removeprefix("tersetalk ") for prog in seen}


@pytest.mark.parametrize(
    ("argv", "dest"),
    [
        (["msp", "demo"], "msp_config"),
        (["mediator", "demo"], "mediator_config"),
        (["mcp-proxy"], "proxy_config"),
        (["targets", "--summary", "s", "--csv", "c"], "config_json"),
    ],
)
def test_a_renamed_config_flag_still_works_with_a_warning(argv, dest, capsys):
    args = build_parser().parse_args([*argv, "--config", "x.yaml"])
    assert str(getattr(args, dest)) == "x.yaml"
    assert not hasattr(args, "config")
    err = capsys.readouterr().err
    new = "--" + dest.replace("_", "-")
    assert f"--config is deprecated here, use {new}" in err


@pytest.fixture
def partial(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("n_eval: 3\nseed: 7\n")
    return path


def test_a_partial_config_layers_over_the_default(repo, partial, monkeypatch):
    monkeypatch.chdir(repo)
    default = load_config(repo / "config" / "config.yaml")
    layered = load_workflow_config([partial])
    assert layered["n_eval"] == 3 and layered["seed"] == 7
    assert {k: v for k, v in layered.items() if k not in ("n_eval", "seed")} == {
        k: v for k, v in default.items() if k not in ("n_eval", "seed")
    }
    assert load_workflow_config([]) == default
    # naming the default first changes nothing; later files win, as with --configfile
    second = partial.with_name("second.yaml")
    second.write_text("seed: 9\n")
    again = load_workflow_config([repo / "config" / "config.yaml", partial, second])
    assert again == {**layered, "seed": 9}


def test_sample_with_a_partial_config(repo, partial, tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.chdir(repo)
    out = tmp_path / "s.parquet"
    assert main(["sample", "--task", "gsm8k", "--config", str(partial), "--out", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 3  # n_eval of the partial file, the rest default


def test_run_with_a_partial_config_keeps_the_default_models(repo, partial, tmp_path, monkeypatch):
    import pandas as pd

    import tersetalk.pipeline.runner

    monkeypatch.chdir(repo)
    specs = []

    def fake_run(spec, sample, out, **kw):
        specs.append(spec)
        return pd.DataFrame({"error": [None]})

    monkeypatch.setattr(tersetalk.pipeline.runner, "run", fake_run)
    argv = ["run", "--task", "gsm8k", "--system", "freeform", "--config", str(partial),
            "--sample", "s.parquet", "--out", str(tmp_path / "r.parquet")]  # fmt: skip
    assert main(argv) == 0
    default = load_config(repo / "config" / "config.yaml")
    assert specs[0]["seed"] == 7 and specs[0]["models"] == default["models"]


def test_outside_a_checkout_a_partial_config_says_what_it_lacks(partial, tmp_path, monkeypatch,
                                                                capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)  # no config/config.yaml here
    argv = ["run", "--task", "gsm8k", "--system", "freeform", "--config", str(partial),
            "--sample", "s.parquet", "--out", "r.parquet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'models' is a required property" in err
    assert "there is no config/config.yaml under" in err and "Traceback" not in err


def test_sample_outside_a_checkout_needs_no_config(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["sample", "--task", "gsm8k", "--n", "2", "--calibration-n", "0", "--seed", "0",
            "--data-dir", str(repo / "data"), "--out", "s.parquet"]  # fmt: skip
    assert main(argv) == 0 and (tmp_path / "s.parquet").is_file()


def test_dashboard_reads_a_partial_config_layered(repo, partial, monkeypatch):
    from tersetalk.dashboard.cli import _live_models

    monkeypatch.chdir(repo)
    models, seed = _live_models([str(partial)])
    assert seed == 7 and models == load_config(repo / "config" / "config.yaml")["models"]


# -- --version -----------------------------------------------------------------------------


def test_version(repo):
    from importlib.metadata import version

    out = tersetalk_cli("--version", cwd=repo, check=True).stdout
    assert out.strip() == f"tersetalk {tersetalk.__version__}"
    assert tersetalk.__version__ == version("tersetalk")


# -- Ctrl-C --------------------------------------------------------------------------------


def _openai_layer(tmp_path: Path, base_url: str) -> Path:
    layer = tmp_path / "server.yaml"
    layer.write_text(yaml.safe_dump({
        "models": {"backend": "openai", "base_url": base_url, "model": "fake",
                   "max_retries": 0, "timeout_s": 600},
        "cache_dir": str(tmp_path / "cache"),
    }))  # fmt: skip
    return layer


@pytest.fixture
def gsm8k_sample(tmp_path, repo):
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=repo / "data"), n=1,
                   calibration_n=0, seed=1)  # fmt: skip
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    return path


def test_ctrl_c_is_one_line_and_exit_130(repo, tmp_path, gsm8k_sample):
    """SIGINT while the run waits on a model server that took the request and never
    answers: the process is then surely inside the run, with its progress bar."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        layer = _openai_layer(tmp_path, f"http://127.0.0.1:{port}/v1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tersetalk", "run", "--task", "gsm8k", "--system",
             "freeform", "--config", str(layer), "--sample", str(gsm8k_sample),
             "--out", str(tmp_path / "run.parquet")],
            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread
            # Ctrl-C as at a terminal: a shell starts a background job (`pytest &`, or
            # `.ci/run` under nohup) with SIGINT ignored, its children inherit that, and
            # Python then leaves it ignored: the run would rightly go on (it did, twice)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        try:
            listener.settimeout(300)  # a hang detector, not a speed check
            conn, _ = listener.accept()
            with conn:
                first = conn.recv(65536)  # the request is sent; no answer will come
                assert first
                proc.send_signal(signal.SIGINT)
                try:
                    _, err = proc.communicate(timeout=300)
                except subprocess.TimeoutExpired:  # say where it hangs
                    proc.send_signal(signal.SIGABRT)
                    _, err = proc.communicate(timeout=60)
                    pytest.fail(f"no exit 300 s after SIGINT during {first[:40]!r}:\n{err[-6000:]}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.rstrip().splitlines()[-1] == "tersetalk: interrupted"


# -- HTTP logging --------------------------------------------------------------------------


@pytest.fixture
def server():
    srv = FakeServer(answer="#### 4").start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("verbose", [False, True])
def test_http_requests_are_logged_only_with_v(server, repo, tmp_path, gsm8k_sample, verbose):
    layer = _openai_layer(tmp_path, server.base_url)
    argv = ["run", "--task", "gsm8k", "--system", "freeform", "--config", str(layer),
            "--sample", str(gsm8k_sample), "--out", str(tmp_path / "run.parquet"),
            "--no-progress"]  # fmt: skip
    proc = tersetalk_cli(*(["-v"] if verbose else []), *argv, cwd=repo,
                         env={**os.environ, "TERSETALK_EVENTS": "off"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert server.chat_requests()  # the run talked to the server
    logged = "HTTP Request: POST" in proc.stderr
    assert logged == verbose, proc.stderr
    assert "wrote" in proc.stderr  # the run's own INFO lines stay


def test_v_is_accepted_after_the_subcommand_too():
    assert build_parser().parse_args(["aggregate", "x", "--out", "y", "-v"]).verbose
    assert not build_parser().parse_args(["aggregate", "x", "--out", "y"]).verbose


def test_an_interrupt_inside_an_exception_group_is_one_line_too(monkeypatch, capsys):
    import tersetalk.cli

    def interrupted(argv):
        raise BaseExceptionGroup("task group", [KeyboardInterrupt()])

    monkeypatch.setattr(tersetalk.cli, "_main", interrupted)
    assert main([]) == 130
    assert capsys.readouterr().err == "tersetalk: interrupted\n"


def test_http_loggers_follow_v_in_one_process():
    import logging

    from tersetalk.cli import HTTP_LOGGERS, _setup_logging

    before = {name: logging.getLogger(name).level for name in HTTP_LOGGERS}
    try:
        _setup_logging("INFO", verbose=False)
        assert all(logging.getLogger(n).level == logging.WARNING for n in HTTP_LOGGERS)
        _setup_logging("INFO", verbose=True)
        assert all(logging.getLogger(n).level == logging.NOTSET for n in HTTP_LOGGERS)
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)
