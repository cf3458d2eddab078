"""Run untrusted Python (a model's HumanEval answer and the task's tests) in a child process.

The candidate never runs in the workflow's interpreter. Each call starts a fresh
``sys.executable -I -S`` (isolated mode, no site-packages: HumanEval needs the standard
library only, and the project's packages stay out of reach) in a new session, inside a
fresh temporary directory that is removed afterwards, with a minimal environment
(``PATH``, ``HOME``/``TMPDIR`` pointing at the working directory, ``LANG``: no API keys or
tokens of the parent). Whatever happens inside, :func:`run_program` returns a
:class:`SandboxResult` (``passed``, ``reason``, ``detail``, ``duration_s`` and the
isolation in force); it never raises because of the candidate.

What contains what:

* **Wall clock**: the parent waits ``timeout_s`` and then kills the whole process group
  (reason ``timeout``).
* **CPU and memory** (kernel, ``setrlimit`` in the child before the candidate runs):
  ``RLIMIT_CPU`` one second above the wall-clock timeout (so a busy loop is reported as
  ``timeout``; the CPU limit is the backstop, reason ``cpu_limit``), ``RLIMIT_AS``
  (``memory_mb``; an allocation beyond it raises MemoryError, reason ``memory``),
  ``RLIMIT_FSIZE`` (no file above ``max_file_mb``), ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``.
* **Processes**: ``RLIMIT_NPROC`` is set, but the kernel does not apply it to root, which
  is what this project's machines run as; the audit hook below is what stops a fork
  (reason ``fork_blocked``). The parent kills the child's process group at the end.
* **Network**: a new network namespace (``unshare --net``, or ``unshare --user
  --map-root-user --net`` for a non-root user) where the kernel allows it: the child sees
  only a loopback device that is down, so no address is reachable. Whether it was in force
  is in ``network_isolation`` (``netns``, ``netns+userns`` or ``none``). In every case the
  audit hook refuses ``connect``/``sendto``/``sendmsg`` (reason ``network_blocked``): a
  network namespace does not cover Unix-domain sockets in the file system.
* **Writes**: a ``sys.addaudithook`` hook, installed by the bootstrap before the candidate
  is compiled, refuses opening for writing, creating, removing, renaming, linking or
  changing the mode of any path outside the working directory (reason
  ``write_blocked``), refuses fork, exec, spawn and ``_posixsubprocess`` (what
  ``subprocess`` and ``multiprocessing`` start processes with; reason ``fork_blocked``),
  and refuses ``ctypes``, ``os.kill`` of other processes and ``resource.setrlimit``
  (reason ``forbidden``). A refused action ends the
  child at once (``os._exit``), so the candidate cannot catch it and carry on.

What it cannot stop, honestly: the audit hook runs in the candidate's own interpreter.
It is a guard against the accidents and misbehaviour of model-written code, not a
security boundary against code written to escape: such code could write to file
descriptors it already holds, reach memory through modules the hook does not know, or
forge the status line the parent reads. The kernel parts (rlimits, the network
namespace, the separate process and its cleanup) hold regardless. We run as root, so
file permissions protect nothing; a real boundary for hostile code needs a container or
a VM (e.g. gVisor, Firecracker) around this.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache

__all__ = [
    "REASONS",
    "SandboxLimits",
    "SandboxResult",
    "network_isolation",
    "run_many",
    "run_program",
]

#: every reason a result can carry; ``passed`` is the only one with ``passed=True``
REASONS = (
    "passed",  # the program ran to its end (for HumanEval: check() returned)
    "failed",  # an AssertionError: a test did not hold
    "error",  # any other exception (SyntaxError, NameError, SystemExit, ...)
    "timeout",  # wall-clock limit; the process group was killed
    "cpu_limit",  # RLIMIT_CPU: the kernel's SIGXCPU/SIGKILL
    "memory",  # MemoryError under RLIMIT_AS
    "fork_blocked",  # fork/exec/spawn/subprocess refused by the audit hook
    "write_blocked",  # a write, create, remove or rename outside the working directory
    "network_blocked",  # connect/sendto/sendmsg refused by the audit hook
    "forbidden",  # ctypes, killing other processes, setrlimit
    "crash",  # killed by another signal, or exited without saying how it ended
    "sandbox_error",  # the sandbox itself could not start (no temp dir, no interpreter)
)

_STATUS_FILE = "status.jsonl"
_PROGRAM_FILE = "program.py"
_VIOLATION_EXIT = 86


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one run; the defaults suit a HumanEval problem (all finish in < 1 s)."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_file_mb: int = 16
    max_open_files: int = 64
    max_processes: int = 1
    network_hook: bool = True  # off only to test that the namespace alone isolates


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    reason: str
    detail: str
    duration_s: float
    returncode: int | None
    network_isolation: str  # netns | netns+userns | none
    network_guard: str  # audit_hook | none
    write_guard: str  # audit_hook
    fork_guard: str  # audit_hook (+ RLIMIT_NPROC when not root)
    limits: str  # JSON of the SandboxLimits used
    notes: str = ""  # limits the child could not set ("; "-joined), e.g. a refused setrlimit

    def as_dict(self) -> dict:
        return asdict(self)


# The child's bootstrap: limits, then the audit hook, then the candidate. It imports only
# what it needs before the hook is in place (no subprocess, no ctypes), so the hook's
# refusal of those modules is not bypassed by an already imported copy.
_BOOTSTRAP = r"""
import os, sys, json, resource
status_path, workdir, limits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
status = open(status_path, "a", buffering=1)

