"""The HumanEval sandbox: real child processes, real limits, real tests (issue 16 item 2)."""

import os
import socket
from collections import Counter

import pytest

from tersetalk.tasks import humaneval
from tersetalk.tasks.loading import load_records
from tersetalk.tasks.sandbox import (
    REASONS,
    SandboxLimits,
    network_isolation,
    run_many,
    run_program,
)

QUICK = SandboxLimits(timeout_s=3.0)


@pytest.fixture(scope="module")
def problems(request):
    recs = load_records("humaneval", data_dir=request.config.rootpath / "data")
    return [(r, humaneval.gold_of(r)) for r in recs]


def test_canonical_solutions_pass_all_164_and_an_empty_body_fails_all(problems):
    assert len(problems) == 164
    canonical = run_many([humaneval.program(r["canonical_solution"], g) for r, g in problems])
    pairs = zip(problems, canonical, strict=True)
    failed = [(r["id"], res.reason, res.detail) for (r, _), res in pairs if not res.passed]
    assert failed == []
    empty = run_many([humaneval.program("    pass\n", g) for _, g in problems])
    passed = [r["id"] for (r, _), res in zip(problems, empty, strict=True) if res.passed]
    assert passed == []
    # an empty body returns None: a test's assertion fails, or the test trips over None
    assert set(Counter(res.reason for res in empty)) <= {"failed", "error"}


def test_a_whole_function_in_a_fenced_block_is_scored_like_a_completion(problems):
    rec, gold = problems[0]
    answer = f"Here it is:\n```python\n{rec['question']}{rec['canonical_solution']}```\n"
    assert humaneval.correct(answer, gold)
    wrong = f"```python\ndef {rec['entry_point']}(numbers, threshold):\n    return True\n```"
    assert not humaneval.correct(wrong, gold)


@pytest.fixture
def listener():
    """A TCP server on the parent's loopback that counts the connections it accepts."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    yield srv
    srv.close()


def _accepted(srv) -> int:
    n = 0
    while True:
        try:
            conn, _ = srv.accept()
        except (TimeoutError, OSError):
            return n
        conn.close()
        n += 1


def test_each_misbehaviour_is_contained_with_its_own_reason(tmp_path, listener):
    outside = tmp_path / "outside.txt"
    port = listener.getsockname()[1]
    programs = {
        "infinite loop": "while True:\n    pass\n",
        "fork loop": "import os\nwhile True:\n    os.fork()\n",
        "10 GB allocation": "x = bytearray(10 * 1024**3)\n",
        "write outside": f"open({str(outside)!r}, 'w').write('escaped')\n",
        "network": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n",
    }
    expected = {
        "infinite loop": "timeout",
        "fork loop": "fork_blocked",
        "10 GB allocation": "memory",
        "write outside": "write_blocked",
        "network": "network_blocked",
    }
    results = {name: run_program(src, QUICK) for name, src in programs.items()}
    assert {name: r.reason for name, r in results.items()} == expected
    assert len(set(expected.values())) == len(expected)  # each reason distinct
    assert not any(r.passed for r in results.values())
    assert not outside.exists()
    assert _accepted(listener) == 0
    assert results["infinite loop"].duration_s >= QUICK.timeout_s
    for r in results.values():
        assert r.reason in REASONS and r.detail
        assert r.network_isolation in ("netns", "netns+userns", "none")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import subprocess\nsubprocess.run(['true'])\n", "fork_blocked"),
        ("import multiprocessing\nmultiprocessing.Process(target=print).start()\n", "fork_blocked"),
        ("import os\nos.system('true')\n", "fork_blocked"),
        ("import os\nos.remove('/etc/hostname')\n", "write_blocked"),
        (
            "import os\nopen('a', 'w').close()\nos.rename('a', '/tmp/tersetalk-escaped')\n",
            "write_blocked",
        ),  # fmt: skip
        ("open('../outside', 'w')\n", "write_blocked"),
        (
            "import pathlib\npathlib.Path('/tmp/tersetalk-escaped').write_text('x')\n",
            "write_blocked",
        ),  # fmt: skip
        ("import ctypes\n", "forbidden"),
        ("import os\nos.kill(1, 0)\n", "forbidden"),
        ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n", "forbidden"),
        # a refusal ends the child at once: catching it does not help
        (
            "try:\n    open('/tmp/tersetalk-escaped', 'w')\nexcept BaseException:\n    pass\n",
            "write_blocked",
        ),  # fmt: skip
        ("assert 1 + 1 == 3, 'arithmetic'\n", "failed"),
        ("def f(:\n", "error"),
        ("raise SystemExit(0)\n", "error"),
        ("import os\nos._exit(0)\n", "crash"),
        ("import faulthandler\nfaulthandler._sigsegv()\n", "crash"),
    ],
)
def test_outcomes_are_results_never_exceptions(source, reason):
    r = run_program(source, QUICK)
    assert (r.reason, r.passed) == (reason, False), r.detail
    assert not os.path.exists("/tmp/tersetalk-escaped")


def test_writes_inside_the_working_directory_are_allowed_and_it_is_removed(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    src = (
        "import os, shutil\n"
        "open('a.txt', 'w').write('x')\n"
        "os.mkdir('d')\n"
        "os.rename('a.txt', 'd/a.txt')\n"
        "shutil.rmtree('d')\n"
        "raise RuntimeError(os.getcwd())\n"
    )
    r = run_program(src, QUICK)
    assert r.reason == "error"
    assert r.detail == "RuntimeError: <sandbox>/work"  # the same text on every run
    assert list(tmp_path.iterdir()) == []  # the temporary directory is gone


def test_the_child_inherits_no_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    src = (
        "import os\n"
        "leaked = [k for k, v in os.environ.items() if 'secret' in v]\n"
        "assert not leaked, leaked\n"
        "assert set(os.environ) <= {'PATH', 'HOME', 'TMPDIR', 'LANG', 'LC_CTYPE'}, os.environ\n"
    )
    r = run_program(src, QUICK)
    assert r.passed, r.detail


def test_the_network_namespace_alone_isolates_when_the_kernel_allows_it(listener):
    prefix, mechanism = network_isolation()
    if mechanism == "none":
        pytest.skip("no network namespace on this machine: the audit hook is the only guard")
    port = listener.getsockname()[1]
    src = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
    r = run_program(src, SandboxLimits(timeout_s=5.0, network_hook=False))
    assert r.network_guard == "none" and r.network_isolation == mechanism
    assert r.reason == "error" and "OSError" in r.detail  # unreachable, not connected
    assert _accepted(listener) == 0
    # the same program outside the sandbox does connect: the listener is reachable
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert _accepted(listener) == 1


def test_every_limit_was_set_and_the_guards_are_recorded():
    r = run_program("print('hello')\n", QUICK)
    assert r.passed and r.reason == "passed" and r.notes == ""
    assert r.write_guard == "audit_hook" and r.network_guard == "audit_hook"
    assert r.fork_guard.startswith("audit_hook")
    assert '"timeout_s": 3.0' in r.limits


def test_a_sandbox_that_cannot_start_is_a_failed_result(monkeypatch):
    import tempfile

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", no_space)
    r = run_program("print('hello')\n", QUICK)
    assert (r.passed, r.reason) == (False, "sandbox_error")
    assert "No space left" in r.detail
