"""The topology router: signals, the rule, policies, settings.

Properties: the rule is monotone in θ (raising θ never turns star into chain),
deterministic, and a run's decisions are reproduced from its recorded signals alone.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from router_support import scripted

from tersetalk.core.io import message_list
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.protocol import TAGS
from tersetalk.systems import system
from tersetalk.tasks.loading import load_records, sample
from tersetalk.tasks.registry import topology_labels
from tersetalk.topology.router import (
    DEFAULT_WEIGHTS,
    SIGNALS,
    RouteSettings,
    decide,
    label_route,
    policy_route,
    prose_signals,
    random_route,
    score,
    scramble,
    typed_lines,
    typed_signals,
)
from tersetalk.topology.signals import (
    MAX_PROGRAM_WORK,
    premises,
    prose_parts,
    quantities,
    question_hops,
    typed_parts,
)

REPO = Path(__file__).resolve().parents[1]

signals_st = st.fixed_dictionaries({k: st.integers(0, 30) for k in SIGNALS})
weights_st = st.fixed_dictionaries(
    {k: st.floats(-10, 10, allow_nan=False, allow_infinity=False) for k in SIGNALS}
)
theta_st = st.floats(-100, 100, allow_nan=False, allow_infinity=False)


@given(signals_st, weights_st, theta_st, theta_st)
def test_raising_theta_never_turns_star_into_chain(signals, weights, t1, t2):
    low, high = sorted((t1, t2))
    if decide(signals, weights, low)[0] == "star":
        assert decide(signals, weights, high)[0] == "star"
    if decide(signals, weights, high)[0] == "chain":
        assert decide(signals, weights, low)[0] == "chain"


@given(signals_st, weights_st, theta_st)
def test_decision_is_deterministic_and_independent_of_key_order(signals, weights, theta):
    reordered = dict(reversed(list(signals.items())))
    assert decide(signals, weights, theta) == decide(reordered, weights, theta)
    route, s = decide(signals, weights, theta)
    assert route == ("chain" if s >= theta else "star")
    assert s == score(signals, weights)


lines_st = st.lists(st.tuples(st.sampled_from(TAGS), st.text(max_size=30)), max_size=15)


@given(lines_st, weights_st, theta_st, st.integers(0, 10**6))
def test_decision_is_reproduced_from_the_recorded_json(lines, weights, theta, seed):
    """What a record keeps (signals and weights as JSON, θ) gives back the decision."""
    for typed in (lines, scramble(lines, seed, "ex")):
        signals = typed_signals(typed)
        recorded = json.dumps(signals, sort_keys=True), json.dumps(weights, sort_keys=True)
        replayed = decide(json.loads(recorded[0]), json.loads(recorded[1]), theta)
        assert replayed == decide(signals, weights, theta)


def test_score_is_the_weighted_sum():
    signals = {"hops": 1, "quantities": 4, "arithmetic": 2, "conditions": 0, "code": 0,
               "plans": 1}  # fmt: skip
    assert score(signals, DEFAULT_WEIGHTS) == 3.0 + 4 * 0.25 + 2 * 1.5 + 1.0
    assert decide(signals, DEFAULT_WEIGHTS, 8.0) == ("chain", 8.0)
    assert decide(signals, DEFAULT_WEIGHTS, 8.01)[0] == "star"


# the same brief, as TerseTalk-JSONL lines and as the free-form rendering
TYPED = "\n".join(
    [
        '["x","passage","Tom has 3 boxes. Each box holds 4 apples. He eats 2 of them."]',
        '["x","A","10"]',
        '["x","B","12"]',
        '["f","Apples are sold in boxes."]',
        '["p","count the apples"]',
        '["q","W","How many apples are left if he gives away one box?"]',
    ]
)
PROSE = (
    "Goal: Choose the best option for the question.\nPassage:\n"
    "Tom has 3 boxes. Each box holds 4 apples. He eats 2 of them.\nFacts:\n"
    "- Apples are sold in boxes.\nOptions:\n- A: 10\n- B: 12\n1. count the apples\n"
    "Question: How many apples are left if he gives away one box?"
)
WANT = {"hops": 0, "quantities": 8, "arithmetic": 3, "conditions": 1, "code": 0, "plans": 1}


def test_both_protocols_read_the_same_parts_and_count_the_same_signals():
    """The typed lines and the prose carry the same brief: the same parts, the same counts
    (quantities: 3, 4, 2, 10, 12 and the 'one' of the question's 'one box', plus 'Each'...
    counted as words; arithmetic: 'Each box holds 4', 'He eats 2' holds no operation word,
    the question combines amounts)."""
    typed_sig = typed_signals(typed_lines(TYPED))
    assert typed_sig == prose_signals(PROSE)
    assert set(typed_sig) == set(SIGNALS)
    parts = typed_parts(TYPED)
    assert parts.question == ["How many apples are left if he gives away one box?"]
    assert parts.options == ["10", "12"] and parts.plans == ["count the apples"]
    assert parts.context and parts.facts == ["Apples are sold in boxes."]
    assert prose_parts(PROSE) == parts


def test_signals_read_content_not_layout():
    """A passage folded into facts, or options into facts, counts the same: what the
    sentences say decides, not which part they sat in."""
    folded = "\n".join(
        ['["f","Tom has 3 boxes."]', '["f","Each box holds 4 apples."]',
         '["f","He eats 2 of them."]', '["f","Apples are sold in boxes."]',
         '["f","A: 10"]', '["f","B: 12"]', '["p","count the apples"]',
         '["q","W","How many apples are left if he gives away one box?"]']
    )  # fmt: skip
    assert typed_signals(typed_lines(folded)) == typed_signals(typed_lines(TYPED))


@pytest.mark.parametrize(
    ("question", "hops"),
    [
        ("Who directed the film in which Pat Ashton starred?", 1),
        ("What other film did the star of 127 Hours act in?", 1),
        ("Which species is native to Asia, Corokia or Rhodotypos?", 1),
        ("Was the director of Jaws born before the first Moon landing?", 2),
        ("To Ben, the son of his father's only brother is his what?", 2),
        ("is a lightning bug the same as a firefly?", 0),
        ("The rats were hiding in the house, where were they?", 0),
        ("What do people usually do when they hear a joke?", 0),
        ("How many apples does Tom have?", 0),
        # asking which thing is the answer, not a bridge to it
        ("Jacqueline du Pré is remembered for a recording of which composer's concerto?", 0),
        # a clause set off by a comma describes a thing already named
        ("The Trans-Siberian Railway, which crosses eight time zones, ends in which city?", 0),
        (
            "The novel Frankenstein, in which a scientist builds a creature, was written by "
            "which author?",
            0,
        ),
        # a superlative is one lookup; *that of* is a pronoun
        ("is the surface of venus hotter than that of any other planet", 0),
        # a relation through *of* in a lower-case question, and two dates compared
        (
            "was the author of pride and prejudice still alive at the time of the battle of "
            "waterloo",
            2,
        ),
        ("The first woman to win a Nobel Prize discovered which element?", 1),
        ("Which ocean lies off the coast of the country whose capital is Nairobi?", 1),
    ],
)
def test_hops_count_the_bridges_of_a_question(question, hops):
    assert question_hops(question) == hops


def test_code_and_conditions_and_numbers():
    code = typed_signals(typed_lines('["x","code","def add(a, b):\\n    return a + b"]\n'
                                     '["q","W","Write the complete function."]'))  # fmt: skip
    # a one-line job names no program work: it counts like a brief with no program
    assert code["code"] == 0 and code["hops"] == 0
    assert prose_signals("Write a Python function that returns the sum of a list.")["code"] == 0
    # the kinds of work a program's description names, capped at MAX_PROGRAM_WORK
    work = prose_signals("Write a Python function that counts the distinct words of a text.")
    assert work["code"] == 2  # counts, distinct
    loop = typed_signals(typed_lines(
        '["x","code","def root(n):\\n    \\"\\"\\"Sum the digits of n again and again '
        'until one digit is left.\\n    >>> root(99)\\n    9\\n    \\"\\"\\""]\n'
        '["q","W","Write the complete function."]'
    ))  # fmt: skip
    assert loop["code"] == MAX_PROGRAM_WORK  # digits, again, until
    # a doctest's numbers are examples, not amounts to use
    assert loop["quantities"] == 1  # "one"
    assert quantities("In 1969, 3 astronauts flew twice; half of 12 is six.") == 5  # no year
    assert prose_signals("Question: Is it open if it rains, unless it is Sunday?")[
        "conditions"] == 2  # fmt: skip


def test_clock_and_calendar_steps_and_transfers_are_arithmetic():
    # a clock time and a hyphenated number are one quantity each; a day is a position
    assert quantities("He left at 6:50 and the trip takes twenty-five minutes.") == 2
    assert quantities("If today is Thursday, what day is it ten days from now?") == 2
    day = prose_signals("Question: If today is Thursday, what day is it ten days from now?")
    assert day["arithmetic"] == 1
    # a transfer changes an amount (the change schema of word problems)
    gave = prose_signals("Facts: Nadia had 73 marbles and gave 28 of them to her cousin.")
    assert gave["arithmetic"] == 1
    # a condition in a situation counts like one in the question
    rule = typed_signals(typed_lines(
        '["x","situation","Only players who attend at least four practices may start."]\n'
        '["q","W","What will Imani feel?"]'
    ))  # fmt: skip
    assert rule["conditions"] == 2


def test_an_amount_told_as_a_difference_is_a_step():
    facts = "Facts: Leo is 4 years older than his sister. In 3 years their ages add up to 30."
    assert prose_signals(facts)["arithmetic"] == 2


def test_parts_of_a_whole_are_arithmetic():
    facts = "Facts: Mia's class has 30 pupils. Two fifths of them walk. A third of the rest ride."
    assert prose_signals(facts)["arithmetic"] == 2


def test_a_passages_amounts_are_steps_only_for_a_question_that_computes():
    passage = (
        '["x","passage","Sound travels about four times faster in water, 1,480 metres '
        'per second, than in air."]\n'
    )
    reads = typed_signals(typed_lines(passage + '["q","W","does sound travel through water"]'))
    assert reads["arithmetic"] == 0 and reads["quantities"] == 2
    # a number in the question is read, not computed with
    number = typed_signals(
        typed_lines(passage + '["q","W","does sound cover 1,480 metres in water"]')
    )
    assert number["arithmetic"] == 0
    adds = typed_signals(
        typed_lines(passage + '["q","W","is it more than twice as fast in water"]')
    )
    assert adds["arithmetic"] >= 1


def test_a_relative_clause_about_nothing_particular_does_not_bridge():
    # indefinite noun phrases in a question that names nothing: descriptions, not lookups
    assert question_hops("Where would you find a fox that is made up?") == 0
    assert question_hops("What is a person called who does not have immortality?") == 0
    # *that* after a verb of saying or being opens no clause about a noun
    assert question_hops("Where is that man buying silk from?") == 0
    assert question_hops("James decided that competing was right; what could happen?") == 0
    # with a name in the question, an indefinite head still bridges
    assert question_hops("Billy Preston plays for a team that competes in what?") == 1


def test_a_question_one_sentence_states_whole_has_no_hops():
    facts = ('["f","The Dead Sea\'s surface lies about 430 metres below sea level."]\n'
             '["f","It borders Jordan to the east."]\n')  # fmt: skip
    asked = '["q","W","Is the surface of the Dead Sea more than 400 metres below sea level?"]'
    assert question_hops("Is the surface of the Dead Sea more than 400 metres below sea level?") > 0
    assert typed_signals(typed_lines(facts + asked))["hops"] == 0
    currency = (
        '["f","The yen is the currency of Japan."]\n["q","W","What is the currency of Japan?"]'
    )
    assert question_hops("What is the currency of Japan?") == 1
    assert typed_signals(typed_lines(currency))["hops"] == 0
    # two facts to combine are never in one sentence: the bridge stays
    bridge = (
        '["f","The Sistine Chapel is named after Pope Sixtus IV."]\n'
        '["f","Michelangelo painted the ceiling of the Sistine Chapel."]\n'
        '["q","W","Who directed the film that starred the painter of the Sistine Chapel?"]'
    )
    assert typed_signals(typed_lines(bridge))["hops"] >= 1


# a Social IQa situation as each protocol carries it, and the question asked about it
def _situation(sentences: list[str], question: str) -> tuple[str, str]:
    typed = [json.dumps(["x", "situation", s]) for s in sentences]
    prose = "".join(f"Situation:\n{s}\n" for s in sentences)
    return (
        "\n".join([*typed, json.dumps(["q", "W", question])]),
        f"Goal: Choose the best option for the question.\n{prose}Question: {question}?",
    )


@pytest.mark.parametrize(
    ("sentences", "question", "count"),
    [
        # a later event takes up what an earlier one told of: an inference step
        (["Grace lent her only umbrella to a colleague.",
          "At six it was pouring, and the colleague had gone home."],
         "How will Grace feel on her way home", 1),
        (["Only Chen and the puppy were home.", "The puppy was shut in the garden.",
          "There were crumbs on Chen's jumper."], "Who ate the biscuits", 1),
        # one event, or events that share nothing but a name: one reading of a situation
        (["Jordan dropped a full glass of juice on the kitchen floor."],
         "What will Jordan want to do next", 0),
        (["Rafael arrived at his sister's flat after a long walk in the rain.",
          "Rafael was holding flowers."], "Why did Rafael bring the flowers", 0),
        # the sentence that asks is no premise, whatever it shares with the situation
        (["Noor's classmate held her umbrella over both of them on the walk home."],
         "How would Noor feel toward her classmate", 0),
        # short words link nothing
        (["Riley got out.", "The others ran out too."], "What happens next", 0),
    ],
)  # fmt: skip
def test_premises_that_build_on_an_earlier_one_are_hops(sentences, question, count):
    typed, prose = _situation(sentences, question)
    parts = typed_parts(typed)
    assert parts.situation == sentences and not parts.context
    assert prose_parts(prose).situation == sentences
    assert premises(parts) == count == premises(prose_parts(prose))
    assert typed_signals(typed_lines(typed))["hops"] == count == prose_signals(prose)["hops"]


def test_a_question_that_opens_with_premises_counts_them():
    """CommonsenseQA holds its situation in the question: its sentences before the one
    that asks are premises too; a passage's sentences are not (it is read, not told)."""
    told = json.dumps(
        ["q", "W", "All in the club play in the band. Luis is not in the band. What follows?"]
    )
    assert typed_signals(typed_lines(told))["hops"] == 1
    passage = (
        '["x","passage","The band plays on Fridays. The band has ten members."]\n'
        '["q","W","does the band play on fridays"]'
    )
    assert premises(typed_parts(passage)) == 0