def _report(reason, detail=""):
    status.write(json.dumps({"reason": reason, "detail": str(detail)[:500]}) + "\n")
    status.flush()

def _limit(name, soft, hard=None):
    try:
        resource.setrlimit(name, (soft, soft if hard is None else hard))
    except (ValueError, OSError) as exc:
        _report("note", "setrlimit %s: %s" % (name, exc))

mb = 1024 * 1024
_limit(resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1)
_limit(resource.RLIMIT_AS, limits["memory_mb"] * mb)
_limit(resource.RLIMIT_FSIZE, limits["max_file_mb"] * mb)
_limit(resource.RLIMIT_CORE, 0)
_limit(resource.RLIMIT_NOFILE, limits["max_open_files"])
_limit(resource.RLIMIT_NPROC, limits["max_processes"])
os.chdir(workdir)
root = os.path.realpath(workdir)
program_path = os.path.join(os.path.dirname(root), "program.py")
with open(program_path, encoding="utf-8") as fh:
    source = fh.read()
pid = os.getpid()

def _deny(reason, what):
    try:
        _report(reason, what)
    finally:
        os._exit(86)

def _resolve(path, dir_fd=None):
    if isinstance(path, int):
        return None
    path = os.fsdecode(path)
    if dir_fd is not None and dir_fd >= 0 and not os.path.isabs(path):
        path = os.path.join(os.readlink("/proc/self/fd/%d" % dir_fd), path)
    return os.path.realpath(path)

def _inside(path, dir_fd=None):
    real = _resolve(path, dir_fd)
    return real is None or real == root or real.startswith(root + os.sep) or real == os.devnull

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PATH_EVENTS = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "os.chmod": 2, "os.chown": 3,
               "os.truncate": 0, "os.utime": 3, "os.mkfifo": 2, "os.mknod": 3,
               "shutil.rmtree": 1}
TWO_PATH_EVENTS = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.copytree",
                   "shutil.move"}
FORK_EVENTS = {"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
               "subprocess.Popen", "os.startfile", "pty.spawn"}
NET_EVENTS = {"socket.connect", "socket.sendto", "socket.sendmsg"}
FORBIDDEN_MODULES = {"ctypes", "_ctypes"}

def _hook(event, args):
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None))[:3]
        writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (
            flags is not None and flags & WRITE_FLAGS)
        if writing and not _inside(path):
            _deny("write_blocked", "open %r for writing" % (path,))
    elif event in PATH_EVENTS:
        i = PATH_EVENTS[event]
        dir_fd = args[i] if 0 < i < len(args) and isinstance(args[i], int) else None
        if not _inside(args[0], dir_fd):
            _deny("write_blocked", "%s %r" % (event, args[0]))
    elif event in TWO_PATH_EVENTS:
        for p in args[:2]:
            if isinstance(p, (str, bytes, os.PathLike)) and not _inside(p):
                _deny("write_blocked", "%s %r" % (event, p))
    elif event in FORK_EVENTS:
        _deny("fork_blocked", event)
    elif event in NET_EVENTS and limits["network_hook"]:
        _deny("network_blocked", "%s %r" % (event, args[1:2]))
    elif event == "import" and args[0] == "_posixsubprocess":
        _deny("fork_blocked", "import _posixsubprocess (subprocess, multiprocessing)")
    elif event == "import" and args[0] in FORBIDDEN_MODULES:
        _deny("forbidden", "import " + args[0])
    elif event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] != pid:
        _deny("forbidden", "%s %r" % (event, args[0]))
    elif event in ("resource.setrlimit", "resource.prlimit"):
        _deny("forbidden", event)

sys.addaudithook(_hook)
del resource
try:
    code = compile(source, "program.py", "exec")
    exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
except AssertionError as exc:
    _report("failed", "AssertionError: %s" % (exc,))
except MemoryError:
    _report("memory", "MemoryError")
except BaseException as exc:
    _report("error", "%s: %s" % (type(exc).__name__, exc))
else:
    _report("passed")
