"""Follow the runs' event files under a results folder (``dashboard --attach``).

Each run appends JSON lines to ``<run>.events.jsonl`` (:mod:`.publish`); this
module finds those files, reads only what was appended since the last poll, and
folds the events into one :class:`RunState` per file (status, examples done,
tokens so far, errors, the last message). Reading is by byte offset, and only up
to the last newline: a line the writer has not finished yet is read on the next
poll, never half-parsed. A file that shrank was replaced (a rerun after cleaning),
so it is read again from the start.

The walk skips ``cache`` folders (the call cache holds thousands of files) and
hidden ones, and looks for new files only every ``rescan_s`` seconds. It does not
descend into symlinked folders, and an event file that is a symlink leading out of
the followed folder is skipped with a warning: the dashboard shows what is under
the folder it was given, nothing else on the machine.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tersetalk.core.events import EVENTS_SUFFIX
from tersetalk.core.io import load_json_text

__all__ = ["EventTailer", "RunState"]

log = logging.getLogger(__name__)

_SKIP_DIRS = {"cache", "__pycache__", "screenshots"}
#: the last message's text is kept this short in a run's state (the full text is in its event)
_PREVIEW_CHARS = 240


@dataclass
class RunState:
    """What a dashboard shows for one run, folded from its events."""

    key: str
    task: str = ""
    system: str = ""
    variant: str = ""
    run_id: str = ""
    status: str = "waiting"  # running | finished | incomplete | failed | stopped
    n_examples: int = 0
    n_done: int = 0
    n_errors: int = 0
    n_transient: int = 0
    n_correct: int = 0
    n_scored: int = 0
    tokens: int = 0
    n_messages: int = 0
    current_example: str | None = None
    last_message: dict[str, Any] | None = None
    last_error: str | None = None
    #: one line on what the run is doing now (the latest message, mediator stage or example)
    activity: str = ""
    model: str = ""
    pid: int | None = None
    host: str = ""
    started: float | None = None
    updated: float | None = None

    def apply(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        self.updated = ev.get("t", self.updated)
        if kind == "run_started":
            fresh = RunState(key=self.key)  # a rerun appends to the same file: start over
            self.__dict__.update(fresh.__dict__)
            self.updated = ev.get("t")
            self.started = ev.get("t")
            self.status = "running"
            self.run_id = str(ev.get("run", ""))
            for name in ("task", "system", "variant", "model", "host"):
                setattr(self, name, str(ev.get(name, "")))
            self.n_examples = int(ev.get("n_examples") or 0)
            self.n_done = int(ev.get("n_done") or 0)
            self.pid = ev.get("pid")
        elif kind == "example_started":
            self.current_example = ev.get("example_id")
            self.activity = f"example {self.current_example}"
        elif kind == "stage":
            self.activity = f"example {self.current_example}: mediator {ev.get('stage')}"
        elif kind == "message":
            self.n_messages += 1
            self.tokens += int(ev.get("tokens") or 0)
            text = str(ev.get("content") or "")
            self.last_message = {
                k: ev.get(k) for k in ("example_id", "sender", "receiver", "kind", "tokens")
            }
            self.last_message["preview"] = text[:_PREVIEW_CHARS]
            m = self.last_message
            self.activity = (
                f"{m['sender']}→{m['receiver']} {m['kind']} ({m['tokens']} tok): "
                f"{text[:_PREVIEW_CHARS]}"
            )
        elif kind == "verdict":
            if ev.get("correct") is not None and not ev.get("error"):
                self.n_scored += 1
                self.n_correct += int(bool(ev.get("correct")))
        elif kind == "example_finished":
            self.n_done += 1
            self.current_example = None
            if ev.get("error"):
                self.n_errors += 1
                self.last_error = str(ev["error"])
        elif kind == "error":
            self.n_transient += 1
            self.current_example = None
            self.last_error = str(ev.get("error"))
        elif kind == "run_finished":
            self.status = str(ev.get("status", "finished"))
            self.current_example = None
            if ev.get("error"):
                self.last_error = str(ev["error"])

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.status == "running" and not _alive(self.pid, self.host):
            d["status"] = "stopped"  # killed without a word (SIGKILL, a cluster's timeout)
        return d


def _alive(pid: Any, host: str) -> bool:
    """Is the run's process still there? Unknown (another host, no pid) counts as alive."""
    if not isinstance(pid, int) or (host and host != socket.gethostname()):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


@dataclass
class _Followed:
    path: Path
    state: RunState
    offset: int = 0
    errors: int = 0


@dataclass
class EventTailer:
    """Polls ``root`` for event files and returns what each run appended since last time."""

    root: Path
    rescan_s: float = 2.0
    _files: dict[Path, _Followed] = field(default_factory=dict)
    _last_scan: float = float("-inf")
    _refused: set[Path] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _key(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return rel.removesuffix(EVENTS_SUFFIX)

    def scan(self) -> None:
        """Find event files not followed yet."""
        self._last_scan = time.monotonic()
        if not self.root.is_dir():
            return
        real_root = self.root.resolve()
        for dirpath, dirnames, filenames in os.walk(self.root):  # symlinked folders: not entered
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
            for name in filenames:
                if name.endswith(EVENTS_SUFFIX):
                    path = Path(dirpath) / name
                    if path in self._files or path in self._refused:
                        continue
                    if real_root not in path.resolve().parents:
                        self._refused.add(path)
                        log.warning(
                            "not following %s: a symlink that leads outside %s", path, self.root
                        )
                        continue
                    self._files[path] = _Followed(path, RunState(key=self._key(path)))

    def poll(self) -> list[tuple[RunState, dict[str, Any]]]:
        """New events, in file order per run, each with its run's state after applying it."""
        if time.monotonic() - self._last_scan >= self.rescan_s:
            self.scan()
        out: list[tuple[RunState, dict[str, Any]]] = []
        for followed in list(self._files.values()):
            for ev in self._read_new(followed):
                followed.state.apply(ev)
                out.append((followed.state, ev))
        return out

    def _read_new(self, f: _Followed) -> list[dict[str, Any]]:
        try:
            size = f.path.stat().st_size
            if size < f.offset:  # replaced or truncated: read it again from the start
                f.offset, f.state = 0, RunState(key=f.state.key)
            if size == f.offset:
                return []
            with open(f.path, "rb") as fh:
                fh.seek(f.offset)
                data = fh.read(size - f.offset)
        except FileNotFoundError:
            self._files.pop(f.path, None)
            return []
        except OSError as exc:
            log.warning("cannot read %s: %s", f.path, exc)
            return []
        end = data.rfind(b"\n") + 1  # the writer's unfinished line waits for the next poll
        f.offset += end
        events = []
        for raw in data[:end].splitlines():
            if not raw.strip():
                continue
            try:  # bounded: a crafted deep line is skipped, not a RecursionError or a 500
                ev = load_json_text(raw, f"events file {f.path}")
            except ValueError:
                f.errors += 1
                continue
            if isinstance(ev, dict):
                events.append(ev)
        return events

    def states(self) -> list[dict[str, Any]]:
        """Every followed run, most recently updated first."""
        states = [f.state.as_dict() for f in self._files.values()]
        return sorted(states, key=lambda s: -(s["updated"] or 0))
