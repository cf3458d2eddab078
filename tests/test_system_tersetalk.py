"""Control flow of the ``tersetalk`` system with the scripted double (no reported numbers)."""

import copy
import html
import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tersetalk.core.io import message_list
from tersetalk.models import ScriptedClient
from tersetalk.pipeline.config import ConfigError, run_spec, validate_config
from tersetalk.pipeline.runner import run
from tersetalk.protocol import REPAIR_KINDS, TAGS, parse_lenient, parse_strict
from tersetalk.tasks.loading import load_records, sample


@pytest.fixture
def hotpot(tmp_path, repo):
    records = load_records("hotpotqa", data_dir=repo / "data")
    ev, _ = sample("hotpotqa", records, n=2, calibration_n=0, seed=11)
    path = tmp_path / "sample.parquet"
    ev.to_parquet(path)
    return path


def spec_for(base_config, tmp_path, max_revisions=None, **settings):
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(tmp_path / "cache")
    if max_revisions is not None:
        cfg["pipeline"]["max_revisions"] = max_revisions
    cfg["systems"]["tersetalk"] = {"variants": {"v": settings}}
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    validate_config(cfg)
    return run_spec(cfg, "hotpotqa", "tersetalk", "v")


def structured_model(need=()):
    """Worker's first reply asks for ``need``; then it answers. The Critic asks for a revision."""

    def respond(messages, gen, schema):
        if schema is None:
            raise AssertionError("schema mode must not make free calls here")
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "R", "note": "check the year"})
        if need and len(messages) == 2:  # system prompt + the brief: the first reply
            return json.dumps({"plan": [], "need": list(need), "answer": "unsure"})
        return json.dumps({"plan": ["look up"], "need": [], "answer": "Paris"})

    return respond


def test_schema_mode_messages_are_canonical_lines_and_compliance_counted(base_config, tmp_path,
                                                                          hotpot):  # fmt: skip
    spec = spec_for(base_config, tmp_path, caps="aggressive", deref="conditional")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert df["error"].isna().all()
    for raw in df["messages"]:
        for m in message_list(raw):
            lines = parse_strict(m["content"])  # every message is valid strict JSONL
            assert lines
    assert (df["prediction"] == "Paris").all()
    assert (df["revisions"] == 1).all() and (df["verdict"] == "revise").all()
    # worker, critic, revised worker: three schema calls, all valid at first try
    assert (df["c_compliance_calls"] == 3).all() and (df["c_compliance_first_try"] == 3).all()
    assert (df["c_deref_derefs"] == 0).all()


def test_conditional_deref_only_when_asked(base_config, tmp_path, hotpot):
    spec = spec_for(base_config, tmp_path, caps={"f": 3, "q": 200}, deref="conditional")
    df = run(spec, hotpot, tmp_path / "o.parquet",
             client=ScriptedClient(structured_model(need=["M#1"])), progress=False)  # fmt: skip
    assert (df["c_overflow_f"] > 0).all()
    assert (df["c_deref_derefs"] == 1).all() and (df["c_deref_reinjected_tokens"] > 0).all()
    kinds = [m["kind"] for m in message_list(df["messages"].iloc[0])]
    assert kinds.count("deref") == 1
    never = spec_for(base_config, tmp_path, caps={"f": 3, "q": 200}, deref="never")
    df = run(never, hotpot, tmp_path / "n.parquet",
             client=ScriptedClient(structured_model(need=["M#1"])), progress=False)  # fmt: skip
    assert (df["c_deref_derefs"] == 0).all()


def test_always_deref_reinjects_every_overflow(base_config, tmp_path, hotpot):
    spec = spec_for(base_config, tmp_path, caps={"f": 3, "q": 200}, deref="always")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert (df["c_deref_derefs"] == df["c_overflow_total"]).all()


def test_posthoc_mode_repairs_and_falls_back(base_config, tmp_path, hotpot):
    def messy(messages):
        if messages[0]["content"].startswith("You are the Critic"):
            return 'Sure!\n```\n["r","C"]\n{"verdict": "accept"}\n```'
        return "I think the answer is Paris."  # no structure at all

    spec = spec_for(base_config, tmp_path, enforcement="posthoc")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(messy), progress=False)
    assert df["error"].isna().all()
    assert (df["c_compliance_fallback"] == 1).all()  # the worker's prose
    assert (df["c_compliance_repaired"] == 1).all()  # the critic's fenced, mixed reply
    assert (df["c_repairs"] > 0).all()
    assert (df["verdict"] == "accept").all()