"""


def _effective_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@lru_cache(maxsize=1)
def network_isolation() -> tuple[tuple[str, ...], str]:
    """The command prefix that puts the child in a new network namespace, and its name.

    Probed once per process by running ``true`` under it: ``unshare --net`` as root,
    ``unshare --user --map-root-user --net`` otherwise; ``((), "none")`` when neither
    works here (no ``unshare``, or the kernel or a seccomp policy refuses namespaces).
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "none"
    candidates = [((unshare, "--net"), "netns")] if _effective_root() else []
    candidates.append(((unshare, "--user", "--map-root-user", "--net"), "netns+userns"))
    for prefix, name in candidates:
        try:
            done = subprocess.run(
                [*prefix, "--", "true"], capture_output=True, timeout=10, env={"PATH": "/bin"}
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return prefix, name
    return (), "none"


def _read_status(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return [s for s in out if s.get("reason") in (*REASONS, "note")]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: str, n: int = 300) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def run_program(source: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``source`` as a Python program in the sandbox; see the module docstring.

    ``passed`` is true only when the whole program ran to its end with no exception and
    no refused action. The reason of any other end is one of :data:`REASONS`, with a short
    ``detail`` (the exception, the refused action, the signal or the stderr's tail).
    """
    limits = limits or SandboxLimits()
    prefix, isolation = network_isolation()
    guards = {
        "network_isolation": isolation,
        "network_guard": "audit_hook" if limits.network_hook else "none",
        "write_guard": "audit_hook",
        "fork_guard": "audit_hook" if _effective_root() else "audit_hook+rlimit_nproc",
        "limits": json.dumps(asdict(limits), sort_keys=True),
    }
    start = time.perf_counter()
    try:
        return _run(source, limits, prefix, guards)
    except OSError as exc:  # the sandbox could not start: the example fails, the run goes on
        return SandboxResult(
            passed=False,
            reason="sandbox_error",
            detail=f"{type(exc).__name__}: {exc}",
            duration_s=time.perf_counter() - start,
            returncode=None,
            **guards,
        )


def _run(
    source: str, limits: SandboxLimits, prefix: tuple[str, ...], guards: dict
) -> SandboxResult:
    child_limits = {
        "cpu_s": int(limits.timeout_s) + 1,
        "memory_mb": limits.memory_mb,
        "max_file_mb": limits.max_file_mb,
        "max_open_files": limits.max_open_files,
        "max_processes": limits.max_processes,
        "network_hook": limits.network_hook,
    }
    base = tempfile.mkdtemp(prefix="tersetalk-sandbox-")
    try:
        workdir = os.path.join(base, "work")
        os.mkdir(workdir)
        with open(os.path.join(base, _PROGRAM_FILE), "w", encoding="utf-8") as fh:
            fh.write(source)
        status_path = os.path.join(base, _STATUS_FILE)
        out_path, err_path = os.path.join(base, "stdout"), os.path.join(base, "stderr")
        env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}
        cmd = [*prefix, "--", sys.executable, "-I", "-S", "-c", _BOOTSTRAP]
        if not prefix:
            cmd = cmd[1:]
        cmd += [status_path, workdir, json.dumps(child_limits)]
        start = time.perf_counter()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=workdir,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
                proc.wait()
        duration = time.perf_counter() - start
        statuses = _read_status(status_path)
        notes = "; ".join(s.get("detail", "") for s in statuses if s["reason"] == "note")
        reason, detail = _classify(proc.returncode, timed_out, statuses, limits)
        if reason in ("crash", "error") and not detail.strip():
            detail = _tail(err_path)
        elif reason == "crash":
            detail = f"{detail}; stderr: {_tail(err_path)}" if _tail(err_path) else detail
        detail = detail.replace(base, "<sandbox>")  # the same text on every run
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return SandboxResult(
        passed=reason == "passed",
        reason=reason,
        detail=detail,
        duration_s=duration,
        returncode=proc.returncode,
        notes=notes,
        **guards,
    )


def _classify(
    returncode: int, timed_out: bool, statuses: list[dict], limits: SandboxLimits
) -> tuple[str, str]:
    """The reason a run ended, from the wall clock, the status lines and the exit code."""
    if timed_out:
        return "timeout", f"wall-clock limit of {limits.timeout_s:g} s"
    final = [s for s in statuses if s["reason"] != "note"]
    if final:
        last = final[-1]
        if last["reason"] == "passed" and returncode != 0:
            return "crash", f"exit code {returncode} after the program finished"
        return last["reason"], last.get("detail", "")
    if returncode < 0:
        sig = -returncode
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        return ("cpu_limit" if sig == signal.SIGXCPU else "crash"), f"killed by {name}"
    return "crash", f"exit code {returncode} without a status"


def run_many(sources: Iterable[str], limits: SandboxLimits | None = None, workers: int = 2):
    """:func:`run_program` over many programs, ``workers`` at a time, results in order.

    Threads suffice: each one only waits on its child process.
    """
    sources = list(sources)
    if workers <= 1 or len(sources) <= 1:
        return [run_program(s, limits) for s in sources]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda s: run_program(s, limits), sources))
