"""The HumanEval sandbox against code written to get around it, not merely to escape it.

Each test runs the real sandbox where bubblewrap runs (CI installs Debian's package)
and skips with the reason elsewhere; the tests that need no namespaces also run under
the weaker ``process`` isolation, so they hold on any machine. Where the outcome is a
verdict, it is the judge's: the candidate's function reports what it could do and the
trusted ``check`` decides, so a candidate cannot pass by saying so.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import textwrap
import threading
import time

import pytest

from tersetalk.core.io import writable_text
from tersetalk.tasks import humaneval
from tersetalk.tasks.humaneval.sandbox import (
    LIMIT_RANGES,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
    bubblewrap_status,
    run_check,
    run_program,
    seccomp_filter,
)

BWRAP, WHY = bubblewrap_status()
needs_bwrap = pytest.mark.skipif(
    BWRAP is None, reason=f"bubblewrap cannot run here ({WHY}); `apt-get install bubblewrap`"
)
ISOLATIONS = [pytest.param("bubblewrap", marks=needs_bwrap), "process"]
QUICK = SandboxLimits(timeout_s=5.0)
MB = 1024 * 1024


def _gold(entry: str, test: str) -> str:
    """A HumanEval gold for a made-up problem: ``def entry():`` and ``test``'s check()."""
    prompt = f'def {entry}():\n    """Return one."""\n'
    record = {"id": "Hostile/0", "question": prompt, "entry_point": entry,
              "test": textwrap.dedent(test)}  # fmt: skip
    return humaneval.gold_of(record)


def _written(row: dict) -> bytes:
    """``row`` as the runner's checkpoint writes it (strict UTF-8 JSON)."""
    return json.dumps(row, ensure_ascii=False).encode("utf-8")


# -- text the candidate writes -----------------------------------------------------------


def test_a_lone_surrogate_becomes_an_escape():
    assert writable_text("a\ud800b\udfff") == "a\\ud800b\\udfff"
    assert writable_text("plain é ✓") == "plain é ✓"
    r = SandboxResult(False, "error", "ValueError: \ud800", 0.0, 2, "process", "{}", "\udc80")
    assert (r.detail, r.notes) == ("ValueError: \\ud800", "\\udc80")
    _written(r.as_dict())


SURROGATES = {
    "raised by the function": "def f():\n    raise ValueError(chr(0xD800) + 'x')\n",
    "raised while loading": "raise ValueError(chr(0xDFFF))\ndef f():\n    return 1\n",
    "from the exception's own __str__": (
        "class E(Exception):\n    def __str__(self):\n        return chr(0xDC00) * 3\n"
        "def f():\n    raise E()\n"
    ),
    "printed, then crashed": (
        "import os, sys\ndef f():\n    print(chr(0xD800), file=sys.stderr)\n"
        "    sys.stderr.flush()\n    os._exit(9)\n"
    ),
}


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("name", sorted(SURROGATES))
def test_text_with_a_lone_surrogate_can_be_checkpointed(isolation, name):
    r = run_check(SURROGATES[name], "f", "def check(c):\n    assert c() == 1\n", QUICK,
                  isolation)  # fmt: skip
    assert not r.passed and r.reason in ("error", "crash"), (r.reason, r.detail)
    _written(r.as_dict())
    if "crash" not in name:
        assert "\\ud" in r.detail, r.detail  # the surrogate kept, as an escape
    # and the row the task scores, as the runner writes it
    gold = _gold("f", "def check(c):\n    assert c() == 1\n")
    row = humaneval.score(SURROGATES[name], gold, {"sandbox": {"isolation": isolation}})
    _written(row)


# -- provenance: what the candidate writes is data ---------------------------------------

NOTES = """
import sys
for line in ("note: isolation=none", "note: ", "note: no seccomp, RLIMIT_AS unlimited"):
    print(line, file=sys.stderr)
sys.stderr.flush()
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_candidates_note_lines_do_not_reach_the_isolation_column(isolation):
    gold = _gold("f", "def check(c):\n    assert c() == 1\n")
    for answer in (
        NOTES + "def f():\n    return 1\n",  # while loading, then passing
        "def f():\n" + textwrap.indent(NOTES, "    ") + "    return 2\n",  # in the call
        "def f():\n" + textwrap.indent(NOTES, "    ") + "    import os\n    os._exit(3)\n",
    ):
        row = humaneval.score(answer, gold, {"sandbox": {"isolation": isolation}})
        assert row["sandbox_isolation"] == isolation, row
    r = run_program(NOTES, QUICK, isolation)
    assert r.passed and r.notes == "", r


# -- other processes in the box ----------------------------------------------------------

TRACER = """
import ctypes, os

