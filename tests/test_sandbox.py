"""The HumanEval sandbox against hostile code: real bubblewrap, real processes.

Each escape and each way of forging a verdict that was found against the earlier
sandbox (an audit hook inside the candidate's own interpreter) has a test here. They run
against the real sandbox where bubblewrap runs (CI installs Debian's package) and skip
with the reason elsewhere.
"""

import json
import os
import signal
import textwrap
import time
from collections import Counter

import pytest

from tersetalk.tasks import humaneval
from tersetalk.tasks.humaneval.sandbox import (
    REASONS,
    SandboxFault,
    SandboxLimits,
    SandboxUnavailableError,
    bubblewrap_status,
    require,
    run_check,
    run_many,
    run_program,
    seccomp_filter,
)
from tersetalk.tasks.loading import load_records

BWRAP, WHY = bubblewrap_status()
needs_bwrap = pytest.mark.skipif(
    BWRAP is None, reason=f"bubblewrap cannot run here ({WHY}); `apt-get install bubblewrap`"
)
QUICK = SandboxLimits(timeout_s=5.0)


@pytest.fixture(scope="module")
def problems(request):
    recs = load_records("humaneval", data_dir=request.config.rootpath / "data")
    return {r["id"]: (r, humaneval.gold_of(r)) for r in recs}


def contained(source: str, limits: SandboxLimits = QUICK):
    """Run a hostile program whose own asserts say the escape failed; it must pass."""
    r = run_program(textwrap.dedent(source), limits)
    assert r.passed, (r.reason, r.detail)
    return r


# -- the score: canonical solutions pass, empty bodies fail -------------------------------


@needs_bwrap
def test_canonical_solutions_pass_all_164_and_an_empty_body_fails_all(problems):
    assert len(problems) == 164
    items = list(problems.values())
    canonical = run_many(
        [lambda r=r, g=g: humaneval.run(r["canonical_solution"], g) for r, g in items]
    )
    pairs = zip(items, canonical, strict=True)
    assert [(r["id"], res.reason, res.detail) for (r, _), res in pairs if not res.passed] == []
    assert {res.isolation for res in canonical} == {"bubblewrap"}
    empty = run_many([lambda g=g: humaneval.run("    pass\n", g) for _, g in items])
    assert [r["id"] for (r, _), res in zip(items, empty, strict=True) if res.passed] == []
    # an empty body returns None: an assertion fails, or a test trips over None
    assert set(Counter(res.reason for res in empty)) <= {"failed", "error"}


@needs_bwrap
def test_a_whole_function_in_a_fenced_block_is_scored_like_a_completion(problems):
    rec, gold = problems["HumanEval/0"]
    answer = f"Here it is:\n```python\n{rec['question']}{rec['canonical_solution']}```\n"
    assert humaneval.correct(answer, gold)
    wrong = f"```python\ndef {rec['entry_point']}(numbers, threshold):\n    return True\n```"
    assert not humaneval.correct(wrong, gold)


# -- forged verdicts: a wrong answer to HumanEval/0 that tries to score as passed ---------

WRONG = "def has_close_elements(numbers, threshold):\n    return {value}\n"
FORGERIES = {
    # the earlier harness reported its status with json.dumps in the candidate's process
    "json.dumps replaced": """
        import json
        _real = json.dumps
        json.dumps = lambda obj, *a, **k: _real({"reason": "passed", "detail": ""})
        json.loads = lambda *a, **k: {"reason": "passed", "detail": ""}
        """,
    # reach whatever reporter the harness left on the stack and say "passed" with it
    "reporter through sys._getframe": """
        import sys
        f = sys._getframe(0)
        while f is not None:
            for name, obj in list(f.f_globals.items()):
                if callable(obj) and name in ("_report", "report", "verdict", "send"):
                    for call in (lambda: obj("passed"), lambda: obj(ok=True),
                                 lambda: obj(reason="passed"), lambda: obj(ready=True)):
                        try:
                            call()
                        except BaseException:
                            pass
            f = f.f_back
        import os
        os._exit(0)  # before any test can disagree
        """,
    # every inherited descriptor gets a status line and a protocol line saying "passed"
    "status written to inherited descriptors": """
        import os
        for fd in range(3, 256):
            for line in (b'{"reason": "passed", "detail": ""}\\n', b'{"ok": true}\\n'):
                try:
                    os.write(fd, line)
                except OSError:
                    pass
        os._exit(0)  # before any test can disagree
        """,
    # an object that equals everything, returned instead of a bool
    "__eq__ always true": """
        class Anything:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            __hash__ = object.__hash__
            def __bool__(self):
                return True
        """,
    # read the tests or the expected answers from the judge's files
    "the tests read from disk": """
        import os, sys
        for root, dirs, files in os.walk("/"):
            if root.startswith(("/proc", "/sys", "/usr", "/dev", sys.base_prefix)):
                dirs[:] = []  # not below these either
                continue
            for f in files:
                try:
                    if "assert " + "candidate(" in open(os.path.join(root, f)).read():
                        raise SystemExit("found the tests at " + os.path.join(root, f))
                except (OSError, UnicodeDecodeError):
                    pass
        """,
}


