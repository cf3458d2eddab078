"""Inside the candidate's sandbox: load model-written code, then answer the judge's calls.

Usage: ``candidate.py BOX LIMITS_JSON ENTRY [IN_FD OUT_FD]``. ``BOX`` holds
``program.py`` (the code under test) and ``wire.py``. Everything in this file is at the
candidate's mercy once ``program.py`` runs: nothing it says is believed. The judge
decodes each reply into builtin values of its own, and the verdict is the judge's. The
rlimits are already set when this starts (by the host, before exec), so nothing here
sets or reports them.

``ENTRY`` ``-``: program mode, for :func:`tersetalk.tasks.humaneval.sandbox.run_program`. The
program runs to its end; the exit code says how (0 ran to its end, 1 AssertionError,
2 another exception, 3 MemoryError), with the exception on stderr.

``ENTRY`` a name: function mode. After loading, one message on ``OUT_FD``:
``{"ready": true}`` or ``{"load_error": "..."}``. Then for each ``{"args", "kwargs"}``
line on ``IN_FD``, one ``{"ok": <value>}`` or ``{"raise": "..."}`` line back.
"""

import json
import os
import sys

box, limits = sys.argv[1], json.loads(sys.argv[2])
entry = sys.argv[3]
sys.path.insert(0, box)

import wire  # noqa: E402 - the box is on the path only now

with open(os.path.join(box, "program.py"), encoding="utf-8", errors="replace") as fh:
    source = fh.read()


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return type(exc).__name__


if entry == "-":
    try:
        exec(compile(source, "program.py", "exec"), {"__name__": "__main__"})
    except AssertionError as exc:
        print(_describe(exc), file=sys.stderr)
        sys.exit(1)
    except MemoryError:
        os.write(2, b"MemoryError\n")
        os._exit(3)
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: reported as error
        print(_describe(exc), file=sys.stderr)
        sys.exit(2)
    sys.exit(0)

max_line = limits["max_reply_kb"] * 1024
inp = os.fdopen(int(sys.argv[4]), "rb")
out = os.fdopen(int(sys.argv[5]), "wb")


def send(**fields):
    out.write(wire.dumps_message(**fields))
    out.flush()


space = {"__name__": "candidate"}
try:
    exec(compile(source, "program.py", "exec"), space)
    fn = space[entry]
    if not callable(fn):
        raise TypeError(f"{entry} is not a function")
except BaseException as exc:  # noqa: BLE001 - the judge reports it
    send(load_error=_describe(exc))
    sys.exit(0)
send(ready=True)
while True:
    line = inp.readline(max_line + 1)
    if not line:
        sys.exit(0)
    try:
        msg = wire.loads_message(line)
        args, kwargs = wire.decode(msg["args"]), wire.decode(msg["kwargs"])
        result = fn(*args, **kwargs)
        reply = wire.dumps_message(ok=wire.encode(result))  # e.g. an int too long to print
    except BaseException as exc:  # noqa: BLE001
        send(**{"raise": _describe(exc)})
    else:
        out.write(reply)
        out.flush()