@given(st.integers(0, 10**6), st.text(min_size=1, max_size=12))
def test_scramble_is_a_seeded_permutation_of_tags(seed, example_id):
    lines = [(t, f"payload {i}") for i, t in enumerate(TAGS)]
    out = scramble(lines, seed, example_id)
    assert out == scramble(lines, seed, example_id)  # deterministic
    assert sorted(t for t, _ in out) == sorted(TAGS)  # a permutation of the alphabet
    assert [p for _, p in out] == [p for _, p in lines]  # payloads untouched


def test_scramble_changes_what_the_counts_say():
    lines = typed_lines(TYPED)
    changed = {
        json.dumps(typed_signals(scramble(lines, seed, "ex")), sort_keys=True) for seed in range(20)
    }
    assert len(changed) > 1  # the counts depend on which letters the lines got


def test_policies():
    kw = dict(rule="chain", seed=1, example_id="e1")
    assert policy_route("star", task="gsm8k", **kw) == "star"
    assert policy_route("chain", task="boolq", **kw) == "chain"
    assert policy_route("adaptive", task="boolq", **kw) == "chain"
    for task, label in topology_labels().items():
        want = "star" if label == "direct" else "chain"
        assert policy_route("oracle", task=task, **kw) == want == label_route(task)
    with pytest.raises(KeyError, match="no topology label"):
        label_route("toolqa")
    with pytest.raises(ValueError, match="unknown routing policy"):
        policy_route("coin", task="gsm8k", **kw)


