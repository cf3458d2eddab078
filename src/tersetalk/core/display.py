"""How tasks are named to readers: one lookup for every figure, table caption and
document, with no import beyond the standard library.

The names are each task's own :attr:`tersetalk.tasks.base.Task.display_name` ("Social
IQa", "GSM8K"): the task registry hands them here as it registers the tasks
(:func:`name_task`), so a figure never names a task "gsm8k" while the next says
"GSM8K". A name nobody registered (a task of another installation, or asked before any
task was loaded) appears by its id; code that draws asks the registry first
(:func:`tersetalk.tasks.registry.display_name`).
"""

from __future__ import annotations

__all__ = ["name_task", "task_display"]

_NAMES: dict[str, str] = {}


def name_task(task: str, display: str) -> None:
    """Record how task ``task`` is named to readers."""
    _NAMES[str(task)] = str(display)


def task_display(task: str) -> str:
    """The display name of a task id ("socialiqa" -> "Social IQa"), else the id."""
    return _NAMES.get(str(task), str(task))
