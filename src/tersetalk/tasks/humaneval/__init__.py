"""HumanEval: write a Python function from its signature and docstring (collaborative-optimal).

Record layout: ``id`` (``HumanEval/<n>``), ``question`` (the prompt: imports, signature
and docstring, exactly as shipped), ``entry_point``, ``test`` (the task's own
``check(candidate)``), ``canonical_solution`` (kept for the tests, never shown to a
model) and ``answer`` (the canonical solution: the record's reference answer).

The sample's ``gold`` is JSON ``{"task_id", "prompt", "entry_point", "test"}``: what the
official harness needs to score a completion, so a run file can be scored on its own.
The prediction is code. Scoring is pass@1 with one sample per problem, as the official
harness defines it (``prompt + completion``, then ``check(entry_point)``), with one
difference that matters for hostile code: the completion and the tests never share a
process. :func:`tersetalk.tasks.humaneval.sandbox.run_check` loads ``prompt + completion`` in the
candidate's sandbox and runs ``prompt + test`` in the judge's, which calls the
candidate's function by message and compares the plain values it gets back. A
completion that repeats the whole function (chat models usually do) follows the
prompt's docstring-only function and redefines it. A fenced Markdown block
(```python ... ```) is unwrapped first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tersetalk.tasks.base import (
    CHAIN,
    Answer,
    Brief,
    DatasetFile,
    Metric,
    Task,
    same_score,
)
from tersetalk.tasks.humaneval.sandbox import (
    LIMIT_RANGES,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
    require,
    run_check,
)

GOAL = "Complete the Python function so that it passes its hidden tests."
WORKER_SYSTEM = (
    "You are the Worker. The Manager sends you a Python function's signature and docstring. "
    "Reply with the complete function in one ```python code block. No explanation."
)

#: the question beside the program text when the code travels as code
CODE_QUESTION = "Write the complete function."


def brief(record: dict, options: Mapping[str, Any]) -> Brief:
    """The prompt (signature and docstring) as code kept verbatim, and the question.

    Folded (:meth:`Brief.flat`), the question is the prompt itself, code that a
    summariser must not cut."""
    return Brief(goal=GOAL, code=record["question"], question=CODE_QUESTION)


_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)
_GOLD_KEYS = ("entry_point", "prompt", "task_id", "test")


def to_record(raw: dict, row: int) -> dict:
    """A HumanEval line as the pipeline's record."""
    return {
        "id": raw["task_id"],
        "question": raw["prompt"],
        "entry_point": raw["entry_point"],
        "test": raw["test"],
        "canonical_solution": raw["canonical_solution"],
        "answer": raw["canonical_solution"],
    }


