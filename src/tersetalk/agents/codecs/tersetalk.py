"""TerseTalk-JSONL as a codec: typed single-letter lines, soft caps, ``M#`` overflow.

The Manager's brief becomes typed lines with soft caps (over-cap payloads are
summarised and their full text kept in a bounded memory behind ``M#`` ids). The
Worker and the Critic answer in lines too, produced under one of three
enforcement modes:

* ``schema``: Instructor + Pydantic with JSON-schema constrained decoding; the
  validated object is rendered to canonical lines;
* ``json``: the backend's JSON mode (no schema), then post-hoc normalisation;
* ``posthoc``: free generation, read by the lenient parser.

Every model call records whether its output was valid at the first try, valid
after retries, repaired by the lenient parser, or a fallback to raw text. Nothing
is changed silently: every lenient repair is counted by kind (``repairs_<kind>``),
every reply field cut to its schema bound (``reply_truncated``) and every item
dropped past a list bound (``reply_dropped``) is counted, and the lines of every
message sent are counted by tag and by direction (``msg_lines_*``).

The Worker's turn dereferences ``M#`` pointers as the variant's policy says
(``always``: the referenced text goes with the brief; ``conditional``: only when the
Worker's reply asks for ids, and then it answers again; ``never``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from tersetalk.agents.context import RunContext
from tersetalk.agents.conversation import Conversation
from tersetalk.agents.engine import Codec, Dialogue, Sent
from tersetalk.agents.roles import Brief, Participant, extract_prediction, participant
from tersetalk.core.tokens import count_tokens
from tersetalk.encoders.lingua import LinguaSettings
from tersetalk.encoders.touchpoints import Touchpoints
from tersetalk.models import GenerationConfig, StructuredOutputError
from tersetalk.protocol import (
    REPAIR_KINDS,
    TAGS,
    CapCounters,
    ContextLine,
    DeltaLine,
    DerefResult,
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
    validate_caps,
)
from tersetalk.protocol.tags import VERDICT_NAMES
from tersetalk.tasks.base import Answer
from tersetalk.tasks.registry import get as get_task

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
    #: max_tokens of the Worker's constrained (schema / json) replies; null: the
    #: config's generation.max_tokens. A JSON reply cut off by max_tokens is invalid
    #: however good the grammar, and the grammar lets the model spend tokens on
    #: whitespace between fields, so the budget leaves room above the largest
    #: schema-valid reply (about 130 tokens); the reply ends when its JSON closes.
    structured_max_tokens: int | None = Field(256, ge=1)
    # LLMLingua touchpoints (tersetalk.encoders.touchpoints), each off by default:
    #: compress an over-cap f/p/q payload with LLMLingua before it overflows
    lingua_payloads: bool = False
    #: overflow summaries written by LLMLingua (the "llmlingua" summarizer slot)
    lingua_summaries: bool = False
    #: compress dereferenced M# text before it is re-injected
    lingua_deref: bool = False
    #: the compressor for the touchpoints; null = LLMLingua defaults (embedded model)
    lingua: LinguaSettings | None = None
    # What every message need not repeat (each a switch with its own ablation):
    #: ``r`` lines naming the sender in the brief and in the replies on the wire (the
    #: transport already says who sent a message)
    role_lines: bool = False
    #: the brief's ``g`` line: the task's goal, the same for every example and stated
    #: in the Worker's system prompt
    goal_line: bool = False
    #: HotpotQA facts are "Title: sentence"; ``dedup`` drops the title when every word
    #: of it (a parenthetical aside aside) occurs in the sentence, ``paragraph`` also
    #: says it once per run of consecutive facts from the same paragraph (the later
    #: sentences continue the first, as on the page), ``keep`` sends every title
    fact_titles: Literal["keep", "dedup", "paragraph"] = "paragraph"
    #: how ``dedup``/``paragraph`` decide that a sentence names its title: ``exact``
    #: words, or ``loose``: accents folded ("Grinde" names "Grindé"), a word of 3+
    #: letters may be the start of the sentence's ("Chris" names "Christopher"), a
    #: legal-form suffix ("Co.", "Inc.") need not recur, and HTML entities in the title
    #: are decoded ("X&amp;Y" is sent as "X&Y")
    title_names: Literal["exact", "loose"] = "loose"
    #: double quotes inside the brief's payloads: ``json`` escapes them (``\"``, often a
    #: token of its own), ``single`` writes them as ``'`` (no escape needed)
    quotes: Literal["json", "single"] = "single"
    #: the brief question's final ``?``: ``keep`` it, or ``tag``: leave it to the ``q``
    #: tag, which already says the line is a question (a ``?`` inside the text stays)
    question_mark: Literal["keep", "tag"] = "tag"
    #: what Wikipedia markup left in HotpotQA's sentences when pronunciations were
    #: stripped: ``keep`` it, or ``strip`` it: an aside with nothing but spaces,
    #: ``;``, ``,`` or ``]`` in it (``McLean ( ) is``) goes, an aside's leading residue
    #: (``( ; June 18, 1942``) goes, runs of spaces become one. Only punctuation and
    #: spaces are removed, so the normalised text (answer and fact checks) is unchanged
    residue: Literal["keep", "strip"] = "strip"
    #: facts one ``f`` line each (``each``), or consecutive facts that fit their caps
    #: merged into one ``f`` line (``merged``: the line syntax is paid once, not per fact)
    fact_lines: Literal["each", "merged"] = "merged"
    #: what the Manager sends the Critic: the whole brief again (``full``) or only the
    #: question the answer must fit (``question``; the facts went to the Worker)
    critic_copy: Literal["full", "question"] = "question"
    #: the Critic's note on the wire: ``always``, or only with a ``revise`` verdict
    #: (``on_revise``: the feedback the Worker revises with; an accepting note mostly
    #: echoes the Worker's answer back to it)
    critic_note: Literal["always", "on_revise"] = "on_revise"

    @field_validator("caps", mode="before")
    @classmethod
    def _known_tags_and_sizes(cls, caps: object) -> object:
        # a bad custom cap must stop the run at startup, not fail every example later
        if isinstance(caps, dict):
            validate_caps(caps)  # CapConfigError (a ValueError) names the tag and the fix
        return caps

    def cap_dict(self) -> dict[str, int]:
        return dict(CAP_SETS[self.caps]) if isinstance(self.caps, str) else dict(self.caps)


# Length bounds keep a grammar-constrained reply inside the generation budget: a reply
# cut off by max_tokens is invalid JSON however good the grammar (worst case here is
# about 3 x 100 + 100 characters, roughly 130 tokens, under the Worker's
# structured_max_tokens; the Critic's 80-character note stays under its 64 tokens).
MAX_TEXT, MAX_NOTE, MAX_PLAN, MAX_NEED = 100, 80, 3, 2
Step = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
# at most 6 digits: without a bound the grammar lets a small model loop on digits
# ("M#1000000...") until max_tokens cuts the reply off (seen on the embedded model)
Ref = Annotated[str, StringConstraints(pattern=r"^M#[0-9]{1,6}$")]


class WorkerReply(BaseModel):
    """What the Worker produces; rendered to ``r``/``p``/``d``/``x answer`` lines."""

    plan: list[Step] = Field(default_factory=list, max_length=MAX_PLAN)
    need: list[Ref] = Field(default_factory=list, max_length=MAX_NEED)
    answer: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)]


class CriticReply(BaseModel):
    """What the Critic produces; rendered to ``r``/``v`` and a ``q`` or ``t`` line."""

    verdict: Literal["A", "R", "E"]
    note: Annotated[str, StringConstraints(max_length=MAX_NOTE)] = ""


#: a Critic reply's one-letter verdict in the record's words (the protocol's table)
VERDICT_WORDS = VERDICT_NAMES

FORMAT_NOTE = (
    "Messages are TerseTalk-JSONL: one JSON array per line. Tags: r role (M manager, "
    "W worker, C critic), g goal, f fact, q question, o overflow summary whose full text "
    "is at the M# id, x key/value, p plan step, v verdict (A accept, R revise, E escalate)."
)
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


#: answers picked or copied from the brief: the Worker is told its plan may be empty
NO_STEPS = ("span", "yes/no", "choice")
#: a number is worked out: the Worker's plan holds the steps
NUMBER_NOTE = "Plan holds up to 3 short calculation steps; the answer is the final number only."


def answer_note(answer: Answer) -> str:
    """What the TerseTalk Worker's prompt says of the answer and its plan, from the
    task's declared :class:`~tersetalk.tasks.base.Answer`."""
    if answer.kind == "number":
        return NUMBER_NOTE
    note = f"The answer is {answer.form}."
    return f"{note} Plan may be empty." if answer.kind in NO_STEPS else note