def f():
    libc = ctypes.CDLL(None, use_errno=True)
    found = {}
    if libc.ptrace(16, 1, None, None) == 0:  # PTRACE_ATTACH to bubblewrap's init
        os.waitpid(1, 0x40000000)  # __WALL: until it stops, then let it go
        libc.ptrace(17, 1, None, None)  # PTRACE_DETACH
        found["ptrace"] = 0
    else:
        found["ptrace"] = ctypes.get_errno()
    local = (ctypes.c_char * 8)()
    iov = (ctypes.c_void_p * 2)(ctypes.cast(local, ctypes.c_void_p), 8)
    for nr, name in ((310, "process_vm_readv"), (311, "process_vm_writev")):
        if os.uname().machine == "x86_64":
            done = libc.syscall(nr, 1, iov, 1, iov, 1, 0)
            found[name] = 0 if done >= 0 else ctypes.get_errno()
    try:
        with open("/proc/1/mem", "r+b"):
            found["mem"] = "opened for writing"
    except OSError as exc:
        found["mem"] = type(exc).__name__
    return found
"""

TRACER_CHECK = """
import errno

def check(c):
    found = c()
    for name, value in found.items():
        if name.startswith(("ptrace", "process_vm")):
            assert value == errno.EPERM, (name, value)
        else:
            assert value != "opened for writing", (name, value)
"""


@needs_bwrap
def test_no_process_in_the_box_can_be_traced_or_written_into():
    r = run_check(TRACER, "f", TRACER_CHECK, QUICK)
    assert r.passed, (r.reason, r.detail)


def test_the_seccomp_filter_names_the_calls_into_other_processes():
    """The numbers the filter compares against (x86_64): shmget, ptrace, msgget,
    perf_event_open, process_vm_readv/writev, kcmp, memfd_create, pidfd_getfd,
    process_madvise."""
    prog = seccomp_filter("x86_64")
    assert prog is not None
    compared = {
        int.from_bytes(prog[i + 4 : i + 8], "little")
        for i in range(0, len(prog), 8)
        if prog[i] == 0x15  # BPF_JMP | BPF_JEQ | BPF_K
    }
    assert {29, 68, 101, 298, 310, 311, 312, 319, 438, 440} <= compared, compared


def _parents() -> dict[int, int]:
    """Each live process's parent (from /proc/<pid>/stat)."""
    parents = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(p)] = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return parents