def test_random_policy_is_seeded_per_example_and_fair():
    ids = [f"ex{i}" for i in range(400)]
    first = [random_route(7, i) for i in ids]
    assert first == [random_route(7, i) for i in ids]  # reproducible
    assert 160 <= first.count("chain") <= 240  # a fair coin over 400 examples
    assert first != [random_route(8, i) for i in ids]  # the seed matters


def test_settings_validation_names_the_problem():
    rs = RouteSettings(weights={"plans": 5}, drop="code")
    assert rs.weights["plans"] == 5 and rs.weights["hops"] == DEFAULT_WEIGHTS["hops"]
    assert rs.effective_weights()["code"] == 0.0
    with pytest.raises(ValidationError, match="unknown signal"):
        RouteSettings(weights={"sentences": 1})
    with pytest.raises(ValidationError):
        RouteSettings(theta=math.inf)
    with pytest.raises(ValidationError, match="finite"):
        RouteSettings(weights={"hops": math.nan})
    with pytest.raises(ValidationError):
        RouteSettings(drop="sentences")
    with pytest.raises(ValidationError, match="no tags to scramble"):
        system("topology_freeform").parse({"scramble_tags": True})


# -- decisions in real records (the scripted double: control flow only) -----------------------
@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = {}
    for task in ("hotpotqa", "gsm8k"):
        ev, _ = sample(task, load_records(task, data_dir=REPO / "data"), n=4, calibration_n=0,
                       seed=3)  # fmt: skip
        path = tmp_path_factory.mktemp(task) / "sample.parquet"
        ev.to_parquet(path)
        out[task] = path
    return out


