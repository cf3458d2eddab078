"""Structured calls whose answer failed: raised as StructuredOutputError, stored by the
call cache (a forced rerun makes no model call) and logged by the conversation.

Control flow only, with the scripted double and a fake OpenAI-style ``create``.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import pydantic
import pytest

from tersetalk.agents.conversation import Conversation
from tersetalk.core.records import usage_totals
from tersetalk.models import CachedClient, GenerationConfig, ModelCallError, ScriptedClient
from tersetalk.models.base import StructuredOutputError

MSGS = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Is the sky blue?"},
]
GEN = GenerationConfig(max_tokens=16)


class Verdict(pydantic.BaseModel):
    ok: bool
    reason: str


def never_valid():
    """A scripted model whose structured answers are never valid; counts every attempt."""
    seen = {"n": 0}

    def answer(messages, gen, schema):
        seen["n"] += 1
        return "not json" if schema is not None else "free text"

    return ScriptedClient(answer, max_retries=1), seen


def entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.rglob("*") if p.is_file())


# -- the cache ---------------------------------------------------------------------------


def test_structured_failure_is_stored_and_replayed_without_calling_the_model(tmp_path):
    inner, seen = never_valid()
    c = CachedClient(inner, tmp_path)
    with pytest.raises(StructuredOutputError) as first:
        c.structured(MSGS, Verdict, GEN)
    assert seen["n"] == 2 and (c.hits, c.misses) == (0, 1)  # first try + one retry
    assert first.value.attempts == 2 and first.value.cache_hit is False
    [path] = entries(tmp_path)
    stored = json.loads(path.read_text())
    assert set(stored) == {"key", "request", "error"} and stored["key"] == path.stem
    assert stored["error"] == {
        "type": "StructuredOutputError",
        "message": str(first.value),
        "attempts": 2,
    }
    # a forced rerun: a fresh client on the same folder makes no model call
    rerun_inner, rerun_seen = never_valid()
    rerun = CachedClient(rerun_inner, tmp_path)
    with pytest.raises(StructuredOutputError) as again:
        rerun.structured(MSGS, Verdict, GEN)
    assert rerun_seen["n"] == 0 and rerun_inner.calls == []
    assert (rerun.hits, rerun.misses) == (1, 0)
    assert str(again.value) == str(first.value)
    assert again.value.attempts == 2 and again.value.cache_hit is True
    # the stored failure is not touched by the replay
    assert json.loads(path.read_text()) == stored


def test_a_failure_entry_does_not_leak_into_other_requests(tmp_path):
    inner, seen = never_valid()
    c = CachedClient(inner, tmp_path)
    with pytest.raises(StructuredOutputError):
        c.structured(MSGS, Verdict, GEN)
    # same messages, a free-text call: another key, answered by the model
    assert c.chat(MSGS, GEN).text == "free text" and seen["n"] == 3
    assert c.chat(MSGS, GEN).cache_hit and (c.hits, c.misses) == (1, 2)


def test_plain_model_call_errors_are_not_stored(tmp_path):
    timeout = ModelCallError("server at http://x: timeout on all 3 attempts")
    inner = ScriptedClient([timeout, '{"ok": true, "reason": "r"}'])
    c = CachedClient(inner, tmp_path)
    with pytest.raises(ModelCallError) as info:
        c.structured(MSGS, Verdict, GEN)
    assert not isinstance(info.value, StructuredOutputError)
    assert entries(tmp_path) == []
    r = c.structured(MSGS, Verdict, GEN)  # the rerun asks the model again
    assert not r.cache_hit and r.parsed == {"ok": True, "reason": "r"}
    assert len(inner.calls) == 2 and (c.hits, c.misses) == (0, 2)


def test_old_format_success_entries_still_load(tmp_path):
    """An entry written before failures were cached (format 1, ``result`` only) is a hit."""
    inner, seen = never_valid()
    c = CachedClient(inner, tmp_path)
    material = {**c.key_material("structured", MSGS, GEN, Verdict), "format": 1}
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    result = {
        "text": '{"ok": true, "reason": "old"}',
        "parsed": {"ok": True, "reason": "old"},
        "prompt_tokens": 7,
        "completion_tokens": 4,
        "ttft_s": None,
        "itl_s": None,
        "total_s": 0.5,
        "attempts": 1,
        "cache_hit": False,
        "backend": "scripted",
        "model": "scripted",
        "extra": {},
    }
    path = tmp_path / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": key, "request": material, "result": result}))
    r = c.structured(MSGS, Verdict, GEN)
    assert seen["n"] == 0 and r.cache_hit and c.hits == 1
    assert r.parsed == {"ok": True, "reason": "old"} and r.total_s == 0.5


@pytest.mark.parametrize(
    "error",
    [
        {"type": "StructuredOutputError", "message": "m"},  # no attempts
        {"type": "TimeoutError", "message": "m", "attempts": 1},  # never stored by us
        "not an object",
    ],
)
def test_malformed_failure_entry_is_a_miss_and_is_overwritten(tmp_path, error):
    inner, seen = never_valid()
    c = CachedClient(inner, tmp_path)
    with pytest.raises(StructuredOutputError):
        c.structured(MSGS, Verdict, GEN)
    [path] = entries(tmp_path)
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "error": error}))
    with pytest.warns(UserWarning, match="corrupt"), pytest.raises(StructuredOutputError) as info:
        c.structured(MSGS, Verdict, GEN)
    assert info.value.cache_hit is False and seen["n"] == 4
    assert json.loads(path.read_text()) == stored  # rewritten from the fresh failure


def test_structured_output_error_keeps_its_fields_through_pickle():
    err = StructuredOutputError("bad answer", attempts=3, cache_hit=True)
    assert isinstance(err, ModelCallError)
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.attempts, back.cache_hit) == ("bad answer", 3, True)


# -- run_instructor: which failures are a property of the answer -------------------------


def completion(content: str, finish_reason: str = "stop"):
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish_reason,
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }
    )


def fake_create(answers):
    sent = []

    def create(*args, **kwargs):
        sent.append(kwargs)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return create, sent


def test_run_instructor_schema_invalid_after_retries_is_a_structured_output_error():
    from tersetalk.models._common import run_instructor

    create, sent = fake_create([completion("nope"), completion('{"ok": "maybe"}')])
    with pytest.raises(StructuredOutputError, match="no answer valid for Verdict") as info:
        run_instructor(create, MSGS, Verdict, {"max_tokens": 16}, max_retries=1, where="fake")
    assert info.value.attempts == len(sent) == 2 and info.value.cache_hit is False


def test_run_instructor_cut_off_answer_is_a_structured_output_error():
    from tersetalk.models._common import run_instructor

    create, sent = fake_create([completion('{"ok": tr', finish_reason="length")] * 3)
    with pytest.raises(StructuredOutputError, match="cut off at max_tokens=4") as info:
        run_instructor(create, MSGS, Verdict, {"max_tokens": 4}, max_retries=2, where="fake")
    assert info.value.attempts == len(sent) >= 1


def test_run_instructor_transport_errors_stay_plain_model_call_errors():
    from tersetalk.models._common import run_instructor

    create, _ = fake_create([ModelCallError("fake: HTTP 500 on all 3 attempts")])
    with pytest.raises(ModelCallError, match="HTTP 500") as info:
        run_instructor(create, MSGS, Verdict, {"max_tokens": 16}, max_retries=1, where="fake")
    assert not isinstance(info.value, StructuredOutputError)


# -- the conversation --------------------------------------------------------------------


def test_conversation_logs_the_failed_call_and_reraises(tmp_path):
    inner, seen = never_valid()
    conv = Conversation(CachedClient(inner, tmp_path))
    for _ in range(2):  # the model, then the cache (a forced rerun)
        with pytest.raises(StructuredOutputError):
            conv.ask_structured("worker", MSGS, Verdict, GEN)
    assert seen["n"] == 2
    first, second = conv.calls
    assert first["role"] == "worker" and first["attempts"] == 2
    assert "not valid for Verdict" in first["error"] and second["error"] == first["error"]
    assert first["cache_hit"] is False and second["cache_hit"] is True
    assert first["prompt_tokens"] == first["completion_tokens"] == -1  # unknown, not zero
    assert first["ttft_s"] is None and first["itl_s"] is None and first["total_s"] == 0.0
    # the same keys as a normal call entry, plus the error
    conv.ask("worker", MSGS, GEN)
    ok = conv.calls[-1]
    assert set(ok) - {"usage_source"} <= set(first) and "error" not in ok
    # the record's totals: usage unknown as a whole, timing still sums
    totals = usage_totals(conv.calls)
    assert totals["usage_prompt_tokens"] is None and totals["usage_unknown_calls"] == 2
    assert sum(c["total_s"] for c in conv.calls) == ok["total_s"]


def test_conversation_does_not_log_plain_model_call_errors():
    conv = Conversation(ScriptedClient([ModelCallError("server down")]))
    with pytest.raises(ModelCallError):
        conv.ask_structured("critic", MSGS, Verdict, GEN)
    assert conv.calls == []