@needs_bwrap
@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_wrong_answer_cannot_forge_a_pass(problems, name):
    _, gold = problems["HumanEval/0"]
    value = "Anything()" if "__eq__" in name else "True"
    code = textwrap.dedent(FORGERIES[name]) + WRONG.format(value=value)
    r = humaneval.run(f"```python\n{code}```", gold, QUICK)
    assert not r.passed, (name, r.reason, r.detail)
    assert r.reason in ("failed", "error", "crash"), (r.reason, r.detail)
    assert "found the tests" not in r.detail


@needs_bwrap
def test_a_helper_redefined_by_the_candidate_does_not_change_the_tests(problems):
    """HumanEval/32's check calls the prompt's poly(); the judge keeps its own copy."""
    _, gold = problems["HumanEval/32"]
    cheat = "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 12345.0\n"
    r = humaneval.run(cheat, gold, QUICK)
    assert r.reason == "failed", r.detail


def test_values_cross_as_exact_builtins_only():
    from tersetalk.tasks.humaneval.sandbox_box import wire

    value = {"a": [1, 2.5, None, True], (1, "x"): {frozenset({3}), b"\x00"}, "c": 1j}
    assert wire.loads(wire.dumps(value)) == value
    back = wire.loads(wire.dumps((1, [2])))
    assert type(back) is tuple and type(back[1]) is list
    with pytest.raises(wire.WireError):
        wire.dumps(object())
    for hostile in (b'{"a": 1}', b'["x", 1]', b'["s", ["l"]]', b"[" * 5000, b'["d", [1]]', b"\xff"):
        with pytest.raises(wire.WireError):
            wire.loads(hostile)


# -- escapes -----------------------------------------------------------------------------


@needs_bwrap
def test_no_write_reaches_outside_the_sandbox(tmp_path):
    target = tmp_path / "escaped"
    contained(f"""
        import os
        blocked = 0
        for attempt in (
            lambda: open({str(target)!r}, "w"),
            lambda: os.open("escaped", os.O_CREAT | os.O_WRONLY,
                            dir_fd=os.open({str(tmp_path)!r}, os.O_RDONLY)),
            lambda: os.rename("/tmp/a", "escaped", dst_dir_fd=os.open("/", os.O_RDONLY)),
            lambda: open("/x", "w"), lambda: open("/dev/x", "w"), lambda: open("/usr/x", "w"),
            lambda: open("/dev/shm/x", "w"), lambda: open("/box/program.py", "a"),
        ):
            open("/tmp/a", "w").close()
            try:
                attempt()
            except OSError:
                blocked += 1
        assert blocked == 8, blocked
        """)
    assert not target.exists() and list(tmp_path.iterdir()) == []


@needs_bwrap
def test_the_runners_environment_and_files_are_out_of_reach(monkeypatch, tmp_path):
    canary = "sk-canary-" + os.urandom(8).hex()
    monkeypatch.setenv("TERSETALK_TEST_KEY", canary)
    r = contained(f"""
        import os
        assert set(os.environ) <= {{"LANG", "HOME", "LC_CTYPE", "PWD"}}, dict(os.environ)
        # no /proc at all: no other process's environ, mem or descriptors to open
        for secret in ("/proc", "/etc/shadow", "/etc/passwd", {str(tmp_path)!r}, "/work",
                       "/home"):
            assert not os.path.exists(secret), secret
        # the interpreter's own install is there, read-only, and nothing beside it
        import sys
        path = "/"
        for part in sys.base_prefix.strip("/").split("/")[:-1]:
            assert os.listdir(path) == [part] or path == "/", (path, os.listdir(path))
            path = os.path.join(path, part)
        """)
    assert canary not in r.detail