def reads_plan(answer: Answer) -> bool:
    """Whether the Worker's plan lines are read with its answer: not for a span, whose
    words a plan would add to (an exact match counts every word)."""
    return answer.kind != "span"


def system_prompt(role: str, task: str, enforcement: str) -> str:
    reply = SCHEMA_REPLY[role] if enforcement in ("schema", "json") else LINES_REPLY[role]
    extra = answer_note(get_task(task).answer) if role == "worker" else ""
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


class Changes(Counter):
    """What rebuilding a reply changed: ``truncated`` fields and ``dropped`` items."""

    def cut(self, text: str, limit: int) -> str:
        """``text`` within ``limit`` characters; a cut is counted as ``truncated``."""
        if len(text) > limit:
            self["truncated"] += 1
            return text[:limit]
        return text

    def keep(self, items: list, limit: int) -> list:
        """The first ``limit`` items; the rest are counted as ``dropped``."""
        self["dropped"] += max(0, len(items) - limit)
        return items[:limit]


def _from_lines(
    role: str, lines: list[LineBase], raw: str, changes: Changes | None = None
) -> WorkerReply | CriticReply | None:
    """Rebuild a reply from leniently parsed lines; None when nothing usable is there.

    Fields over the reply's bounds are cut and extra items dropped, each counted in
    ``changes`` (extra ``answer`` or ``v`` lines past the first count as dropped).
    """
    changes = Changes() if changes is None else changes
    if role == "worker":
        answers = [
            ln.value for ln in lines if isinstance(ln, ContextLine) and ln.key.lower() == "answer"
        ]
        if not answers or not answers[0].strip():
            return None
        answer = changes.keep(answers, 1)[0]
        plan = changes.keep([ln.text for ln in lines if isinstance(ln, PlanLine)], MAX_PLAN)
        need = changes.keep([ln.ref for ln in lines if isinstance(ln, DeltaLine)], MAX_NEED)
        return WorkerReply(
            plan=[changes.cut(p, MAX_TEXT) for p in plan],
            need=need,
            answer=changes.cut(answer, MAX_TEXT),
        )
    verdicts = [ln.verdict for ln in lines if isinstance(ln, VerdictLine)]
    if not verdicts:
        return None
    verdict = changes.keep(verdicts, 1)[0]
    note = " ".join(ln.text for ln in lines if isinstance(ln, TextLine | QuestionLine))
    return CriticReply(verdict=verdict, note=changes.cut(note, MAX_NOTE))


