"""The registry of tasks: a task is one module that declares a :class:`~tersetalk.tasks.base.Task`.

The built-in tasks are found as the systems are: every module and sub-package of
``tersetalk.tasks`` but the machinery (:data:`MACHINERY`) is imported, and each that
holds ``TASK`` (or ``TASKS``, a module with several: CommonsenseQA and Social IQa) is
registered, in the order of the modules' names (:func:`builtin_modules`). More come from

- the environment variable ``TERSETALK_TASKS``: comma-separated module names,
  importable from ``PYTHONPATH`` (as ``TERSETALK_SYSTEMS`` does for systems);
- the ``tersetalk.tasks`` entry-point group of installed packages: each entry point
  names a module (or a :class:`Task`).

A plug-in module may also call :func:`register` itself. Everything else of the
workflow asks this module: :func:`get` (a clear error naming the known tasks),
:func:`names`, :func:`topology_labels`, and the shortcuts below.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Mapping
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from tersetalk.core import display
from tersetalk.core.configio import UnknownNameError
from tersetalk.tasks.base import CHAIN, DIRECT, Task

__all__ = [
    "MACHINERY",
    "CHAIN",
    "DIRECT",
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "TaskPluginError",
    "builtin_modules",
    "display_name",
    "get",
    "names",
    "preflight",
    "register",
    "score_columns",
    "topology_label",
    "topology_labels",
]

#: the modules of ``tersetalk.tasks`` that are the tasks' machinery, not tasks
MACHINERY = frozenset({"base", "loading", "registry"})
ENV_VAR = "TERSETALK_TASKS"
ENTRY_POINT_GROUP = "tersetalk.tasks"

_TASKS: dict[str, Task] = {}
_loaded = False


class TaskPluginError(ImportError):
    """A task plug-in (``TERSETALK_TASKS``, an entry point) that cannot be loaded or
    declares no task; the message names the plug-in and the fix."""


def register(task: Task) -> Task:
    """Add ``task``; registering the same object twice is harmless, another task under a
    taken name is an error."""
    if not isinstance(task, Task):
        raise TypeError(f"register() takes a tersetalk.tasks.base.Task, got {type(task).__name__}")
    known = _TASKS.get(task.name)
    if known is not None and known is not task:
        raise ValueError(f"task {task.name!r} is registered twice (two modules declare it)")
    _TASKS[task.name] = task
    display.name_task(task.name, task.display_name)
    return task


def _register_module(module: ModuleType) -> None:
    found = [getattr(module, "TASK", None), *getattr(module, "TASKS", ())]
    for task in found:
        if task is not None:
            register(task)


def builtin_modules() -> list[str]:
    """The shipped tasks' modules, by name: every module and sub-package of
    ``tersetalk.tasks`` but :data:`MACHINERY` (a new one is found without a list to edit)."""
    package = importlib.import_module(__package__)
    return sorted(
        f"{__package__}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if info.name not in MACHINERY
    )


def _plugin_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(ENV_VAR, "").split(",") if m.strip()]


#: what a plug-in module must hold, said in each error about one
_DECLARE = (
    "a task module declares TASK = Task(...) (or TASKS, a list of them; see "
    "tersetalk/tasks/gsm8k.py and README 'Adding a task')"
)


def _load_plugin(where: str, load: Any) -> None:
    """Register the tasks of one plug-in (``load()`` imports it); any failure is a
    :class:`TaskPluginError` naming the plug-in (``where``) and the fix.

    Why catch everything: a plug-in is the user's code, and whatever its import raises
    (a missing dependency, a syntax error, a wrong value) must say which plug-in failed,
    not end in a traceback from the middle of the registry.
    """
    before = len(_TASKS)
    try:
        loaded = load()
    except ImportError as exc:
        raise TaskPluginError(
            f"{where} cannot be imported ({exc}); put its folder on PYTHONPATH, install "
            f"what it imports, or remove it from {ENV_VAR}"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - the plug-in's own code failed
        raise TaskPluginError(
            f"{where} failed while being imported ({type(exc).__name__}: {exc}); fix the "
            f"module or remove it from {ENV_VAR}"
        ) from exc
    try:
        if isinstance(loaded, Task):
            register(loaded)
        elif isinstance(loaded, ModuleType):
            _register_module(loaded)
        else:
            raise TypeError(f"it is a {type(loaded).__name__}, not a module or a Task")
    except (TypeError, ValueError) as exc:
        raise TaskPluginError(
            f"{where} does not declare a usable task ({exc}); {_DECLARE}"
        ) from exc
    if len(_TASKS) == before and not _declares(loaded):
        raise TaskPluginError(f"{where} declares no task: {_DECLARE}")


def _declares(loaded: Any) -> bool:
    """Whether a plug-in declares a task (one already registered, by itself, counts)."""
    if isinstance(loaded, Task):
        return True
    return getattr(loaded, "TASK", None) is not None or bool(getattr(loaded, "TASKS", ()))


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True  # first: a plug-in that asks the registry while it loads sees no loop
    try:
        for name in builtin_modules():
            _register_module(importlib.import_module(name))
        for name in _plugin_modules():
            load = functools.partial(importlib.import_module, name)
            _load_plugin(f"{ENV_VAR} module {name!r}", load)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _load_plugin(f"entry point {ep.name!r} ({ep.value}, {ENTRY_POINT_GROUP})", ep.load)
    except TaskPluginError:
        _loaded = False  # asked again, the error is raised again
        raise


def names() -> list[str]:
    """Every registered task, built-ins first, in registration order."""
    _load()
    return list(_TASKS)


def get(name: str) -> Task:
    """The task called ``name``; an unknown name is an error that lists the known ones."""
    _load()
    try:
        return _TASKS[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown task {name!r}; known tasks: {', '.join(_TASKS)} (a task of your own is "
            f"a module declaring TASK, named in {ENV_VAR}: see README 'Adding a task')"
        ) from None


def display_name(name: str) -> str:
    """How readers are told task ``name`` (its :attr:`Task.display_name`); a task this
    installation does not know (results from another one) by its id."""
    _load()
    return display.task_display(name)


def topology_labels() -> dict[str, str]:
    """{task: ``direct`` or ``chain``} for every task the topology study can run."""
    _load()
    return {name: t.topology for name, t in _TASKS.items() if t.topology is not None}


def topology_label(name: str) -> str:
    """The label of a task (``direct`` or ``chain``); a task without one is an error."""
    label = get(name).topology
    if label is None:
        known = ", ".join(sorted(topology_labels()))
        raise UnknownNameError(
            f"task {name!r} has no topology label; the topology study runs on: {known}"
        )
    return label


def score_columns(
    name: str, prediction: str, gold: str, options: Mapping[str, Any] | None = None
) -> dict:
    """A record's score columns by the task's official scorer (``options``: its config section)."""
    return get(name).scores(prediction, gold, options)


def preflight(name: str, options: Mapping[str, Any] | None = None) -> None:
    """Stop before the first example when a task cannot be scored here (HumanEval without
    its sandbox)."""
    task = get(name)
    if task.preflight is not None:
        task.preflight(options or {})
