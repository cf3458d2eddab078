"""The planning Manager: one model call that writes the brief's plan.

The deterministic Manager (:func:`tersetalk.agents.roles.build_brief`) never plans,
so the router's strongest signals (``p`` plan lines and ``d`` references into the
Manager's memory) never appear in a brief. A planning Manager makes **one** model call
on behalf of the role ``manager`` (logged in the :class:`Conversation` like every other
call, so its tokens land in the record's usage totals and ``n_model_calls``) and
returns:

* for TerseTalk (:func:`plan_lines`): ``p`` lines, at most ``plan_max_steps``, each
  followed by a ``d`` line when the step delegates a piece of the brief already stored
  in the Manager's memory (an ``M#`` id the memory holds: an id the memory does not
  hold is never sent). The reply is produced under the Worker's enforcement modes:
  ``schema`` (a Pydantic plan, constrained decoding through
  :meth:`Conversation.ask_structured`), ``json`` (the backend's JSON mode, read
  leniently) or ``posthoc`` (free text asked as JSONL lines, read by the lenient
  parser);
* for prose (:func:`prose_plan`): numbered steps ("1. ..."), which the free-form
  router counts as plan steps (:func:`numbered_plan` writes them).

Both planners see the same information (:func:`planner_input`: goal, question,
context passages, facts, answer options, program text, tool payload), so the
comparison stays protocol against protocol; the TerseTalk one also sees the ids its
memory holds, with the start of each text, since only it can point at them.

A model's output is hostile input: it is cut to a size, parsed without raising, and
every item that does not make it into the plan is counted (:class:`PlanCounters`):
steps past the bound or empty, step texts cut, ids that are malformed or not in the
memory (also removed from the step's text), lines that are neither a step nor a
reference.

Failures. When the call's *answer* fails (a structured answer schema-invalid after
its retries or cut off, or a reply from which no step can be read) the brief goes
out **without a plan**, and the record says so: ``planner_failed`` is 1,
``planner_parse_failures`` counts the readings that failed and ``planner_error``
keeps the error text. No second call is made (the Worker's free-generation fallback
would double the Manager's cost for an optional part of the brief). Faults of the
transport or server (:class:`~tersetalk.models.ModelCallError` other than
:class:`~tersetalk.models.StructuredOutputError`) propagate, exactly as they do from a
Worker's call, so the runner's rules apply (a transient fault reruns the example, an
unreachable model stops the run, anything else is an error row).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, create_model

from tersetalk.agents.conversation import Conversation
from tersetalk.agents.roles import Brief
from tersetalk.models import GenerationConfig, StructuredOutputError
from tersetalk.protocol import DeltaLine, LineBase, Memory, PlanLine, TextLine, parse_lenient
from tersetalk.protocol.lines import replace_surrogates
from tersetalk.protocol.tags import REF_MENTION_RE, REF_RE

__all__ = [
    "MANAGER_ROLE",
    "MAX_PLAN_STEPS",
    "PlanCounters",
    "PlannerSettings",
    "insert_plan",
    "insert_prose_plan",
    "numbered_plan",
    "plan_lines",
    "plan_schema",
    "planner_input",
    "prose_plan",
]

#: the role the planning call is logged under (the Manager's, ``PARTICIPANTS["M"]``)
MANAGER_ROLE = "manager"
#: the most steps any variant may ask for (the schema's grammar bound comes from the
#: setting, this keeps a grammar-constrained plan inside its token budget)
MAX_PLAN_STEPS = 8
#: the most characters of a reply that are read at all (the rest is cut, and counted);
#: the generation budget bounds a model's reply, not a cached or replayed one
MAX_REPLY_CHARS = 16_000
#: how much of each memory entry the TerseTalk planner is shown next to its id
MEMORY_PREVIEW_CHARS = 80
#: how many memory ids the TerseTalk planner is shown (oldest first)
MEMORY_PREVIEW_IDS = 24

Enforcement = Literal["schema", "json", "posthoc"]


class PlannerSettings(BaseModel):
    """The planning Manager's knobs: inherit them into a codec's settings.

    ``planner: none`` (the default) makes no call and adds no line, so a variant
    without the planner is byte-identical to one built before it existed.
    """

    model_config = ConfigDict(extra="forbid")

    #: ``none``: the deterministic brief only; ``model``: one planning call per example
    planner: Literal["none", "model"] = "none"
    #: the most plan steps the brief carries (the schema's grammar bound, too)
    plan_max_steps: int = Field(4, ge=1, le=MAX_PLAN_STEPS)
    #: the most characters of one step (a longer step is cut, and counted)
    plan_step_chars: int = Field(100, ge=10, le=300)
    #: max_tokens of the planning call; null: the config's generation.max_tokens. It
    #: leaves room above the largest schema-valid plan (4 steps of 100 characters with
    #: an id: about 150 tokens), so a constrained plan is not cut off
    plan_max_tokens: int | None = Field(256, ge=1)
    #: ``d`` lines for steps that delegate a stored text (false: ``p`` lines only, the
    #: ablation of the delegation signal; TerseTalk only)
    plan_refs: bool = True
    #: the most characters of the brief the planner is shown (cut from the end, after
    #: the goal, question and memory ids; a cut is counted)
    plan_input_chars: int = Field(8_000, ge=200)


# -- the schema ----------------------------------------------------------------------------
#: a step's optional id: empty, or an ``M#`` id of at most 6 digits (without a bound the
#: grammar lets a small model loop on digits until max_tokens cuts the reply off). An
#: empty string rather than null keeps the grammar free of ``anyOf``.
_REF_OR_EMPTY = r"^(M#[1-9][0-9]{0,5})?$"


@functools.lru_cache(maxsize=64)
def plan_schema(max_steps: int, step_chars: int, refs: bool = True) -> type[BaseModel]:
    """The plan as a Pydantic model: ``steps`` of ``{text, ref}`` (``{text}`` when
    ``refs`` is off), bounded by the settings.

    Built per (steps, characters, refs) so the grammar enforces the variant's bounds;
    cached, so the same variant always sends the same JSON schema (the call cache keys
    on it).
    """
    fields: dict[str, Any] = {
        "text": (Annotated[str, StringConstraints(min_length=1, max_length=step_chars)], ...)
    }
    if refs:
        fields["ref"] = (Annotated[str, StringConstraints(pattern=_REF_OR_EMPTY)], "")
    step = create_model("PlanStep", __config__=ConfigDict(extra="forbid"), **fields)
    return create_model(
        "ManagerPlan",
        __config__=ConfigDict(extra="forbid"),
        steps=(list[step], Field(..., min_length=1, max_length=max_steps)),  # type: ignore[valid-type]
    )


# -- counters ------------------------------------------------------------------------------
@dataclass
class PlanCounters:
    """What the planning call cost and what became of its reply, for the record.

    Every field is present whatever happened (zeros when the planner is off), so the
    record's ``c_planner_*`` columns are stable. ``failed`` is 1 when a call was made
    and the brief went out without a plan; ``error`` says why.
    """

    calls: int = 0
    #: how the reply was read: valid at the first try, valid after the backend's
    #: retries, or rebuilt by the lenient reading (each 0 or 1)
    first_try: int = 0
    after_retries: int = 0
    repaired: int = 0
    failed: int = 0
    #: readings that failed (a schema-invalid answer, JSON that is not the plan, a
    #: reply with no step in it)
    parse_failures: int = 0
    steps: int = 0
    #: steps past ``plan_max_steps`` or empty, not sent
    steps_dropped: int = 0
    #: steps whose text repeats an earlier step's (case and spaces aside), not sent again
    #: (a looping model would otherwise inflate the router's plan count)
    steps_repeated: int = 0
    #: step texts cut to ``plan_step_chars``
    steps_truncated: int = 0
    refs: int = 0
    #: ids not sent: malformed, or not held by the memory (an invented id)
    refs_dropped: int = 0
    #: ids a step named that an earlier step had already sent as a ``d`` line
    refs_repeated: int = 0
    #: reply lines that were neither a step nor a reference (prose around the plan, ...)
    lines_ignored: int = 0
    input_truncated: int = 0
    output_truncated: int = 0
    #: the planning call's usage by the model's tokenizer (``-1``: unknown)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""

    def as_dict(self, prefix: str = "planner_") -> dict[str, Any]:
        return {f"{prefix}{k}": v for k, v in dataclasses.asdict(self).items()}


# -- what the planner reads ----------------------------------------------------------------
def _pairs(items: Any) -> list[tuple[str, str]]:
    """``(label, text)`` pairs of a Brief field that may hold pairs or plain strings."""
    out = []
    for item in items or ():
        if isinstance(item, str):
            out.append(("", item))
        elif isinstance(item, tuple | list) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
        else:
            out.append(("", str(item)))
    return out


def _memory_index(memory: Memory) -> list[str]:
    lines = []
    for ref in memory.ids()[:MEMORY_PREVIEW_IDS]:
        text = " ".join(memory.get(ref).split())
        if len(text) > MEMORY_PREVIEW_CHARS:
            text = text[:MEMORY_PREVIEW_CHARS] + "..."
        lines.append(f"- {ref}: {text}")
    return lines


def planner_input(
    brief: Brief, memory: Memory | None, limit: int, counters: PlanCounters | None = None
) -> str:
    """What the planner is shown: the brief in plain sections, at most ``limit`` chars.

    Goal and question come first, then (TerseTalk) the memory's ids, then context,
    facts, options, code and payload; a cut falls on the last of these, and is counted
    in ``counters.input_truncated``. ``context``, ``options`` and ``code`` are read
    with ``getattr`` so briefs with or without those fields both work.
    """
    parts = [f"Goal: {brief.goal}", f"Question: {brief.question}"]
    if memory is not None and len(memory):
        parts.append("Stored texts (refer to them by id):")
        parts.extend(_memory_index(memory))
    context = _pairs(getattr(brief, "context", ()))
    if context:
        parts.append("Context:")
        parts.extend(f"- {t}: {p}" if t else f"- {p}" for t, p in context)
    if brief.facts:
        parts.append("Facts:")
        parts.extend(f"- {f}" for f in brief.facts)
    options = _pairs(getattr(brief, "options", ()))
    if options:
        parts.append("Options:")
        parts.extend(f"- {k}: {v}" if k else f"- {v}" for k, v in options)
    code = getattr(brief, "code", "") or ""
    if code:
        parts.extend(["Code:", code])
    if brief.payload:
        parts.extend(["Tool response:", brief.payload])
    text = "\n".join(parts)
    if len(text) > limit:
        text = text[:limit]
        if counters is not None:
            counters.input_truncated = 1
    return text


_INTRO = (
    "You are the Manager. Before a Worker answers the question below, write a short "
    "plan for it: at most {n} steps, each one short imperative sentence."
)
_REFS_NOTE = (
    " When a step needs one of the stored texts, give that text's id (M#n) with the "
    "step; use only ids listed under stored texts."
)
_JSON_REPLY = ' Reply with a JSON object: {{"steps": [{{"text": "<step>"{ref}}}]}}.'
_TT_REPLY = {
    "schema": _JSON_REPLY,
    "json": _JSON_REPLY,
    "posthoc": ' Reply only with JSONL lines: ["p","<step>"] for each step{d}.',
}
_PROSE_REPLY = " Reply only with the numbered steps, one per line: 1. <step>"


def _tersetalk_system(enforcement: str, max_steps: int, refs: bool) -> str:
    d = ', followed by ["d","M#n"] when the step needs a stored text' if refs else ""
    ref = ', "ref": "<M# id or empty>"' if refs else ""
    return (
        _INTRO.format(n=max_steps)
        + (_REFS_NOTE if refs else "")
        + _TT_REPLY[enforcement].format(d=d, ref=ref)
    )


# -- reading the reply ---------------------------------------------------------------------
_NUMBERED = re.compile(r"^\s*(?:step\s*)?\d{1,3}\s*[.):-]\s*(\S.*)$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[-*•]\s+(\S.*)$")
_LEADING_MARK = re.compile(r"^\s*(?:(?:step\s*)?\d{1,3}\s*[.):-]|[-*•])\s+", re.IGNORECASE)

#: a raw step: its text and the id it names explicitly (``None``: none)
RawStep = tuple[str, str | None]


def _mention(ref: str) -> re.Pattern[str]:
    """``ref`` as a whole mention in text (``M#1`` does not match inside ``M#12``)."""
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(ref)}(?![0-9])")