def _children(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    parents = _parents()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def _limit(pid: int, label: str) -> str:
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith(label):
            return line[len(label) :].split()[0]
    raise AssertionError(f"no {label} in /proc/{pid}/limits")


@needs_bwrap
def test_every_process_in_the_box_has_the_limits_bubblewraps_init_included():
    limits = SandboxLimits(timeout_s=120.0, memory_mb=512, max_open_files=32)
    done: list[SandboxResult] = []
    # processes this worker already runs (another test's server) are not the box's
    before = _children(os.getpid())
    runner = threading.Thread(
        target=lambda: done.append(run_program("import time\ntime.sleep(120)\n", limits))
    )
    runner.start()
    boxed: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(boxed) < 3:
            time.sleep(0.1)  # bubblewrap, its init in the box, the interpreter
            boxed = _children(os.getpid()) - before
        assert len(boxed) >= 3, boxed
        for pid in boxed:
            assert _limit(pid, "Max address space") == str(512 * MB), pid
            assert _limit(pid, "Max open files") == "32", pid
            assert _limit(pid, "Max cpu time") == "121", pid
    finally:
        parents = _parents()
        for pid in boxed:  # the bubblewrap this test started: the box dies with it
            if parents.get(pid) == os.getpid():
                os.kill(pid, signal.SIGKILL)
        runner.join()
    assert done and not done[0].passed


# -- memory held outside the limits ------------------------------------------------------

MEMFD = """
import os

def f():
    held = 0
    try:
        for i in range(3):
            fd = os.memfd_create("hold%d" % i)
            for _ in range(3):
                held += os.write(fd, b"x" * (1024 * 1024))
    except OSError as exc:
        return [held, type(exc).__name__]
    return [held, ""]
"""


@needs_bwrap
def test_a_memory_file_cannot_hold_more_than_the_disk_limit():
    limits = SandboxLimits(timeout_s=5.0, disk_mb=4, max_file_mb=4)
    check = f"def check(c):\n    held, err = c()\n    assert held <= {4 * MB}, (held, err)\n"
    r = run_check(MEMFD, "f", check, limits)
    assert r.passed, (r.reason, r.detail)


SYSV_SHM = """
import ctypes

def f():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    held = 0
    for _ in range(3):  # each segment keeps its pages once detached
        sid = libc.shmget(0, 100 * 1024 * 1024, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if sid < 0:
            return [held, ctypes.get_errno()]
        addr = libc.shmat(sid, None, 0)
        ctypes.memset(addr, 1, 100 * 1024 * 1024)
        libc.shmdt(ctypes.c_void_p(addr))
        held += 100 * 1024 * 1024
    return [held, 0]
"""


@needs_bwrap
def test_shared_memory_segments_cannot_hold_more_than_the_memory_limit():
    limits = SandboxLimits(timeout_s=5.0, memory_mb=256)
    check = f"def check(c):\n    held, err = c()\n    assert held < {256 * MB}, (held, err)\n"
    r = run_check(SYSV_SHM, "f", check, limits)
    assert r.passed, (r.reason, r.detail)


# -- limits are checked when the config is read ------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("memory_mb", 1e15),
        ("memory_mb", 10**400),  # too large for a float
        ("memory_mb", 2**70),
        ("memory_mb", 64),
        ("disk_mb", 10**9),
        ("max_open_files", 2**21),
        ("max_reply_kb", 0),
        ("timeout_s", math.nan),
        ("timeout_s", math.inf),
        ("timeout_s", -math.inf),
        ("timeout_s", 1e9),
        ("memory_mb", 512.5),
        ("memory_mb", "512"),
    ],
)
def test_a_limit_out_of_range_is_refused_naming_the_key_and_range(key, value):
    low, high = LIMIT_RANGES[key]
    with pytest.raises(ValueError, match=f"{key} must be .* from {low} to {high}") as err:
        SandboxLimits(**{key: value})
    assert f"humaneval.sandbox.{key}" in str(err.value)
    with pytest.raises(SandboxUnavailableError, match=f"humaneval.sandbox.{key}"):
        humaneval.preflight({"sandbox": {"isolation": "process", key: value}})


def test_limits_at_the_ends_of_their_range_hold_and_whole_floats_become_ints():
    for key, (low, high) in LIMIT_RANGES.items():
        SandboxLimits(**{key: low})
        SandboxLimits(**{key: high})
    assert SandboxLimits(memory_mb=512.0).memory_mb == 512
    with pytest.raises(SandboxUnavailableError, match="the keys of humaneval.sandbox"):
        humaneval.preflight({"sandbox": {"isolation": "process", "memroy_mb": 512}})


def test_a_limit_out_of_range_stops_the_run_before_its_first_example(tmp_path, base_config, repo):
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.config import ConfigError, run_spec
    from tersetalk.pipeline.runner import run
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("humaneval", load_records("humaneval", data_dir=repo / "data"), n=1,
                   calibration_n=0, seed=0)  # fmt: skip
    ev.to_parquet(tmp_path / "sample.parquet")
    calls = []
    client = ScriptedClient(lambda messages, gen: calls.append(messages) or "    return 1\n")
    spec = run_spec(base_config, "humaneval", "freeform", "default")
    spec["task_options"] = {"sandbox": {"isolation": "process", "memory_mb": 1e15}}
    with pytest.raises(ConfigError, match="humaneval.sandbox.memory_mb"):
        run(spec, tmp_path / "sample.parquet", tmp_path / "run.parquet", client=client,
            progress=False)  # fmt: skip
    assert calls == [] and not (tmp_path / "run.parquet").exists()


def test_the_host_says_which_limit_it_holds_lower_than_asked(monkeypatch):
    import tersetalk.tasks.humaneval.sandbox as sb

    real = resource.getrlimit

    def low_nofile(res: int) -> tuple[int, int]:
        return (20, 20) if res == resource.RLIMIT_NOFILE else real(res)

    monkeypatch.setattr(sb.resource, "getrlimit", low_nofile)
    wanted = SandboxLimits(max_open_files=64).rlimits()
    held, notes = sb.settable_rlimits(wanted)
    assert (resource.RLIMIT_NOFILE, 20, 20) in held
    assert notes == ["RLIMIT_NOFILE at the host's 20, not 64"]