def _fallback(
    role: str, raw: str, changes: Changes | None = None
) -> tuple[WorkerReply | CriticReply, bool]:
    """Raw text when no structure could be read: the answer is the text itself.

    Returns the reply and whether a Critic's verdict was stated (a verdict the text
    never states defaults to accept, and the record must say so).
    """
    changes = Changes() if changes is None else changes
    if role == "worker":
        return WorkerReply(answer=changes.cut(raw.strip() or "(empty)", MAX_TEXT)), True
    from tersetalk.agents.roles import parse_verdict

    verdict, explicit = parse_verdict(raw)
    return CriticReply(
        verdict={word: letter for letter, word in VERDICT_NAMES.items()}[verdict],
        note=changes.cut(raw.strip(), MAX_NOTE),
    ), explicit


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
        #: lenient repairs by kind (every kind of REPAIR_KINDS, zero if unused)
        self.repair_kinds: dict[str, int] = dict.fromkeys(REPAIR_KINDS, 0)
        #: reply fields cut to their bounds and list items dropped past them
        self.changes = Changes(truncated=0, dropped=0)
        #: whether the last Critic reply stated its verdict (False: defaulted to accept)
        self.verdict_explicit = True
        self.log: list[dict] = []

    def counters(self) -> dict:
        """Compliance, repairs by kind, reply changes and the per-call log, as counters.

        Shared by every system that speaks through a Speaker, so the names
        (``compliance_*``, ``repairs``, ``repairs_<kind>``, ``reply_truncated``,
        ``reply_dropped``, ``compliance_log``) mean the same in each.
        """
        return {
            **{f"compliance_{k}": v for k, v in self.compliance.items()},
            "repairs": self.repairs,
            **{f"repairs_{k}": v for k, v in self.repair_kinds.items()},
            **{f"reply_{k}": v for k, v in self.changes.items()},
            "compliance_log": self.log,
        }

    def _note(self, role: str, outcome: str) -> None:
        self.compliance["calls"] += 1
        self.compliance[outcome] += 1
        self.log.append({"role": role, "outcome": outcome})

    def reply(self, role: str, messages: list[dict], gen: GenerationConfig):
        if role == "critic":
            self.verdict_explicit = True  # every path but the raw-text fallback reads a verdict
        schema = WorkerReply if role == "worker" else CriticReply
        mode = self.settings.enforcement
        fell_back = False
        free_gen = gen  # the budget of free generation, should the constrained call fail
        if role == "worker" and mode in ("schema", "json") and self.settings.structured_max_tokens:
            gen = dataclasses.replace(gen, max_tokens=self.settings.structured_max_tokens)
        if mode == "schema":
            try:
                res = self.conv.ask_structured(role, messages, schema, gen)
                self._note(role, "first_try" if res.attempts == 1 else "after_retries")
                return schema.model_validate(res.parsed)
            except StructuredOutputError:  # the answer failed; a server fault propagates
                fell_back = True  # free generation, read leniently: counted as a fallback
                mode = "posthoc"
                gen = free_gen
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
        for kind, n in parsed.repairs.items():
            self.repair_kinds[kind] = self.repair_kinds.get(kind, 0) + n
        # changes are tallied per attempt and kept only for the reply actually used
        changes = Changes()
        rebuilt = _from_lines(role, parsed.lines, raw, changes)
        if rebuilt is None and mode == "json":
            changes = Changes()
            rebuilt = _from_json_object(schema, raw, changes)
        if rebuilt is None:
            changes = Changes()
            rebuilt, explicit = _fallback(role, raw, changes)
            if role == "critic":
                self.verdict_explicit = explicit
            self._note(role, "fallback")
        elif fell_back:
            self._note(role, "fallback")
        else:
            self._note(role, "first_try" if parsed.clean and mode == "posthoc" else "repaired")
        self.changes.update(changes)
        return rebuilt