def _cut_reply(raw: str, counters: PlanCounters) -> str:
    if len(raw) > MAX_REPLY_CHARS:
        counters.output_truncated = 1
        return raw[:MAX_REPLY_CHARS]
    return raw


def _clean_text(text: str) -> str:
    """A step's text on one line, without a numbering or bullet of its own."""
    text = " ".join(replace_surrogates(str(text)).split())
    return _LEADING_MARK.sub("", text, count=1).strip()


def _steps_from_object(obj: Any) -> list[RawStep] | None:
    """Steps from a JSON value of any reasonable shape; None when there is no plan in it.

    Accepts ``{"steps": [...]}`` (or ``plan``), a bare list or step, and items that are strings
    or objects with ``text``/``step``/``description`` and ``ref``/``refs``/``need``.
    """
    if isinstance(obj, dict):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        if "steps" not in lowered and "plan" not in lowered and "text" in lowered:
            lowered = {"steps": [obj]}  # one step object, not wrapped in a plan
        obj = next((lowered[k] for k in ("steps", "plan") if k in lowered), None)
        if isinstance(obj, str):
            obj = [obj]
    if not isinstance(obj, list):
        return None
    steps: list[RawStep] = []
    for item in obj:
        if isinstance(item, dict):
            low = {str(k).lower(): v for k, v in item.items()}
            text = next((low[k] for k in ("text", "step", "description") if k in low), "")
            ref = next((low[k] for k in ("ref", "refs", "need") if k in low), None)
            if isinstance(ref, list):
                ref = ref[0] if ref else None
            steps.append((str(text), None if ref in (None, "") else str(ref)))
        elif item is not None:
            steps.append((str(item), None))
    return steps