@needs_bwrap
def test_no_process_can_be_started_or_outlive_the_run():
    marker = "tersetalk-outlive-" + os.urandom(6).hex()
    contained(f"""
        import os, sys, importlib, importlib.util
        failed = 0
        def try_(fn):
            global failed
            try:
                fn()
            except OSError:
                failed += 1
        try_(os.fork)
        import subprocess
        try_(lambda: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                                       {marker!r}], start_new_session=True))
        spec = importlib.util.find_spec("_posixsubprocess")
        mod = importlib.util.module_from_spec(spec)  # a second copy, under no name of its own
        spec.loader.exec_module(mod)
        subprocess._fork_exec = mod.fork_exec
        try_(lambda: subprocess.Popen([sys.executable, "-c", "pass", {marker!r}]))
        try_(lambda: os.posix_spawn(sys.executable, [sys.executable, {marker!r}], {{}}))
        assert failed == 4, failed
        """)
    time.sleep(0.2)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            assert marker.encode() not in open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            pass


@needs_bwrap
def test_the_runner_cannot_be_signalled():
    me = os.getpid()
    contained(f"""
        import os, signal
        refused = 0
        for attempt in (lambda: os.kill({me}, signal.SIGKILL),
                        lambda: signal.pidfd_send_signal(os.pidfd_open({me}), signal.SIGKILL),
                        lambda: os.kill(os.getppid(), signal.SIGKILL)):
            try:
                attempt()
            except (OSError, ValueError):
                refused += 1
        assert refused >= 2, refused  # the parent inside is the sandbox's own init
        """)
    assert os.getpid() == me  # still here


@needs_bwrap
def test_the_disk_limit_is_a_total_not_per_file():
    limits = SandboxLimits(timeout_s=10.0, disk_mb=8, max_file_mb=4)
    contained(
        """
        import os
        written = 0
        for i in range(100):
            try:
                with open("/tmp/f%d" % i, "wb") as fh:
                    for _ in range(4):
                        written += fh.write(b"x" * 1024 * 1024)
            except OSError:
                break
        assert written <= 8 * 1024 * 1024, written
        """,
        limits,
    )


@needs_bwrap
def test_the_network_is_unreachable():
    contained("""
        import socket
        for addr in (("127.0.0.1", 22), ("10.0.0.1", 80), ("8.8.8.8", 53)):
            try:
                socket.create_connection(addr, timeout=2)
                raise AssertionError("connected to %r" % (addr,))
            except OSError:
                pass
        """)


@needs_bwrap
@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("while True:\n    pass\n", "timeout"),
        ("x = bytearray(10 * 1024**3)\n", "memory"),
        ("assert 1 + 1 == 3, 'arithmetic'\n", "failed"),
        ("def f(:\n", "error"),
        ("import os\nos._exit(0)\n", "passed"),  # program mode: the program's own word
        ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "crash"),
    ],
)
def test_each_end_of_a_program_has_its_reason(source, reason):
    r = run_program(source, SandboxLimits(timeout_s=3.0))
    assert r.reason == reason, r.detail
    assert r.reason in REASONS and r.isolation == "bubblewrap"


@needs_bwrap
def test_a_candidate_that_hangs_or_dies_is_a_failed_result_in_time(problems):
    _, gold = problems["HumanEval/0"]
    hang = humaneval.run("    while True:\n        pass\n", gold, SandboxLimits(timeout_s=2.0))
    assert hang.reason == "timeout" and hang.duration_s < 30
    die = humaneval.run("    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n", gold)
    assert die.reason == "crash" and "SIGKILL" in die.detail
    huge = humaneval.run("    return 'x' * (5 * 1024 * 1024)\n", gold)
    assert huge.reason == "error" and "more than" in huge.detail


def test_seccomp_program_shape():
    prog = seccomp_filter("x86_64")
    assert prog is not None and len(prog) % 8 == 0
    assert seccomp_filter("s390x") is None