def gold_of(record: dict) -> str:
    """The sample's gold: the task's prompt, entry point and tests (JSON, sorted keys)."""
    return json.dumps(
        {
            "task_id": record["id"],
            "prompt": record["question"],
            "entry_point": record["entry_point"],
            "test": record["test"],
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def parse_gold(gold: str) -> dict[str, str]:
    from tersetalk.tasks.base import ScoringError

    try:
        obj = json.loads(gold)
    except ValueError as exc:
        raise ScoringError(f"HumanEval gold is not JSON: {gold!r:.200} ({exc})") from exc
    if not isinstance(obj, dict) or set(obj) != set(_GOLD_KEYS):
        raise ScoringError(f"HumanEval gold must hold exactly {list(_GOLD_KEYS)}: {gold!r:.200}")
    if not obj["entry_point"].isidentifier():
        raise ScoringError(f"HumanEval entry_point is not an identifier: {obj['entry_point']!r}")
    return obj


def extract_code(prediction: str) -> str:
    """The code in a model's answer: the first fenced block, else the text as it is."""
    m = _FENCE.search(prediction or "")
    return m.group(1) if m else (prediction or "")


def candidate_source(prediction: str, gold: str) -> str:
    """What the candidate's sandbox loads: the prompt, then the model's completion."""
    prompt = parse_gold(gold)["prompt"]
    return f"{prompt if prompt.endswith(chr(10)) else prompt + chr(10)}{extract_code(prediction)}\n"


def tests_source(gold: str) -> str:
    """What the judge's sandbox runs: the prompt (its helpers) and the task's check().

    A prompt that ends in a signature without a body (no docstring) gets ``pass`` as
    its body, so the judge can define the prompt's helpers; the stub itself is replaced
    by the candidate's stand-in.
    """
    g = parse_gold(gold)
    prompt = g["prompt"] if g["prompt"].endswith("\n") else g["prompt"] + "\n"
    for body in ("", "    pass\n"):
        text = f"{prompt}{body}\n\n{g['test']}\n"
        try:
            compile(text, "tests.py", "exec")  # compiling runs nothing
        except (SyntaxError, ValueError):
            continue
        return text
    return f"{prompt}\n\n{g['test']}\n"  # the judge reports the SyntaxError


def run(
    prediction: str,
    gold: str,
    limits: SandboxLimits | None = None,
    isolation: str = "bubblewrap",
) -> SandboxResult:
    """The task's own tests on the prediction: check() in the judge, the code in its own box."""
    g = parse_gold(gold)
    return run_check(
        candidate_source(prediction, gold), g["entry_point"], tests_source(gold), limits, isolation
    )


def correct(prediction: str, gold: str) -> bool:
    """pass@1 of one prediction (see :func:`run`)."""
    return run(prediction, gold).passed


def sandbox_settings(options: Mapping[str, Any] | None) -> tuple[SandboxLimits, str]:
    """The sandbox limits and isolation from the task's config section.

    ``options`` is the ``humaneval:`` config section (the run spec's ``task_options``);
    its ``sandbox`` mapping may set ``isolation`` (``bubblewrap``, the default, or the
    weaker ``process``) and any field of :class:`~tersetalk.tasks.humaneval.sandbox.SandboxLimits`.
    A value out of range raises :class:`~tersetalk.tasks.humaneval.sandbox.SandboxUnavailableError`
    (which the runner reports as a config error, before the first example) rather than
    failing on every example.
    """
    sandbox = dict((options or {}).get("sandbox") or {})
    isolation = sandbox.pop("isolation", "bubblewrap")
    try:
        return SandboxLimits(**sandbox), isolation
    except (TypeError, ValueError) as exc:
        keys = ["isolation", *LIMIT_RANGES]
        raise SandboxUnavailableError(
            f"HumanEval's sandbox cannot run with this config: {exc} (the keys of "
            f"humaneval.sandbox are {keys})"
        ) from None


def preflight(options: Mapping[str, Any]) -> None:
    """Without its sandbox the task cannot be scored: stop before the first example
    (:class:`~tersetalk.tasks.humaneval.sandbox.SandboxUnavailableError` says how to install it)."""
    require(sandbox_settings(options)[1])


def score(prediction: str, gold: str, options: Mapping[str, Any]) -> dict:
    """pass@1 of one prediction, with how the sandbox ended.

    Adds ``sandbox_reason`` (one of ``tersetalk.tasks.humaneval.sandbox.REASONS``),
    ``sandbox_detail``, ``sandbox_isolation`` (``bubblewrap`` or the weaker ``process``,
    with any limit that could not be set) and ``t_sandbox_s`` (timing).
    """
    limits, isolation = sandbox_settings(options)
    result = run(prediction, gold, limits, isolation)
    ok = float(result.passed)
    return {
        **same_score(ok),
        "sandbox_reason": result.reason,
        "sandbox_detail": result.detail,
        "sandbox_isolation": f"{isolation}; {result.notes}" if result.notes else isolation,
        "t_sandbox_s": result.duration_s,
    }


TASK = Task(
    name="humaneval",
    title="HumanEval (pass@1)",
    dataset=DatasetFile(
        "humaneval/HumanEval.jsonl.gz",
        "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        "openai/openai_humaneval",
        None,
        "test",
        from_hub=dict,  # the hub rows have the file's keys
        to_record=to_record,
        gold=gold_of,
    ),
    brief=brief,
    worker_system=WORKER_SYSTEM,
    answer=Answer("the complete Python function (signature and body)", "code"),
    metric=Metric(
        "pass@1", "pass@1: the task's own check(entry_point) passes in the sandbox (one sample)"
    ),
    correct=correct,
    topology=CHAIN,
    # code: every line counts (the scorer strips a code fence)
    extract=lambda text: text.strip("\n"),
    score=score,
    # pass@1 as the run scored it: model code runs once, sandboxed, never again in the
    # score step, which reads the run's verdict
    executes=True,
    gold_text=lambda gold: None,  # its gold is tests: no answer string reaches the Worker
    run_options=True,
    preflight=preflight,
)
