"""``hybrid``: per turn, TerseTalk or free-form + LLMLingua, whichever fits a token budget.

Every message the system sends passes one gate (the Manager's brief, its copy to
the Critic, re-injected ``M#`` text, the Worker's draft, the Critic's verdict, the
final answer):

1. estimate the TerseTalk message's tokens (cl100k); within ``budget`` (or with the
   gate off, ``gate: false``): send it;
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

The codec is the TerseTalk codec with a gate in front of every write, so reading
is TerseTalk's: the Critic's ``verdict_explicit`` is the Speaker's (False when a
verdict was defaulted), a ``revise`` verdict buys exactly one revise round (the star
topology), and the Speaker's counters (``compliance_*``, ``repairs_<kind>``,
``reply_truncated``, ``reply_dropped``) mean the same. ``msg_lines_*`` (by tag and direction, see
``message_line_counts``) count the lines of the messages sent in TerseTalk form
(routes ``tersetalk`` and ``overflow``); a message routed to LLMLingua is prose with
no lines, so it adds none and is counted in ``route_llmlingua`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tersetalk.agents.codecs.tersetalk import (
    TERSETALK_RATES,
    VERDICT_WORDS,
    TerseTalkCodec,
    TerseTalkSettings,
    touchpoint_models,
)
from tersetalk.agents.context import RunContext
from tersetalk.agents.engine import Dialogue, Sent
from tersetalk.agents.roles import participant
from tersetalk.core.tokens import count_tokens
from tersetalk.encoders.lingua import LinguaSettings, get_compressor
from tersetalk.encoders.messages import MessageView, compress_message, plan_message, project
from tersetalk.encoders.prepare import prepared_compressor_inputs
from tersetalk.protocol import (
    CapCounters,
    ContextLine,
    LineBase,
    Memory,
    PlanLine,
    QuestionLine,
    TextLine,
    VerdictLine,
    apply_caps,
    serialize,
)
from tersetalk.systems import Axis, register
from tersetalk.systems.lingua_brief import brief_view

ROUTES = ("tersetalk", "llmlingua", "overflow")
#: caps the overflow route starts from for the Worker's and Critic's lines
REPLY_CAPS = {"p": 20, "q": 30, "t": 30}


class HybridSettings(BaseModel):
    """The knobs of one ``hybrid`` variant (``systems.hybrid.variants.<name>``)."""

    model_config = ConfigDict(extra="forbid")

    #: tokens (cl100k) one message may take
    budget: int = Field(400, ge=1)
    #: false: the gate is off, every message is sent as TerseTalk (the budget is still
    #: logged and ``over_budget`` still counted against it, so the ablation shows what
    #: the gate would have changed)
    gate: bool = True
    #: the TerseTalk side: caps, summarizer, dereference, enforcement, touchpoints
    tersetalk: TerseTalkSettings = Field(default_factory=TerseTalkSettings)
    #: the LLMLingua side: model, rate (or target_tokens), ranking, forcing
    llmlingua: LinguaSettings = Field(default_factory=LinguaSettings)
    #: scales the projected compressed length (1.0: trust the target rate)
    projection_factor: float = Field(1.0, gt=0.0, le=3.0)
    #: the overflow route halves caps down to this many tokens
    min_cap: int = Field(4, ge=1)


@dataclass
class Routed:
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
    ) -> Routed:
        """Decide how one message travels; ``encode(caps)`` renders its TerseTalk form."""
        lines, memory, counters = encode(caps)
        text = serialize(lines)
        est = count_tokens(text)
        entry: dict[str, Any] = {
            "turn": len(self.log),
            "kind": kind,
            "budget": self.budget,
            "gate": self.settings.gate,
            "est_tt": est,
            "ff_tokens": None,
            "projection": None,
        }
        if est <= self.budget or not self.settings.gate:
            sent = Routed(text, "tersetalk", lines, memory, counters)
        else:
            opts = self.settings.llmlingua
            plan = plan_message(view, opts)
            projection = project(plan, opts, self.settings.projection_factor)
            entry.update(ff_tokens=plan.message_tokens, projection=projection)
            if projection <= self.budget:
                out = compress_message(view, get_compressor(self.ctx, opts), opts, self.ctx.task)
                self.lingua.append({"kind": kind, **out.counters})
                entry["lingua_rate"] = out.counters["lingua_rate"]
                sent = Routed(out.text, "llmlingua")
            elif overflowable:
                sent = self._overflow(encode, caps, entry)
            else:  # nothing left to overflow (e.g. the dereferenced text itself)
                sent = Routed(text, "tersetalk", lines, memory, counters)
        entry["route"] = sent.route
        entry["sent_tokens"] = count_tokens(sent.text)
        entry["over_budget"] = int(entry["sent_tokens"] > self.budget)
        self.log.append(entry)
        return sent

    def _overflow(self, encode, caps: dict[str, int], entry: dict[str, Any]) -> Routed:
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
        return Routed(
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
        out: dict[str, Any] = {
            "hybrid_budget": self.budget,
            "hybrid_gate": self.settings.gate,
            "turns": turns,
        }
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


class HybridCodec(TerseTalkCodec):
    """TerseTalk's codec with the gate in front of every message it writes."""

    settings: HybridSettings

    def __init__(self, ctx, settings, example, brief, conv) -> None:
        super().__init__(ctx, settings, example, brief, conv)
        self.gate = Gate(settings, ctx)

    def tersetalk_settings(self) -> TerseTalkSettings:
        return self.settings.tersetalk

    def write(self, kind: str, sender: str, receiver: str, content: Any) -> Sent:
        tts = self.tts
        if kind == "brief":

            def encode(caps: dict[str, int]):
                memory = Memory(max_entries=tts.memory_max_entries)  # fresh per encoding
                lines, counters = self.encode_brief(caps, memory)
                return lines, memory, counters

            routed = self.gate.route("brief", encode, tts.cap_dict(), brief_view(self.brief))
            # what was sent is what the Worker can dereference (a prose brief: nothing)
            self.memory = routed.memory or Memory(max_entries=tts.memory_max_entries)
            self.lines = routed.lines or []
            self.caps = routed.caps or CapCounters()
        elif kind == "deref":
            result = content
            view = MessageView(
                pieces=tuple(f"{ln.key}: {ln.value}" for ln in result.lines),
                question=self.brief.question,
            )
            memory = self.memory
            routed = self.gate.route(
                "deref", lambda caps: (result.lines, memory, None), {}, view, overflowable=False
            )
        else:
            lines = self.content_lines(kind, content)
            routed = self.gate.route(
                kind,
                _reply_encoder(lines, tts.memory_max_entries),
                dict(REPLY_CAPS),
                _reply_view(lines, self.brief.question),
            )
        return Sent(sender, receiver, kind, routed.text, content, meta=routed.route)

    def write_copy(self, sent: Sent, sender: str, receiver: str) -> Sent:
        kind = f"{sent.kind}_to_{participant(receiver).name}"
        if self.question_copy(sent, receiver):  # a message of its own, through the gate
            lines, question = self.critic_copy_lines(), self.brief.question
            routed = self.gate.route(
                kind,
                lambda caps: (lines, Memory(max_entries=1), None),
                {},
                MessageView(tail=(f"Question: {question}",), question=question),
                overflowable=False,
            )
            return Sent(sender, receiver, sent.kind, routed.text, sent.content, routed.route)
        self.gate.repeat(kind, Routed(sent.text, sent.meta))
        return super().write_copy(sent, sender, receiver)

    def counters(self, d: Dialogue) -> dict[str, Any]:
        return {**super().counters(d), **self.gate.counters()}


def budget_value(settings: HybridSettings) -> str:
    """x value of the budget ablation: the budget in tokens, or ``gate off``."""
    return str(settings.budget) if settings.gate else "gate off"


register(
    "hybrid",
    codec=HybridCodec,
    settings=HybridSettings,
    ablation={"budget": Axis(value=budget_value, label="token budget (cl100k)")},
    inputs=lambda s: prepared_compressor_inputs(
        [s.llmlingua.model, *touchpoint_models(s.tersetalk)]
    ),
    rates={
        **TERSETALK_RATES,
        # share of all turns routed each way (pooled over the run)
        "route_tersetalk_share": ("route_tersetalk", "turns"),
        "route_llmlingua_share": ("route_llmlingua", "turns"),
        "route_overflow_share": ("route_overflow", "turns"),
    },
)
