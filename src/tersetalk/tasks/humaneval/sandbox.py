"""Run model-written code where it can neither escape nor write its own verdict.

**Threat model.** A HumanEval answer is code a model wrote, run on the researcher's
machine with the researcher's keys in the environment. It is treated as hostile: it may
try to read secrets, write outside its directory, start processes that outlive the run,
signal the workflow, fill the disk or memory, or make a wrong answer score as passed.

**Isolation** (``isolation="bubblewrap"``, the default) is the kernel's, set up by
`bubblewrap <https://github.com/containers/bubblewrap>`_ (Debian's ``bubblewrap``;
it needs no daemon). Each program runs as uid 65534 in new user, pid, network, ipc,
uts, cgroup and mount namespaces, with an empty environment; the file system holds
read-only binds of ``/usr`` (and ``/lib*``), the interpreter's own install, and a
read-only folder with the program, nothing else (no project files, no ``/proc`` at all,
so no ``/proc/1/mem`` of bubblewrap's own init to write into, no ``/etc``); the root and
``/dev`` are remounted read-only and the only writable place is a tmpfs ``/tmp`` of
``disk_mb`` (a total, not per file). A seccomp filter, which bubblewrap's init inside the
box carries too, refuses every new process (fork, vfork, clone without ``CLONE_THREAD``;
clone3 answers ENOSYS so the C library falls back to clone), every way into another
process (ptrace, process_vm_readv/writev, kcmp, perf_event_open, pidfd_getfd,
process_madvise: without Yama, the same uid would be enough to take over the init) and
memory held outside the limits (memfd_create, memfd_secret, SysV shmget and msgget).
Rlimits bound CPU seconds, address space, file size and open files; the host sets them
between fork and exec of bubblewrap, so every process in the box inherits them, its
init included, and no process in it can raise them. The whole tree dies at the deadline
(the host kills bubblewrap; ``--die-with-parent`` takes the namespace with it) and when
the workflow dies.

**What leaves the box is data.** The reason comes from the judge's verdict and the exit
code; the detail is text the candidate may have written, made writable (a lone
surrogate becomes ``\\udXXX``) and never parsed for anything else. The notes on limits
(``SandboxResult.notes``, recorded as ``sandbox_isolation``) come from the host alone.

**The verdict** (:func:`run_check`): the dataset's trusted tests run in a second sandbox,
the *judge*, never in the candidate's process. The candidate's process loads the model's
code and answers calls; the judge's ``check(candidate)`` receives a stand-in that sends
each call's arguments across a pipe as plain data and decodes the reply into builtin
values of its own (``sandbox_box/wire.py``: checked by type, never by ``==``). The
candidate holds no reference to the judge, its reporter or the descriptor the verdict
travels on, and it cannot see the tests. What the candidate can do is answer calls.

``isolation="process"`` is a weaker fallback a config key may opt into where bubblewrap
is missing, for code you trust: separate processes, rlimits, an empty environment, a
temporary directory and the judge split kept (so an accident or a lying ``__eq__``
cannot pass), but no namespaces, no read-only file system, no process limit for root
and no death with the workflow; code written to attack the host or the judge (through
``/proc``, say) is not held by it. It is recorded in every row (``sandbox_isolation``);
it is never chosen silently: without bubblewrap, :func:`require` stops the run with how
to install it. A failure of the host rather than of the code (no space, no descriptors,
a judge without a verdict under bubblewrap) raises :class:`SandboxFault`, which the
runner treats like a server's passing fault: the example is redone on the next run.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from tersetalk.core.io import writable_text
from tersetalk.tasks.base import TaskHostFault, TaskUnavailableError

__all__ = [
    "ISOLATIONS",
    "LIMIT_RANGES",
    "REASONS",
    "SandboxFault",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "bubblewrap_status",
    "require",
    "run_check",
    "run_many",
    "run_program",
    "settable_rlimits",
]

ISOLATIONS = ("bubblewrap", "process")

#: every reason a result can carry; ``passed`` is the only one with ``passed=True``
REASONS = (
    "passed",  # the program ran to its end (for HumanEval: the judge's check() returned)
    "failed",  # an AssertionError: a test did not hold
    "error",  # any other exception, in the candidate or in a test tripping over its value
    "timeout",  # wall-clock limit; everything was killed
    "cpu_limit",  # RLIMIT_CPU: the kernel's SIGXCPU/SIGKILL
    "memory",  # MemoryError under RLIMIT_AS
    "crash",  # the candidate's process died by a signal or exited without saying how
)

_BOX_FILES = ("candidate.py", "judge.py", "wire.py")
_INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install "
    "bubblewrap`; it needs unprivileged user namespaces or root), or accept a weaker sandbox "
    "for code you trust by setting `humaneval: {sandbox: {isolation: process}}` in the "
    "config (recorded in every row as sandbox_isolation)"
)


class SandboxUnavailableError(TaskUnavailableError):
    """The configured isolation cannot run here; the message says how to fix it."""


class SandboxFault(TaskHostFault):
    """The sandbox failed on this host (no temporary folder, no file descriptors, a
    judge that gave no verdict under bubblewrap), not the code in it: the example is
    not scored, and the runner leaves it for the next run like a server's passing fault.
    """


MB = 1024 * 1024

#: the valid range of each limit, both ends included. Beyond these, a value says nothing a
#: HumanEval run needs and the kernel may refuse it (an rlimit above 2**63 bytes, a
#: descriptor count above fs.nr_open): refused when the config is read, not per example.
LIMIT_RANGES: dict[str, tuple[float, float]] = {
    "timeout_s": (0.1, 3600.0),
    "memory_mb": (128, 1024 * 1024),  # 128 MiB .. 1 TiB of address space
    "disk_mb": (1, 64 * 1024),
    "max_file_mb": (1, 64 * 1024),
    "max_open_files": (16, 65536),
    "max_reply_kb": (1, 1024 * 1024),
}


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one run; the defaults suit a HumanEval problem (all finish in < 1 s)."""

    timeout_s: float = 10.0  # wall clock for the whole run, judge and candidate
    memory_mb: int = 1024  # address space of each process
    disk_mb: int = 32  # the writable tmpfs, in total
    max_file_mb: int = 16  # any one file (also what it writes to stderr)
    max_open_files: int = 64
    max_reply_kb: int = 1024  # one value the candidate returns

    def __post_init__(self) -> None:
        """Refuse what is not a number in :data:`LIMIT_RANGES` (NaN and infinity included);
        a whole-number float (YAML's ``1e3``) becomes an int."""
        for name, given in asdict(self).items():
            low, high = LIMIT_RANGES[name]
            whole = name != "timeout_s"
            value = given
            if whole and isinstance(value, float) and value.is_integer():
                value = int(value)
                object.__setattr__(self, name, value)
            kind = (int,) if whole else (int, float)
            # the range alone refuses NaN and infinity, and a whole number too large
            # for a float (math.isfinite would raise OverflowError on it)
            if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
                what = "a whole number" if whole else "a finite number of seconds"
                raise ValueError(
                    f"sandbox limit {name} must be {what} from {low} to {high}, got "
                    f"{given!r}: set humaneval.sandbox.{name} in the config within that range"
                )

    def rlimits(self, nproc: int = 0) -> list[tuple[int, int, int]]:
        """``(resource, soft, hard)`` for every process of a run (the host sets them).

        The hard limits equal the soft ones (the CPU limit's hard one a second later, for
        SIGKILL after SIGXCPU), so code in the box can lower them but never raise them.
        """
        cpu_s = math.ceil(self.timeout_s) + 1
        wanted = [
            (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),
            (resource.RLIMIT_AS, self.memory_mb * MB, self.memory_mb * MB),
            (resource.RLIMIT_FSIZE, self.max_file_mb * MB, self.max_file_mb * MB),
            (resource.RLIMIT_CORE, 0, 0),
            (resource.RLIMIT_NOFILE, self.max_open_files, self.max_open_files),
        ]
        if nproc:
            wanted.append((resource.RLIMIT_NPROC, nproc, nproc))
        return wanted

    def child(self) -> dict:
        """What the programs inside read."""
        return {"max_reply_kb": self.max_reply_kb}


