"""Every task's topology label and official scoring, in one table.

:func:`correct` is what a record's ``correct`` column and a run's accuracy use for
BoolQ, CommonsenseQA, Social IQa and HumanEval (HotpotQA, GSM8K and toolqa keep their
own branches in ``records.score`` and ``metrics.summary``, which predate this table and
compute EM/F1 as well). :func:`score_columns` adds the provenance a scorer has: for
HumanEval, how the sandbox ended (``sandbox_reason``) and which isolation was in force;
:func:`preflight` stops a run that cannot score its task (HumanEval without bubblewrap).

:func:`brief_parts` says what the Manager's brief holds for these tasks (goal, facts,
question) and :data:`WORKER_SYSTEM` the Worker's instruction, for the dialogue engine's
brief builder; :func:`gold_text` the string whose arrival at the Worker answer
preservation can check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tersetalk.tasks.boolq as _boolq
import tersetalk.tasks.humaneval as _humaneval
import tersetalk.tasks.multiple_choice as _mc
from tersetalk.tasks.labels import topology_label
from tersetalk.tasks.sandbox import SandboxLimits, require


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


WORKER_SYSTEM: dict[str, str] = {
    "boolq": _boolq.WORKER_SYSTEM,
    "commonsenseqa": _mc.WORKER_SYSTEM,
    "socialiqa": _mc.WORKER_SYSTEM,
    "humaneval": _humaneval.WORKER_SYSTEM,
}


@dataclass(frozen=True)
class BriefParts:
    """What the Manager's brief carries for one example."""

    goal: str
    facts: list[str]
    question: str


def brief_parts(task: str, record: dict) -> BriefParts:
    """The brief of a record of one of the four tasks.

    BoolQ: the passage's sentences as facts and the question with its question mark.
    CommonsenseQA / Social IQa: the situation (Social IQa) then one fact per option
    (``"A: bank"``), and the question. HumanEval: no facts; the question is the prompt
    (signature and docstring), code that a summariser must not cut.
    """
    if task == "boolq":
        return BriefParts(_boolq.GOAL, list(record["context"]), _boolq.brief_question(record))
    if task in ("commonsenseqa", "socialiqa"):
        facts = [*record["context"], *_mc.option_lines(record)]
        return BriefParts(_mc.GOAL, facts, record["question"].strip())
    if task == "humaneval":
        return BriefParts(_humaneval.GOAL, [], record["question"])
    raise KeyError(f"task {task!r} has no brief here; known: {sorted(SCORING)}")


def gold_text(task: str, gold: str) -> str | None:
    """The answer string that can reach the Worker: BoolQ's yes/no, the gold option's
    text for CommonsenseQA and Social IQa; None for HumanEval (its gold is tests)."""
    if task in ("commonsenseqa", "socialiqa"):
        label, options = _mc.parse_gold(gold)
        return options.get(label)
    if task == "boolq":
        return gold
    return None


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


def sandbox_settings(options: dict | None) -> tuple[SandboxLimits, str]:
    """HumanEval's sandbox limits and isolation from the task's config section.

    ``options`` is the ``humaneval:`` config section (the run spec's ``task_options``);
    its ``sandbox`` mapping may set ``isolation`` (``bubblewrap``, the default, or the
    weaker ``process``) and any field of :class:`~tersetalk.tasks.sandbox.SandboxLimits`.
    """
    sandbox = dict((options or {}).get("sandbox") or {})
    isolation = sandbox.pop("isolation", "bubblewrap")
    return SandboxLimits(**sandbox), isolation


def preflight(task: str, options: dict | None = None) -> None:
    """Stop before the first example when a task cannot be scored here.

    HumanEval without its sandbox raises
    :class:`~tersetalk.tasks.sandbox.SandboxUnavailableError` saying how to install it.
    """
    if task == "humaneval":
        require(sandbox_settings(options)[1])


def score_columns(task: str, prediction: str, gold: str, options: dict | None = None) -> dict:
    """A record's score columns (``em``/``f1``/``precision``/``recall`` equal ``correct``).

    HumanEval adds ``sandbox_reason`` (one of ``tersetalk.tasks.sandbox.REASONS``),
    ``sandbox_detail``, ``sandbox_isolation`` (``bubblewrap`` or the weaker
    ``process``, with any limit that could not be set) and ``t_sandbox_s`` (timing).
    """
    extra: dict = {}
    if task == "humaneval":
        limits, isolation = sandbox_settings(options)
        result = _humaneval.run(prediction or "", gold, limits, isolation)
        ok = float(result.passed)
        extra = {
            "sandbox_reason": result.reason,
            "sandbox_detail": result.detail,
            "sandbox_isolation": f"{isolation}; {result.notes}" if result.notes else isolation,
            "t_sandbox_s": result.duration_s,
        }
    else:
        ok = float(correct(task, prediction, gold))
    return {"em": ok, "f1": ok, "precision": ok, "recall": ok, "correct": ok, **extra}