def _from_json_object(schema, raw: str, changes: Changes | None = None):
    """JSON mode's post-hoc normalisation: pick the known fields out of any object.

    Cuts and drops past the reply's bounds are counted in ``changes``; ``need``
    entries that are not ``M#`` ids are dropped (and counted) too.
    """
    changes = Changes() if changes is None else changes
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
            plan = plan if isinstance(plan, list) else [plan]
            plan = [changes.cut(str(p), MAX_TEXT) for p in changes.keep(plan, MAX_PLAN)]
            need = lowered.get("need") or []
            need = need if isinstance(need, list) else [need]
            refs = [str(r).strip() for r in need if _REF_RE.match(str(r).strip())]
            changes["dropped"] += len(need) - len(refs)
            return WorkerReply(
                plan=plan,
                need=changes.keep(refs, MAX_NEED),
                answer=changes.cut(str(answer), MAX_TEXT) or "(empty)",
            )
        verdict = str(lowered.get("verdict", "")).strip().upper()[:1]
        if verdict not in ("A", "R", "E"):
            return None
        return CriticReply(
            verdict=verdict, note=changes.cut(str(lowered.get("note", "")), MAX_NOTE)
        )
    except ValidationError:
        return None


_REF_RE = re.compile(r"^M#[0-9]{1,6}$")