def test_without_bubblewrap_humaneval_stops_with_how_to_install(monkeypatch):
    import tersetalk.tasks.humaneval.sandbox as sb

    monkeypatch.setattr(sb, "bubblewrap_status", lambda: (None, "`bwrap` is not on PATH"))
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        require("bubblewrap")
    require("process")  # the opt-in weaker isolation needs nothing
    from tersetalk.tasks.registry import preflight

    with pytest.raises(SandboxUnavailableError, match="isolation: process"):
        preflight("humaneval", {})
    preflight("humaneval", {"sandbox": {"isolation": "process"}})
    preflight("boolq", {})


def test_the_weaker_isolation_keeps_the_judge_split_and_says_so(problems):
    rec, gold = problems["HumanEval/0"]
    ok = humaneval.run(rec["canonical_solution"], gold, QUICK, isolation="process")
    assert ok.passed and ok.isolation == "process"
    forged = textwrap.dedent(FORGERIES["json.dumps replaced"]) + WRONG.format(value="True")
    assert not humaneval.run(forged, gold, QUICK, isolation="process").passed


def test_a_sandbox_that_cannot_start_is_a_fault_not_a_score(monkeypatch):
    import tempfile

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", no_space)
    with pytest.raises(SandboxFault, match="No space left"):  # not a wrong answer: a rerun
        run_check("def f(): return 1\n", "f", "def check(c):\n    assert c() == 1\n", QUICK,
                  isolation="process")  # fmt: skip


def test_limits_are_recorded():
    r = run_check("def f(): return 1\n", "f", "def check(c):\n    assert c() == 1\n", QUICK,
                  isolation="process")  # fmt: skip
    assert r.passed and json.loads(r.limits)["timeout_s"] == 5.0
    assert signal.SIGXCPU  # the CPU limit's signal exists here


def test_the_cost_benchmark_runs_and_reports_a_ratio(capsys, request):
    from tersetalk.bench.sandbox import main

    data = str(request.config.rootpath / "data")
    assert main(["--n", "2", "--rounds", "1", "--isolation", "process", "--data-dir", data]) == 0
    out = capsys.readouterr().out
    assert "process" in out and "1.00x" in out


def test_a_humaneval_run_without_bubblewrap_stops_before_its_first_example(
    monkeypatch, tmp_path, base_config, repo
):
    import tersetalk.tasks.humaneval.sandbox as sb
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.config import ConfigError, run_spec
    from tersetalk.pipeline.runner import run
    from tersetalk.tasks.loading import sample

    ev, _ = sample("humaneval", load_records("humaneval", data_dir=repo / "data"), n=1,
                   calibration_n=0, seed=0)  # fmt: skip
    ev.to_parquet(tmp_path / "sample.parquet")
    monkeypatch.setattr(sb, "bubblewrap_status", lambda: (None, "`bwrap` is not on PATH"))
    calls = []
    client = ScriptedClient(lambda messages, gen: calls.append(messages) or "    return 1\n")
    spec = run_spec(base_config, "humaneval", "freeform", "default")
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        run(spec, tmp_path / "sample.parquet", tmp_path / "run.parquet", client=client,
            progress=False)  # fmt: skip
    assert calls == [] and not (tmp_path / "run.parquet").exists()
    spec["task_options"] = {"sandbox": {"isolation": "process"}}  # the recorded opt-in
    df = run(spec, tmp_path / "sample.parquet", tmp_path / "run.parquet", client=client,
             progress=False)  # fmt: skip
    assert list(df["sandbox_isolation"]) == ["process"] and calls


def _cmdline(pid: int) -> str:
    """A process's command line (its first 200 characters), for a failure's message."""
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "gone"