def routed_spec(base_config, tmp_path, task, name, sections=None, **settings):
    """The run spec of system ``name`` with one variant ``v`` of ``settings`` on ``task``
    (``sections``: more top-level config sections, e.g. a task's own)."""
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    cfg["systems"][name] = {"variants": {"v": settings}}
    cfg.update(ablations={}, calibration={}, **(sections or {}))
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    return run_spec(cfg, task, name, "v")


def routed_run(base_config, tmp_path, samples, task, name, client=None, **settings):
    spec = routed_spec(base_config, tmp_path, task, name, **settings)
    out = tmp_path / f"{task}-{name}-{abs(hash(json.dumps(settings, sort_keys=True)))}.parquet"
    client = client or ScriptedClient(scripted)
    return run(spec, samples[task], out, client=client, progress=False)


@pytest.mark.parametrize("name", ["topology_tersetalk", "topology_freeform"])
def test_recorded_decisions_are_reproduced_from_the_signals_alone(
    base_config, tmp_path, samples, name
):
    for task in ("hotpotqa", "gsm8k"):
        df = routed_run(base_config, tmp_path, samples, task, name, policy="adaptive", theta=4.0)
        assert df["error"].isna().all()
        for _, row in df.iterrows():
            signals, weights = json.loads(row["route_signals"]), json.loads(row["route_weights"])
            assert sorted(signals) == sorted(SIGNALS)
            rule, s = decide(signals, weights, row["route_theta"])
            assert (rule, s) == (row["route_rule"], row["route_score"])
            assert row["route"] == rule  # adaptive follows the rule
            assert row["route_features"] == ("typed" if name == "topology_tersetalk" else "prose")
            assert row["t_route_s"] >= 0