def message_line_counts(messages: list[dict], directions: tuple[str, ...]) -> dict[str, int]:
    """Lines of every message sent, by tag (``msg_lines_<tag>``) and direction.

    Directions are ``msg_lines_<sender>_<receiver>`` for the topology's ``directions``
    (plus any other edge that carried lines); keys are stable (zero when unused).
    Messages are canonical lines here, so the lenient parser reads them exactly (and
    never raises on anything else); a caller whose messages may be prose (the hybrid's
    LLMLingua route) passes only the messages sent as lines.
    """
    by_tag: Counter[str] = Counter()
    by_dir: Counter[str] = Counter()
    for msg in messages:
        lines = parse_lenient(msg["content"]).lines
        by_tag.update(ln.tag for ln in lines)
        by_dir[f"{msg['sender']}_{msg['receiver']}"] += len(lines)
    out = {"msg_lines_total": sum(by_tag.values())}
    out |= {f"msg_lines_{tag}": by_tag.get(tag, 0) for tag in TAGS}
    out |= {f"msg_lines_{d}": by_dir.get(d, 0) for d in (*directions, *by_dir)}
    return out


#: pooled rates of the codec's counters: (numerator, denominator) summed over a run
TERSETALK_RATES = {
    "overflow_rate": ("overflow_total", "lines_total"),
    "compressed_rate": ("compressed_total", "lines_total"),
    "compliance_first_try_rate": ("compliance_first_try", "compliance_calls"),
    "compliance_after_retries_rate": ("compliance_after_retries", "compliance_calls"),
    "compliance_repaired_rate": ("compliance_repaired", "compliance_calls"),
    "compliance_fallback_rate": ("compliance_fallback", "compliance_calls"),
}


def touchpoint_models(settings: TerseTalkSettings) -> list[str]:
    """The LLMLingua compressor models a variant's touchpoints may load (none when off)."""
    if settings.lingua_payloads or settings.lingua_summaries or settings.lingua_deref:
        return [(settings.lingua or LinguaSettings()).model]
    return []


def tag_question_mark(text: str) -> str:
    """``text`` without its final ``?``: on a ``q`` line the tag says it is a question.

    Only a last ``?`` after the text goes ("Who won?" is sent as "Who won"); a text
    that is nothing but question marks is kept as it is.
    """
    stripped = text.rstrip()
    if stripped.endswith("?") and stripped[:-1].strip():
        return stripped[:-1].rstrip()
    return text


def single_quotes(text: str) -> str:
    """Double quotes as single ones: a JSON string must escape ``"`` and ``'`` it need not."""
    return text.replace('"', "'")


def answer_lines(reply: WorkerReply) -> list[LineBase]:
    """The final message: the Worker's role line and its answer."""
    return [RoleLine(role="W"), ContextLine(key="answer", value=reply.answer)]