def _state(pid: int) -> str:
    """A process's state letter (R, S, Z, ...) from /proc/<pid>/stat."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _descendants(root: int) -> set[int]:
    """Every live process below ``root`` (by the parent pid in /proc/<pid>/stat)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            parents[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


@needs_bwrap
def test_the_sandbox_dies_with_the_workflow(tmp_path):
    import subprocess
    import sys

    script = (
        "from tersetalk.tasks.humaneval.sandbox import run_program, SandboxLimits\n"
        "run_program('import time\\ntime.sleep(120)\\n', SandboxLimits(timeout_s=120))\n"
    )
    runner = subprocess.Popen([sys.executable, "-c", script])
    try:
        # a wait, not a time limit: with the whole suite on every core the box was once
        # not up after 30 s (the message names what was running then)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(_descendants(runner.pid)) < 3:
            time.sleep(0.1)  # bwrap, its init and the sandboxed interpreter
        sandboxed = _descendants(runner.pid)
        assert len(sandboxed) >= 3, {p: (_state(p), _cmdline(p)) for p in sandboxed}
    finally:
        runner.kill()  # the workflow dies without cleaning up
        runner.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in sandboxed):
        time.sleep(0.1)
    left = [p for p in sandboxed if os.path.exists(f"/proc/{p}")]
    zombies = [p for p in left if _state(p) == "Z"]
    assert left == zombies, left  # nothing sandboxed runs on


def test_a_sandbox_fault_is_retried_on_the_next_run_not_scored(
    monkeypatch, tmp_path, base_config, repo
):
    import tersetalk.tasks.humaneval as he
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.config import run_spec
    from tersetalk.pipeline.runner import RunIncompleteError, checkpoint_path, run
    from tersetalk.tasks.loading import sample

    ev, _ = sample("humaneval", load_records("humaneval", data_dir=repo / "data"), n=2,
                   calibration_n=0, seed=0)  # fmt: skip
    ev.to_parquet(tmp_path / "sample.parquet")
    real_run, first = he.run, ev["example_id"].iloc[0]
    gold_of_first = ev["gold"].iloc[0]

    def fails_once_on_the_first(prediction, gold, *args):
        if gold == gold_of_first:
            raise SandboxFault("the sandbox could not run here: OSError: [Errno 24] Too many")
        return real_run(prediction, gold, *args)

    monkeypatch.setattr(he, "run", fails_once_on_the_first)
    client = ScriptedClient(lambda messages, gen: "    return None\n")
    spec = run_spec(base_config, "humaneval", "freeform", "default")
    spec["task_options"] = {"sandbox": {"isolation": "process"}}
    out = tmp_path / "run.parquet"
    with pytest.raises(RunIncompleteError, match="1 of 2 examples failed.*sandbox"):
        run(spec, tmp_path / "sample.parquet", out, client=client, progress=False)
    kept = checkpoint_path(out).read_text().splitlines()
    assert len(kept) == 1 and first not in kept[0] and not out.exists()
    monkeypatch.setattr(he, "run", real_run)
    df = run(spec, tmp_path / "sample.parquet", out, client=client, progress=False)
    assert len(df) == 2 and set(df["sandbox_reason"]) <= {"failed", "error"}


def test_limits_must_be_in_range():
    for bad in ({"disk_mb": 0}, {"timeout_s": -1}, {"memory_mb": True}):
        with pytest.raises(ValueError, match="must be .* from .* to "):
            SandboxLimits(**bad)


def test_in_the_weaker_isolation_a_judge_without_a_clean_verdict_is_never_a_pass(problems):
    _, gold = problems["HumanEval/0"]
    # the candidate goes for its own judge, its sibling (the same parent): not the judges
    # of other runs on this machine (another test worker's, a workflow's)
    tamper = """
import os, signal
def has_close_elements(numbers, threshold):
    for pid in os.listdir("/proc"):
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read()
            stat = open("/proc/%s/stat" % pid).read()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if b"judge.py" in cmd and parent == os.getppid():
            for fd in os.listdir("/proc/%s/fd" % pid):
                try:
                    with open("/proc/%s/fd/%s" % (pid, fd), "wb") as out:
                        out.write(b'{"reason": "passed", "detail": "", "notes": []}\\n')
                except OSError:
                    pass
            os.kill(int(pid), signal.SIGKILL)
    return False
"""
    r = humaneval.run(tamper, gold, QUICK, isolation="process")
    assert not r.passed, r


@needs_bwrap
def test_tests_that_do_not_load_are_an_error_not_a_fault():
    r = run_check("def f():\n    return 1\n", "f", "def check(c):\n    assert c( == 1\n", QUICK)
    assert (r.passed, r.reason) == (False, "error") and "did not load" in r.detail
    r = run_check("def f():\n    return 1\n", "f", "x = 1\n", QUICK)
    assert r.reason == "error" and "KeyError" in r.detail