def _steps_from_lines(raw: str, counters: PlanCounters) -> tuple[list[RawStep], bool]:
    """Steps from a free reply: ``p`` lines, numbered or bulleted text lines, ``d`` lines
    (a ``d`` line names the id of the step before it; one before any step is dropped),
    and whether the reply was canonical lines, nothing repaired or ignored."""
    steps: list[RawStep] = []
    parsed = parse_lenient(raw)
    clean = parsed.clean
    for line in parsed.lines:
        if isinstance(line, PlanLine):
            steps.append((line.text, None))
        elif isinstance(line, DeltaLine):
            if steps and steps[-1][1] is None:
                steps[-1] = (steps[-1][0], line.ref)
            elif steps:  # a second id for the same step: a step of its own would be empty
                steps.append(("", line.ref))
            else:
                counters.refs_dropped += 1
        elif isinstance(line, TextLine) and (
            m := _NUMBERED.match(line.text) or _BULLET.match(line.text)
        ):
            steps.append((m.group(1), None))
            clean = False
        else:
            counters.lines_ignored += 1
            clean = False
    return steps, clean


def _finish(
    steps: list[RawStep], memory: Memory, settings: PlannerSettings, counters: PlanCounters
) -> list[LineBase]:
    """The plan's lines from raw steps: bounded, ids checked against ``memory``.

    A step's id is its explicit one, else the first ``M#`` it mentions. Only ids the
    memory holds become ``d`` lines (one per id, at most ``plan_max_steps``); an id it
    does not hold is dropped from the step and from its text, and counted. A step whose
    text repeats an earlier one sends no second ``p`` line (a new id of it still goes).
    """
    lines: list[LineBase] = []
    sent_refs: set[str] = set()
    seen: set[str] = set()
    for text, ref in steps:
        text = _clean_text(text)
        named = [] if ref is None else [str(ref).strip()]
        named += [m.group(0) for m in REF_MENTION_RE.finditer(text)]
        valid = [r for r in dict.fromkeys(named) if REF_RE.match(r) and r in memory]
        invalid = [r for r in dict.fromkeys(named) if r not in valid]
        counters.refs_dropped += len(invalid)
        for bad in invalid:  # an invented id is not sent, not even inside the text
            text = " ".join(_mention(bad).sub(" ", text).split())
        if not text and not valid:
            counters.steps_dropped += 1
            continue
        cut = text[: settings.plan_step_chars].rstrip()
        new = bool(cut) and cut.casefold() not in seen
        if new and counters.steps >= settings.plan_max_steps:
            counters.steps_dropped += 1
            continue
        if text and not new:
            counters.steps_repeated += 1  # its id, if new, still goes as a d line
        if new:
            counters.steps_truncated += int(cut != text)
            seen.add(cut.casefold())
            lines.append(PlanLine(text=cut))
            counters.steps += 1
        if valid and settings.plan_refs:
            first = valid[0]
            if first in sent_refs:
                counters.refs_repeated += 1
            elif counters.refs >= settings.plan_max_steps:
                counters.refs_dropped += 1
            else:
                sent_refs.add(first)
                lines.append(DeltaLine(ref=first))
                counters.refs += 1
    return lines


