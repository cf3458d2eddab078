"""Every task's topology label and official scoring, in one table.

:func:`correct` is what a record's ``correct`` column and a run's accuracy use for
BoolQ, CommonsenseQA, Social IQa and HumanEval (HotpotQA, GSM8K and toolqa keep their
own branches in ``records.score`` and ``metrics.summary``, which predate this table and
compute EM/F1 as well). :func:`score_columns` adds the provenance a scorer has: for
HumanEval, how the sandbox ended (``sandbox_reason``) and which isolation was in force.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tersetalk.tasks.boolq as _boolq
import tersetalk.tasks.humaneval as _humaneval
import tersetalk.tasks.multiple_choice as _mc
from tersetalk.tasks.labels import topology_label


@dataclass(frozen=True)
class TaskScoring:
    """A task's official metric: its name, how it is computed, and the check itself."""

    task: str
    metric: str
    definition: str
    correct: Callable[[str, str], bool]

    @property
    def label(self) -> str:
        return topology_label(self.task)


SCORING: dict[str, TaskScoring] = {
    "boolq": TaskScoring(
        "boolq",
        "accuracy",
        "yes/no accuracy; an answer that says neither yes nor no counts as wrong",
        _boolq.correct,
    ),
    "commonsenseqa": TaskScoring(
        "commonsenseqa",
        "accuracy",
        "accuracy on the option label (A-E); the option's exact text also counts",
        _mc.correct,
    ),
    "socialiqa": TaskScoring(
        "socialiqa",
        "accuracy",
        "accuracy on the option label (A-C); the option's exact text also counts",
        _mc.correct,
    ),
    "humaneval": TaskScoring(
        "humaneval",
        "pass@1",
        "pass@1: the task's own check(entry_point) passes in the sandbox (one sample)",
        _humaneval.correct,
    ),
}


def scored_here(task: str) -> bool:
    """Whether ``task`` is scored through this table."""
    return task in SCORING


def correct(task: str, prediction: str, gold: str) -> bool:
    """The official check of one prediction; an empty prediction is wrong."""
    try:
        scoring = SCORING[task]
    except KeyError:
        raise KeyError(f"task {task!r} is not in the scoring table {sorted(SCORING)}") from None
    return scoring.correct(prediction or "", gold)


def score_columns(task: str, prediction: str, gold: str) -> dict:
    """A record's score columns (``em``/``f1``/``precision``/``recall`` equal ``correct``).

    HumanEval adds ``sandbox_reason`` (one of ``tersetalk.tasks.sandbox.REASONS``),
    ``sandbox_detail``, ``sandbox_network`` (the isolation in force: ``netns``,
    ``netns+userns`` or ``none``) and ``t_sandbox_s`` (a timing column).
    """
    extra: dict = {}
    if task == "humaneval":
        result = _humaneval.run(prediction or "", gold)
        ok = float(result.passed)
        extra = {
            "sandbox_reason": result.reason,
            "sandbox_detail": result.detail,
            "sandbox_network": result.network_isolation,
            "t_sandbox_s": result.duration_s,
        }
    else:
        ok = float(correct(task, prediction, gold))
    return {"em": ok, "f1": ok, "precision": ok, "recall": ok, "correct": ok, **extra}