def test_schema_failure_falls_back_to_lenient_free_generation(base_config, tmp_path, hotpot):
    def never_valid(messages, gen, schema):
        if schema is not None:
            return "not json"
        return '["r","W"]\n["x","answer","Paris"]'

    spec = spec_for(base_config, tmp_path)
    cfg_client = ScriptedClient(never_valid, max_retries=1)
    df = run(spec, hotpot, tmp_path / "o.parquet", client=cfg_client, progress=False)
    assert df["error"].isna().all() and (df["prediction"] == "Paris").all()
    assert (df["c_compliance_first_try"] == 0).all()
    assert (df["c_compliance_fallback"] == df["c_compliance_calls"]).all()


def is_critic(messages):
    return messages[0]["content"].startswith("You are the Critic")


def test_json_mode_normalises_post_hoc_and_counts_every_change(base_config, tmp_path, hotpot):
    json_modes = []

    def respond(messages, gen, schema):
        assert schema is None, "json mode makes free calls, no schema"
        json_modes.append(gen.json_mode)
        if is_critic(messages):
            return json.dumps({"verdict": "A", "note": "fine"})  # valid for the schema
        # JSON, but past the reply's bounds: a 150-character step, a 4th step, a bad ref
        return json.dumps({"plan": ["x" * 150, "b", "c", "d"], "need": ["fact 3"],
                           "answer": "Paris"})  # fmt: skip

    spec = spec_for(base_config, tmp_path, enforcement="json")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(respond), progress=False)
    assert df["error"].isna().all() and (df["prediction"] == "Paris").all()
    assert json_modes and all(json_modes)  # every call asked the backend for JSON
    assert (df["c_compliance_calls"] == 2).all()
    assert (df["c_compliance_first_try"] == 1).all()  # the critic's object validated as is
    assert (df["c_compliance_repaired"] == 1).all()  # the worker's was normalised
    assert (df["c_reply_truncated"] == 1).all()  # the long step was cut ...
    assert (df["c_reply_dropped"] == 2).all()  # ... the 4th step and "fact 3" dropped
    for raw in df["messages"]:
        draft = next(m for m in message_list(raw) if m["kind"] == "draft")
        steps = [ln.text for ln in parse_strict(draft["content"]) if ln.tag == "p"]
        assert steps == ["x" * 100, "b", "c"]


def test_valid_after_retries_is_recorded_as_such(base_config, tmp_path, hotpot):
    tries = Counter()

    def respond(messages, gen, schema):
        key = json.dumps(messages)
        tries[key] += 1
        if schema.__name__ == "CriticReply":
            return json.dumps({"verdict": "A", "note": ""})
        if tries[key] == 1:
            return json.dumps({"plan": [], "need": [], "answer": ""})  # empty answer: invalid
        return json.dumps({"plan": [], "need": [], "answer": "Paris"})

    spec = spec_for(base_config, tmp_path)  # schema enforcement
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(respond), progress=False)
    assert df["error"].isna().all() and (df["prediction"] == "Paris").all()
    assert (df["c_compliance_calls"] == 2).all()
    assert (df["c_compliance_after_retries"] == 1).all()
    assert (df["c_compliance_first_try"] == 1).all()  # the critic
    assert (df["c_compliance_fallback"] == 0).all()
    for raw in df["counters"]:
        log = json.loads(raw)["compliance_log"]
        assert log == [{"role": "worker", "outcome": "after_retries"},
                       {"role": "critic", "outcome": "first_try"}]  # fmt: skip


def test_lines_are_counted_by_tag_and_direction_for_every_message(base_config, tmp_path,
                                                                   hotpot):  # fmt: skip
    # every line the protocol can send: role lines, the goal and the whole brief to the Critic
    spec = spec_for(base_config, tmp_path, caps="aggressive", role_lines=True, goal_line=True,
                    critic_copy="full")  # fmt: skip
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert df["error"].isna().all()
    for tag in TAGS:
        assert f"c_msg_lines_{tag}" in df.columns
    row = df.iloc[0]
    brief = int(row["c_lines_total"])  # the existing counters still describe the brief only
    assert row["c_lines_r"] == 1 and row["c_lines_v"] == 0
    # brief to W and to C; draft r,p,x; verdict r,v,q (a revise note is a question); final r,x
    assert row["c_msg_lines_M_W"] == brief and row["c_msg_lines_M_C"] == brief
    assert (row["c_msg_lines_W_C"], row["c_msg_lines_C_W"], row["c_msg_lines_W_M"]) == (3, 3, 2)
    assert row["c_msg_lines_total"] == 2 * brief + 8
    assert (row["c_msg_lines_r"], row["c_msg_lines_v"], row["c_msg_lines_p"]) == (5, 1, 1)
    assert row["c_msg_lines_x"] == 2
    assert row["c_msg_lines_q"] == 2 * row["c_lines_q"] + 1
    assert sum(row[f"c_msg_lines_{t}"] for t in TAGS) == row["c_msg_lines_total"]