def _usage(conv: Conversation, counters: PlanCounters) -> None:
    last = conv.calls[-1]
    counters.prompt_tokens = int(last["prompt_tokens"])
    counters.completion_tokens = int(last["completion_tokens"])


def _gen(gen: GenerationConfig, settings: PlannerSettings, json_mode: bool) -> GenerationConfig:
    if settings.plan_max_tokens:
        gen = dataclasses.replace(gen, max_tokens=settings.plan_max_tokens)
    return dataclasses.replace(gen, json_mode=json_mode) if json_mode else gen


def _no_plan(counters: PlanCounters, why: str) -> list[LineBase]:
    counters.failed = 1
    counters.error = counters.error or why
    counters.first_try = counters.after_retries = counters.repaired = 0
    # an id read from a step without text is not sent either: no plan, no d lines
    counters.refs_dropped += counters.refs
    counters.refs = 0
    return []


# -- the two planners ----------------------------------------------------------------------
def plan_lines(
    conv: Conversation,
    gen: GenerationConfig,
    brief: Brief,
    memory: Memory,
    settings: PlannerSettings,
    enforcement: Enforcement = "schema",
    *,
    role: str = MANAGER_ROLE,
) -> tuple[list[LineBase], PlanCounters]:
    """The TerseTalk plan: ``p`` lines (each followed by its ``d`` line if it delegates).

    ``memory`` is the example's store *after* the brief was encoded (its ``M#`` ids are
    the ones a step may name). ``gen`` is the run's generation config (the budget is
    ``plan_max_tokens``). With ``planner: none`` no call is made and the lines are
    empty. On an answer failure the lines are empty and ``counters.failed`` is 1 (see
    the module docstring); a transport or server fault propagates.
    """
    counters = PlanCounters()
    if settings.planner == "none":
        return [], counters
    if enforcement not in _TT_REPLY:
        raise ValueError(f"unknown enforcement {enforcement!r}; known: {', '.join(_TT_REPLY)}")
    messages = [
        {
            "role": "system",
            "content": _tersetalk_system(enforcement, settings.plan_max_steps, settings.plan_refs),
        },
        {
            "role": "user",
            # without d lines the ids are not shown either (the ablation asks for none)
            "content": planner_input(
                brief, memory if settings.plan_refs else None, settings.plan_input_chars, counters
            ),
        },
    ]
    counters.calls = 1
    schema = plan_schema(settings.plan_max_steps, settings.plan_step_chars, settings.plan_refs)
    validated = False  # read as a schema-valid plan
    if enforcement == "schema":
        try:
            res = conv.ask_structured(role, messages, schema, _gen(gen, settings, False))
        except StructuredOutputError as exc:  # logged by the conversation as a failed call
            _usage(conv, counters)
            counters.parse_failures += 1
            return _no_plan(counters, f"structured plan failed: {exc}"), counters
        _usage(conv, counters)
        validated = True
        if res.attempts == 1:
            counters.first_try = 1
        else:
            counters.after_retries = 1
        raw_steps = [(s["text"], s.get("ref") or None) for s in res.parsed["steps"]]
    else:
        raw = conv.ask(role, messages, _gen(gen, settings, enforcement == "json"))
        _usage(conv, counters)
        raw = _cut_reply(raw, counters)
        raw_steps = None
        if enforcement == "json":
            try:
                obj = schema.model_validate_json(raw)
                counters.first_try = 1
                validated = True
                raw_steps = [(s.text, getattr(s, "ref", "") or None) for s in obj.steps]
            except ValidationError:
                counters.parse_failures += 1
                try:
                    raw_steps = _steps_from_object(json.loads(raw))
                except (ValueError, RecursionError):  # a 5,000-digit int is a ValueError
                    raw_steps = None
        if raw_steps is None:
            raw_steps, clean = _steps_from_lines(raw, counters)
            # canonical lines asked for in posthoc mode are right at the first try
            counters.first_try = int(clean and enforcement == "posthoc")
        if not counters.first_try:
            counters.repaired = 1
    lines = _finish(raw_steps, memory, settings, counters)
    if not any(isinstance(ln, PlanLine) for ln in lines):
        # a schema-valid plan whose every step was dropped was read; anything else was not
        counters.parse_failures += 0 if validated else 1
        return _no_plan(counters, "no plan step could be read from the reply"), counters
    return lines, counters


