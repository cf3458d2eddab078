"""How tasks are named to readers: one mapping for every figure, table caption and
document, with no import beyond the standard library (figures, captions and the results
document all read it)."""

from __future__ import annotations

__all__ = ["TASK_NAMES", "task_display"]

#: Every figure names a task this way (the paper's spelling), whatever the module: one
#: mapping, so a task is never "gsm8k" in one figure and "GSM8K" in the next. A task
#: not listed (a plug-in) appears by its id.
TASK_NAMES = {
    "hotpotqa": "HotpotQA",
    "gsm8k": "GSM8K",
    "boolq": "BoolQ",
    "commonsenseqa": "CommonsenseQA",
    "socialiqa": "Social IQa",
    "humaneval": "HumanEval",
    "toolqa": "ToolQA",
}


def task_display(task: str) -> str:
    """The display name of a task id ("socialiqa" -> "Social IQa")."""
    return TASK_NAMES.get(str(task), str(task))
