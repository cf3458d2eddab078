"""``tersetalk mcp tune|telemetry`` beside the proxy; the old spellings under
``tersetalk formats`` still run and say where the commands moved."""

from __future__ import annotations

import pytest

from tersetalk.cli import main


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv) or 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_tuner_runs_under_tersetalk_mcp_without_a_warning(capsys):
    code, out, err = _run(["mcp", "tune", "show", "--model-id", "gpt-4o"], capsys)
    assert code == 0 and out.strip()
    assert "is now" not in err


@pytest.mark.parametrize("group", ["formats", "mcp"])
def test_the_old_spelling_gives_the_same_answer_and_warns_only_there(group, capsys):
    _, new_out, _ = _run(["mcp", "tune", "show", "--model-id", "gpt-4o"], capsys)
    code, out, err = _run([group, "tune", "show", "--model-id", "gpt-4o"], capsys)
    assert code == 0 and out == new_out
    warned = "`tersetalk formats tune show` is now `tersetalk mcp tune show`" in err
    assert warned == (group == "formats")


def test_telemetry_is_under_tersetalk_mcp_too(tmp_path, capsys):
    code, _, err = _run(["mcp", "telemetry", "--help"], capsys)
    assert code == 0
    code, _, err = _run(["formats", "telemetry", "show", "--dir", str(tmp_path)], capsys)
    assert "`tersetalk formats telemetry show` is now `tersetalk mcp telemetry show`" in err