def test_ablations_are_recorded_and_change_only_the_score(base_config, tmp_path, samples):
    base = routed_run(base_config, tmp_path, samples, "hotpotqa", "topology_tersetalk",
                      policy="star")  # fmt: skip
    dropped = routed_run(base_config, tmp_path, samples, "hotpotqa", "topology_tersetalk",
                         policy="star", drop="quantities")  # fmt: skip
    assert (dropped["route_drop"] == "quantities").all()
    assert (dropped["route_signals"] == base["route_signals"]).all()  # still counted
    assert all(json.loads(w)["quantities"] == 0 for w in dropped["route_weights"])
    quantities = [json.loads(sig)["quantities"] for sig in base["route_signals"]]
    assert any(quantities)  # HotpotQA's facts hold numbers
    lost = [0.25 * q for q in quantities]  # the weight of quantities times its count
    assert (base["route_score"] - dropped["route_score"]).tolist() == pytest.approx(lost)
    scrambled = routed_run(base_config, tmp_path, samples, "hotpotqa", "topology_tersetalk",
                           policy="star", scramble_tags=True)  # fmt: skip
    assert scrambled["route_scrambled"].all() and not base["route_scrambled"].any()
    assert (scrambled["route_signals"] != base["route_signals"]).any()
    # the messages do not change: only what the router reads does
    assert [message_list(m) for m in scrambled["messages"]] == [
        message_list(m) for m in base["messages"]
    ]


# -- the fan-out cap, the planning Manager, the brief's parts --------------------------
def test_fan_out_cap_sends_a_chain_route_to_the_star_and_records_it(base_config, tmp_path,
                                                                    samples):  # fmt: skip
    chain = routed_run(base_config, tmp_path, samples, "gsm8k", "topology_tersetalk",
                       policy="chain")  # fmt: skip
    capped = routed_run(base_config, tmp_path, samples, "gsm8k", "topology_tersetalk",
                        policy="chain", fan_out_cap=1)  # fmt: skip
    assert (chain["route"] == "chain").all() and not chain["route_capped"].any()
    assert (capped["route"] == "star").all() and capped["route_capped"].all()
    # the cap changes the route, never what the rule said
    assert (capped["route_rule"] == chain["route_rule"]).all()
    with pytest.raises(ValidationError):
        RouteSettings(fan_out_cap=0)