_RLIMIT_NAMES = {
    getattr(resource, n): n
    for n in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NOFILE",
              "RLIMIT_NPROC")
}  # fmt: skip


def settable_rlimits(
    wanted: list[tuple[int, int, int]],
) -> tuple[list[tuple[int, int, int]], list[str]]:
    """``wanted`` as this host can set them, and a note for each it cannot.

    Lowering a limit is always allowed; raising one above the host's own hard limit is
    not (without CAP_SYS_RESOURCE). A limit the host holds lower stays at the host's
    value: stricter than asked, and said so, decided here rather than by what a
    sandboxed program reports.
    """
    out, notes = [], []
    for res, soft, hard in wanted:
        host_hard = resource.getrlimit(res)[1]
        if host_hard != resource.RLIM_INFINITY and hard > host_hard:
            notes.append(f"{_RLIMIT_NAMES.get(res, res)} at the host's {host_hard}, not {hard}")
            soft, hard = min(soft, host_hard), host_hard
        out.append((res, soft, hard))
    return out, notes


#: a program that sets the rlimits given as JSON, then becomes the command after them.
#: Run as ``python -I -S -c`` in front of the sandbox, it gives every process of the
#: box the limits from its first instruction, without code between fork and exec in
#: this process (``preexec_fn``, which can deadlock when other threads hold locks)
_WITH_LIMITS = (
    "import json, os, resource, sys\n"
    "for res, soft, hard in json.loads(sys.argv[1]):\n"
    "    resource.setrlimit(res, (soft, hard))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _with_rlimits(wanted: list[tuple[int, int, int]], cmd: list[str]) -> list[str]:
    """``cmd`` started under the rlimits ``wanted`` (see :data:`_WITH_LIMITS`)."""
    return [sys.executable, "-I", "-S", "-c", _WITH_LIMITS, json.dumps(wanted), *cmd]


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    reason: str
    detail: str
    duration_s: float
    returncode: int | None
    isolation: str  # bubblewrap | process
    limits: str  # JSON of the SandboxLimits used
    notes: str = ""  # from the host only: limits held differently, a missing filter

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():  # each text field is safe to write
            if isinstance(value, str):
                object.__setattr__(self, name, writable_text(value))

    def as_dict(self) -> dict:
        return asdict(self)


# -- bubblewrap ---------------------------------------------------------------------------

# seccomp-BPF: refuse new processes, allow threads. struct seccomp_data: nr at 0, arch at
# 4, args[0] at 16 (its low half on little-endian machines, which both arches here are).
# Per arch: its audit value, clone, and what answers EPERM: fork and vfork (x86_64 only);
# ptrace, process_vm_readv, process_vm_writev, kcmp, perf_event_open (another process);
# memfd_create, shmget, msgget (memory outside the rlimits: a SysV segment keeps its
# pages once detached); then pidfd_getfd, process_madvise, memfd_secret (same on both).
_COMMON = (438, 440, 447)
_ARCH = {
    "x86_64": (0xC000003E, 56, (57, 58, 101, 310, 311, 312, 298, 319, 29, 68, *_COMMON)),
    "aarch64": (0xC00000B7, 220, (117, 270, 271, 272, 241, 279, 194, 186, *_COMMON)),
}
_CLONE3 = 435
_CLONE_THREAD = 0x00010000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_EPERM, _ENOSYS = 0x00050000 | 1, 0x00050000 | 38


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The BPF program (``struct sock_filter[]``) bubblewrap loads before the interpreter.

    None on an architecture without a table here; the result then says so in ``notes``.
    """
    table = _ARCH.get(machine or os.uname().machine)
    if table is None:
        return None
    arch, clone, refused = table
    # (code, jump if true, jump if false, k); a jump is a label resolved below
    ops: list[tuple] = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ, 0, "kill", arch),
        (_LD_W_ABS, 0, 0, 0),
        (_JGE, "kill", 0, 0x40000000),  # x32 syscalls on x86_64; none on aarch64
        *((_JEQ, "eperm", 0, nr) for nr in refused),
        (_JEQ, "enosys", 0, _CLONE3),
        (_JEQ, 0, "allow", clone),
        (_LD_W_ABS, 0, 0, 16),
        (_JSET, "allow", "eperm", _CLONE_THREAD),
    ]
    returns = {"allow": _ALLOW, "eperm": _EPERM, "enosys": _ENOSYS, "kill": _KILL}
    at = {name: len(ops) + i for i, name in enumerate(returns)}
    ops += [(_RET, 0, 0, k) for k in returns.values()]
    prog = []
    for i, (code, jt, jf, k) in enumerate(ops):
        jt, jf = (at[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        prog.append((code, jt, jf, k))
    return b"".join(struct.pack("HBBI", *op) for op in prog)


def _seccomp_fd(program: bytes | None) -> int | None:
    """A memory file holding ``program`` for bubblewrap's ``--seccomp FD`` (the caller
    closes it once the child has started)."""
    if program is None:
        return None
    fd = os.memfd_create("tersetalk-seccomp")
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _system_binds() -> list[str]:
    """Read-only views of what an interpreter needs: /usr, the /lib* and /bin links."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def interpreter() -> tuple[str, list[str]]:
    """The real Python binary (not a venv's link) and the folders it must see."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    roots = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    return exe, sorted(r for r in roots if not (r + "/").startswith("/usr/"))


def _bwrap_command(bwrap: str, box: str, disk_mb: int, seccomp_fd: int | None) -> list[str]:
    exe, roots = interpreter()
    cmd = [
        bwrap,
        "--unshare-user", "--unshare-all", "--disable-userns", "--die-with-parent",
        "--new-session", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL",
        "--clearenv", "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/tmp",
        *_system_binds(),
    ]  # fmt: skip
    for root in roots:
        cmd += ["--ro-bind", root, root]
    cmd += [
        "--ro-bind", box, "/box", "--dev", "/dev",
        "--size", str(disk_mb * 1024 * 1024), "--tmpfs", "/tmp", "--chdir", "/tmp",
        "--remount-ro", "/dev", "--remount-ro", "/",
    ]  # fmt: skip
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return [*cmd, "--", exe, "-I", "-S", "-B"]


@lru_cache(maxsize=1)
def bubblewrap_status() -> tuple[str | None, str]:
    """``(path, "")`` when bubblewrap runs a sandboxed interpreter here, else ``(None, why)``.

    Probed once per process with the real arguments, so a kernel that refuses user
    namespaces is found at startup, not as 164 failed examples.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "the `bwrap` command (bubblewrap) is not on PATH"
    box = tempfile.mkdtemp(prefix="tersetalk-probe-")
    sfd = None
    try:  # the real command, seccomp filter included: a kernel that refuses it fails here
        os.chmod(box, 0o755)
        sfd = _seccomp_fd(seccomp_filter())
        cmd = _bwrap_command(bwrap, box, 1, sfd) + ["-c", "import os; print(os.getuid())"]
        done = subprocess.run(cmd, capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                              pass_fds=() if sfd is None else (sfd,))  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bubblewrap did not start: {exc}"
    finally:
        shutil.rmtree(box, ignore_errors=True)
        if sfd is not None:
            os.close(sfd)
    if done.returncode != 0 or done.stdout.strip() != b"65534":
        err = done.stderr.decode("utf-8", "replace").strip()[-300:]
        return None, f"bubblewrap failed here (exit {done.returncode}): {err}"
    return bwrap, ""