def test_revise_is_one_round_as_in_freeform(base_config, tmp_path, hotpot):
    client = ScriptedClient(structured_model())  # the Critic always asks for a revision
    spec = spec_for(base_config, tmp_path, max_revisions=3)
    df = run(spec, hotpot, tmp_path / "o.parquet", client=client, progress=False)
    assert (df["revisions"] == 1).all() and (df["verdict"] == "revise").all()
    # per example: worker, critic, one revised worker; the Critic is not asked again
    assert (df["c_compliance_calls"] == 3).all()
    assert [c["schema"].__name__ for c in client.calls] == ["WorkerReply", "CriticReply",
                                                            "WorkerReply"] * 2  # fmt: skip
    none = spec_for(base_config, tmp_path, max_revisions=0)
    df = run(none, hotpot, tmp_path / "n.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert (df["revisions"] == 0).all() and (df["c_compliance_calls"] == 2).all()


WORKER_PROSE = "I think the answer is Paris."
CRITIC_MIXED = 'Sure!\n```\n["r","C"]\n{"verdict": "accept"}\n```'


def test_repairs_are_counted_by_kind(base_config, tmp_path, hotpot):
    def messy(messages):
        return CRITIC_MIXED if is_critic(messages) else WORKER_PROSE

    spec = spec_for(base_config, tmp_path, enforcement="posthoc")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(messy), progress=False)
    expected = Counter(parse_lenient(WORKER_PROSE).repairs)
    expected.update(parse_lenient(CRITIC_MIXED).repairs)
    assert expected["code_fence"] == 2 and expected["prose"] == 2  # what the double sends
    for kind in REPAIR_KINDS:  # every kind has its column, zero when unused
        assert (df[f"c_repairs_{kind}"] == expected[kind]).all(), kind
    assert (df["c_repairs"] == sum(df[f"c_repairs_{k}"] for k in REPAIR_KINDS)).all()


@pytest.mark.parametrize(
    ("critic_text", "verdict", "explicit"),
    [
        ("Looks fine to me.", "accept", False),  # no verdict anywhere: defaulted
        ("REVISE: the year is wrong.", "revise", True),  # raw text, but stated
        ('["r","C"]\n["v","E"]', "escalate", True),  # a v line
    ],
)
def test_verdict_explicit_is_carried_through(base_config, tmp_path, hotpot, critic_text, verdict,
                                             explicit):  # fmt: skip
    def respond(messages):
        return critic_text if is_critic(messages) else '["r","W"]\n["x","answer","Paris"]'

    spec = spec_for(base_config, tmp_path, enforcement="posthoc")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(respond), progress=False)
    assert df["error"].isna().all()
    assert (df["verdict"] == verdict).all()
    assert (df["verdict_explicit"] == explicit).all()


def test_bad_variant_setting_names_the_key(base_config):
    cfg = copy.deepcopy(base_config)
    cfg.update(ablations={}, calibration={})
    cfg["evaluation"]["comparisons"] = []
    cfg["systems"]["tersetalk"] = {"variants": {"x": {"deref": "sometimes"}}}
    with pytest.raises(ConfigError, match=r"systems\.tersetalk\.variants\.x\.deref"):
        validate_config(cfg)
    cfg["systems"]["tersetalk"] = {"variants": {"x": {}}}
    cfg["systems"]["freeform"] = {"variants": {"y": {"caps": "baseline"}}}
    with pytest.raises(ConfigError, match=r"systems\.freeform\.variants\.y"):
        validate_config(cfg)


