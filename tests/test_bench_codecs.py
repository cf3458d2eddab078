"""MB-3: every wire format round-trips the same fields (no timing here)."""

from __future__ import annotations

import dataclasses
import json

import msgpack
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tersetalk.bench.codecs import BASELINE, CODECS, protobuf_message_class
from tersetalk.bench.fields import Fields, canonical_text, to_freeform, to_jsonl
from tersetalk.bench.mb3 import check_round_trip
from tersetalk.bench.results import EquivalenceError
from tersetalk.protocol import parse_strict

SAMPLE = Fields(
    role="M",
    goal="Solve it, e.g. with 3.5 × 2.",
    facts=("Dr. Smith has 4 horses.", 'He said "Stop." — café ☕', "Zürich\u200bis far, 12 km"),
    plan=("Multiply.",),
    questions=(("W", "How many?"), ("C", "Right?")),
    verdict="E",
)


@pytest.mark.parametrize("name", list(CODECS))
def test_codec_round_trips(name):
    codec = CODECS[name]
    data = codec.encode(SAMPLE.key())
    assert isinstance(data, bytes)
    assert codec.decode(data) == SAMPLE.key()
    empty = Fields(role="C", verdict="A").key()
    assert codec.decode(codec.encode(empty)) == empty


def test_text_codecs_send_the_documented_representations():
    key = SAMPLE.key()
    assert CODECS["freeform_text"].encode(key).decode() == to_freeform(SAMPLE)
    for name in ("tersetalk_jsonl_pydantic", "tersetalk_jsonl_json", "tersetalk_jsonl_orjson"):
        assert CODECS[name].encode(key).decode() == to_jsonl(SAMPLE), name
        assert parse_strict(CODECS[name].encode(key))  # canonical, strictly parseable
    obj = json.loads(CODECS["json_object_json"].encode(key))
    assert obj["questions"] == [{"to": "W", "text": "How many?"}, {"to": "C", "text": "Right?"}]
    assert orjson.loads(CODECS["json_object_orjson"].encode(key)) == obj
    assert msgpack.unpackb(CODECS["msgpack"].encode(key)) == obj
    assert b" " not in CODECS["json_object_json"].encode(Fields(role="W").key())  # compact


def test_protobuf_type_is_built_at_runtime():
    cls = protobuf_message_class()
    desc = cls.DESCRIPTOR
    assert desc.full_name == "tersetalk.bench.Message"
    assert [f.name for f in desc.fields] == ["role", "goal", "facts", "plan", "questions",
                                            "verdict"]  # fmt: skip
    msg = cls.FromString(CODECS["protobuf"].encode(SAMPLE.key()))
    assert list(msg.facts) == list(SAMPLE.facts) and msg.questions[1].text == "Right?"


_text = st.text(min_size=1, max_size=40).map(canonical_text).filter(bool)
_fields = st.builds(
    Fields,
    role=st.none() | st.sampled_from("MWC"),
    goal=st.none() | _text,
    facts=st.lists(_text, max_size=4).map(tuple),
    plan=st.lists(_text, max_size=3).map(tuple),
    questions=st.lists(st.tuples(st.sampled_from("MWC"), _text), max_size=3).map(tuple),
    verdict=st.none() | st.sampled_from("ARE"),
)


@given(_fields)
def test_every_codec_round_trips_any_fields(fields):
    for name, codec in CODECS.items():
        assert codec.decode(codec.encode(fields.key())) == fields.key(), name


def test_check_round_trip_catches_a_lossy_codec(monkeypatch):
    keys = [SAMPLE.key()]
    assert len(check_round_trip(BASELINE, keys)) == 1
    codec = CODECS["msgpack"]
    lossy = dataclasses.replace(codec, decode=lambda data: Fields(role="M").key())
    monkeypatch.setitem(CODECS, "msgpack", lossy)
    with pytest.raises(EquivalenceError, match="msgpack"):
        check_round_trip("msgpack", keys)