class TerseTalkCodec(Codec):
    """TerseTalk-JSONL on the wire; replies produced under the variant's enforcement.

    The brief is encoded with the variant's caps into a fresh per-example memory;
    the Worker's turn dereferences ``M#`` ids as the ``deref`` policy says; replies go
    through a :class:`Speaker`. Subclasses (the hybrid) override :meth:`encode` to
    choose how each message travels and :meth:`adopt_brief` to keep what was sent.
    """

    settings: TerseTalkSettings

    def __init__(
        self,
        ctx: RunContext,
        settings: TerseTalkSettings,
        example: dict,
        brief: Brief,
        conv: Conversation,
    ) -> None:
        super().__init__(ctx, settings, example, brief, conv)
        self.tts = self.tersetalk_settings()
        self.memory = Memory(max_entries=self.tts.memory_max_entries)  # fresh per example
        self.touch = Touchpoints.from_settings(self.tts, ctx, question=brief.question,
                                               task=ctx.task)  # fmt: skip
        self.speaker = Speaker(conv, ctx, self.tts)
        self.lines: list[LineBase] = []
        self.caps = CapCounters()
        self.deref_counts = {"derefs": 0, "reinjected_tokens": 0, "missing": 0}

    def tersetalk_settings(self) -> TerseTalkSettings:
        """The TerseTalk knobs (the hybrid nests them in its own settings)."""
        return self.settings

    # -- writing ------------------------------------------------------------------------
    def encode_brief(self, caps: dict[str, int], memory: Memory):
        """The brief as capped TerseTalk lines, overflow going to ``memory``."""
        tts = self.tts
        facts = list(self.brief.facts)
        loose = tts.title_names == "loose"
        titled = get_task(self.ctx.task).titled_facts
        if titled is not None:  # "Title: sentence" facts (HotpotQA's)
            if tts.residue == "strip":
                facts = [titled.strip_residue(f) for f in facts]
            if tts.fact_titles == "dedup":
                facts = [titled.dedup_title(f, loose) for f in facts]
            elif tts.fact_titles == "paragraph":
                facts = titled.paragraph_titles(facts, loose)
        return encode_brief(
            self.brief.goal if tts.goal_line else None,
            [self.wire_text(f) for f in facts],
            self.wire_question(),
            caps=caps,
            memory=memory,
            summarizer=self.touch.summarizer(tts.summarizer),
            count_tokens=count_tokens,
            compress=self.touch.compress_hook,
            role_line=tts.role_lines,
            merge_facts=tts.fact_lines == "merged",
            context=[(name, self.wire_text(text)) for name, text in self.brief.context],
            options=[(label, self.wire_text(text)) for label, text in self.brief.options],
            code=self.brief.code,
        )

    def content_lines(self, kind: str, content: Any) -> list[LineBase]:
        """The lines of a reply, a dereference or the final answer, as sent."""
        if kind == "deref":
            return content.lines
        if kind == "verdict":
            lines = critic_lines(content)
            if self.tts.critic_note == "on_revise" and content.verdict != "R":
                lines = [ln for ln in lines if ln.tag in ("r", "v")]
        elif kind == "final":
            lines = answer_lines(content)
        else:
            lines = worker_lines(content)
        return lines if self.tts.role_lines else [ln for ln in lines if ln.tag != "r"]

    def critic_copy_lines(self) -> list[LineBase]:
        """What ``critic_copy: question`` sends the Critic: the question, uncapped (with
        the program text it asks about, when the brief carries code apart from it)."""
        lines: list[LineBase] = [RoleLine(role="M")] if self.tts.role_lines else []
        if self.brief.code:
            lines.append(ContextLine(key="code", value=self.brief.code))
        return lines + [QuestionLine(to="W", text=self.wire_question())]

    def wire_text(self, text: str) -> str:
        """A payload of the brief as the variant writes it (``quotes``)."""
        return single_quotes(text) if self.tts.quotes == "single" else text

    def wire_question(self) -> str:
        """The brief's question as its ``q`` line carries it (``quotes``, ``question_mark``)."""
        text = self.wire_text(self.brief.question)
        return tag_question_mark(text) if self.tts.question_mark == "tag" else text

    def question_copy(self, sent: Sent, receiver: str) -> bool:
        """Whether the copy of ``sent`` to ``receiver`` is only the question."""
        return (
            sent.kind == "brief"
            and self.tts.critic_copy == "question"
            and participant(receiver).kind == "critic"
        )

    def write_copy(self, sent: Sent, sender: str, receiver: str) -> Sent:
        if self.question_copy(sent, receiver):
            text = serialize(self.critic_copy_lines())
            return Sent(sender, receiver, "brief", text, sent.content, meta="tersetalk")
        return super().write_copy(sent, sender, receiver)

    def write(self, kind: str, sender: str, receiver: str, content: Any) -> Sent:
        if kind == "brief":
            lines, self.caps = self.encode_brief(self.tts.cap_dict(), self.memory)
            self.lines = lines
        else:
            lines = self.content_lines(kind, content)
        return Sent(sender, receiver, kind, serialize(lines), content, meta="tersetalk")

    # -- reading ------------------------------------------------------------------------
    def prompt(self, who: Participant) -> str:
        return system_prompt(who.kind, self.ctx.task, self.tts.enforcement)

    def compose(self, who: Participant, inbox: list[Sent]) -> str:
        return "\n".join(s.text for s in inbox)

    def reply(self, who: Participant, messages: list[dict], gen: GenerationConfig):
        return self.speaker.reply(who.kind, messages, gen)

    def reinject(self, d: Dialogue, who: Participant, result: DerefResult) -> str | None:
        """Send the dereferenced text (compressed if the touchpoint says so); its text."""
        result = self.touch.compress_deref(result)
        self.deref_counts["derefs"] += result.derefs
        self.deref_counts["reinjected_tokens"] += result.reinjected_tokens
        self.deref_counts["missing"] += len(result.missing)
        if not result.lines:
            return None
        return d.send("M", who.letter, "deref", result).text

    def respond(
        self, d: Dialogue, who: Participant, inbox: list[Sent], gen: GenerationConfig
    ) -> tuple[Any, list[dict]]:
        """The reply to the brief, with ``M#`` text re-injected as the policy says."""
        policy = self.tts.deref
        user = self.compose(who, inbox)
        if policy == "always" and self.lines:
            found = dereference(self.lines, self.memory, "always", count_tokens=count_tokens)
            extra = self.reinject(d, who, found)
            if extra:
                user = user + "\n" + extra
        messages = [
            {"role": "system", "content": self.prompt(who)},
            {"role": "user", "content": user},
        ]
        reply = self.reply(who, messages, gen)
        if policy == "conditional":
            asked = worker_lines(reply)
            if requested_refs(asked):
                found = dereference(self.lines, self.memory, "conditional", requests=asked,
                                    count_tokens=count_tokens)  # fmt: skip
                extra = self.reinject(d, who, found)
                if extra:
                    messages = messages + [
                        {"role": "assistant", "content": serialize(asked)},
                        {"role": "user", "content": extra},
                    ]
                    reply = self.reply(who, messages, gen)
        return reply, messages

    def revise_text(self, feedback: Sent) -> str:
        return feedback.text

    def verdict(self, critique: CriticReply) -> tuple[str, bool]:
        return VERDICT_WORDS[critique.verdict], self.speaker.verdict_explicit

    def prediction(self, answer: WorkerReply) -> str:
        text = (
            "\n".join(answer.plan + [f"Answer: {answer.answer}"])
            if reads_plan(get_task(self.ctx.task).answer)
            else answer.answer
        )
        return extract_prediction(self.ctx.task, text)

    def counters(self, d: Dialogue) -> dict[str, Any]:
        typed = [s.message for s in d.sent if s.meta != "llmlingua"]
        return {
            # lines_* / overflow_* / compressed_* / density: the Manager's brief as capped
            **self.caps.as_dict(),
            # msg_lines_*: every message sent as TerseTalk lines
            **message_line_counts(typed, d.directions),
            **{f"deref_{k}": v for k, v in self.deref_counts.items()},
            # compliance_*, repairs, repairs_<kind>, reply_*, compliance_log
            **self.speaker.counters(),
            **self.memory.stats().as_dict(),
            **self.touch.counters(),
        }