@pytest.mark.parametrize("enforcement", ["schema", "json"])
def test_constrained_worker_replies_get_their_own_budget(base_config, tmp_path, hotpot,
                                                        enforcement):  # fmt: skip
    spec = spec_for(base_config, tmp_path, enforcement=enforcement, structured_max_tokens=300)

    def respond(messages, gen, schema):  # json mode asks for JSON through chat calls
        if "You are the Critic" in messages[0]["content"]:
            return json.dumps({"verdict": "A", "note": ""})
        return json.dumps({"plan": [], "need": [], "answer": "Paris"})

    client = ScriptedClient(respond)
    run(spec, hotpot, tmp_path / "o.parquet", client=client, progress=False)
    worker = [c for c in client.calls if "You are the Worker" in c["messages"][0]["content"]]
    critic = [c for c in client.calls if "You are the Critic" in c["messages"][0]["content"]]
    assert worker and critic
    assert {c["gen"].max_tokens for c in worker} == {300}
    assert {c["gen"].max_tokens for c in critic} == {base_config["generation"]["critic_max_tokens"]}


def test_free_fallback_after_a_failed_constrained_reply_keeps_the_free_budget(
    base_config, tmp_path, hotpot
):
    spec = spec_for(base_config, tmp_path, structured_max_tokens=300)

    def respond(messages, gen, schema):
        if schema is not None and schema.__name__ == "WorkerReply":
            return "not json at all"  # stays invalid through every retry
        if schema is not None:
            return json.dumps({"verdict": "A", "note": ""})
        return "Answer: Paris"

    client = ScriptedClient(respond)
    df = run(spec, hotpot, tmp_path / "o.parquet", client=client, progress=False)
    assert df["error"].isna().all()
    free = [c for c in client.calls if c["kind"] == "chat"]
    assert free and {c["gen"].max_tokens for c in free} == {base_config["generation"]["max_tokens"]}


def test_a_server_fault_in_schema_mode_is_not_a_fallback(base_config, tmp_path, hotpot):
    # a timeout or 5xx is the server's, not the answer's: it must not be read as "the
    # model could not fill the schema" (a fallback), but fail the run for a retry
    from tersetalk.models import TransientModelError
    from tersetalk.pipeline.runner import RunIncompleteError, checkpoint_path

    def flaky(messages, gen, schema):
        if schema is not None and schema.__name__ == "WorkerReply":
            raise TransientModelError("HTTP 503 on all 3 attempts")
        return json.dumps({"verdict": "A", "note": ""})

    spec = spec_for(base_config, tmp_path)
    out = tmp_path / "o.parquet"
    with pytest.raises(RunIncompleteError, match="2 of 2 examples failed"):
        run(spec, hotpot, out, client=ScriptedClient(flaky), progress=False)
    assert not out.exists() and checkpoint_path(out).read_text() == ""


def test_the_default_brief_repeats_nothing_the_wire_or_the_prompt_already_carries(
    base_config, tmp_path, hotpot
):
    from tersetalk.agents.roles import build_brief
    from tersetalk.tasks.loading import read_sample

    spec = spec_for(base_config, tmp_path, caps="very_relaxed")
    df = run(spec, hotpot, tmp_path / "o.parquet", client=ScriptedClient(structured_model()),
             progress=False)  # fmt: skip
    assert df["error"].isna().all()
    examples = {e["example_id"]: e for e in read_sample(hotpot)}
    for row in df.itertuples():
        msgs = message_list(row.messages)
        brief = parse_strict(msgs[0]["content"])
        # no role lines on the wire, no goal line; every fact and the question arrive
        assert all(m["content"].count('["r",') == 0 for m in msgs)
        # the facts travel as one merged f line (fact_lines: merged), then the question
        assert [ln.tag for ln in brief] == ["f", "q"]
        facts = build_brief("hotpotqa", examples[row.example_id]["record"]).facts
        sent = brief[0].text
        # double quotes travel as single ones (quotes: single): no JSON escapes
        assert '"' not in sent and '"' not in brief[1].text
        rest = sent
        previous = None
        for fact in facts:
            fact = html.unescape(fact).replace('"', "'")
            title, _, sentence = fact.partition(": ")
            # the title goes at most once per paragraph, and only when the sentence does
            # not name it; facts keep their order
            got = fact if rest.startswith(fact) else sentence
            assert rest.startswith(got), (got, rest[:80])
            assert got == sentence or title != previous
            rest = rest[len(got) :].lstrip(" ")
            previous = title
        assert rest == ""
        # the Critic gets the question only (M->C), then judges the draft against it
        copy = [m for m in msgs if (m["sender"], m["receiver"]) == ("M", "C")]
        assert [ln.tag for ln in parse_strict(copy[0]["content"])] == ["q"]
        assert row.tokens_M_C_cl100k < row.tokens_M_W_cl100k


