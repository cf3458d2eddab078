"""MB-3's wire formats: each encodes a :class:`Fields` to bytes and decodes it back.

Every codec round-trips the same :data:`Key` tuple, so encode and decode time
and bytes on wire are compared for identical content:

* ``freeform_text`` (baseline) -- the free-form layout as UTF-8; decoding is the
  regex extraction of MB-1 (free text has no other way back to fields);
* ``tersetalk_jsonl_pydantic`` -- the protocol package as the workflow uses it:
  line models, :func:`serialize`, :func:`parse_strict`;
* ``tersetalk_jsonl_json`` / ``_orjson`` -- the same canonical lines written and
  read with the stdlib ``json`` module or with ``orjson``;
* ``json_object_json`` / ``_orjson`` -- one compact JSON object per message
  (``{"role":..,"facts":[..],"questions":[{"to":..,"text":..}]}``, empty fields left out);
* ``msgpack`` -- the same object as MessagePack;
* ``protobuf`` -- a message type built at run time from a ``FileDescriptorProto``
  (no ``protoc`` needed): enums for role and verdict, repeated strings, a nested
  ``Question``; proto3, so an absent text is the empty string (texts are never empty).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgpack
import orjson

from tersetalk.protocol import parse_strict, serialize

from .extract import extract_jsonl_json, extract_jsonl_orjson, extract_regex_freeform
from .fields import Key, key_from_lines, lines_from_key, render_freeform


@dataclass(frozen=True)
class Codec:
    name: str
    encode: Callable[[Key], bytes]
    decode: Callable[[bytes], Key]
    library: str  # which serializer does the work
    describe: str


# -- shared shapes ---------------------------------------------------------------


def _arrays(key: Key) -> list[list[str]]:
    role, goal, facts, plan, questions, verdict = key
    out: list[list[str]] = []
    if role is not None:
        out.append(["r", role])
    if goal is not None:
        out.append(["g", goal])
    out += [["f", t] for t in facts]
    out += [["p", t] for t in plan]
    out += [["q", to, t] for to, t in questions]
    if verdict is not None:
        out.append(["v", verdict])
    return out


def _obj(key: Key) -> dict[str, Any]:
    role, goal, facts, plan, questions, verdict = key
    obj: dict[str, Any] = {}
    if role is not None:
        obj["role"] = role
    if goal is not None:
        obj["goal"] = goal
    if facts:
        obj["facts"] = list(facts)
    if plan:
        obj["plan"] = list(plan)
    if questions:
        obj["questions"] = [{"to": to, "text": t} for to, t in questions]
    if verdict is not None:
        obj["verdict"] = verdict
    return obj


def _from_obj(obj: dict[str, Any]) -> Key:
    return (
        obj.get("role"),
        obj.get("goal"),
        tuple(obj.get("facts", ())),
        tuple(obj.get("plan", ())),
        tuple((q["to"], q["text"]) for q in obj.get("questions", ())),
        obj.get("verdict"),
    )


# -- free-form and JSONL ----------------------------------------------------------


def _freeform_encode(key: Key) -> bytes:
    return render_freeform(key).encode("utf-8")


def _freeform_decode(data: bytes) -> Key:
    return extract_regex_freeform(data.decode("utf-8"))


def _pydantic_encode(key: Key) -> bytes:
    return serialize(lines_from_key(key)).encode("utf-8")


def _pydantic_decode(data: bytes) -> Key:
    return key_from_lines(parse_strict(data))


#: Built once: ``json.dumps`` with non-default options builds a new encoder per call.
_json_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _jsonl_json_encode(key: Key, _dumps=_json_encode) -> bytes:
    return "\n".join([_dumps(a) for a in _arrays(key)]).encode("utf-8")


def _jsonl_json_decode(data: bytes) -> Key:
    return extract_jsonl_json(data.decode("utf-8"))


def _jsonl_orjson_encode(key: Key, _dumps=orjson.dumps) -> bytes:
    return b"\n".join([_dumps(a) for a in _arrays(key)])


def _jsonl_orjson_decode(data: bytes) -> Key:
    return extract_jsonl_orjson(data.decode("utf-8"))


# -- JSON object, MessagePack -----------------------------------------------------


def _obj_json_encode(key: Key, _dumps=_json_encode) -> bytes:
    return _dumps(_obj(key)).encode("utf-8")


def _obj_json_decode(data: bytes, _loads=json.loads) -> Key:
    return _from_obj(_loads(data))


def _obj_orjson_encode(key: Key, _dumps=orjson.dumps) -> bytes:
    return _dumps(_obj(key))


def _obj_orjson_decode(data: bytes, _loads=orjson.loads) -> Key:
    return _from_obj(_loads(data))


def _msgpack_encode(key: Key, _packb=msgpack.packb) -> bytes:
    return _packb(_obj(key))


def _msgpack_decode(data: bytes, _unpackb=msgpack.unpackb) -> Key:
    return _from_obj(_unpackb(data))


# -- Protocol Buffers, built at run time -----------------------------------------

_PB_ROLES = ["ROLE_UNSET", "M", "W", "C"]
_PB_VERDICTS = ["VERDICT_UNSET", "A", "R", "E"]


@lru_cache(maxsize=1)
def protobuf_message_class() -> type:
    """``tersetalk.bench.Message`` from a descriptor built in code (cached)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="tersetalk_bench_message.proto", package="tersetalk.bench", syntax="proto3"
    )
    role = fdp.enum_type.add(name="Role")
    for i, name in enumerate(_PB_ROLES):
        role.value.add(name=f"ROLE_{name}" if i else name, number=i)
    verdict = fdp.enum_type.add(name="Verdict")
    for i, name in enumerate(_PB_VERDICTS):
        verdict.value.add(name=f"VERDICT_{name}" if i else name, number=i)
    question = fdp.message_type.add(name="Question")
    question.field.add(name="to", number=1, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                       type_name=".tersetalk.bench.Role")  # fmt: skip
    question.field.add(name="text", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg = fdp.message_type.add(name="Message")
    msg.field.add(name="role", number=1, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                  type_name=".tersetalk.bench.Role")  # fmt: skip
    msg.field.add(name="goal", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="facts", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    msg.field.add(name="plan", number=4, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    msg.field.add(name="questions", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                  type_name=".tersetalk.bench.Question")  # fmt: skip
    msg.field.add(name="verdict", number=6, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                  type_name=".tersetalk.bench.Verdict")  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tersetalk.bench.Message"))


_PB_ROLE_NUM = {name: i for i, name in enumerate(_PB_ROLES) if i}
_PB_VERDICT_NUM = {name: i for i, name in enumerate(_PB_VERDICTS) if i}


def _protobuf_encode(key: Key) -> bytes:
    role, goal, facts, plan, questions, verdict = key
    m = protobuf_message_class()()
    if role is not None:
        m.role = _PB_ROLE_NUM[role]
    if goal is not None:
        m.goal = goal
    m.facts.extend(facts)
    m.plan.extend(plan)
    for to, t in questions:
        m.questions.add(to=_PB_ROLE_NUM[to], text=t)
    if verdict is not None:
        m.verdict = _PB_VERDICT_NUM[verdict]
    return m.SerializeToString()


def _protobuf_decode(data: bytes) -> Key:
    m = protobuf_message_class().FromString(data)
    return (
        _PB_ROLES[m.role] if m.role else None,
        m.goal or None,
        tuple(m.facts),
        tuple(m.plan),
        tuple((_PB_ROLES[q.to], q.text) for q in m.questions),
        _PB_VERDICTS[m.verdict] if m.verdict else None,
    )


CODECS: dict[str, Codec] = {
    c.name: c
    for c in (
        Codec("freeform_text", _freeform_encode, _freeform_decode, "str + re",
              "free-form layout as UTF-8; decoded by the MB-1 regex"),
        Codec("tersetalk_jsonl_pydantic", _pydantic_encode, _pydantic_decode, "pydantic + json",
              "protocol line models, serialize / parse_strict"),
        Codec("tersetalk_jsonl_json", _jsonl_json_encode, _jsonl_json_decode, "json",
              "canonical JSONL lines with the stdlib json module"),
        Codec("tersetalk_jsonl_orjson", _jsonl_orjson_encode, _jsonl_orjson_decode, "orjson",
              "canonical JSONL lines with orjson"),
        Codec("json_object_json", _obj_json_encode, _obj_json_decode, "json",
              "one compact JSON object, stdlib json"),
        Codec("json_object_orjson", _obj_orjson_encode, _obj_orjson_decode, "orjson",
              "one compact JSON object, orjson"),
        Codec("msgpack", _msgpack_encode, _msgpack_decode, "msgpack",
              "the JSON object's content as MessagePack"),
        Codec("protobuf", _protobuf_encode, _protobuf_decode, "protobuf",
              "runtime-built proto3 message (enums, repeated strings, nested Question)"),
    )
}  # fmt: skip

#: MB-3's baseline: the free-form text the ``freeform`` system sends.
BASELINE = "freeform_text"