def require(isolation: str) -> None:
    """Raise :class:`SandboxUnavailableError` unless ``isolation`` can run here."""
    if isolation not in ISOLATIONS:
        raise SandboxUnavailableError(
            f"sandbox isolation {isolation!r} is not one of {list(ISOLATIONS)}"
        )
    if isolation == "bubblewrap":
        path, why = bubblewrap_status()
        if path is None:
            raise SandboxUnavailableError(
                f"HumanEval runs model-written code, which needs a sandbox: {why}. "
                f"To fix: {_INSTALL_HINT}"
            )


# -- running ------------------------------------------------------------------------------


def _make_box(base: str, name: str, files: dict[str, str]) -> str:
    """A folder with the sandbox programs and ``files``, readable by uid 65534."""
    box = os.path.join(base, name)
    os.mkdir(box)
    src = resources.files("tersetalk.tasks.humaneval.sandbox_box")
    for fname in _BOX_FILES:
        Path(box, fname).write_text(src.joinpath(fname).read_text("utf-8"), "utf-8")
    for fname, text in files.items():
        Path(box, fname).write_text(text, "utf-8", errors="replace")
    for p in (box, *(os.path.join(box, f) for f in os.listdir(box))):
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
    return box


class _Launcher:
    """Starts a sandbox's program under the chosen isolation, with descriptors passed on."""

    def __init__(self, isolation: str, limits: SandboxLimits, base: str) -> None:
        require(isolation)
        self.isolation, self.limits, self.base = isolation, limits, base
        self.seccomp = seccomp_filter() if isolation == "bubblewrap" else None
        # the weaker isolation has no seccomp filter: RLIMIT_NPROC is its process limit
        wanted = limits.rlimits(nproc=1 if isolation == "process" else 0)
        self.rlimits, self.notes = settable_rlimits(wanted)
        if isolation == "bubblewrap" and self.seccomp is None:
            self.notes.append(f"no seccomp table for {os.uname().machine}: no process limit")
        os.chmod(base, 0o755)

    def start(
        self, box: str, script: str, args: list[str], fds: tuple[int, ...], **io
    ) -> subprocess.Popen:
        """Start ``script``; the rlimits are set before exec, so its whole tree has them."""
        limits = json.dumps(self.limits.child())
        if self.isolation == "process":
            work = tempfile.mkdtemp(dir=self.base, prefix="work-")
            cmd = [sys.executable, "-I", "-S", "-B", os.path.join(box, script), box, limits]
            env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8"}
            return subprocess.Popen(
                _with_rlimits(self.rlimits, [*cmd, *args]), cwd=work, env=env, pass_fds=fds,
                start_new_session=True, **io,
            )  # fmt: skip
        bwrap, _ = bubblewrap_status()
        sfd = _seccomp_fd(self.seccomp)
        try:
            cmd = _bwrap_command(bwrap, box, self.limits.disk_mb, sfd)
            cmd += [f"/box/{script}", "/box", limits, *args]
            return subprocess.Popen(
                _with_rlimits(self.rlimits, cmd), env={},
                pass_fds=fds + ((sfd,) if sfd is not None else ()),
                start_new_session=True, **io,
            )  # fmt: skip
        finally:
            if sfd is not None:
                os.close(sfd)


