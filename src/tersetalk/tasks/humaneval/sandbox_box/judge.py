"""Inside the judge's sandbox: the dataset's trusted tests, calling the candidate by message.

Usage: ``judge.py BOX LIMITS_JSON ENTRY IN_FD OUT_FD``. ``BOX`` holds ``tests.py`` (the task's
prompt and its ``check(candidate)``) and ``wire.py``. ``check`` receives a stand-in for
the candidate's function, also bound to the name ``ENTRY`` (some tests call the
function by its name, as the official harness allows): each call is sent to the
candidate's process as plain data and its reply decoded into builtin values here, so
the tests compare values the judge made (an object with a lying ``__eq__`` cannot
cross, and the candidate never holds a reference to this process, its reporter or its
output).

The verdict is one JSON line on this process's original stdout, which only the host
reads: ``{"reason": passed|failed|error|memory|crash, "detail": "..."}``. What the tests
print goes to /dev/null.
"""

import json
import os
import sys

box, limits = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, box)

import wire  # noqa: E402 - the box is on the path only now

verdict_fd = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
max_line = limits["max_reply_kb"] * 1024
entry = sys.argv[3]
inp = os.fdopen(int(sys.argv[4]), "rb")
out = os.fdopen(int(sys.argv[5]), "wb")


def verdict(reason, detail=""):
    line = json.dumps({"reason": reason, "detail": str(detail)[:500]})
    os.write(verdict_fd, line.encode() + b"\n")
    sys.exit(0)


class CandidateError(Exception):
    """The candidate raised, or replied with something that is not a plain value."""


class CandidateGone(Exception):
    """The candidate's process ended (killed by a limit, or it exited) mid-conversation."""


def receive():
    line = inp.readline(max_line + 1)
    if not line:
        raise CandidateGone("the candidate's process ended without replying")
    if len(line) > max_line or not line.endswith(b"\n"):
        raise CandidateError(f"a reply of more than {max_line} bytes")
    return wire.loads_message(line)


def candidate(*args, **kwargs):
    """The function under test, as the tests see it: a call by message."""
    out.write(wire.dumps_message(args=wire.encode(list(args)), kwargs=wire.encode(kwargs)))
    out.flush()
    try:
        msg = receive()
        if set(msg) == {"ok"}:
            return wire.decode(msg["ok"])
        if set(msg) == {"raise"} and type(msg["raise"]) is str:
            raise CandidateError(msg["raise"])
    except wire.WireError as exc:
        raise CandidateError(f"invalid reply: {exc}") from None
    raise CandidateError("invalid reply: neither a value nor an exception")


def main():
    with open(os.path.join(box, "tests.py"), encoding="utf-8") as fh:
        tests = fh.read()
    try:
        first = receive()
    except CandidateGone as exc:
        verdict("crash", exc)
    except (CandidateError, wire.WireError) as exc:
        verdict("error", f"candidate: {exc}")
    if set(first) == {"load_error"} and type(first["load_error"]) is str:
        detail = first["load_error"]
        verdict("memory" if detail.startswith("MemoryError") else "error", detail)
    if first != {"ready": True}:
        verdict("error", "candidate: not ready")
    space = {"__name__": "judge"}
    try:
        exec(compile(tests, "tests.py", "exec"), space)
        check = space["check"]
    except BaseException as exc:  # noqa: BLE001 - the task's own tests do not load
        verdict("error", f"the task's tests did not load: {type(exc).__name__}: {exc}")
    space[entry] = candidate  # the prompt's stub must not answer for the candidate
    try:
        check(candidate)
    except AssertionError as exc:
        verdict("failed", f"AssertionError: {exc}")
    except CandidateGone as exc:
        verdict("crash", exc)
    except CandidateError as exc:
        text = str(exc)
        verdict("memory" if text.startswith("MemoryError") else "error", text)
    except BaseException as exc:  # noqa: BLE001 - a test that trips over the value
        verdict("error", f"{type(exc).__name__}: {exc}")
    verdict("passed")


main()
