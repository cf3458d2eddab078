"""MB-1: JSONL and regex extraction recover the same fields (no timing here)."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.agents.roles import Brief, build_brief, render_brief
from tersetalk.bench.corpus import ambiguity, build_corpus, fields_from_message
from tersetalk.bench.extract import BASELINE, METHODS
from tersetalk.bench.fields import (
    Fields,
    FieldsError,
    canonical_text,
    prose_key,
    to_freeform,
    to_jsonl,
    to_prose,
)
from tersetalk.bench.mb1 import check_extraction
from tersetalk.bench.results import EquivalenceError
from tersetalk.bench.synth import synthetic_message, synthetic_sweep
from tersetalk.protocol import (
    ContextLine,
    Memory,
    RoleLine,
    TextLine,
    VerdictLine,
    encode_brief,
    serialize,
)

RENDER = {"jsonl": to_jsonl, "freeform": to_freeform, "prose": to_prose}


def assert_all_methods_recover(fields: Fields) -> None:
    want = fields.key()
    for method in METHODS.values():
        got = method.extract(RENDER[method.representation](fields))
        if method.representation == "prose":
            assert prose_key(got) == prose_key(want), method.name
        else:
            assert got == want, method.name


TRICKY = Fields(
    role="M",
    goal="Answer with a short span, e.g. a name.",
    facts=(
        "Dr. Smith moved to St. Louis in 1999 and met Mr. J. K. Rowling.",
        "The U.S. population grew by 0.5% to 331.4 million; see Fig. 2.",
        'She said "Stop." and left at 5.30 p.m.',
        "It costs $1,204.75, i.e. about 3.5 times more (approx. 12.5 kg).",
        "Version 2.0.1 was released on Jan. 5, 2021 — not v2.0.",
        "Note: the ratio is 3:1; the answer is 42",
        "Wait... is it?!",
        "Café Müller is 12 km from Zürich…",
        "'Single quotes.' And (brackets.)",
    ),
    plan=("Multiply 3.5 by 2.", "Add the U.S. total", "1. Already numbered", "- dash first"),
    questions=(("W", "How many apples did Dr. Lee buy?"), ("C", "Is 3.14 right")),
    verdict="R",
)


def test_tricky_prose_every_method_recovers_every_field():
    assert_all_methods_recover(TRICKY)
    assert ambiguity(TRICKY) is None


def test_freeform_layout_of_a_brief_is_exactly_render_brief():
    brief = Brief(goal="Solve it.", facts=["Dr. Smith has 3.5 apples.", "He eats 1."],
                  question="How many are left?")  # fmt: skip
    fields = Fields(goal=brief.goal, facts=tuple(brief.facts), questions=(("W", brief.question),))
    assert to_freeform(fields) == render_brief(brief)


@pytest.mark.parametrize(
    "fields",
    [
        Fields(role="C", verdict="A"),
        Fields(role="W", plan=("Add 2 and 3.",)),
        Fields(goal="Only a goal"),
        Fields(questions=(("M", "Why?"),)),
        Fields(role="M", facts=("One.", "Two", "Three!")),
    ],
)
def test_small_messages(fields):
    assert_all_methods_recover(fields)


def test_fields_reject_non_canonical_text():
    with pytest.raises(FieldsError):
        Fields(facts=("two  spaces",))
    with pytest.raises(FieldsError):
        Fields(goal="line\nbreak")
    with pytest.raises(FieldsError):
        Fields(verdict="accept")


def test_prose_key_forgives_only_the_added_period():
    fields = Fields(facts=("Paris",))
    got = METHODS["regex_prose"].extract(to_prose(fields))
    assert got[2] == ("Paris.",)  # the renderer added the period
    assert prose_key(got) == prose_key(fields.key())
    assert prose_key(got) != prose_key(Fields(facts=("Lyon",)).key())


def test_check_extraction_raises_on_a_mismatch():
    fields = Fields(goal="A goal.", facts=("x",))
    other = Fields(goal="A goal.", facts=("y",))
    with pytest.raises(EquivalenceError, match="regex_freeform"):
        check_extraction(BASELINE, [to_freeform(fields)], [other.key()])


# -- Hypothesis: any canonical text for JSONL and the line layout -------------------

_text = st.text(min_size=1, max_size=60).map(canonical_text).filter(bool)
_fields = st.builds(
    Fields,
    role=st.none() | st.sampled_from("MWC"),
    goal=st.none() | _text,
    facts=st.lists(_text, max_size=5).map(tuple),
    plan=st.lists(_text, max_size=4).map(tuple),
    questions=st.lists(st.tuples(st.sampled_from("MWC"), _text), max_size=3).map(tuple),
    verdict=st.none() | st.sampled_from("ARE"),
)


@given(_fields)
def test_jsonl_and_freeform_layout_recover_any_fields(fields):
    want = fields.key()
    for method in METHODS.values():
        if method.representation != "prose":
            assert method.extract(RENDER[method.representation](fields)) == want, method.name


# prose cannot hold a label after a sentence end ("... . Fact: ..."), so its texts come
# from words that trip sentence parsers but are never labels
_TRICKY_WORDS = ["Dr.", "U.S.", "e.g.", "3.5", "$1,204.75", '"Stop."', "'Go!'", "Note:", "3:1;",
                 "(approx.", "12.5)", "Fact", "Goal", "Role", "Question", "for", "the", "Worker",
                 "Plan", "step", "Mr.", "J.", "K.", "Rowling", "café", "—", "…", "?", "!", "a.m.",
                 "Verdict", "accept", "x", "1.", "-", "Jan.", "5,", "v2.0.1"]  # fmt: skip
_prose_text = st.lists(st.sampled_from(_TRICKY_WORDS), min_size=1, max_size=12).map(" ".join)
_prose_fields = st.builds(
    Fields,
    role=st.none() | st.sampled_from("MWC"),
    goal=st.none() | _prose_text,
    facts=st.lists(_prose_text, max_size=4).map(tuple),
    plan=st.lists(_prose_text, max_size=3).map(tuple),
    questions=st.lists(st.tuples(st.sampled_from("MWC"), _prose_text), max_size=2).map(tuple),
    verdict=st.none() | st.sampled_from("ARE"),
)


@given(_prose_fields)
def test_every_method_recovers_tricky_prose_fields(fields):
    assert_all_methods_recover(fields)


def test_synthetic_messages_are_distinct_and_recoverable():
    sweep = synthetic_sweep([1, 4, 16], per_size=8, seed=3)
    assert len(sweep) == 24 and len({f for _, f in sweep}) == 24
    for _, fields in sweep:
        assert_all_methods_recover(fields)
    assert synthetic_message(random.Random(1), 64).n_items >= 64


# -- real-shaped messages, as the runs record them -----------------------------------

HOTPOT_RECORD = {
    "question": 'The album "Planet Earth Rock and Roll Orchestra" was by whom?',
    "supporting_facts": [["Planet Earth Rock and Roll Orchestra (album)", 0],
                         ["Paul Kantner", 0]],
    "context": [
        ["Planet Earth Rock and Roll Orchestra (album)",
         ["Planet Earth Rock and Roll Orchestra is the final solo album by Paul Kantner."]],
        ["Paul Kantner", ["Paul Lorin Kantner (March 17, 1941 – January 28, 2016) was an "
                          "American rock musician.", " He co-founded Jefferson Airplane."]],
    ],
}  # fmt: skip
GSM_RECORD = {
    "question": "Uncle Ben has 4 horses. Each eats 5.5 lb. of oats per meal. He feeds them "
    "twice a day. If one bag holds 50 lb., how many bags does he need for 5 days?"
}


def _messages() -> list[dict]:
    hot = build_brief("hotpotqa", HOTPOT_RECORD)
    gsm = build_brief("gsm8k", GSM_RECORD)
    lines, _ = encode_brief(hot.goal, hot.facts, hot.question, caps={"f": 8}, memory=Memory())
    tt_brief = serialize(lines)
    assert '["o",' in tt_brief  # the long fact overflowed, as in real runs
    return [
        {"sender": "M", "receiver": "W", "kind": "brief", "content": render_brief(hot)},
        {"sender": "M", "receiver": "W", "kind": "brief", "content": render_brief(gsm)},
        {"sender": "M", "receiver": "C", "kind": "brief", "content": render_brief(gsm)},
        {"sender": "W", "receiver": "C", "kind": "draft",
         "content": "1. 4 horses x 5.5 lb. = 22 lb.\n2. Twice a day: 44 lb.\nAnswer: 5"},
        {"sender": "C", "receiver": "W", "kind": "verdict",
         "content": "ACCEPT. The answer is right."},
        {"sender": "W", "receiver": "M", "kind": "final", "content": "Paul Kantner"},
        {"sender": "M", "receiver": "W", "kind": "brief", "content": tt_brief},
        {"sender": "W", "receiver": "C", "kind": "draft", "content": serialize(
            [RoleLine(role="W"), ContextLine(key="answer", value="Paul Kantner")])},
        {"sender": "C", "receiver": "W", "kind": "verdict", "content": serialize(
            [RoleLine(role="C"), VerdictLine(verdict="R"), TextLine(text="Check M#1.")])},
    ]  # fmt: skip


def test_real_shaped_messages_reduce_to_their_typed_fields():
    msgs = _messages()
    brief, how = fields_from_message(msgs[0])
    assert how == "freeform_layout" and brief.goal.startswith("Answer the question")
    assert len(brief.facts) == 2 and brief.questions[0][0] == "W"
    draft, how = fields_from_message(msgs[3])
    assert how == "free_text" and draft.plan[0] == "4 horses x 5.5 lb. = 22 lb."
    verdict, _ = fields_from_message(msgs[4])
    assert verdict.verdict == "A"
    assert fields_from_message(msgs[5])[0] is None  # a bare answer has no typed field
    tt, how = fields_from_message(msgs[6])
    assert how == "jsonl" and tt.role == "M" and len(tt.facts) == 2  # o line -> fact
    assert fields_from_message(msgs[7])[0] is None  # role + answer only
    critic, _ = fields_from_message(msgs[8])
    assert critic == Fields(role="C", verdict="R")
    for msg in msgs:
        fields, _ = fields_from_message(msg)
        if fields is not None:
            assert_all_methods_recover(fields)


def test_corpus_from_run_files(tmp_path):
    rows = [
        {"task": "hotpotqa", "system": "freeform", "variant": "default", "example_id": "a",
         "messages": json.dumps(_messages()[:6])},
        {"task": "hotpotqa", "system": "tersetalk", "variant": "default", "example_id": "a",
         "messages": json.dumps(_messages()[6:])},
        {"task": "gsm8k", "system": "freeform", "variant": "default", "example_id": "b",
         "messages": "[]"},  # an error row
    ]  # fmt: skip
    path = tmp_path / "run.parquet"
    pd.DataFrame(rows).to_parquet(path)
    df, summary = build_corpus([path], sizes=[1, 4], per_size=3, seed=0)
    real = df[df["group"] == "real"]
    assert summary["real"]["messages"] == 9
    assert summary["real"]["duplicates"] == 1  # the brief sent to the Worker and the Critic
    assert summary["real"]["untyped"] == 2
    assert len(real) == summary["real"]["kept"] == 6
    assert (real["source"] == "real").all()
    assert (df.loc[df["group"] != "real", "source"] == "synthetic").all()
    assert summary["n_real"] == 6 and not summary["synthetic_only"]
    assert set(df["group"]) == {"real", "synthetic-001", "synthetic-004"}
    for row in df.itertuples():
        fields = Fields.from_json(row.fields)
        assert row.jsonl == to_jsonl(fields) and row.freeform == to_freeform(fields)
        for name in METHODS:
            check_extraction(name, [getattr(row, METHODS[name].representation)], [fields.key()])


def test_ambiguous_prose_is_detected_and_left_out(tmp_path, caplog):
    fields = Fields(facts=("He wrote it down. Goal: win the cup",))
    assert ambiguity(fields) is not None and "regex_prose" in ambiguity(fields)
    msg = {"sender": "M", "kind": "brief", "content": to_freeform(fields)}
    path = tmp_path / "run.parquet"
    pd.DataFrame([{"task": "t", "system": "freeform", "messages": json.dumps([msg])}]).to_parquet(
        path
    )
    with caplog.at_level("WARNING", logger="tersetalk.bench"):
        df, summary = build_corpus([path], sizes=[1], per_size=1)
    assert summary["real"]["ambiguous"] == 1 and (df["group"] == "real").sum() == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith("1 of 1 real messages left out") for m in warnings), warnings
    # the only real message was left out: nothing real remains, and that is said too
    assert any("NO real workflow messages" in m and "1 run files" in m for m in warnings)
    assert summary["synthetic_only"] and (df["source"] == "synthetic").all()