def planning(messages, gen, schema):
    """The scripted double with a Manager that plans: two steps, one delegating M#1."""
    if schema is not None and schema.__name__ == "ManagerPlan":
        return json.dumps({"steps": [{"text": "Find the numbers", "ref": ""},
                                     {"text": "Check the result", "ref": "M#1"}]})  # fmt: skip
    if messages[0]["content"].startswith("You are the Manager"):
        return "1. Find the numbers\n2. Check the result"
    return scripted(messages, gen, schema)


@pytest.mark.parametrize("name", ["topology_tersetalk", "topology_freeform"])
def test_a_planning_manager_writes_plan_lines_the_router_reads(base_config, tmp_path, samples,
                                                               name):  # fmt: skip
    planned = {"policy": "adaptive", "planner": "model"}
    df = routed_run(base_config, tmp_path, samples, "gsm8k", name,
                    client=ScriptedClient(planning), **planned)  # fmt: skip
    assert df["error"].isna().all()
    for _, row in df.iterrows():
        signals = json.loads(row["route_signals"])
        assert signals["plans"] == 2  # both steps counted as plan lines / numbered steps
        brief = message_list(row["messages"])[0]["content"]
        assert "Find the numbers" in brief
    assert (df["c_planner_calls"] == 1).all() and (df["c_planner_steps"] == 2).all()
    if name == "topology_tersetalk":
        # the d line only when the brief's memory holds M#1 (a GSM8K fact overflowed)
        refs = df["c_planner_refs"]
        assert set(refs) <= {0, 1}


def test_a_brief_routes_alike_whichever_part_holds_its_sentences():
    """The brief's parts as typed lines: a BoolQ passage or multiple-choice options folded
    into facts give the same signals (content, not layout), HumanEval's code is seen as
    code and never overflows into M#."""
    from tersetalk.agents.roles import build_brief, lay_out
    from tersetalk.protocol import serialize
    from tersetalk.protocol.brief import encode_brief
    from tersetalk.systems.topology import TerseTalkRouteSettings

    def routed(task, **layout):
        rec = load_records(task, data_dir=REPO / "data")[0]
        b = lay_out(build_brief(task, rec), TerseTalkRouteSettings(**layout))
        lines, _ = encode_brief(b.goal, b.facts, b.question, context=b.context,
                                options=b.options, code=b.code)  # fmt: skip
        wire = serialize(lines)
        return decide(typed_signals(typed_lines(wire)), DEFAULT_WEIGHTS, 3.0)[0], wire

    for task in ("boolq", "commonsenseqa", "socialiqa"):
        folded = {"brief_context": "facts", "brief_options": "facts"}
        unfolded_route, unfolded = routed(task)
        folded_route, wire = routed(task, **folded)
        assert '["x",' in unfolded and '["x",' not in wire, task
        assert folded_route == unfolded_route, task
    route, wire = routed("humaneval")
    assert route == "chain" and '["x","code",' in wire and '"o"' not in wire
    route, wire = routed("humaneval", brief_code="question")
    assert '["o",' in wire  # folded into the question, the prompt overflows into M#


def test_weights_from_reads_the_fitted_router_and_names_what_is_wrong(tmp_path):
    import yaml

    fitted = {"hops": 0.5, "plans": 1.0, "quantities": -0.25, "arithmetic": 0.0,
              "conditions": 2.0, "code": 3.0}  # fmt: skip
    path = tmp_path / "router.yaml"
    entry = {"weights": fitted, "theta": 1.25}
    path.write_text(yaml.safe_dump({"systems": {"topology_tersetalk": entry}}))
    rs = RouteSettings(weights_from=str(path))
    assert rs.rule("topology_tersetalk") == (fitted, 1.25)
    dropped = RouteSettings(weights_from=str(path), drop="code").rule("topology_tersetalk")
    assert dropped[0]["code"] == 0.0 and dropped[0]["conditions"] == 2.0
    assert RouteSettings().rule("x") == (dict(DEFAULT_WEIGHTS), 3.0)  # by hand: unchanged
    with pytest.raises(ValueError, match="no fitted router for 'topology_freeform'"):
        rs.rule("topology_freeform")
    path.write_text(yaml.safe_dump({"topology_tersetalk": {"weights": {"hops": 1}, "theta": 0}}))
    with pytest.raises(ValueError, match="weights must give each of"):
        rs.rule("topology_tersetalk")  # a rewritten file is read again
    path.write_text(yaml.safe_dump({"topology_tersetalk": {"weights": fitted, "theta": "x"}}))
    with pytest.raises(ValueError, match="must be finite"):
        rs.rule("topology_tersetalk")
    with pytest.raises(ValueError, match="topology-fit"):
        RouteSettings(weights_from=str(tmp_path / "missing.yaml")).rule("topology_tersetalk")


