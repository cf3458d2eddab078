"""``hybrid``: per turn, TerseTalk or free-form + LLMLingua, whichever fits a token budget.

Every message the system sends passes one gate (the Manager's brief, its copy to
the Critic, re-injected ``M#`` text, the Worker's draft, the Critic's verdict, the
final answer):

1. estimate the TerseTalk message's tokens (cl100k); within ``budget``: send it;
2. otherwise project LLMLingua's length once, without running it (the kept parts
   plus the compressible part at the target rate, times ``projection_factor``);
   when the projection fits, send the free-form message compressed by LLMLingua;
3. otherwise send TerseTalk with overflow: caps are halved (down to ``min_cap``)
   until the message fits, the full texts going to memory behind ``M#`` ids. When
   nothing in the message can overflow (a long answer, re-injected ``M#`` text), it
   is sent as TerseTalk over the budget, and logged so (``over_budget``).

The Worker and the Critic always answer in TerseTalk's structured form (the gate
decides how their answers travel). Every decision is logged per turn in
``counters["route_log"]`` (route, budget, TerseTalk estimate, free-form tokens,
projection, tokens sent, caps used), and summed in numeric counters: ``turns``,
``route_tersetalk``/``route_llmlingua``/``route_overflow`` and their ``share_*``,
``over_budget_turns``, and the brief's own decision (``brief_route_*``,
``brief_est_tt``, ``brief_projection``). The three LLMLingua touchpoints of
TerseTalk are toggles in ``tersetalk`` (``lingua_payloads``, ``lingua_summaries``,
``lingua_deref``) and count as they do in the ``tersetalk`` system.

The rest follows the ``tersetalk`` system through its shared helpers: the Critic's
``verdict_explicit`` is the Speaker's (False when a verdict was defaulted), a
``revise`` verdict buys exactly one revise round (``revise_once``), and the
Speaker's counters (``compliance_*``, ``repairs_<kind>``, ``reply_truncated``,
``reply_dropped``) mean the same. ``msg_lines_*`` (by tag and direction, see
``message_line_counts``) count the lines of the messages sent in TerseTalk form
(routes ``tersetalk`` and ``overflow``); a message routed to LLMLingua is prose with
no lines, so it adds none and is counted in ``route_llmlingua`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tersetalk.agents.conversation import Conversation
from tersetalk.agents.roles import build_brief, extract_prediction
from tersetalk.encoders.lingua import LinguaSettings, get_compressor
from tersetalk.encoders.messages import MessageView, compress_message, plan_message, project
from tersetalk.encoders.touchpoints import Touchpoints
from tersetalk.protocol import (
    CapCounters,
    ContextLine,
    LineBase,
    Memory,
    PlanLine,
    QuestionLine,
    RoleLine,
    TextLine,
    VerdictLine,
    apply_caps,
    encode_brief,
    serialize,
)
from tersetalk.systems import register
from tersetalk.systems.base import RunContext, SystemResult
from tersetalk.systems.tersetalk_jsonl import (
    VERDICT_WORDS,
    Speaker,
    TerseTalkSettings,
    critic_lines,
    message_line_counts,
    revise_once,
    system_prompt,
    worker_lines,
    worker_turn,
)
from tersetalk.tokens import count_tokens

ROUTES = ("tersetalk", "llmlingua", "overflow")
#: caps the overflow route starts from for the Worker's and Critic's lines
REPLY_CAPS = {"p": 20, "q": 30, "t": 30}


class HybridSettings(BaseModel):
    """The knobs of one ``hybrid`` variant (``systems.hybrid.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    #: tokens (cl100k) one message may take
    budget: int = Field(400, ge=1)
    #: the TerseTalk side: caps, summarizer, dereference, enforcement, touchpoints
    tersetalk: TerseTalkSettings = Field(default_factory=TerseTalkSettings)
    #: the LLMLingua side: model, rate (or target_tokens), ranking, forcing
    llmlingua: LinguaSettings = Field(default_factory=LinguaSettings)
    #: scales the projected compressed length (1.0: trust the target rate)
    projection_factor: float = Field(1.0, gt=0.0, le=3.0)
    #: the overflow route halves caps down to this many tokens
    min_cap: int = Field(4, ge=1)


@dataclass
class Sent:
    """What the gate decided for one message."""

    text: str
    route: str
    lines: list[LineBase] | None = None
    memory: Memory | None = None
    caps: CapCounters | None = None


@dataclass
class Gate:
    """The per-turn decision, with its log."""

    settings: HybridSettings
    ctx: RunContext
    log: list[dict[str, Any]] = field(default_factory=list)
    lingua: list[dict[str, Any]] = field(default_factory=list)

    @property
    def budget(self) -> int:
        return self.settings.budget

    def route(
        self,
        kind: str,
        encode: Callable[[dict[str, int]], tuple[list[LineBase], Memory, CapCounters | None]],
        caps: dict[str, int],
        view: MessageView,
        *,
        overflowable: bool = True,
    ) -> Sent:
        """Decide how one message travels; ``encode(caps)`` renders its TerseTalk form."""
        lines, memory, counters = encode(caps)
        text = serialize(lines)
        est = count_tokens(text)
        entry: dict[str, Any] = {
            "turn": len(self.log),
            "kind": kind,
            "budget": self.budget,
            "est_tt": est,
            "ff_tokens": None,
            "projection": None,
        }
        if est <= self.budget:
            sent = Sent(text, "tersetalk", lines, memory, counters)
        else:
            opts = self.settings.llmlingua
            plan = plan_message(view, opts)
            projection = project(plan, opts, self.settings.projection_factor)
            entry.update(ff_tokens=plan.message_tokens, projection=projection)
            if projection <= self.budget:
                out = compress_message(view, get_compressor(self.ctx, opts), opts, self.ctx.task)
                self.lingua.append({"kind": kind, **out.counters})
                entry["lingua_rate"] = out.counters["lingua_rate"]
                sent = Sent(out.text, "llmlingua")
            elif overflowable:
                sent = self._overflow(encode, caps, entry)
            else:  # nothing left to overflow (e.g. the dereferenced text itself)
                sent = Sent(text, "tersetalk", lines, memory, counters)
        entry["route"] = sent.route
        entry["sent_tokens"] = count_tokens(sent.text)
        entry["over_budget"] = int(entry["sent_tokens"] > self.budget)
        self.log.append(entry)
        return sent

    def _overflow(self, encode, caps: dict[str, int], entry: dict[str, Any]) -> Sent:
        current = dict(caps)
        result = None
        while True:
            tighter = {t: max(self.settings.min_cap, c // 2) for t, c in current.items()}
            if tighter == current and result is not None:
                break  # the caps cannot shrink further: send the tightest encoding
            current = tighter
            result = encode(current)
            if count_tokens(serialize(result[0])) <= self.budget:
                break
        lines, memory, counters = result
        entry["caps"] = current
        # a message whose bulk is uncappable (e.g. a long answer) overflows nothing: it
        # is plain TerseTalk over the budget, and is logged as such
        overflowed = counters is not None and counters.overflow_lines > 0
        return Sent(
            serialize(lines), "overflow" if overflowed else "tersetalk", lines, memory, counters
        )

    def repeat(self, kind: str, sent: Sent) -> None:
        """Log a message sent again unchanged (the brief's copy to the Critic)."""
        tokens = count_tokens(sent.text)
        self.log.append(
            {
                "turn": len(self.log),
                "kind": kind,
                "budget": self.budget,
                "est_tt": None,
                "ff_tokens": None,
                "projection": None,
                "route": sent.route,
                "sent_tokens": tokens,
                "over_budget": int(tokens > self.budget),
                "repeat": 1,
            }
        )

    def counters(self) -> dict[str, Any]:
        turns = len(self.log)
        out: dict[str, Any] = {"hybrid_budget": self.budget, "turns": turns}
        for r in ROUTES:
            n = sum(e["route"] == r for e in self.log)
            out[f"route_{r}"] = n
            out[f"share_{r}"] = n / turns if turns else 0.0
        out["over_budget_turns"] = sum(e["over_budget"] for e in self.log)
        out["projected_turns"] = sum(e["projection"] is not None for e in self.log)
        brief = next((e for e in self.log if e["kind"] == "brief"), None)
        if brief is not None:
            for r in ROUTES:
                out[f"brief_route_{r}"] = int(brief["route"] == r)
            out["brief_est_tt"] = brief["est_tt"]
            out["brief_sent_tokens"] = brief["sent_tokens"]
            if brief["projection"] is not None:
                out["brief_ff_tokens"] = brief["ff_tokens"]
                out["brief_projection"] = brief["projection"]
        # lingua_* describe the brief's compression (when it was routed to LLMLingua),
        # so they compare with the llmlingua system's; other compressions are counted
        out["lingua_messages"] = len(self.lingua)
        out["t_lingua_s"] = sum(c["t_lingua_s"] for c in self.lingua)
        if self.lingua:
            for c in self.lingua:
                if c["kind"] == "brief":
                    out.update({k: v for k, v in c.items() if k not in ("kind", "t_lingua_s")})
            errors = [
                e["sent_tokens"] - e["projection"]
                for e in self.log
                if e["route"] == "llmlingua" and e["projection"] is not None
            ]
            if errors:
                out["projection_error_tokens"] = sum(errors) / len(errors)
        out["route_log"] = self.log
        return out


def _reply_encoder(lines: list[LineBase], max_entries: int):
    """TerseTalk form of a reply: uncapped normally, capped by the overflow route."""

    def encode(caps: dict[str, int]):
        memory = Memory(max_entries=max_entries)
        if not caps:
            return lines, memory, None
        res = apply_caps(lines, caps, memory=memory, count_tokens=count_tokens)
        return res.lines, memory, res.counters

    return encode


def _reply_view(lines: list[LineBase], question: str = "") -> MessageView:
    """A reply in free-form words: verdict and answer kept, plan steps and notes compressible."""
    head, pieces, tail = [], [], []
    for line in lines:
        if isinstance(line, VerdictLine):
            head.append(f"Verdict: {VERDICT_WORDS[line.verdict]}.")
        elif isinstance(line, PlanLine):
            pieces.append(line.text)
        elif isinstance(line, TextLine | QuestionLine):
            pieces.append(line.text)
        elif isinstance(line, ContextLine):
            tail.append(f"{line.key.capitalize()}: {line.value}")
    return MessageView(head=tuple(head), pieces=tuple(pieces), tail=tuple(tail), question=question)


@register("hybrid", settings=HybridSettings)
def run(example: dict, ctx: RunContext) -> SystemResult:
    settings = HybridSettings.model_validate(ctx.variant_settings)
    tts = settings.tersetalk
    brief = build_brief(ctx.task, example["record"], ctx.task_options)
    touch = Touchpoints.from_settings(tts, ctx, question=brief.question, task=ctx.task)
    summarizer = touch.summarizer(tts.summarizer)
    gate = Gate(settings, ctx)

    def encode_the_brief(caps: dict[str, int]):
        memory = Memory(max_entries=tts.memory_max_entries)  # fresh per encoding: no leaks
        lines, counters = encode_brief(
            brief.goal,
            brief.facts,
            brief.question,
            caps=caps,
            memory=memory,
            summarizer=summarizer,
            count_tokens=count_tokens,
            compress=touch.compress_hook,
        )
        return lines, memory, counters

    conv = Conversation(ctx.client)
    speaker = Speaker(conv, ctx, tts)
    typed: list[dict] = []  # the messages sent in TerseTalk form (their lines are counted)

    def post(sender: str, receiver: str, kind: str, sent: Sent) -> str:
        msg = conv.send(sender, receiver, kind, sent.text)
        if sent.route != "llmlingua":
            typed.append(msg)
        return sent.text

    sent_brief = gate.route("brief", encode_the_brief, tts.cap_dict(), MessageView.of_brief(brief))
    manager_msg = post("M", "W", "brief", sent_brief)
    memory = sent_brief.memory or Memory(max_entries=tts.memory_max_entries)
    lines = sent_brief.lines or []
    deref_counts = {"derefs": 0, "reinjected_tokens": 0, "missing": 0}

    def reinject(result) -> str | None:
        result = touch.compress_deref(result)
        deref_counts["derefs"] += result.derefs
        deref_counts["reinjected_tokens"] += result.reinjected_tokens
        deref_counts["missing"] += len(result.missing)
        if not result.lines:
            return None
        view = MessageView(
            pieces=tuple(f"{ln.key}: {ln.value}" for ln in result.lines), question=brief.question
        )
        sent = gate.route(
            "deref", lambda caps: (result.lines, memory, None), {}, view, overflowable=False
        )
        return post("M", "W", "deref", sent)

    reply, worker_msgs = worker_turn(speaker, ctx, tts, manager_msg, lines, memory, reinject)

    def send_reply(kind: str, sender: str, receiver: str, reply_lines: list[LineBase]) -> str:
        sent = gate.route(
            kind,
            _reply_encoder(reply_lines, tts.memory_max_entries),
            dict(REPLY_CAPS),
            _reply_view(reply_lines, brief.question),
        )
        return post(sender, receiver, kind, sent)

    draft_msg = send_reply("draft", "W", "C", worker_lines(reply))
    post("M", "C", "brief", sent_brief)
    gate.repeat("brief_to_critic", sent_brief)
    critic_msgs = [
        {"role": "system", "content": system_prompt("critic", ctx.task, tts.enforcement)},
        {"role": "user", "content": f"{manager_msg}\n{draft_msg}"},
    ]
    critique = speaker.reply("critic", critic_msgs, ctx.critic_gen)
    critique_msg = send_reply("verdict", "C", "W", critic_lines(critique))
    verdict_explicit = speaker.verdict_explicit
    reply, revisions = revise_once(
        speaker, ctx, critique, reply, worker_msgs, draft_msg, critique_msg
    )
    final_msg = send_reply(
        "final", "W", "M", [RoleLine(role="W"), ContextLine(key="answer", value=reply.answer)]
    )
    cap_counters = sent_brief.caps or CapCounters()
    counters = {
        # lines_* / overflow_* / compressed_* / density: the Manager's brief as capped
        **cap_counters.as_dict(),
        # msg_lines_*: every message sent in TerseTalk form (not those routed to LLMLingua)
        **message_line_counts(typed),
        **{f"deref_{k}": v for k, v in deref_counts.items()},
        # compliance_*, repairs, repairs_<kind>, reply_*, compliance_log
        **speaker.counters(),
        **memory.stats().as_dict(),
        **touch.counters(),
        **gate.counters(),
    }
    answer_text = (
        reply.answer
        if ctx.task == "hotpotqa"
        else "\n".join(reply.plan + [f"Answer: {reply.answer}"])
    )
    return SystemResult(
        prediction=extract_prediction(ctx.task, answer_text),
        raw_answer=final_msg,
        conversation=conv,
        verdict=VERDICT_WORDS[critique.verdict],
        verdict_explicit=verdict_explicit,
        revisions=revisions,
        counters=counters,
    )