def _kill(proc: subprocess.Popen | None) -> None:
    """Kill ``proc``'s process group, unless it was already reaped (its id may be reused)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(path: str, n: int = 400) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _signal_reason(returncode: int | None) -> tuple[str, str] | None:
    """The reason a process ended by a signal (bubblewrap reports it as 128 + N)."""
    if returncode is None:
        return None
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if sig <= 0:
        return None
    name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
    return ("cpu_limit" if sig == signal.SIGXCPU else "crash"), f"killed by {name}"


def _sandboxed(
    isolation: str, limits: SandboxLimits, body: Callable[[_Launcher, str, float], tuple]
) -> SandboxResult:
    """Shared set-up and clean-up: the temporary folder, timing, and start failures.

    A failure of the host (an OSError: no space, no descriptors, a process that could
    not start) raises :class:`SandboxFault`: it says nothing of the code under test.
    ``body`` returns ``(reason, detail, returncode)``; the notes are the launcher's.
    """
    start = time.perf_counter()
    base = None
    try:
        base = tempfile.mkdtemp(prefix="tersetalk-sandbox-")
        launcher = _Launcher(isolation, limits, base)
        reason, detail, rc = body(launcher, base, start + limits.timeout_s)
        detail = detail.replace(base, "<sandbox>")
    except (OSError, subprocess.SubprocessError) as exc:
        said = writable_text(f"{type(exc).__name__}: {exc}")
        raise SandboxFault(f"the sandbox could not run here: {said}") from exc
    finally:
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
    return SandboxResult(
        passed=reason == "passed",
        reason=reason,
        detail=detail,
        duration_s=time.perf_counter() - start,
        returncode=rc,
        isolation=isolation,
        limits=json.dumps(asdict(limits), sort_keys=True),
        notes="; ".join(launcher.notes),
    )


def run_program(
    source: str, limits: SandboxLimits | None = None, isolation: str = "bubblewrap"
) -> SandboxResult:
    """Run ``source`` as a whole program in the sandbox; its exit says how it ended.

    This is the program's own verdict (it could exit 0 whatever happened): use it to
    contain code, and :func:`run_check` to score it. Never raises because of the program.
    """
    limits = limits or SandboxLimits()

    def body(launcher: _Launcher, base: str, deadline: float) -> tuple:
        box = _make_box(base, "program", {"program.py": source})
        err_path = os.path.join(base, "stderr")
        with open(err_path, "wb") as err:
            proc = launcher.start(
                box, "candidate.py", ["-"], (), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
            try:
                proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                return "timeout", f"wall-clock limit of {limits.timeout_s:g} s", None
            finally:
                _kill(proc)
        tail = _tail(err_path)
        last = tail.splitlines()[-1] if tail else ""
        rc = proc.returncode
        by_code = {0: "passed", 1: "failed", 2: "error", 3: "memory"}
        if rc in by_code:
            return by_code[rc], "" if rc == 0 else last, rc
        sig = _signal_reason(rc)
        if sig:
            return sig[0], sig[1], rc
        return "crash", f"exit code {rc}: {last}", rc

    return _sandboxed(isolation, limits, body)


def run_check(
    candidate_source: str,
    entry_point: str,
    tests_source: str,
    limits: SandboxLimits | None = None,
    isolation: str = "bubblewrap",
) -> SandboxResult:
    """Score ``entry_point`` of ``candidate_source`` with ``tests_source``'s ``check``.

    Two sandboxes joined by two pipes: the candidate's (model-written code) and the
    judge's (the trusted tests); the verdict is the judge's alone (module docstring).
    """
    limits = limits or SandboxLimits()

    def body(launcher: _Launcher, base: str, deadline: float) -> tuple:
        cbox = _make_box(base, "candidate", {"program.py": candidate_source})
        jbox = _make_box(base, "judge", {"tests.py": tests_source})
        j2c_r, j2c_w = os.pipe()
        c2j_r, c2j_w = os.pipe()
        cand = judge = None
        err_path = os.path.join(base, "candidate.stderr")
        try:
            with open(err_path, "wb") as err:
                cand = launcher.start(
                    cbox, "candidate.py", [entry_point, str(j2c_r), str(c2j_w)], (j2c_r, c2j_w),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                )  # fmt: skip
            judge = launcher.start(
                jbox, "judge.py", [entry_point, str(c2j_r), str(j2c_w)], (c2j_r, j2c_w),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            for fd in (j2c_r, j2c_w, c2j_r, c2j_w):
                os.close(fd)
            j2c_r = j2c_w = c2j_r = c2j_w = -1
            try:
                out, jerr = judge.communicate(timeout=max(0.0, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                return "timeout", f"wall-clock limit of {limits.timeout_s:g} s", None
        finally:
            _kill(cand)
            _kill(judge)
            for fd in (j2c_r, j2c_w, c2j_r, c2j_w):
                if fd >= 0:
                    os.close(fd)
        try:  # exactly one verdict line from a judge that ended well
            (line,) = out.decode("utf-8").splitlines()
            verdict = json.loads(line)
            reason, detail = verdict["reason"], verdict["detail"]
            if judge.returncode != 0 or reason not in REASONS or type(detail) is not str:
                raise ValueError(f"judge exit code {judge.returncode}, reason {reason!r}")
        except (ValueError, KeyError, TypeError) as exc:
            jtail = jerr.decode("utf-8", "replace").strip()[-300:]
            said = writable_text(f"the judge gave no clean verdict ({exc}): {jtail}")
            if launcher.isolation == "bubblewrap":  # the candidate cannot reach the judge
                raise SandboxFault(said) from None
            return "error", said, judge.returncode  # tampering is possible: never a pass
        ctail = _tail(err_path)
        if reason == "crash":
            sig = _signal_reason(cand.returncode)
            if sig:
                reason, detail = sig
            elif ctail:
                detail = f"{detail}; stderr: {ctail[-200:]}"
        rc = cand.returncode if reason in ("crash", "cpu_limit") else judge.returncode
        return reason, detail, rc

    return _sandboxed(isolation, limits, body)


def run_many(jobs: Iterable[Callable[[], SandboxResult]], workers: int = 2) -> list[SandboxResult]:
    """Run sandbox jobs (zero-argument callables), ``workers`` at a time, results in order.

    Threads suffice: each one only waits on its child processes.
    """
    jobs = list(jobs)
    if workers <= 1 or len(jobs) <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: job(), jobs))