def test_fact_titles_are_dropped_only_when_the_sentence_names_them():
    from tersetalk.tasks.hotpotqa import dedup_title

    assert dedup_title("Paul Kantner: Paul Lorin Kantner was a musician.") == (
        "Paul Lorin Kantner was a musician."
    )
    # a parenthetical aside in the title need not be repeated
    assert dedup_title("The Wild (film): The Wild is a 2006 film.") == "The Wild is a 2006 film."
    # "the beer" does not name Genny Light: the title stays
    kept = "Genny Light: The beer has 4.0% alcohol."
    assert dedup_title(kept) == kept
    assert dedup_title("no title here") == "no title here"


def test_loose_title_names_fold_accents_first_names_and_legal_suffixes():
    from tersetalk.tasks.hotpotqa import dedup_title, names_title

    # a short first name the sentence spells out, an accent, a company's legal form
    for title, sentence in [
        ("Chris Summers (ice hockey)", "Christopher C Summers is a defenseman."),
        ("Case Keenum", "Casey Austin Keenum is a quarterback."),
        ("Nick Grinde", "Nick Grindé was a director."),
        ("Stone Brewing Co.", "Stone Brewing is a brewery."),
    ]:
        assert names_title(title, sentence, loose=True)
        assert not names_title(title, sentence)
    # a surname alone does not name "Dan LeFevour"; two letters are no first name
    assert not names_title("Dan LeFevour", "LeFevour had the most touchdowns.", loose=True)
    assert not names_title("Al Gore", "Alan Gore was a senator.", loose=True)
    # a legal form alone is a title word like any other
    assert not names_title("Co.", "The company is old.", loose=True)
    # HTML entities in a kept title are decoded; a decoded one can be named
    assert (
        dedup_title("X&amp;Y: The album's cover art.", loose=True) == "X&Y: The album's cover art."
    )
    assert dedup_title("Waring &amp; Gillow: Waring & Gillow is a firm.", loose=True) == (
        "Waring & Gillow is a firm."
    )
    assert dedup_title("X&amp;Y: The album's cover art.") == "X&amp;Y: The album's cover art."


def test_paragraph_titles_say_a_title_once_per_run_of_its_sentences():
    from tersetalk.tasks.hotpotqa import paragraph_titles

    facts = [
        "Genny Light: Genny Light is a beer.",
        "Genny Light: The beer has 4.0% alcohol.",
        "Genesee Brewing Company: It is a brewery.",
        "Genesee Brewing Company: Along with this change, it was renamed.",
        "Genny Light: The can is green.",
    ]
    assert paragraph_titles(facts) == [
        "Genny Light is a beer.",
        "The beer has 4.0% alcohol.",
        "Genesee Brewing Company: It is a brewery.",
        "Along with this change, it was renamed.",
        # a new run of the first paragraph names it again
        "Genny Light: The can is green.",
    ]
    assert paragraph_titles(["no title", "no title"]) == ["no title", "no title"]


def _encoded_brief(facts, question, settings):
    """The serialised lines of a HotpotQA brief the codec writes under ``settings``."""
    from tersetalk.agents.codecs.tersetalk import TerseTalkCodec
    from tersetalk.agents.context import RunContext
    from tersetalk.agents.roles import Brief
    from tersetalk.protocol import serialize

    ctx = RunContext(task="hotpotqa", client=None, gen=None, critic_gen=None)
    codec = TerseTalkCodec(ctx, settings, {}, Brief(goal="g", facts=facts, question=question),
                           None)  # fmt: skip
    lines, _ = codec.encode_brief(settings.cap_dict(), codec.memory)
    return serialize(lines).split("\n")


def test_brief_settings_for_titles_and_quotes_each_change_only_their_part():
    from tersetalk.agents.codecs.tersetalk import TerseTalkSettings

    facts = [
        'Genny Light: Genny Light is a "light" beer.',
        "Genny Light: The beer has 100 calories.",
    ]
    question = 'Which "light" beer?'

    def brief(**kw):
        return _encoded_brief(facts, question, TerseTalkSettings(**kw))

    default = brief()
    assert default == ['["f","Genny Light is a \'light\' beer. The beer has 100 calories."]',
                       '["q","W","Which \'light\' beer"]']  # fmt: skip
    assert brief(quotes="json")[1] == '["q","W","Which \\"light\\" beer"]'
    assert brief(question_mark="keep")[1] == '["q","W","Which \'light\' beer?"]'
    assert "Genny Light: The beer" in brief(fact_titles="dedup")[0]
    assert brief(fact_titles="keep")[0].startswith('["f","Genny Light: Genny Light is')


