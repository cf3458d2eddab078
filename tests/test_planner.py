"""Control flow of the planning Manager with the scripted double (no reported numbers),
and one integration test that the embedded model's grammar accepts the plan schema."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tersetalk.agents.conversation import Conversation
from tersetalk.agents.planner import (
    MAX_REPLY_CHARS,
    PlanCounters,
    PlannerSettings,
    insert_plan,
    insert_prose_plan,
    numbered_plan,
    plan_lines,
    plan_schema,
    planner_input,
    prose_plan,
)
from tersetalk.agents.roles import Brief
from tersetalk.models import GenerationConfig, ModelCallError, ScriptedClient
from tersetalk.protocol import (
    DeltaLine,
    FactLine,
    Memory,
    PlanLine,
    QuestionLine,
    parse_strict,
    serialize,
)
from tersetalk.topology.router import prose_signals, typed_lines, typed_signals
from tersetalk.topology.signals import prose_parts, typed_parts

GEN = GenerationConfig(max_tokens=64)
REF_MENTIONS = re.compile(r"(?<![A-Za-z0-9_])M#[1-9][0-9]*(?![0-9])")
ON = PlannerSettings(planner="model")


def brief(**extra) -> Brief:
    b = Brief(goal="Answer the question.", facts=["Paris is in France."], question="Where?")
    for k, v in extra.items():
        setattr(b, k, v)  # the fields the task briefs are gaining, set when present
    return b


def memory_with(n: int) -> Memory:
    mem = Memory()
    for i in range(n):
        mem.put(f"stored text number {i + 1}")
    return mem


def conv_of(responses) -> Conversation:
    return Conversation(ScriptedClient(responses))


def plan_json(*steps) -> str:
    return json.dumps({"steps": [{"text": t, "ref": r} for t, r in steps]})


def tags(lines) -> list[str]:
    return [ln.tag for ln in lines]


# -- the schema path -----------------------------------------------------------------------
def test_schema_plan_is_p_lines_with_d_for_stored_ids_and_counted_as_the_managers_call():
    conv = conv_of([plan_json(("Find the city", ""), ("Check the passage", "M#1"))])
    lines, c = plan_lines(conv, GEN, brief(), memory_with(1), ON, "schema")
    assert lines == [
        PlanLine(text="Find the city"),
        PlanLine(text="Check the passage"),
        DeltaLine(ref="M#1"),
    ]
    assert (c.calls, c.first_try, c.steps, c.refs, c.failed) == (1, 1, 2, 1, 0)
    # one structured call, logged as the Manager's, its usage counted
    client = conv.client
    assert [k["kind"] for k in client.calls] == ["structured"]
    assert client.calls[0]["gen"].max_tokens == ON.plan_max_tokens
    assert [call["role"] for call in conv.calls] == ["manager"]
    assert c.prompt_tokens == conv.calls[0]["prompt_tokens"] > 0
    assert c.completion_tokens == conv.calls[0]["completion_tokens"] > 0
    assert conv.messages == []  # the call is not a message: the brief carries the plan


def test_the_schema_bounds_come_from_the_settings():
    schema = plan_schema(2, 20)
    with pytest.raises(ValidationError):
        schema.model_validate_json(plan_json(("a", ""), ("b", ""), ("c", "")))
    with pytest.raises(ValidationError):
        schema.model_validate_json(plan_json(("x" * 21, "")))
    with pytest.raises(ValidationError):  # a ref is an M# id or empty
        schema.model_validate_json(plan_json(("a", "see M#1")))
    with pytest.raises(ValidationError):  # a plan has a step
        schema.model_validate_json(json.dumps({"steps": []}))
    assert schema is plan_schema(2, 20)  # the same schema (and call-cache key) every time


def test_schema_retries_are_counted_as_after_retries():
    conv = conv_of(["not json", plan_json(("Add the numbers", ""))])
    lines, c = plan_lines(conv, GEN, brief(), Memory(), ON, "schema")
    assert tags(lines) == ["p"] and (c.first_try, c.after_retries) == (0, 1)


def test_invented_ids_are_dropped_from_the_plan_and_its_text_and_counted():
    conv = conv_of([plan_json(("Read M#7 then M#1", "M#9"), ("Use M#12 too", ""))])
    lines, c = plan_lines(conv, GEN, brief(), memory_with(1), ON, "schema")
    # M#9 (its explicit id), M#7 and M#12 (mentioned) are not in memory: none is sent
    assert lines == [PlanLine(text="Read then M#1"), DeltaLine(ref="M#1"),
                     PlanLine(text="Use too")]  # fmt: skip
    assert (c.refs, c.refs_dropped, c.steps) == (1, 3, 2)
    wire = serialize(lines)
    assert "M#7" not in wire and "M#9" not in wire and "M#12" not in wire


def test_no_memory_no_d_lines_and_one_d_line_per_id():
    conv = conv_of([plan_json(("a", "M#1"))])
    lines, c = plan_lines(conv, GEN, brief(), Memory(), ON, "schema")
    assert tags(lines) == ["p"] and c.refs_dropped == 1
    conv = conv_of([plan_json(("a", "M#2"), ("b", "M#2"), ("c", "M#1"))])
    lines, c = plan_lines(conv, GEN, brief(), memory_with(2), ON, "schema")
    assert tags(lines) == ["p", "d", "p", "p", "d"] and (c.refs, c.refs_repeated) == (2, 1)


def test_plan_refs_off_sends_no_d_lines():
    conv = conv_of([json.dumps({"steps": [{"text": "Check M#1"}]})])
    settings = PlannerSettings(planner="model", plan_refs=False)
    lines, c = plan_lines(conv, GEN, brief(), memory_with(1), settings, "schema")
    assert lines == [PlanLine(text="Check M#1")] and c.refs == 0  # an existing id's mention
    call = conv.client.calls[0]
    assert all("M#" not in m["content"] for m in call["messages"])  # ids neither shown nor asked
    assert "ref" not in call["schema"].model_json_schema()["$defs"]["PlanStep"]["properties"]


def test_a_failed_structured_answer_sends_no_plan_and_says_so():
    conv = conv_of(["garbage"] * 3)  # the double retries twice, then gives up
    lines, c = plan_lines(conv, GEN, brief(), memory_with(1), ON, "schema")
    assert lines == []
    assert (c.calls, c.failed, c.parse_failures, c.steps) == (1, 1, 1, 0)
    assert "structured plan failed" in c.error
    assert len(conv.client.calls) == 1  # no second (free) call
    assert conv.calls[0]["role"] == "manager" and conv.calls[0]["prompt_tokens"] == -1
    assert c.prompt_tokens == -1  # unknown, as the record's usage


def test_a_transport_fault_propagates_like_any_other_call():
    conv = conv_of([ModelCallError("server said 500 after retries")])
    with pytest.raises(ModelCallError):
        plan_lines(conv, GEN, brief(), Memory(), ON, "posthoc")


def test_planner_off_makes_no_call_and_keeps_stable_zero_counters():
    conv = conv_of([])
    lines, c = plan_lines(conv, GEN, brief(), Memory(), PlannerSettings(), "schema")
    steps, pc = prose_plan(conv, GEN, brief(), PlannerSettings())
    assert lines == [] and steps == [] and conv.calls == []
    assert c == pc == PlanCounters()
    assert set(c.as_dict()) == set(PlanCounters(calls=1).as_dict())
    assert all(k.startswith("planner_") for k in c.as_dict())


# -- bounds on hostile output --------------------------------------------------------------
def test_too_many_and_too_long_steps_are_cut_and_counted():
    settings = PlannerSettings(planner="model", plan_max_steps=2, plan_step_chars=20)
    reply = json.dumps({"steps": [{"text": "y" * 500}] + [{"text": f"s{i}"} for i in range(50)]})
    lines, c = plan_lines(conv_of([reply]), GEN, brief(), Memory(), settings, "json")
    assert lines == [PlanLine(text="y" * 20), PlanLine(text="s0")]
    assert (c.steps, c.steps_dropped, c.steps_truncated, c.repaired) == (2, 49, 1, 1)
    assert c.parse_failures == 1  # not schema-valid; read by the lenient path


def test_repeated_steps_are_sent_once_and_counted():
    # a looping model must not inflate the router's plan count (seen on the embedded one)
    reply = plan_json(("Check it", ""), ("check  IT", "M#1"), ("Check it", "M#1"))
    lines, c = plan_lines(conv_of([reply]), GEN, brief(), memory_with(1), ON, "schema")
    assert lines == [PlanLine(text="Check it"), DeltaLine(ref="M#1")]
    assert (c.steps, c.steps_repeated, c.refs, c.refs_repeated) == (1, 2, 1, 1)


def test_posthoc_canonical_lines_are_first_try():
    reply = '["p","Find the year"]\n["d","M#1"]'
    lines, c = plan_lines(conv_of([reply]), GEN, brief(), memory_with(1), ON, "posthoc")
    assert tags(lines) == ["p", "d"] and (c.first_try, c.repaired) == (1, 0)


def test_a_huge_reply_is_read_only_up_to_its_bound():
    reply = '["p","first"]\n' + "x" * (MAX_REPLY_CHARS * 3)
    lines, c = plan_lines(conv_of([reply]), GEN, brief(), Memory(), ON, "posthoc")
    assert lines == [PlanLine(text="first")] and c.output_truncated == 1


@pytest.mark.parametrize("mode", ["json", "posthoc"])
@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I cannot help with that.",
        "{]",
        "[" * 5000,
        "9" * 5000,
        '{"answer": "Paris"}',
        "\x00\ud800",
    ],
)
def test_garbage_sends_no_plan_and_is_counted(mode, reply):
    conv = conv_of([reply])
    lines, c = plan_lines(conv, GEN, brief(), memory_with(2), ON, mode)
    assert lines == []
    assert (c.calls, c.failed, c.steps) == (1, 1, 0) and c.parse_failures >= 1 and c.error
    assert [call["role"] for call in conv.calls] == ["manager"]


_step = st.fixed_dictionaries(
    {"text": st.text(max_size=150), "ref": st.sampled_from(["", "M#1", "M#2", "M#3", "M#0", "x"])}
)
_reply = st.one_of(
    st.text(max_size=400),
    st.lists(_step, max_size=12).map(lambda steps: json.dumps({"steps": steps})),
    st.lists(
        st.one_of(
            st.tuples(st.just("p"), st.text(max_size=120)),
            st.tuples(st.just("d"), st.sampled_from(["M#1", "M#2", "M#9"])),
        ),
        max_size=12,
    ).map(lambda lines: "\n".join(json.dumps(list(ln)) for ln in lines)),
)


@given(reply=_reply, mode=st.sampled_from(["schema", "json", "posthoc"]),
       n_mem=st.integers(0, 2), max_steps=st.integers(1, 5))  # fmt: skip
def test_any_reply_gives_a_bounded_valid_plan_of_existing_ids(reply, mode, n_mem, max_steps):
    settings = PlannerSettings(planner="model", plan_max_steps=max_steps, plan_step_chars=40)
    memory = memory_with(n_mem)
    lines, c = plan_lines(conv_of([reply] * 3), GEN, brief(), memory, settings, mode)
    plans = [ln for ln in lines if isinstance(ln, PlanLine)]
    refs = [ln.ref for ln in lines if isinstance(ln, DeltaLine)]
    assert len(plans) == c.steps <= max_steps and len(refs) == c.refs
    assert all(0 < len(p.text) <= 40 for p in plans)
    assert set(refs) <= set(memory.ids()) and len(set(refs)) == len(refs)
    assert parse_strict(serialize(lines)) == lines if lines else c.failed == 1
    assert all(ref in memory for m in REF_MENTIONS.finditer(serialize(lines)) for ref in [m[0]])


def test_json_mode_valid_plan_is_first_try_and_asks_for_json():
    conv = conv_of([plan_json(("Compute the total", ""))])
    lines, c = plan_lines(conv, GEN, brief(), Memory(), ON, "json")
    assert tags(lines) == ["p"] and (c.first_try, c.repaired, c.parse_failures) == (1, 0, 0)
    call = conv.client.calls[0]
    assert call["kind"] == "chat" and call["gen"].json_mode


def test_json_mode_other_shapes_are_read_leniently():
    reply = json.dumps({"Plan": ["Read M#1", {"step": "Answer", "refs": ["M#2"]}, None, ""]})
    lines, c = plan_lines(conv_of([reply]), GEN, brief(), memory_with(2), ON, "json")
    assert lines == [PlanLine(text="Read M#1"), DeltaLine(ref="M#1"), PlanLine(text="Answer"),
                     DeltaLine(ref="M#2")]  # fmt: skip
    assert (c.repaired, c.steps_dropped) == (1, 1)
    one = json.dumps({"text": "Only step", "ref": "M#1", "extra": 1})  # one step, unwrapped
    lines, c = plan_lines(conv_of([one]), GEN, brief(), memory_with(1), ON, "json")
    assert lines == [PlanLine(text="Only step"), DeltaLine(ref="M#1")] and c.repaired == 1


def test_posthoc_reads_p_and_d_lines_numbered_text_and_ignores_the_rest():
    reply = (
        "Here is the plan:\n"
        '["p","Find the year"]\n["d","M#1"]\n'
        '["d","M#5"]\n'  # an invented id
        '["d","M#0"]\n'  # not an id at all: an ignored line
        "2. Subtract the years\n"
        '["f","a fact the planner should not send"]\n'
    )
    conv = conv_of([reply])
    lines, c = plan_lines(conv, GEN, brief(), memory_with(1), ON, "posthoc")
    assert lines == [PlanLine(text="Find the year"), DeltaLine(ref="M#1"),
                     PlanLine(text="Subtract the years")]  # fmt: skip
    assert (c.repaired, c.refs, c.refs_dropped, c.lines_ignored) == (1, 1, 1, 3)
    assert not conv.client.calls[0]["gen"].json_mode
    assert '["p",' in conv.client.calls[0]["messages"][0]["content"]


def test_plan_lines_are_valid_protocol_whatever_the_text():
    reply = plan_json(('quote " backslash \\ tab\tnew\nline', ""), ("1. numbered itself", ""))
    lines, _ = plan_lines(conv_of([reply]), GEN, brief(), Memory(), ON, "schema")
    assert parse_strict(serialize(lines)) == lines
    assert [ln.text for ln in lines] == ['quote " backslash \\ tab new line', "numbered itself"]


# -- what the planner is shown -------------------------------------------------------------
def test_the_planner_sees_every_part_of_the_brief_and_the_memory_ids():
    b = brief(
        context=[("Paris", "Paris is the capital.")],
        options=[("A", "Paris"), ("B", "Lyon")],
        code="def f(x):\n    return x",
    )
    text = planner_input(b, memory_with(2), 10_000)
    for part in ("Goal: Answer", "Question: Where?", "- M#1: stored text number 1", "- M#2:",
                 "- Paris: Paris is the capital.", "- Paris is in France.", "- A: Paris",
                 "def f(x):\n    return x"):  # fmt: skip
        assert part in text
    assert "M#" not in planner_input(b, None, 10_000)  # the prose planner has no memory
    assert planner_input(Brief(goal="g", question="q"), None, 100) == "Goal: g\nQuestion: q"


def test_a_long_brief_is_cut_from_the_end_and_counted():
    c = PlanCounters()
    text = planner_input(brief(facts=["long fact " * 100] * 10), memory_with(1), 300, c)
    assert len(text) == 300 and text.startswith("Goal:") and "Question: Where?" in text
    assert "M#1" in text and c.input_truncated == 1


# -- prose ---------------------------------------------------------------------------------
def test_prose_plan_is_numbered_steps_counted_by_the_prose_router():
    reply = "Sure.\n1. Find the year\n2) Subtract M#3\nStep 3: State the answer\n4. Extra"
    conv = conv_of([reply])
    settings = PlannerSettings(planner="model", plan_max_steps=3)
    steps, c = prose_plan(conv, GEN, brief(), settings)
    assert steps == ["Find the year", "Subtract M#3", "State the answer"]
    assert (c.first_try, c.steps, c.steps_dropped, c.lines_ignored) == (1, 3, 1, 1)
    assert [call["role"] for call in conv.calls] == ["manager"]
    assert conv.client.calls[0]["kind"] == "chat"
    assert "1. <step>" in conv.client.calls[0]["messages"][0]["content"]
    text = numbered_plan(steps)
    assert text == "Plan:\n1. Find the year\n2. Subtract M#3\n3. State the answer"
    assert prose_signals(text)["plans"] == 3
    assert prose_parts(text).plans == steps and prose_parts(text).facts == []
    assert numbered_plan([]) == ""


def test_prose_plan_reads_bullets_as_repaired_and_garbage_as_no_plan():
    steps, c = prose_plan(conv_of(["- Find it\n* Check it"]), GEN, brief(), ON)
    assert steps == ["Find it", "Check it"] and (c.repaired, c.first_try) == (1, 0)
    steps, c = prose_plan(conv_of(["I will not plan."]), GEN, brief(), ON)
    assert steps == [] and (c.failed, c.parse_failures, c.lines_ignored) == (1, 1, 1)


# -- into the brief ------------------------------------------------------------------------
def test_the_plan_goes_before_the_question_and_the_router_reads_it():
    brief_lines = [FactLine(text="Paris is in France."), QuestionLine(to="W", text="Where")]
    plan = [PlanLine(text="Find it"), DeltaLine(ref="M#1"), PlanLine(text="Answer")]
    lines = insert_plan(brief_lines, plan)
    assert tags(lines) == ["f", "p", "d", "p", "q"]
    assert tags(insert_plan(brief_lines[:1], plan)) == ["f", "p", "d", "p"]
    signals = typed_signals(typed_lines(serialize(lines)))
    assert signals["plans"] == 2  # the d line is a pointer: nothing to count
    parts = typed_parts(serialize(lines))
    assert (parts.plans, parts.facts) == (["Find it", "Answer"], ["Paris is in France."])


def test_the_prose_plan_goes_before_the_question_line():
    from tersetalk.agents.roles import render_brief

    b = brief(question="What?\nQuestion: a trap")
    text = render_brief(b)
    plan = numbered_plan(["Find it", "Answer"])
    out = insert_prose_plan(text, plan, b.question)
    assert out == text.removesuffix(f"Question: {b.question}") + plan + f"\nQuestion: {b.question}"
    assert insert_prose_plan("no question here", plan, "q") == f"no question here\n{plan}"
    assert insert_prose_plan(text, "", b.question) == text
    assert prose_signals(out)["plans"] == 2


def test_settings_are_a_fragment_a_codec_inherits():
    from tersetalk.topology.router import RouteSettings

    class Combined(RouteSettings, PlannerSettings):
        pass

    s = Combined.model_validate({"planner": "model", "plan_max_steps": 3, "theta": 2})
    assert (s.planner, s.plan_max_steps, s.theta) == ("model", 3, 2)
    with pytest.raises(ValidationError):
        Combined.model_validate({"plan_max_steps": 0})
    with pytest.raises(ValidationError):
        Combined.model_validate({"planner": "yes"})


def test_a_planning_codec_logs_the_managers_call_among_the_run_s_calls(repo):
    """Wired into a codec the way the report suggests: the plan rides on the brief, the
    call is the Manager's in the call log and in the record's usage totals."""
    from tersetalk.agents.codecs.prose import ProseCodec
    from tersetalk.agents.context import RunContext
    from tersetalk.agents.engine import converse
    from tersetalk.agents.roles import render_brief
    from tersetalk.agents.topology import STAR
    from tersetalk.core.records import usage_totals
    from tersetalk.tasks.loading import load_records

    class PlanningProse(ProseCodec):
        def write_brief(self, brief):
            steps, self.plan_counters = prose_plan(self.conv, self.ctx.gen, brief, ON)
            return insert_prose_plan(render_brief(brief), numbered_plan(steps), brief.question)

        def counters(self, d):
            return self.plan_counters.as_dict()

    def respond(messages):
        if messages[0]["content"].startswith("You are the Manager"):
            return "1. Find the two facts\n2. Compare them"
        return "ACCEPT. Answer: Paris"

    record = load_records("hotpotqa", data_dir=repo / "data")[0]
    ctx = RunContext(task="hotpotqa", client=ScriptedClient(respond), gen=GEN, critic_gen=GEN)
    res = converse({"record": record, "example_id": "x"}, ctx, codec=PlanningProse, topology=STAR)
    calls = res.conversation.calls
    assert [c["role"] for c in calls][:2] == ["manager", "worker"]
    brief_msg = res.conversation.messages[0]
    assert brief_msg["sender"] == "M" and "1. Find the two facts" in brief_msg["content"]
    assert res.counters["planner_steps"] == 2 and res.counters["planner_calls"] == 1
    usage = usage_totals(calls)
    assert usage["usage_completion_tokens"] >= res.counters["planner_completion_tokens"] > 0


# -- the embedded model --------------------------------------------------------------------
@pytest.mark.integration
def test_embedded_model_writes_a_schema_valid_plan():
    from tersetalk.models import LlamaCppClient

    with LlamaCppClient(max_retries=0) as client:
        conv = Conversation(client)
        b = brief(code="def add(a, b):\n    return a + b")
        lines, c = plan_lines(conv, GenerationConfig(max_tokens=256), b, memory_with(1), ON)
    # whatever the small model plans, the grammar keeps it schema-valid: read first try
    assert c.first_try == 1 and c.failed == 0 and 1 <= c.steps <= ON.plan_max_steps
    assert all(isinstance(ln, PlanLine | DeltaLine) for ln in lines)
    assert c.prompt_tokens > 0 and c.completion_tokens > 0