def hostile_router_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """Router files a careless or hostile hand made: name -> (path, what the error says)."""
    laughs = ["l0: &l0 [ha, ha, ha, ha, ha, ha, ha, ha, ha]"] + [
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)
    ]  # 9**10 values once expanded, from under 1 KB
    texts = {
        "laughs": ("systems:\n  topology_tersetalk: {theta: 1}\n" + "\n".join(laughs) + "\n",
                   "aliases (*name) expand to more than 100000 values"),
        "deep": ("systems: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than 100"),
    }  # fmt: skip
    out = {}
    for name, (text, said) in texts.items():
        path = folder / f"{name}.yaml"
        path.write_text(text)
        out[name] = (path, said)
    return out


@pytest.mark.parametrize("name", ["laughs", "deep"])
def test_every_reader_of_a_router_file_refuses_a_hostile_one_naming_it(tmp_path, name):
    from tersetalk.topology.cli import fitted_router
    from tersetalk.topology.fit import RouterFileError, read_router_yaml

    path, said = hostile_router_files(tmp_path)[name]
    start = f"router file {path}: "
    with pytest.raises(ValueError) as info:
        RouteSettings(weights_from=str(path)).rule("topology_tersetalk")
    assert str(info.value).startswith(start) and said in str(info.value)
    with pytest.raises(RouterFileError) as info:
        read_router_yaml(path)
    assert str(info.value).startswith(start) and said in str(info.value)
    with pytest.raises(ValueError) as info:
        fitted_router(path)  # what `tersetalk topology --router-yaml` copies into its summary
    assert str(info.value).startswith(start) and said in str(info.value)


def test_the_critics_copy_keeps_the_code_the_question_asks_about(base_config, tmp_path):
    """critic_copy: question sends the Critic the question; when the brief carries the
    program text apart from it (HumanEval), the code line goes with it, uncapped."""
    ev, _ = sample("humaneval", load_records("humaneval", data_dir=REPO / "data"), n=1,
                   calibration_n=0, seed=3)  # fmt: skip
    path = tmp_path / "he.parquet"
    ev.to_parquet(path)
    # control flow only: no bwrap needed
    sections = {"humaneval": {"sandbox": {"isolation": "process"}}}
    spec = routed_spec(base_config, tmp_path, "humaneval", "topology_tersetalk", sections,
                       policy="star")  # fmt: skip
    df = run(spec, path, tmp_path / "out.parquet", client=ScriptedClient(scripted),
             progress=False)  # fmt: skip
    messages = message_list(df["messages"].iloc[0])
    to_critic = [m for m in messages if m["sender"] == "M" and m["receiver"] == "C"]
    assert to_critic, [(m["sender"], m["receiver"]) for m in messages]
    record = ev["record"].iloc[0]
    prompt = (json.loads(record) if isinstance(record, str) else record)["question"]
    code = json.dumps(["x", "code", prompt], ensure_ascii=False, separators=(",", ":"))
    assert code in to_critic[0]["content"]


@pytest.mark.parametrize(
    "question",
    [("Aa  " * 3000) + "x?", "A " * 5000 + "?", "Ab and " * 2000, "who " * 5000],
)
def test_a_hostile_question_is_read_in_bounded_time(question):
    """Whatever a record holds: the bridge patterns read a bounded prefix, and names are
    matched without ambiguous whitespace (double spaces once made a pattern backtrack
    for minutes). The bound is on the work, so the test counts nothing slow: it would
    hang, not fail, without it."""
    from tersetalk.topology.signals import MAX_QUESTION_CHARS

    assert question_hops(question) == question_hops(question[:MAX_QUESTION_CHARS])