def prose_plan(
    conv: Conversation,
    gen: GenerationConfig,
    brief: Brief,
    settings: PlannerSettings,
    *,
    role: str = MANAGER_ROLE,
) -> tuple[list[str], PlanCounters]:
    """The free-form plan: step texts read from a reply of numbered lines.

    The same one call, the same bounds and counters as :func:`plan_lines`, free text
    (the free-form system has no enforcement mode and no memory). Lines that are not
    numbered are ignored (a bulleted reply is read as steps too, counted as repaired);
    an ``M#`` mention is left in the text, since prose has no ids to check it against.
    Render the steps with :func:`numbered_plan`.
    """
    counters = PlanCounters()
    if settings.planner == "none":
        return [], counters
    messages = [
        {"role": "system", "content": _INTRO.format(n=settings.plan_max_steps) + _PROSE_REPLY},
        {
            "role": "user",
            "content": planner_input(brief, None, settings.plan_input_chars, counters),
        },
    ]
    counters.calls = 1
    raw = conv.ask(role, messages, _gen(gen, settings, False))
    _usage(conv, counters)
    raw = _cut_reply(raw, counters)
    numbered, bulleted = [], []
    for line in raw.splitlines():
        if m := _NUMBERED.match(line):
            numbered.append(m.group(1))
        elif m := _BULLET.match(line):
            bulleted.append(m.group(1))
        elif line.strip():
            counters.lines_ignored += 1
    if numbered:
        counters.lines_ignored += len(bulleted)
        counters.first_try = 1
    else:
        counters.repaired = int(bool(bulleted))
    steps: list[str] = []
    for text in numbered or bulleted:
        text = _clean_text(text)
        if not text or len(steps) >= settings.plan_max_steps:
            counters.steps_dropped += 1
            continue
        if len(text) > settings.plan_step_chars:
            text = text[: settings.plan_step_chars].rstrip()
            counters.steps_truncated += 1
        steps.append(text)
    counters.steps = len(steps)
    if not steps:
        counters.parse_failures += 1
        _no_plan(counters, "no numbered step could be read from the reply")
    return steps, counters