def test_a_q_line_leaves_its_final_question_mark_to_the_tag():
    from tersetalk.agents.codecs.tersetalk import tag_question_mark

    assert tag_question_mark("Who won?") == "Who won"
    assert tag_question_mark("Who won ? ") == "Who won"
    # only the last one: a question mark inside the text is part of it
    assert tag_question_mark("Would You Like to Take a Walk? with whom?") == (
        "Would You Like to Take a Walk? with whom"
    )
    assert tag_question_mark("Name the song") == "Name the song"
    assert tag_question_mark("?") == "?"


#: what stripped Wikipedia pronunciations left in real HotpotQA sentences, and the cleanup
RESIDUE = [
    ("McLean ( ) is a census-designated place.", "McLean is a census-designated place."),
    ("styled Mondelēz ( ), is an American company.", "styled Mondelēz, is an American company."),
    ("Yingkou () is a city.", "Yingkou is a city."),
    ("Roger Joseph Ebert ( ; June 18, 1942 – April 4, 2013) was", "Roger Joseph Ebert (June 18, "
     "1942 – April 4, 2013) was"),
    ("Sergio Pérez Mendoza (    ; born 26 January 1990) also", "Sergio Pérez Mendoza (born 26 "
     "January 1990) also"),
    ("Verdi (] ; 9 or 10 October 1813 – 27 January 1901) was", "Verdi (9 or 10 October 1813 – 27 "
     "January 1901) was"),
    ("Robert Clark Seger ( , born May 6, 1945) is", "Robert Clark Seger (born May 6, 1945) is"),
    ("known as Sir Roger Casement  between 1911", "known as Sir Roger Casement between 1911"),
]  # fmt: skip


def test_markup_residue_goes_and_nothing_else_changes():
    from tersetalk.tasks.hotpotqa import strip_residue

    for raw, clean in RESIDUE:
        assert strip_residue(raw) == clean
    # an aside with words in it, a call in code, a lone bracket: untouched
    for kept in ["Vanilla ('V. planifolia').", "f(x) and g()", "Kantner (1941 – 2016)", "a ) b"]:
        assert strip_residue(kept) == kept


_RESIDUE_TEXT = st.lists(
    st.sampled_from([*"ab ()[];,.-\t", "the", "é", "–", "\u00a0", "  ", " ( ) ", "( ; ", "(] ; "]),
    max_size=24,
).map("".join)


@given(_RESIDUE_TEXT)
@settings(max_examples=400, deadline=None)
def test_stripping_residue_keeps_the_normalised_text_the_checks_read(text):
    # gold-reaches-Worker and facts-reaching-Worker compare normalised text: stripping
    # must remove nothing a reader of it could see, nor glue two words together
    from tersetalk.tasks.hotpotqa import normalize_answer, strip_residue

    assert normalize_answer(strip_residue(text)) == normalize_answer(text)


def test_question_mark_and_residue_settings_each_change_only_their_part():
    from tersetalk.agents.codecs.tersetalk import TerseTalkSettings

    facts = ["Bordan Tkachuk: Bordan Tkachuk ( ) is a British business executive."]
    question = "Who is Bordan Tkachuk?"

    def brief(**kw):
        return _encoded_brief(facts, question, TerseTalkSettings(**kw))

    q = '["q","W","Who is Bordan Tkachuk"]'
    assert brief() == ['["f","Bordan Tkachuk is a British business executive."]', q]
    assert brief(residue="keep") == ['["f","Bordan Tkachuk ( ) is a British business executive."]',
                                     q]  # fmt: skip
    assert brief(question_mark="keep")[1] == '["q","W","Who is Bordan Tkachuk?"]'
    for settings_ in ({}, {"residue": "keep"}, {"question_mark": "keep"}):
        text = "\n".join(brief(**settings_))
        # both parsers read the brief; nothing but the q line's "?" and the residue moved
        assert parse_strict(text) == parse_lenient(text).lines
