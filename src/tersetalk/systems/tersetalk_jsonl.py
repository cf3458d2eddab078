"""``tersetalk``: every message travels as TerseTalk-JSONL.

The Manager's brief becomes typed lines with soft caps (over-cap payloads are
summarised and their full text kept in a bounded memory behind ``M#`` ids). The
Worker and the Critic answer in lines too, produced under one of three
enforcement modes:

* ``schema``: Instructor + Pydantic with JSON-schema constrained decoding; the
  validated object is rendered to canonical lines;
* ``json``: the backend's JSON mode (no schema), then post-hoc normalisation;
* ``posthoc``: free generation, read by the lenient parser.

Every model call records whether its output was valid at the first try, valid
after retries, repaired by the lenient parser, or a fallback to raw text.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from tersetalk.agents.conversation import Conversation
from tersetalk.agents.roles import build_brief, extract_prediction
from tersetalk.encoders.lingua import LinguaSettings
from tersetalk.encoders.touchpoints import Touchpoints
from tersetalk.models import GenerationConfig, ModelCallError
from tersetalk.protocol import (
    ContextLine,
    DeltaLine,
    LineBase,
    Memory,
    PlanLine,
    QuestionLine,
    RoleLine,
    TextLine,
    VerdictLine,
    dereference,
    encode_brief,
    parse_lenient,
    requested_refs,
    serialize,
)
from tersetalk.systems import register
from tersetalk.systems.base import RunContext, SystemResult
from tersetalk.tokens import count_tokens

CAP_SETS = {
    "aggressive": {"f": 20, "p": 15, "q": 20},
    "baseline": {"f": 30, "p": 20, "q": 30},
    "relaxed": {"f": 50, "p": 40, "q": 50},
    "very_relaxed": {"f": 100, "p": 80, "q": 100},
}


class TerseTalkSettings(BaseModel):
    """The knobs of one ``tersetalk`` variant (``systems.tersetalk.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    caps: Literal["aggressive", "baseline", "relaxed", "very_relaxed"] | dict[str, int] = "baseline"
    summarizer: Literal["extractive", "truncation"] = "extractive"
    deref: Literal["always", "conditional", "never"] = "conditional"
    enforcement: Literal["schema", "json", "posthoc"] = "schema"
    memory_max_entries: int = Field(10_000, ge=1)
    # LLMLingua touchpoints (tersetalk.encoders.touchpoints), each off by default:
    #: compress an over-cap f/p/q payload with LLMLingua before it overflows
    lingua_payloads: bool = False
    #: overflow summaries written by LLMLingua (the "llmlingua" summarizer slot)
    lingua_summaries: bool = False
    #: compress dereferenced M# text before it is re-injected
    lingua_deref: bool = False
    #: the compressor for the touchpoints; null = LLMLingua defaults (embedded model)
    lingua: LinguaSettings | None = None

    def cap_dict(self) -> dict[str, int]:
        return dict(CAP_SETS[self.caps]) if isinstance(self.caps, str) else dict(self.caps)


# Length bounds keep a grammar-constrained reply inside the generation budget: a reply
# cut off by max_tokens is invalid JSON however good the grammar (worst case here is
# about 3 x 100 + 100 characters, roughly 130 tokens, under the 160-token Worker budget;
# the Critic's 80-character note stays under its 64 tokens).
Step = Annotated[str, StringConstraints(max_length=100)]
Ref = Annotated[str, StringConstraints(pattern=r"^M#[0-9]+$")]


class WorkerReply(BaseModel):
    """What the Worker produces; rendered to ``r``/``p``/``d``/``x answer`` lines."""

    plan: list[Step] = Field(default_factory=list, max_length=3)
    need: list[Ref] = Field(default_factory=list, max_length=2)
    answer: Annotated[str, StringConstraints(min_length=1, max_length=100)]


class CriticReply(BaseModel):
    """What the Critic produces; rendered to ``r``/``v`` and a ``q`` or ``t`` line."""

    verdict: Literal["A", "R", "E"]
    note: Annotated[str, StringConstraints(max_length=80)] = ""


FORMAT_NOTE = (
    "Messages are TerseTalk-JSONL: one JSON array per line. Tags: r role (M manager, "
    "W worker, C critic), g goal, f fact, q question, o overflow summary whose full text "
    "is at the M# id, x key/value, p plan step, v verdict (A accept, R revise, E escalate)."
)
ANSWER_NOTE = {
    "hotpotqa": "The answer is a few words copied from the facts, or yes/no. Plan may be empty.",
    "gsm8k": "Plan holds up to 3 short calculation steps; the answer is the final number only.",
}
SCHEMA_REPLY = {
    "worker": "Reply with a JSON object: plan (list of steps), need (M# ids whose full text "
    "you need; usually empty), answer.",
    "critic": "Reply with a JSON object: verdict (A, R or E) and a short note.",
}
LINES_REPLY = {
    "worker": 'Reply only with JSONL lines: ["r","W"], optional ["p","step"] lines, and '
    '["x","answer","<answer>"].',
    "critic": 'Reply only with JSONL lines: ["r","C"], ["v","A" or "R" or "E"], and '
    '["t","<short note>"].',
}
ROLE_INTRO = {
    "worker": "You are the Worker. The Manager sends you a task. ",
    "critic": "You are the Critic. Check the Worker's answer against the Manager's task. ",
}


def system_prompt(role: str, task: str, enforcement: str) -> str:
    reply = SCHEMA_REPLY[role] if enforcement in ("schema", "json") else LINES_REPLY[role]
    extra = ANSWER_NOTE[task] if role == "worker" else ""
    return f"{ROLE_INTRO[role]}{FORMAT_NOTE} {reply} {extra}".strip()


def worker_lines(reply: WorkerReply) -> list[LineBase]:
    lines: list[LineBase] = [RoleLine(role="W")]
    lines += [PlanLine(text=s) for s in reply.plan if s.strip()]
    lines += [DeltaLine(ref=r) for r in reply.need]
    lines.append(ContextLine(key="answer", value=reply.answer))
    return lines


def critic_lines(reply: CriticReply) -> list[LineBase]:
    lines: list[LineBase] = [RoleLine(role="C"), VerdictLine(verdict=reply.verdict)]
    if reply.note.strip():
        lines.append(
            QuestionLine(to="W", text=reply.note)
            if reply.verdict == "R"
            else TextLine(text=reply.note)
        )
    return lines


def _from_lines(role: str, lines: list[LineBase], raw: str) -> WorkerReply | CriticReply | None:
    """Rebuild a reply from leniently parsed lines; None when nothing usable is there."""
    if role == "worker":
        answer = next(
            (
                ln.value
                for ln in lines
                if isinstance(ln, ContextLine) and ln.key.lower() == "answer"
            ),
            None,
        )
        if answer is None or not answer.strip():
            return None
        plan = [ln.text for ln in lines if isinstance(ln, PlanLine)][:3]
        need = [ln.ref for ln in lines if isinstance(ln, DeltaLine)][:2]
        return WorkerReply(plan=[p[:100] for p in plan], need=need, answer=answer[:100])
    verdict = next((ln.verdict for ln in lines if isinstance(ln, VerdictLine)), None)
    if verdict is None:
        return None
    note = " ".join(ln.text for ln in lines if isinstance(ln, TextLine | QuestionLine))
    return CriticReply(verdict=verdict, note=note[:80])


def _fallback(role: str, raw: str) -> WorkerReply | CriticReply:
    """Raw text when no structure could be read: the answer is the text itself."""
    if role == "worker":
        return WorkerReply(answer=(raw.strip() or "(empty)")[:100])
    from tersetalk.agents.roles import parse_verdict

    verdict, _ = parse_verdict(raw)
    return CriticReply(
        verdict={"accept": "A", "revise": "R", "escalate": "E"}[verdict], note=raw.strip()[:80]
    )


class Speaker:
    """Produces one role's replies under the variant's enforcement mode, and tallies compliance."""

    def __init__(self, conv: Conversation, ctx: RunContext, settings: TerseTalkSettings):
        self.conv, self.ctx, self.settings = conv, ctx, settings
        self.compliance: dict[str, int] = {
            "calls": 0,
            "first_try": 0,
            "after_retries": 0,
            "repaired": 0,
            "fallback": 0,
        }
        self.repairs = 0
        self.log: list[dict] = []

    def _note(self, role: str, outcome: str) -> None:
        self.compliance["calls"] += 1
        self.compliance[outcome] += 1
        self.log.append({"role": role, "outcome": outcome})

    def reply(self, role: str, messages: list[dict], gen: GenerationConfig):
        schema = WorkerReply if role == "worker" else CriticReply
        mode = self.settings.enforcement
        fell_back = False
        if mode == "schema":
            try:
                res = self.conv.ask_structured(role, messages, schema, gen)
                self._note(role, "first_try" if res.attempts == 1 else "after_retries")
                return schema.model_validate(res.parsed)
            except ModelCallError:
                fell_back = True  # free generation, read leniently: counted as a fallback
                mode = "posthoc"
                messages = [
                    {"role": "system", "content": system_prompt(role, self.ctx.task, "posthoc")}
                ] + messages[1:]
        if mode == "json":
            gen = dataclasses.replace(gen, json_mode=True)
        raw = self.conv.ask(role, messages, gen)
        if mode == "json":
            try:
                obj = schema.model_validate_json(raw)
                self._note(role, "first_try")
                return obj
            except ValidationError:
                pass
        parsed = parse_lenient(raw)
        self.repairs += parsed.repairs_total
        rebuilt = _from_lines(role, parsed.lines, raw)
        if rebuilt is None and mode == "json":
            rebuilt = _from_json_object(schema, raw)
        if rebuilt is not None and not fell_back:
            self._note(role, "first_try" if parsed.clean and mode == "posthoc" else "repaired")
            return rebuilt
        self._note(role, "fallback")
        if rebuilt is not None:
            return rebuilt
        return _fallback(role, raw)


def _from_json_object(schema, raw: str):
    """JSON mode's post-hoc normalisation: pick the known fields out of any object."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    lowered = {str(k).lower(): v for k, v in obj.items()}
    try:
        if schema is WorkerReply:
            answer = lowered.get("answer") or lowered.get("final") or lowered.get("result")
            if answer is None:
                return None
            plan = lowered.get("plan") or lowered.get("steps") or []
            plan = [str(p)[:100] for p in plan][:3] if isinstance(plan, list) else [str(plan)[:100]]
            return WorkerReply(plan=plan, answer=str(answer)[:100] or "(empty)")
        verdict = str(lowered.get("verdict", "")).strip().upper()[:1]
        if verdict not in ("A", "R", "E"):
            return None
        return CriticReply(verdict=verdict, note=str(lowered.get("note", ""))[:80])
    except ValidationError:
        return None


def worker_turn(speaker, ctx, settings, manager_msg, lines, memory, reinject):
    """The Worker's reply to the brief, with ``M#`` text re-injected as the policy says.

    ``always``: the referenced text goes with the brief. ``conditional``: only when
    the Worker's reply asks for ids, and then the Worker answers again. ``reinject``
    sends the dereferenced lines and returns their text (or None when there are none).
    Returns the reply and the Worker's conversation so far (for a revision).
    """
    worker_input = manager_msg
    if settings.deref == "always" and lines:
        extra = reinject(dereference(lines, memory, "always", count_tokens=count_tokens))
        if extra:
            worker_input = manager_msg + "\n" + extra
    worker_msgs = [
        {"role": "system", "content": system_prompt("worker", ctx.task, settings.enforcement)},
        {"role": "user", "content": worker_input},
    ]
    reply = speaker.reply("worker", worker_msgs, ctx.gen)
    if settings.deref == "conditional":
        asked = worker_lines(reply)
        if requested_refs(asked):
            extra = reinject(
                dereference(lines, memory, "conditional", requests=asked, count_tokens=count_tokens)
            )
            if extra:
                worker_msgs = worker_msgs + [
                    {"role": "assistant", "content": serialize(asked)},
                    {"role": "user", "content": extra},
                ]
                reply = speaker.reply("worker", worker_msgs, ctx.gen)
    return reply, worker_msgs


@register("tersetalk", settings=TerseTalkSettings)
def run(example: dict, ctx: RunContext) -> SystemResult:
    settings = TerseTalkSettings.model_validate(ctx.variant_settings)
    brief = build_brief(ctx.task, example["record"], ctx.task_options)
    memory = Memory(max_entries=settings.memory_max_entries)  # fresh per example: no leaks
    touch = Touchpoints.from_settings(settings, ctx, question=brief.question, task=ctx.task)
    lines, cap_counters = encode_brief(
        brief.goal,
        brief.facts,
        brief.question,
        caps=settings.cap_dict(),
        memory=memory,
        summarizer=touch.summarizer(settings.summarizer),
        count_tokens=count_tokens,
        compress=touch.compress_hook,
    )
    conv = Conversation(ctx.client)
    speaker = Speaker(conv, ctx, settings)
    manager_msg = serialize(lines)
    conv.send("M", "W", "brief", manager_msg)
    deref_counts = {"derefs": 0, "reinjected_tokens": 0, "missing": 0}

    def reinject(result) -> str | None:
        result = touch.compress_deref(result)
        deref_counts["derefs"] += result.derefs
        deref_counts["reinjected_tokens"] += result.reinjected_tokens
        deref_counts["missing"] += len(result.missing)
        if not result.lines:
            return None
        text = serialize(result.lines)
        conv.send("M", "W", "deref", text)
        return text

    reply, worker_msgs = worker_turn(speaker, ctx, settings, manager_msg, lines, memory, reinject)
    draft_msg = serialize(worker_lines(reply))
    conv.send("W", "C", "draft", draft_msg)
    conv.send("M", "C", "brief", manager_msg)
    critic_msgs = [
        {"role": "system", "content": system_prompt("critic", ctx.task, settings.enforcement)},
        {"role": "user", "content": f"{manager_msg}\n{draft_msg}"},
    ]
    critique = speaker.reply("critic", critic_msgs, ctx.critic_gen)
    critique_msg = serialize(critic_lines(critique))
    conv.send("C", "W", "verdict", critique_msg)
    revisions = 0
    while critique.verdict == "R" and revisions < ctx.max_revisions:
        revisions += 1
        worker_msgs = worker_msgs + [
            {"role": "assistant", "content": draft_msg},
            {"role": "user", "content": critique_msg},
        ]
        reply = speaker.reply("worker", worker_msgs, ctx.gen)
    final_msg = serialize([RoleLine(role="W"), ContextLine(key="answer", value=reply.answer)])
    conv.send("W", "M", "final", final_msg)
    stats = memory.stats()
    counters = {
        **cap_counters.as_dict(),
        **{f"deref_{k}": v for k, v in deref_counts.items()},
        **{f"compliance_{k}": v for k, v in speaker.compliance.items()},
        "repairs": speaker.repairs,
        **stats.as_dict(),
        **touch.counters(),
        "compliance_log": speaker.log,
    }
    answer_text = (
        reply.answer
        if ctx.task == "hotpotqa"
        else "\n".join(reply.plan + [f"Answer: {reply.answer}"])
    )
    verdict = {"A": "accept", "R": "revise", "E": "escalate"}[critique.verdict]
    return SystemResult(
        prediction=extract_prediction(ctx.task, answer_text),
        raw_answer=final_msg,
        conversation=conv,
        verdict=verdict,
        verdict_explicit=True,
        revisions=revisions,
        counters=counters,
    )