# -- putting the plan into a brief ---------------------------------------------------------
def insert_plan(lines: list[LineBase], plan: Iterable[LineBase]) -> list[LineBase]:
    """``lines`` with the plan before the first ``q`` line (at the end if there is none):
    the Worker reads the plan after what it works on and before what it answers."""
    plan = list(plan)
    for i, line in enumerate(lines):
        if line.tag == "q":
            return [*lines[:i], *plan, *lines[i:]]
    return [*lines, *plan]


def insert_prose_plan(text: str, plan: str, question: str) -> str:
    """The free-form brief ``text`` with ``plan`` (:func:`numbered_plan`) before its
    final ``Question: <question>`` line (:func:`~tersetalk.agents.roles.render_brief`
    ends with it), or at the end when it does not end so. Empty ``plan``: ``text``."""
    if not plan:
        return text
    last = f"Question: {question}"
    if text.endswith(last) and (len(text) == len(last) or text[-len(last) - 1] == "\n"):
        head = text[: -len(last)]
        return f"{head}{plan}\n{last}"
    return f"{text}\n{plan}"


def numbered_plan(steps: list[str], header: str = "Plan:") -> str:
    """The free-form plan: a header line (the prose router counts it as nothing, it ends
    with a colon) and ``1. step`` lines, which it counts as plan steps. Empty: no plan."""
    if not steps:
        return ""
    return "\n".join([header, *(f"{i}. {s}" for i, s in enumerate(steps, 1))])
